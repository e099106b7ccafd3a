"""Sources without restarts, the file side: `enabled = false`, the removal of an entry, and
SourcesWatch following the file's sources (a file that does not load keeps the running ones)."""

from __future__ import annotations

import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from eventlake.config import (
    SourcesWatch,
    add_source,
    load_settings,
    remove_source,
    set_source_enabled,
    write_initial_config,
)
from eventlake.errors import UsageError


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = write_initial_config(tmp_path / "p")
    for slug in ("web", "ios", "app"):
        add_source(path, slug, write_key=f"wk_{slug}")
    return path


def test_disable_writes_enabled_false_into_the_entry_and_enable_takes_it_out(config: Path) -> None:
    before = config.read_text()
    assert set_source_enabled(config, "ios", False) is True
    text = config.read_text()
    assert 'database = "ios"\nenabled = false\n' in text
    assert text.replace("enabled = false\n", "") == before  # nothing else changed, comments kept
    assert [s.enabled for s in load_settings(config, environ={}).sources] == [True, False, True]
    assert stat.S_IMODE(config.stat().st_mode) == 0o600

    assert set_source_enabled(config, "ios", False) is False  # already: nothing written
    assert set_source_enabled(config, "ios", True) is True
    assert config.read_text() == before


def test_an_enabled_line_written_by_hand_is_replaced(config: Path) -> None:
    config.write_text(config.read_text().replace('database = "web"\n', 'database = "web"\nenabled = true\n'))
    set_source_enabled(config, "web", False)
    assert config.read_text().count("enabled") == 1
    assert not load_settings(config, environ={}).source("web").enabled


def test_remove_takes_out_the_entry_and_returns_it(config: Path) -> None:
    ios = load_settings(config, environ={}).source("ios")
    removed = remove_source(config, "ios")
    assert removed.startswith("[[sources]]\n") and f'id = "{ios.id}"' in removed
    settings = load_settings(config, environ={})
    assert [s.slug for s in settings.sources] == ["web", "app"]
    assert "# Sources are added with `eventlake sources add SLUG`." in config.read_text()
    config.write_text(config.read_text() + "\n" + removed)  # the undo the CLI offers
    assert load_settings(config, environ={}).source("ios") == ios


def test_the_last_and_the_only_source_can_be_removed(config: Path) -> None:
    for slug in ("app", "web", "ios"):
        remove_source(config, slug)
    text = config.read_text()
    assert load_settings(config, environ={}).sources == ()
    assert text.endswith("`eventlake sources add SLUG`.\n")


def test_unknown_and_inline_sources_are_refused_naming_the_fix(config: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"unknown source 'nope' \(known: web, ios, app"):
        remove_source(config, "nope")
    inline = write_initial_config(tmp_path / "inline")
    inline.write_text('sources = [{slug = "web", id = "abc", write_key = "wk_w"}]\n' + inline.read_text())
    with pytest.raises(UsageError, match=r"not written as a \[\[sources\]\] table .* edit the file by hand"):
        set_source_enabled(inline, "web", False)


def watch(config: Path, lines: list[str]) -> SourcesWatch:
    return SourcesWatch(load_settings(config, environ={}), environ={}, say=lines.append)


def test_the_watch_follows_added_disabled_and_removed_sources(config: Path) -> None:
    lines: list[str] = []
    watched = watch(config, lines)
    assert watched.check(force=True) is None  # nothing changed
    add_source(config, "tv", write_key="wk_tv")
    changes = watched.check(force=True)
    assert changes is not None and changes.added == ("tv",)
    assert watched.settings.source_by_write_key("wk_tv") is not None
    set_source_enabled(config, "web", False)
    remove_source(config, "ios")
    changes = watched.check(force=True)
    assert changes is not None and (changes.disabled, changes.removed) == (("web",), ("ios",))
    assert watched.settings.source_by_write_key("wk_ios") is None
    assert lines == [
        f"sources reloaded from {config}: added tv",
        f"sources reloaded from {config}: removed ios; disabled web",
    ]


def test_a_file_that_does_not_load_keeps_the_running_sources_and_is_said_once(config: Path) -> None:
    lines: list[str] = []
    watched = watch(config, lines)
    good = config.read_text()
    config.write_text(good.replace('write_key = "wk_app"', 'write_key = "wk_web"'))  # a duplicate key
    assert watched.check(force=True) is None
    assert watched.check(force=True) is None
    assert len(lines) == 1, lines
    assert "invalid setting sources.app.write_key: (hidden) is used by two sources" in lines[0]
    assert "the 3 sources loaded before stay in use until the file is fixed" in lines[0]
    assert [s.slug for s in watched.settings.sources] == ["web", "ios", "app"]

    config.write_text(good + "[[sources]\n")  # not TOML
    assert watched.check(force=True) is None and "not valid TOML" in lines[-1]
    config.unlink()
    assert watched.check(force=True) is None and lines[-1].startswith(f"{config} changed but was not loaded")
    config.write_text(good + '[[sources]]\nslug = "tv"\nid = "tvtvtv"\nwrite_key = "wk_tv"\n')
    changes = watched.check(force=True)
    assert changes is not None and changes.added == ("tv",)
    assert lines[-2:] == [f"{config} loads again", f"sources reloaded from {config}: added tv"]


def test_other_sections_need_a_restart_and_say_so(config: Path) -> None:
    lines: list[str] = []
    watched = watch(config, lines)
    config.write_text(config.read_text().replace("port = 8088", "port = 9099"))
    assert watched.check(force=True) is None
    assert lines == [f"[collector] changed in {config}: restart for that to take effect"]
    assert watched.settings.collector.port == 8088


def test_the_file_is_looked_at_at_most_once_per_interval(config: Path) -> None:
    watched = SourcesWatch(load_settings(config, environ={}), environ={}, interval=3600, say=print)
    add_source(config, "tv", write_key="wk_tv")
    assert watched.check() is None  # within the interval: not looked at
    assert watched.check(force=True) is not None


def test_two_edits_at_once_both_land(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two `eventlake sources add` at once (and a disable beside them): each reads the file, checks
    its new text, writes it; without a lock around the three, the later write drops the other's."""
    from eventlake.config import writer

    check = writer.settings_from_text

    def slow_check(*args: object, **kwargs: object) -> object:
        time.sleep(0.3)  # the other edit reads the file meanwhile
        return check(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(writer, "settings_from_text", slow_check)
    start = threading.Barrier(3)

    def edit(run: Callable[[], object]) -> None:
        start.wait()
        run()

    threads = [
        threading.Thread(target=edit, args=(lambda: add_source(config, "android"),)),
        threading.Thread(target=edit, args=(lambda: add_source(config, "server"),)),
        threading.Thread(target=edit, args=(lambda: set_source_enabled(config, "ios", False),)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    settings = load_settings(config, environ={})
    assert sorted(s.slug for s in settings.sources) == ["android", "app", "ios", "server", "web"]
    assert not settings.source("ios").enabled
