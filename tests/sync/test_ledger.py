"""The ledger's checkpoint and closed days: a sync lists only open days, and nothing is lost.

These drive :class:`eventlake.sync.protocol.ledger.Ledger` on a real local lake with explicit clocks (a day
is closed only once it ended :data:`CLOSE_MARGIN_MS` ago): the sync job calls the same three
steps (read, scan, checkpoint) at its start, under the source's lock."""

from __future__ import annotations

import gzip
import types
from pathlib import Path

import orjson
import pytest

from eventlake import layout, state_layout
from eventlake.archive import list_archive_files
from eventlake.archive.day_state import CLOSE_MARGIN_MS, MARKER_AGE_MS
from eventlake.archive.days import reopen_archive, reopen_days
from eventlake.storage.local import LocalStorage
from eventlake.sync.protocol.ledger import CHECKPOINT_RUNS, Ledger

SOURCE = "src1"
DAY = layout.DAY_MS
D0 = 1_764_028_800_000  # 2025-11-25T00:00Z
HOUR = 3_600_000


class Crash(Exception):
    pass


class CrashingStorage(LocalStorage):
    """A local store that fails its ``n``-th write or delete (counted from 1), once."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0

    def _step(self) -> None:
        self.calls += 1
        if self.calls == self.n:
            raise Crash(f"killed at step {self.n}")

    def write(self, path, data, *, private=False):
        self._step()
        return super().write(path, data, private=private)

    def delete(self, path):
        self._step()
        return super().delete(path)


def seal(lake: Path, day: int, n: int) -> str:
    """An archive file sealed into ``day``; its key."""
    name = state_layout.spool_segment_name(day, day + n, "a1b2c3d4", n) + layout.ARCHIVE_SUFFIX
    path = layout.archive_file(lake, SOURCE, day, name)
    LocalStorage().write(path, gzip.compress(b'{"type":"track"}\n'))
    return layout.lake_relative(lake, path)


def sync(ledger: Ledger, now_ms: int, run: str) -> list[str]:
    """What a sync does with the ledger: read, list the open days, checkpoint, then record what it
    read as synced. Returns the keys it synced."""
    view = ledger.read()
    scan = ledger.scan(view, now_ms)
    ledger.checkpoint(view, scan, now_ms)
    keys = [f.key for f in scan.pending]
    if keys:
        ledger.record(run, keys)
    return keys


def checkpoint(lake: Path) -> dict:
    return orjson.loads(state_layout.ledger_checkpoint_file(lake, SOURCE).read_bytes())


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    return tmp_path / "lake"


def test_finished_days_close_and_later_syncs_list_only_open_days(lake: Path) -> None:
    ledger = Ledger(LocalStorage(), lake, SOURCE)
    old = [seal(lake, D0, n) for n in range(3)] + [seal(lake, D0 + DAY, n) for n in range(2)]
    assert sorted(sync(ledger, D0 + 2 * DAY + HOUR, "run1")) == sorted(old)
    assert sync(ledger, D0 + 2 * DAY + 3 * HOUR, "run2") == []  # both days ended 2 h ago: closed
    assert checkpoint(lake)["closed_through"] == D0 + DAY
    assert orjson.loads(state_layout.closed_day_file(lake, SOURCE, D0).read_bytes()) == sorted(
        k.rsplit("/", 1)[1] for k in old[:3]
    )
    assert not list(
        state_layout.state_dir(lake, "ledger", SOURCE).glob("*.json")
    )  # folded into the checkpoint

    # a file dropped into a closed day without a marker is not listed: the sync lists open days only
    hidden = seal(lake, D0, 9)
    today = seal(lake, D0 + 2 * DAY, 1)
    assert sync(ledger, D0 + 2 * DAY + 4 * HOUR, "run3") == [today]
    # ... and reopening the day (what the sealer, the importer and `sync --rescan` do) finds it
    assert reopen_archive(LocalStorage(), lake, SOURCE) == 3  # `eventlake sync --rescan`
    assert sync(ledger, D0 + 2 * DAY + 5 * HOUR, "run4") == [hidden]
    assert ledger.synced_keys() == {*old, hidden, today}


def test_a_marker_is_consumed_only_once_old_and_its_day_all_synced(lake: Path) -> None:
    ledger = Ledger(LocalStorage(), lake, SOURCE)
    seal(lake, D0, 1)
    now = D0 + 3 * DAY + 3 * HOUR
    sync(ledger, now, "run1")
    sync(ledger, now + 1, "run2")
    assert checkpoint(lake)["closed_through"] == D0 + 2 * DAY
    # a late seal: the marker first, then (later) the file
    (marker,) = reopen_days(LocalStorage(), lake, SOURCE, [D0], now_ms=now + 10)
    assert sync(ledger, now + 20, "run3") == []  # the file is not there yet
    assert marker.exists()  # too recent to consume: the file may be on its way
    late = seal(lake, D0, 2)
    assert sync(ledger, now + 30, "run4") == [late]
    assert sync(ledger, now + 10 + MARKER_AGE_MS, "run5") == []
    assert not marker.exists()  # consumed: old, and every file of the day synced
    assert late in ledger.synced_keys([D0])
    assert str(D0) not in checkpoint(lake)["open"]


def test_run_entries_are_folded_every_few_runs(lake: Path) -> None:
    ledger = Ledger(LocalStorage(), lake, SOURCE)
    now = D0 + HOUR
    sync(ledger, now, "run00")  # the first checkpoint
    for n in range(1, CHECKPOINT_RUNS + 2):
        seal(lake, D0, n)
        assert len(sync(ledger, now + n, f"run{n:02d}")) == 1
        assert len(ledger.read().runs) <= CHECKPOINT_RUNS
    assert len(checkpoint(lake)["open"][str(D0)]) >= CHECKPOINT_RUNS
    assert len(ledger.synced_keys()) == CHECKPOINT_RUNS + 1


def lay_legacy_lake(lake: Path, days: int, files_per_day: int) -> set[str]:
    """A lake as the version before checkpoints left it: one ledger entry per run, nothing else."""
    keys = set()
    for d in range(days):
        day_keys = [seal(lake, D0 + d * DAY, n) for n in range(files_per_day)]
        for n, key in enumerate(day_keys):
            LocalStorage().write(
                state_layout.ledger_file(lake, SOURCE, f"2025{d:04d}T{n:06d}000Z-0000"),
                orjson.dumps({"run_id": "r", "files": [key]}),
            )
        keys.update(day_keys)
    return keys


def test_a_lake_before_checkpoints_upgrades_in_place(lake: Path) -> None:
    keys = lay_legacy_lake(lake, days=3, files_per_day=4)
    unsynced = seal(lake, D0 + 2 * DAY, 99)
    ledger = Ledger(LocalStorage(), lake, SOURCE)
    assert sync(ledger, D0 + 3 * DAY + 3 * HOUR, "new1") == [unsynced]
    assert checkpoint(lake)["closed_through"] == D0 + DAY  # day 2 had an unsynced file then
    assert sync(ledger, D0 + 3 * DAY + 4 * HOUR, "new2") == []
    assert checkpoint(lake)["closed_through"] == D0 + 2 * DAY
    assert ledger.synced_keys() == keys | {unsynced}


@pytest.mark.parametrize("step", range(1, 12))
def test_a_checkpoint_killed_at_any_step_loses_and_repeats_nothing(lake: Path, step: int) -> None:
    keys = lay_legacy_lake(lake, days=2, files_per_day=3)
    new = seal(lake, D0 + 2 * DAY, 1)
    reopen_days(LocalStorage(), lake, SOURCE, [D0], now_ms=D0 + DAY + HOUR)
    now = D0 + 3 * DAY
    crashing = Ledger(CrashingStorage(step), lake, SOURCE)
    view = crashing.read()
    scan = crashing.scan(view, now)
    try:
        crashing.checkpoint(view, scan, now)
    except Crash:
        pass
    ledger = Ledger(LocalStorage(), lake, SOURCE)
    assert sync(ledger, now + 1, "rerun") == [new]  # the unsynced file once, nothing synced again
    assert sync(ledger, now + MARKER_AGE_MS, "again") == []
    assert ledger.synced_keys() == keys | {new}
    assert not list(state_layout.reopened_days_dir(lake, SOURCE).glob("*.json"))


def closed_lake(lake: Path, now: int) -> Ledger:
    """A source whose days up to two days before ``now`` are closed, each fully synced."""
    ledger = Ledger(LocalStorage(), lake, SOURCE)
    seal(lake, D0, 1)
    sync(ledger, now, "run1")
    sync(ledger, now + 1, "run2")
    assert checkpoint(lake)["closed_through"] >= D0
    return ledger


def test_a_collector_sealing_late_into_a_closed_day_is_found(lake: Path, tmp_path: Path) -> None:
    from eventlake.archive.seal import Segment, seal_segment

    now = D0 + 3 * DAY + 3 * HOUR
    ledger = closed_lake(lake, now)
    # a collector that was down since day D0 seals its spool segment of D0 now (the real sealer)
    name = state_layout.spool_segment_name(D0, D0 + HOUR, "feedbeef", 1)
    spooled = state_layout.spool_segment_file(tmp_path / "spool", SOURCE, name)
    spooled.parent.mkdir(parents=True)
    spooled.write_bytes(b'{"type":"track","messageId":"late"}\n')
    result = seal_segment(Segment.from_path(spooled), LocalStorage(), lake)
    assert result.archive_path is not None
    assert [f.path for f in ledger.pending(now + 2)] == [result.archive_path]


def test_an_import_into_a_closed_day_is_found(lake: Path, tmp_path: Path) -> None:
    from eventlake.archive.importer import import_segment_archive

    now = D0 + 3 * DAY + 3 * HOUR
    ledger = closed_lake(lake, now)
    export = tmp_path / "export" / "segment-logs" / "Seg1" / str(D0)
    export.mkdir(parents=True)
    (export / "1764030000000.ab12.gz").write_bytes(gzip.compress(b'{"type":"track","messageId":"old"}\n'))
    result = import_segment_archive(LocalStorage(), tmp_path / "export", LocalStorage(), lake, SOURCE)
    assert result.files == 1
    assert [f.path.name for f in ledger.pending(now + 2)] == ["segment-Seg1-1764030000000.ab12.gz"]


class WallClock:
    """The machine's clock as the sealer and the importer read it by default (``time.time`` in
    :mod:`eventlake.archive.days`), set by the test: ``ms`` is now."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def time(self) -> float:
        return self.ms / 1000


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> WallClock:
    clock = WallClock(D0)
    monkeypatch.setattr("eventlake.archive.days.time", types.SimpleNamespace(time=clock.time))
    return clock


def test_the_first_checkpoint_at_one_past_midnight_keeps_yesterday_open(
    lake: Path, tmp_path: Path, wall
) -> None:
    """Issue 34, defect 5: a new source's first sync at 00:01 closed yesterday at once; a collector
    whose clock is a few seconds behind then seals into yesterday without a marker (by its clock
    the day has not ended), and its 10 messages were never synced."""
    from eventlake.archive.seal import Segment, seal_segment

    midnight = D0 + 5 * DAY
    ledger = Ledger(LocalStorage(), lake, SOURCE)
    assert sync(ledger, midnight + 60_000, "first") == []  # a new source, its first sync at 00:01
    wall.ms = midnight - 3_000  # the collector's clock: 23:59:57 of yesterday, 3 s behind
    name = state_layout.spool_segment_name(midnight - DAY, midnight - 4_000, "feedbeef", 1)
    spooled = state_layout.spool_segment_file(tmp_path / "spool", SOURCE, name)
    spooled.parent.mkdir(parents=True)
    spooled.write_bytes(b"".join(b'{"type":"track","messageId":"m%d"}\n' % n for n in range(10)))
    sealed = seal_segment(Segment.from_path(spooled), LocalStorage(), lake).archive_path
    assert sealed is not None and sealed.parent.name == str(midnight - DAY)
    assert not list(
        state_layout.reopened_days_dir(lake, SOURCE).glob("*.json")
    )  # no marker: not ended by its clock
    synced = sync(ledger, midnight + 2 * 60_000, "second")
    assert synced == [layout.lake_relative(lake, sealed)]  # its 10 messages: all of them synced
    assert len(gzip.decompress(sealed.read_bytes()).splitlines()) == 10
    # yesterday closes once it ended CLOSE_MARGIN_MS ago, its file in its day file
    sync(ledger, midnight + CLOSE_MARGIN_MS, "third")
    assert checkpoint(lake)["closed_through"] == midnight - DAY
    assert ledger.synced_keys() == set(synced)


def export_days(tmp_path: Path, days: list[int], per_day: int) -> Path:
    """A Segment archive (the S3 destination's layout) of ``per_day`` files in each of ``days``."""
    root = tmp_path / "export"
    for day in days:
        folder = root / "segment-logs" / "Seg1" / str(day)
        folder.mkdir(parents=True)
        for n in range(per_day):
            line = b'{"type":"track","messageId":"%d-%d"}\n' % (day, n)
            (folder / f"{day + n * HOUR}.f{n}.gz").write_bytes(gzip.compress(line))
    return root


class SlowExport(LocalStorage):
    """The export's storage, read one file at a time by an import that takes hours: before each
    file read, ``before_read(path)`` (the test moves the clock and runs syncs there)."""

    def __init__(self, before_read) -> None:
        self.before_read = before_read

    def read(self, path):
        self.before_read(path)
        return super().read(path)


def test_a_sync_hours_into_a_long_import_loses_no_day(
    lake: Path, tmp_path: Path, wall, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34, defect 2: the import marked every day before its copy loop; a sync more than two
    hours later, while the import is between days, found the days it had not reached yet empty,
    closed them and consumed their markers, and the files written into them afterwards were never
    listed. Every imported file must be synced, however long the import runs."""
    from eventlake.archive.importer import import_segment_archive
    from eventlake.storage import prefetch

    monkeypatch.setattr(prefetch, "PREFETCH_FILES", 1)  # one file at a time: "between days" is exact
    now = D0 + 10 * DAY + 3 * HOUR
    ledger = closed_lake(lake, now)  # the lake's earlier days are closed
    days = [D0 + DAY, D0 + 2 * DAY, D0 + 3 * DAY]
    export = export_days(tmp_path, days, per_day=2)
    wall.ms = now + HOUR  # the import starts
    synced: list[str] = []

    def between_days(path: Path) -> None:
        if path.parent.name == str(days[1]) and path.name.endswith(".f0.gz"):  # day 1 done, day 2 next
            wall.ms += 3 * HOUR  # two years of archive: hours go by
            synced.extend(sync(ledger, wall.ms, "during-1"))  # `up` syncs as it does every minute
            synced.extend(sync(ledger, wall.ms + 60_000, "during-2"))

    result = import_segment_archive(SlowExport(between_days), export, LocalStorage(), lake, SOURCE)
    assert result.files == 6
    imported = {
        f.key for f in list_archive_files(LocalStorage(), lake, SOURCE) if f.path.name.startswith("segment-")
    }
    wall.ms += 60_000
    for n in range(4):  # the syncs after the import, until every day is closed again
        synced.extend(sync(ledger, wall.ms + n * MARKER_AGE_MS, f"after-{n}"))
    assert sorted(synced) == sorted(imported)  # every imported file listed and synced once
    assert imported <= ledger.synced_keys()
    assert not list(
        state_layout.reopened_days_dir(lake, SOURCE).glob("*.json")
    )  # every marker consumed at last
    assert checkpoint(lake)["closed_through"] >= days[-1]


def test_a_day_whose_copy_runs_for_hours_is_marked_again(
    lake: Path, tmp_path: Path, wall, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for one day whose files take hours to copy: a marker older than MARKER_AGE_MS
    would be consumed while the import still writes into its day, so the import marks it again."""
    from eventlake.archive.importer import import_segment_archive
    from eventlake.storage import prefetch

    monkeypatch.setattr(prefetch, "PREFETCH_FILES", 1)
    now = D0 + 10 * DAY + 3 * HOUR
    ledger = closed_lake(lake, now)
    export = export_days(tmp_path, [D0 + DAY], per_day=4)
    wall.ms = now + HOUR
    synced: list[str] = []

    def an_hour_a_file(path: Path) -> None:
        wall.ms += HOUR
        synced.extend(sync(ledger, wall.ms, f"during-{path.name}-1"))
        synced.extend(sync(ledger, wall.ms + 60_000, f"during-{path.name}-2"))

    result = import_segment_archive(SlowExport(an_hour_a_file), export, LocalStorage(), lake, SOURCE)
    assert result.files == 4
    for n in range(4):
        synced.extend(sync(ledger, wall.ms + 60_000 + n * MARKER_AGE_MS, f"after-{n}"))
    assert len(synced) == 4 and len(set(synced)) == 4
    assert not list(state_layout.reopened_days_dir(lake, SOURCE).glob("*.json"))


def test_rerunning_an_import_finds_what_an_earlier_run_wrote_into_a_day_closed_without_it(
    lake: Path, tmp_path: Path, wall
) -> None:
    """A file an earlier import wrote into a day that a sync then closed without it (what the
    import before issue 34's fix left behind): the rerun skips the file (already there) but marks
    its day, so the next sync lists and syncs it."""
    from eventlake.archive.importer import import_segment_archive

    now = D0 + 10 * DAY + 3 * HOUR
    ledger = closed_lake(lake, now)
    export = export_days(tmp_path, [D0 + DAY], per_day=1)
    wall.ms = now
    import_segment_archive(LocalStorage(), export, LocalStorage(), lake, SOURCE)
    for marker in state_layout.reopened_days_dir(lake, SOURCE).glob("*.json"):
        marker.unlink()  # as a sync consumed it before the file was written
    assert sync(ledger, now + MARKER_AGE_MS, "lost") == []  # hidden: its day is closed
    wall.ms = now + MARKER_AGE_MS + HOUR
    again = import_segment_archive(LocalStorage(), export, LocalStorage(), lake, SOURCE)
    assert (again.files, again.skipped) == (0, 1)
    [found] = sync(ledger, wall.ms + 60_000, "found")
    assert found.endswith(".f0.gz") and found in ledger.synced_keys()
