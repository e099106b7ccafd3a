"""The spool on its own: group commit, sealing, recovery after a crash, the spool-dir lock."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from eventlake import layout, state_layout
from eventlake.archive import (
    ArchiveUploadError,
    Spool,
    SpoolClosedError,
    SpoolFullError,
    SpoolLockedError,
    SpoolWriteError,
    list_archive_files,
    read_archive_lines,
)
from eventlake.archive.seal import Segment, spool_segments
from eventlake.errors import EventLakeError
from eventlake.storage import LocalStorage, Location

DAY = 1_795_305_600_000  # 2026-11-22T00:00:00Z
NEXT_DAY = DAY + 86_400_000
NEVER = 3600.0


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "state" / "spool", tmp_path / "lake"


@pytest.fixture
def spool(dirs: tuple[Path, Path]) -> Iterator[Spool]:
    with Spool(dirs[0], dirs[1], seal_max_bytes=64 * 1024 * 1024, seal_max_age_seconds=NEVER) as opened:
        yield opened


def lines(prefix: str, count: int) -> list[bytes]:
    return [orjson.dumps({"messageId": f"{prefix}-{i}"}) for i in range(count)]


def archived(lake: Path, source_id: str) -> list[bytes]:
    return [
        line
        for f in list_archive_files(LocalStorage(), lake, source_id)
        for line in read_archive_lines(LocalStorage(), f.path)
    ]


def segments(spool_dir: Path) -> list[Path]:
    return sorted(spool_dir.glob(f"*/*{state_layout.SPOOL_SUFFIX}"))


def test_append_resolves_after_fsync_and_close_seals(spool: Spool, dirs: tuple[Path, Path]) -> None:
    futures = [spool.append("src1", lines("a", 3), DAY), spool.append("src2", lines("b", 2), DAY)]
    for future in futures:
        assert future.result(timeout=5) is None
    src1_segment = segments(dirs[0])[0]
    assert src1_segment.parent.name == "src1"
    assert src1_segment.read_bytes() == b"".join(line + b"\n" for line in lines("a", 3))
    spool.close()
    assert segments(dirs[0]) == []
    assert archived(dirs[1], "src1") == lines("a", 3)
    assert archived(dirs[1], "src2") == lines("b", 2)
    stats = spool.stats()
    assert (stats.messages, stats.sealed_files, stats.pending_bytes) == (5, 2, 0)


def test_concurrent_appends_are_group_committed(spool: Spool, dirs: tuple[Path, Path]) -> None:
    def worker(n: int) -> None:
        for i in range(20):
            spool.append("src", lines(f"w{n}-{i}", 5), DAY).result(timeout=5)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 1 <= spool.stats().group_commits <= 8 * 20
    spool.close()
    got = archived(dirs[1], "src")
    assert len(got) == len(set(got)) == 8 * 20 * 5
    assert len(list_archive_files(LocalStorage(), dirs[1], "src")) == 1  # one open segment per source and day


def test_a_new_received_day_opens_a_new_segment(spool: Spool, dirs: tuple[Path, Path]) -> None:
    spool.append("src", lines("d1", 1), DAY).result(timeout=5)
    spool.append("src", lines("d2", 1), NEXT_DAY).result(timeout=5)
    spool.close()
    files = list_archive_files(LocalStorage(), dirs[1], "src")
    assert [f.day_ms for f in files] == [DAY, NEXT_DAY]
    assert [f.key.split("/")[:3] for f in files] == [
        ["segment-logs", "src", str(DAY)],
        ["segment-logs", "src", str(NEXT_DAY)],
    ]


def test_seals_full_segments_while_open(dirs: tuple[Path, Path]) -> None:
    with Spool(dirs[0], dirs[1], seal_max_bytes=1024, seal_max_age_seconds=NEVER) as spool:
        for i in range(10):
            spool.append("src", [orjson.dumps({"i": i, "pad": "x" * 400})], DAY).result(timeout=5)
        wait_until(lambda: len(list_archive_files(LocalStorage(), dirs[1], "src")) >= 3)
    assert len(archived(dirs[1], "src")) == 10


def test_seals_aged_segments_while_open(dirs: tuple[Path, Path]) -> None:
    with Spool(dirs[0], dirs[1], seal_max_bytes=1 << 20, seal_max_age_seconds=0.2) as spool:
        spool.append("src", lines("aged", 2), DAY).result(timeout=5)
        wait_until(lambda: archived(dirs[1], "src") == lines("aged", 2) and segments(dirs[0]) == [])


def test_append_validates_and_refuses_after_close(spool: Spool) -> None:
    with pytest.raises(ValueError, match="newline"):
        spool.append("src", [b'{"a":\n1}'], DAY)
    with pytest.raises(ValueError, match="source id"):
        spool.append("../x", lines("x", 1), DAY)
    assert spool.append("src", [], DAY).result(timeout=1) is None
    spool.close()
    spool.close()  # idempotent
    with pytest.raises(SpoolClosedError):
        spool.append("src", lines("late", 1), DAY)


def test_two_spools_on_one_dir_are_refused(spool: Spool, dirs: tuple[Path, Path]) -> None:
    with pytest.raises(SpoolLockedError, match="in use by another eventlake collector") as caught:
        Spool(dirs[0], dirs[1], seal_max_bytes=1024, seal_max_age_seconds=1)
    assert str(dirs[0]) in str(caught.value)
    assert isinstance(caught.value, EventLakeError)
    spool.close()
    Spool(dirs[0], dirs[1], seal_max_bytes=1024, seal_max_age_seconds=1).close()  # free again


# recovery -------------------------------------------------------------------------------------


def crashed_segment(spool_dir: Path, content: bytes, source_id: str = "src", seq: int = 1) -> Path:
    """A segment left by a process (token ``deadbeef``) killed before it sealed it."""
    name = state_layout.spool_segment_name(DAY, 1_795_340_000_000, "deadbeef", seq)
    path = state_layout.spool_segment_file(spool_dir, source_id, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def test_recover_seals_a_crashed_segment_and_drops_its_torn_line(dirs: tuple[Path, Path]) -> None:
    path = crashed_segment(dirs[0], b'{"n":1}\n{"n":2}\n{"n":3, "tor')
    with Spool(dirs[0], dirs[1], seal_max_bytes=1024, seal_max_age_seconds=NEVER) as spool:
        assert spool.recover() == 1
        assert not path.exists()
        assert spool.stats().sealed_files == 1
    files = list_archive_files(LocalStorage(), dirs[1], "src")
    assert [f.path.name for f in files] == [path.name.replace(state_layout.SPOOL_SUFFIX, ".gz")]
    assert archived(dirs[1], "src") == [b'{"n":1}', b'{"n":2}']


def test_recover_after_a_crash_between_rename_and_unlink_seals_nothing_twice(dirs: tuple[Path, Path]) -> None:
    path = crashed_segment(dirs[0], b'{"n":1}\n{"n":2}\n')
    name = path.name[: -len(state_layout.SPOOL_SUFFIX)]
    final = layout.archive_file(dirs[1], "src", DAY, name)
    final.parent.mkdir(parents=True)
    final.write_bytes(gzip.compress(b'{"n":1}\n{"n":2}\n'))
    before = final.read_bytes()
    with Spool(dirs[0], dirs[1], seal_max_bytes=1024, seal_max_age_seconds=NEVER) as spool:
        assert spool.recover() == 1
        assert spool.stats().sealed_files == 0
    assert not path.exists()
    assert final.read_bytes() == before
    assert len(list_archive_files(LocalStorage(), dirs[1], "src")) == 1
    assert archived(dirs[1], "src") == [b'{"n":1}', b'{"n":2}']


def test_recover_after_a_crash_mid_gzip_rewrites_the_staged_file(dirs: tuple[Path, Path]) -> None:
    path = crashed_segment(dirs[0], b'{"n":1}\n')
    segment = Segment.from_path(path)
    assert segment is not None
    segment.temp_path.write_bytes(b"half a gzip stream")  # killed while gzipping into the spool
    assert spool_segments(dirs[0]) == [segment]  # staged files are not segments
    with Spool(dirs[0], dirs[1], seal_max_bytes=1024, seal_max_age_seconds=NEVER) as spool:
        assert spool.recover() == 1
    assert archived(dirs[1], "src") == [b'{"n":1}']
    assert sorted(p.name for p in path.parent.iterdir()) == []  # segment and staged files dropped


def test_recover_after_a_crash_before_the_upload_writes_the_staged_file(dirs: tuple[Path, Path]) -> None:
    path = crashed_segment(dirs[0], b'{"n":1}\n{"n":2}\n{"torn')
    segment = Segment.from_path(path)
    assert segment is not None
    segment.staged_path.write_bytes(gzip.compress(b'{"n":1}\n{"n":2}\n'))  # complete: it has its name
    with Spool(dirs[0], dirs[1], seal_max_bytes=1024, seal_max_age_seconds=NEVER) as spool:
        assert spool.recover() == 1
        assert spool.stats().sealed_files == 1
    assert archived(dirs[1], "src") == [b'{"n":1}', b'{"n":2}']
    assert not path.exists() and not segment.staged_path.exists()


def test_recover_deletes_empty_segments(dirs: tuple[Path, Path]) -> None:
    empty = crashed_segment(dirs[0], b"", seq=1)
    torn_only = crashed_segment(dirs[0], b'{"never acknowledged', seq=2)
    with Spool(dirs[0], dirs[1], seal_max_bytes=1024, seal_max_age_seconds=NEVER) as spool:
        assert spool.recover() == 2
    assert not empty.exists() and not torn_only.exists()
    assert list_archive_files(LocalStorage(), dirs[1], "src") == []


def test_recover_leaves_its_own_open_segments_alone(dirs: tuple[Path, Path]) -> None:
    with Spool(dirs[0], dirs[1], seal_max_bytes=1 << 20, seal_max_age_seconds=NEVER) as spool:
        spool.append("src", lines("own", 2), DAY).result(timeout=5)
        assert spool.recover() == 0
        assert len(segments(dirs[0])) == 1
        spool.append("src", lines("more", 1), DAY).result(timeout=5)
    assert archived(dirs[1], "src") == lines("own", 2) + lines("more", 1)
    assert len(list_archive_files(LocalStorage(), dirs[1], "src")) == 1


def wait_until(condition: object, timeout: float = 5.0) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_a_failed_write_fails_only_its_group(spool: Spool, dirs: tuple[Path, Path]) -> None:
    blocker = state_layout.spool_source_dir(dirs[0], "broken")
    blocker.write_bytes(b"a file where the source's spool directory should be")
    failed = spool.append("broken", lines("lost", 1), DAY)
    fine = spool.append("src", lines("kept", 1), DAY)
    with pytest.raises(SpoolWriteError, match="could not store the messages durably"):
        failed.result(timeout=5)
    assert fine.result(timeout=5) is None
    assert spool.stats().write_errors == 1
    blocker.unlink()
    spool.append("broken", lines("retried", 1), DAY).result(timeout=5)
    spool.close()
    assert archived(dirs[1], "broken") == lines("retried", 1)
    assert archived(dirs[1], "src") == lines("kept", 1)


# spool size and its bound -----------------------------------------------------------------------


def test_spool_bytes_count_what_is_stored_and_not_sealed(dirs: tuple[Path, Path]) -> None:
    crashed_segment(dirs[0], b'{"n":1}\n{"n":2}\n')
    with Spool(dirs[0], dirs[1], seal_max_bytes=1 << 20, seal_max_age_seconds=NEVER) as spool:
        spool.recover()
        assert spool.stats().spool_bytes == 0  # the recovered segment is sealed
        spool.append("src", lines("a", 3), DAY).result(timeout=5)
        stored = len(b"".join(line + b"\n" for line in lines("a", 3)))
        assert spool.stats().spool_bytes == stored == spool.stats().bytes
    assert spool.stats().spool_bytes == 0  # closing sealed it


def test_a_spool_over_its_bound_answers_full_until_sealing_catches_up(dirs: tuple[Path, Path]) -> None:
    """The sealer falls behind (here: the archive cannot be written): 429, then back to normal."""
    archive = layout.archive_root(dirs[1])
    dirs[1].mkdir(parents=True)
    archive.write_bytes(b"a file where the archive directory should be: sealing fails")
    record = orjson.dumps({"pad": "x" * 500})
    with Spool(
        dirs[0], dirs[1], seal_max_bytes=1024, seal_max_age_seconds=0.1, max_spool_bytes=4096
    ) as spool:
        full = None
        for _ in range(20):
            try:
                spool.append("src", [record], DAY).result(timeout=5)
            except SpoolFullError as exc:
                full = exc
                break
        assert full is not None, "the spool never refused"
        assert full.http_status == 429 and full.retry_after_seconds > 0
        assert "sealed into the archive" in str(full)
        assert spool.stats().spool_bytes <= 4096
        wait_until(lambda: spool.stats().seal_errors > 0 and spool.stats().upload_failures > 0)
        archive.unlink()  # the archive is writable again: the sealer catches up
        wait_until(lambda: spool.stats().spool_bytes == 0)
        spool.append("src", [record], DAY).result(timeout=5)
    assert len(archived(dirs[1], "src")) == spool.stats().messages


# the archive's store failing --------------------------------------------------------------------


class StoreDown(Exception):
    """What a client library raises when its store is unreachable (not an OSError: botocore's)."""


class FlakyStorage(LocalStorage):
    """The local store, except that every call fails while ``down`` (as an unreachable bucket)."""

    def __init__(self) -> None:
        self.down = threading.Event()
        self.calls = 0  # calls while down
        self.tried: set[Location] = set()  # the paths of those calls

    def _check(self, path: Location) -> None:
        if self.down.is_set():
            self.calls += 1
            self.tried.add(path)
            raise StoreDown("Could not connect to the endpoint URL: http://127.0.0.1:9/bucket")

    def exists(self, path: Location) -> bool:
        self._check(path)
        return super().exists(path)

    def open_write(self, path: Location, mode: int = 0o644):  # type: ignore[override]
        self._check(path)
        return super().open_write(path, mode)


def flaky_spool(dirs: tuple[Path, Path], storage: FlakyStorage, **options: object) -> Spool:
    settings: dict = {"seal_max_bytes": 1 << 20, "seal_max_age_seconds": 0.05}
    settings.update(options)
    return Spool(
        dirs[0], dirs[1], storage=storage, retry_first_seconds=0.01, retry_max_seconds=0.05, **settings
    )


def test_upload_failures_keep_segments_in_the_spool_and_are_retried(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    storage = FlakyStorage()
    storage.down.set()
    with caplog.at_level("DEBUG", logger="eventlake.archive"), flaky_spool(dirs, storage) as spool:
        for n in range(3):  # a segment each: one per received day
            spool.append("src", lines(f"while-down-{n}", 2), DAY + n * 86_400_000).result(timeout=5)
        wait_until(lambda: len(storage.tried) == 3)  # a failing segment goes last: every one is tried
        stats = spool.stats()
        assert stats.upload_failures == stats.seal_errors == storage.calls  # one store call per attempt
        assert stats.spool_bytes == stats.bytes and stats.sealed_files == 0
        assert len(segments(dirs[0])) == 3 and archived(dirs[1], "src") == []
        storage.down.clear()
        wait_until(lambda: spool.stats().spool_segments == 0)
        assert spool.stats().spool_bytes == 0 and spool.stats().sealed_files == 3
    expected = lines("while-down-0", 2) + lines("while-down-1", 2) + lines("while-down-2", 2)
    assert archived(dirs[1], "src") == expected
    assert segments(dirs[0]) == [] and list(dirs[0].glob("src/.*")) == []
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1, "one line per failure streak"
    assert "cannot write spool segment" in errors[0].getMessage()
    assert "StoreDown: Could not connect" in errors[0].getMessage()
    assert "retried with backoff" in errors[0].getMessage()
    assert [r for r in caplog.records if "works again" in r.getMessage()]


def test_the_spool_bound_counts_segments_waiting_for_their_upload(dirs: tuple[Path, Path]) -> None:
    storage = FlakyStorage()
    storage.down.set()
    record = orjson.dumps({"pad": "x" * 500})
    with flaky_spool(dirs, storage, seal_max_bytes=1024, max_spool_bytes=4096) as spool:
        accepted = 0
        with pytest.raises(SpoolFullError):
            for _ in range(20):
                spool.append("src", [record], DAY).result(timeout=5)
                accepted += 1
        assert 0 < accepted < 20 and spool.stats().spool_segments >= 1
        storage.down.clear()
        wait_until(lambda: spool.stats().spool_bytes == 0)
        spool.append("src", [record], DAY).result(timeout=5)
        accepted += 1
    assert len(archived(dirs[1], "src")) == accepted


def test_closing_while_the_store_is_down_leaves_the_segments_for_the_next_start(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    storage = FlakyStorage()
    storage.down.set()
    with flaky_spool(dirs, storage, seal_max_age_seconds=NEVER) as spool:
        spool.append("src", lines("kept", 3), DAY).result(timeout=5)
    assert len(segments(dirs[0])) == 1
    assert any("could not be sealed into the archive" in r.getMessage() for r in caplog.records)

    storage = FlakyStorage()
    storage.down.set()
    with flaky_spool(dirs, storage, seal_max_age_seconds=NEVER) as spool:
        assert spool.recover() == 0  # the store is still down: the collector starts anyway
        assert spool.stats().spool_segments == 1 and spool.stats().upload_failures >= 1
        storage.down.clear()
        wait_until(lambda: spool.stats().spool_segments == 0)
    assert archived(dirs[1], "src") == lines("kept", 3)
    assert segments(dirs[0]) == []


def test_the_retry_backoff_must_be_sensible(dirs: tuple[Path, Path]) -> None:
    with pytest.raises(ValueError, match="first wait must be positive"):
        Spool(dirs[0], dirs[1], 1024, NEVER, retry_first_seconds=5, retry_max_seconds=1)
    assert ArchiveUploadError.http_status == 503


def test_the_spool_folders_are_durable_before_a_message_is_acknowledged(
    dirs: tuple[Path, Path], fsynced_dirs: list[Path]
) -> None:
    spool_dir = dirs[0]  # state/spool, neither folder there yet
    with Spool(spool_dir, dirs[1], seal_max_bytes=1 << 26, seal_max_age_seconds=NEVER) as opened:
        opened.append("src1", lines("a", 1), DAY).result(timeout=5)
        acknowledged = list(fsynced_dirs)
    source_dir = state_layout.spool_source_dir(spool_dir, "src1")
    assert {spool_dir.parent.parent, spool_dir.parent, spool_dir, source_dir} <= set(acknowledged)
