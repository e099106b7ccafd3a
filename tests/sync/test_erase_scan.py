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

from eventlake import layout, state_layout
from eventlake.config import add_source, load_settings, write_initial_config
from eventlake.storage import LocalStorage
from eventlake.sync.maintenance.erase import delete_user
from eventlake.sync.protocol import runner
from eventlake.timestamps import day_start_ms, now_utc
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
    LocalStorage().delete_tree(state_layout.reopened_days_dir(lake.settings.lake.root, lake.source.id))
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
    """A damaged archive file is quarantined by a sync (eventlake.sync.protocol.damaged) and never stops a
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


def test_a_file_written_while_a_long_scan_read_the_archive_is_found(lake: Lake) -> None:
    """The archive is read before the lock, for hours on a big archive. A file ``import`` writes into
    an old day meanwhile is announced by a reopen marker, which a sync consumes two hours later
    (archive.day_state): by the time the deletion holds the lock, nothing names that day any more;
    the deletion still finds the file and erases the user from it."""
    from dataclasses import replace

    from eventlake.archive.days import reopened_days
    from eventlake.sync.maintenance import erase

    storage, root, source_id = LocalStorage(), lake.settings.lake.root, lake.source.id
    old = now_utc() - timedelta(days=20)
    lake.archive([{"type": "track", "userId": "u-other", "messageId": "o1", "event": "x"}], old)
    scan = erase.scan_archive(storage, root, source_id, USER, None)
    scan = replace(scan, listed_ms=scan.listed_ms - 3 * 3_600_000)  # it listed the archive 3 hours ago
    late = lake.archive(
        [{"type": "track", "userId": USER, "messageId": "t1", "event": "x"}], old
    )  # an import
    for markers in reopened_days(storage, root, source_id).values():  # consumed by a sync since
        for _, marker in markers:
            storage.delete(marker)

    caught = erase.catch_up(storage, root, source_id, scan)

    assert late in caught.holding and "t1" in caught.identity.message_ids


def test_a_file_announced_before_the_scan_and_written_after_it_is_found(lake: Lake) -> None:
    """A writer marked an old day half an hour before the scan listed the archive and wrote its file
    just after; a sync consumed the marker before the deletion took the lock. The scan saw the
    marker (its day's listing may miss a file): the deletion lists the day again and finds it."""
    import time

    from eventlake.archive.days import reopen_days, reopened_days
    from eventlake.sync.maintenance import erase

    storage, root, source_id = LocalStorage(), lake.settings.lake.root, lake.source.id
    old = now_utc() - timedelta(days=20)
    lake.archive([{"type": "track", "userId": "u-other", "messageId": "o1", "event": "x"}], old)
    for markers in reopened_days(storage, root, source_id).values():  # the old file's: consumed long ago
        for _, marker in markers:
            storage.delete(marker)
    day = day_start_ms(old)
    reopen_days(storage, root, source_id, [day], now_ms=int(time.time() * 1000) - 30 * 60_000)
    scan = erase.scan_archive(storage, root, source_id, USER, None)
    late = layout.archive_file(root, source_id, day, "test-late")
    line = b'{"type":"track","userId":"%s","messageId":"t1","event":"x"}\n' % USER.encode()
    storage.write(late, gzip.compress(line))
    for markers in reopened_days(storage, root, source_id).values():  # consumed by a sync since
        for _, marker in markers:
            storage.delete(marker)

    caught = erase.catch_up(storage, root, source_id, scan)

    assert late in caught.holding and "t1" in caught.identity.message_ids
