"""User deletion's reading of the archive (no Spark: a lake with an archive and no table yet): the
archive is listed once and read before the source's lock is taken; under the lock only the days
that may have changed are listed again and only the files holding the user's messages are read
(again) and rewritten, so that `up` is kept waiting for the rewrites only."""

from __future__ import annotations

import contextlib
import gzip
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from eventlake import layout
from eventlake.config import add_source, load_settings, write_initial_config
from eventlake.storage import LocalStorage
from eventlake.sync import runner
from eventlake.sync.erase import delete_user
from eventlake.timestamps import now_utc
from tests.conftest import Lake

USER, LINKED = "u-erase", "anon-77"


def quiet(line: str) -> None:
    pass


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    config = write_initial_config(tmp_path / "project")
    add_source(config, "web", write_key="wk_web")
    return Lake(tmp_path / "project", config, load_settings(config, environ={}), "web")


def archived_text(lake: Lake) -> str:
    folder = Path(layout.archive_source_dir(lake.settings.lake.root, lake.source.id))
    return "".join(gzip.decompress(p.read_bytes()).decode() for p in sorted(folder.rglob("*.gz")))


def test_the_archive_is_listed_once_and_read_before_the_lock(lake: Lake, monkeypatch) -> None:
    start = now_utc() - timedelta(days=20)
    for n in range(60):  # 20 days, 3 files each: the anonymous page comes before the identify
        received = start + timedelta(hours=8 * n)
        messages: list[dict[str, Any]] = [
            {"type": "track", "userId": "u-other", "messageId": f"o{n}", "event": "x"}
        ]
        if n == 5:
            messages.append({"type": "page", "anonymousId": LINKED, "messageId": "p-anon"})
        if n == 40:
            messages.append({"type": "identify", "userId": USER, "anonymousId": LINKED, "messageId": "i1"})
        if n in (41, 50):
            messages.append({"type": "track", "userId": USER, "messageId": f"t{n}", "event": "x"})
        lake.archive(messages, received)
    # written long ago: the reopen markers of their days are consumed (by syncs) since
    LocalStorage().delete_tree(layout.reopened_days_dir(lake.settings.lake.root, lake.source.id))
    archive = Path(layout.archive_source_dir(lake.settings.lake.root, lake.source.id))
    events: list[str] = []  # "lock", "unlock", "list <what>", "read"
    real_list, real_read = LocalStorage.list, LocalStorage.read

    def listed(self: LocalStorage, folder: Any, pattern: str = "*") -> list:
        if Path(folder) == archive:
            events.append("list archive")
        elif archive in Path(folder).parents:
            events.append("list day")
        return real_list(self, folder, pattern)

    def read(self: LocalStorage, path: Any) -> bytes:
        if archive in Path(path).parents:
            events.append("read")
        return real_read(self, path)

    real_lock = runner.source_lock

    @contextlib.contextmanager
    def lock(*args: Any, **kwargs: Any) -> Iterator[Any]:
        with real_lock(*args, **kwargs) as held:
            events.append("lock")
            lake.archive(
                [{"type": "track", "userId": USER, "messageId": "late", "event": "x"}]
            )  # sealed meanwhile
            yield held
            events.append("unlock")

    monkeypatch.setattr(LocalStorage, "list", listed)
    monkeypatch.setattr(LocalStorage, "read", read)
    monkeypatch.setattr(runner, "source_lock", lock)
    [result] = delete_user(lake.settings, USER, ["web"], requested_by="dpo", say=quiet)

    assert result.status == "Success", result.error
    assert (result.linked_anonymous_ids, result.archive_files_rewritten, result.archive_messages_deleted) == (
        1,
        5,
        5,
    )
    locked = events[events.index("lock") : events.index("unlock")]
    assert events.count("list archive") == 1 and "list archive" not in locked  # was: 3, under the lock
    assert events[: events.index("lock")].count("read") == 2 * 60  # the identity's two passes
    assert locked.count("read") == 2 + 5  # the file sealed meanwhile (two passes), the 5 files rewritten
    assert locked.count("list day") in (2, 3)  # today, tomorrow (yesterday until 02:00): may have changed
    text = archived_text(lake)
    assert USER not in text and LINKED not in text and text.count("u-other") == 60


def test_a_damaged_archive_file_does_not_stop_users_delete(lake: Lake) -> None:
    """A damaged archive file is quarantined by a sync (eventlake.sync.damaged) and never stops a
    source: users delete reads the rest of the archive and erases the user from it."""
    lake.archive([{"type": "track", "userId": USER, "messageId": "t1", "event": "x"}])
    good = lake.archive([{"type": "track", "userId": "u-other", "messageId": "o1", "event": "x"}])
    damaged = good.with_name("test-truncated.gz")
    whole = gzip.compress(b'{"type":"track","userId":"u-other","messageId":"o2"}\n' * 50)
    damaged.write_bytes(whole[: len(whole) // 2])  # an interrupted copy

    [result] = delete_user(lake.settings, USER, ["web"], requested_by="dpo", say=quiet)

    assert result.status == "Success", result.error
    assert result.archive_messages_deleted == 1
    assert damaged.read_bytes() == whole[: len(whole) // 2]  # left as it is (quarantined by the sync)
