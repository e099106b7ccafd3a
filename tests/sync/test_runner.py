"""The one per-source loop (sync/protocol/runner.py) on a local lake, with the real lock file and a real
lease: busy -> Skipped, raised -> Failed, interrupted runs completed first, a lost lease publishes
nothing. No Spark: the jobs here are plain functions."""

from __future__ import annotations

import dataclasses
import time
from datetime import timedelta
from types import SimpleNamespace

import orjson
import pytest

from eventlake import layout, state_layout
from eventlake.flock import LockFile
from eventlake.storage.lease import Lease, LeaseLostError, lease_name
from eventlake.storage.local import LocalStorage
from eventlake.sync.protocol.lock import SyncBusyError
from eventlake.sync.protocol.manifest import Manifest
from eventlake.sync.protocol.runner import EXIT_BUSY, Hold, exit_code, publish, roll_forward, run_source
from eventlake.sync.protocol.state import SyncState
from eventlake.sync.protocol.status import Status


def no_catalog():
    pytest.fail("a manifest that registers no table needs no catalog")


def staged_move(lake, run_id: str, data: bytes) -> tuple[Manifest, object, object]:
    """A run's manifest that moves one staged file into the lake (no tables, no report)."""
    root, source_id = lake.settings.lake.root, lake.source.id
    stage = layout.stage_dir(root, source_id, run_id)
    staged, final = stage / "table" / "part.parquet", layout.source_data_dir(root, source_id) / "x.parquet"
    lake.settings.lake.storage().write(staged, data)
    manifest = Manifest(
        run_id=run_id, source_id=source_id, files=(), moves=((str(staged), str(final)),), tables=(),
        report_path="", report=(), stage=str(stage),
    )  # fmt: skip
    return manifest, staged, final


def test_a_source_another_process_holds_is_skipped_and_said(lake):
    said, ran = [], []
    holder = LockFile(state_layout.sync_lock_file(lake.settings.lake.root, lake.source.id))
    assert holder.try_lock()
    try:
        result = run_source(
            lake.settings, lake.settings.lake.storage(), lake.source, ran.append,
            failed=lambda status, exc: (status, str(exc)), what="compaction", wait=False, say=said.append,
        )  # fmt: skip
        with pytest.raises(SyncBusyError):  # a one-source command: the busy error exits 75
            run_source(lake.settings, lake.settings.lake.storage(), lake.source, ran.append, wait=False,
                       say=said.append)  # fmt: skip
    finally:
        holder.close()
    status, error = result
    assert status == Status.SKIPPED == "Skipped: already running" and "holds its lock" in error
    assert ran == [] and said[0] == f"{lake.slug}: {error}"
    assert exit_code([SimpleNamespace(status=status)]) == EXIT_BUSY == 75


def test_a_job_that_raises_is_failed_said_and_its_lock_released(lake):
    said = []

    def boom(hold: Hold) -> None:
        raise RuntimeError("the disk is full")

    storage = lake.settings.lake.storage()
    failed = run_source(
        lake.settings, storage, lake.source, boom, failed=lambda status, exc: status, what="retention",
        wait=False, say=said.append,
    )  # fmt: skip
    assert failed == Status.FAILED == "Failed"
    assert said == [f"{lake.slug}: retention failed: RuntimeError: the disk is full"]
    with pytest.raises(RuntimeError, match="the disk is full"):  # without ``failed``: it raises
        run_source(lake.settings, storage, lake.source, boom, wait=False, say=said.append)
    assert (
        run_source(lake.settings, storage, lake.source, lambda hold: "ran", wait=False, say=said.append)
        == "ran"
    )


def test_interrupted_runs_are_completed_before_the_job_runs(lake):
    storage, root = lake.settings.lake.storage(), lake.settings.lake.root
    state = SyncState(storage, root, lake.source.id)
    manifest, staged, final = staged_move(lake, "20261122T104700123Z-1a2b", b"rows")
    state.write_pending(manifest)  # killed after its manifest: the next job completes it
    crashed = layout.stage_dir(root, lake.source.id, "20261122T104800123Z-3c4d") / "table" / "y.parquet"
    storage.write(crashed, b"half")  # killed before its manifest: dropped
    seen, said = [], []

    def job(hold: Hold) -> str:
        seen.append((hold.completed, storage.exists(final), state.pending()))
        return "done"

    assert run_source(lake.settings, storage, lake.source, job, catalog=no_catalog, say=said.append) == "done"
    assert seen == [((manifest,), True, [])]
    assert storage.read(final) == b"rows" and not storage.exists(staged) and not storage.exists(crashed)
    assert said == [f"{lake.slug}: completing interrupted run {manifest.run_id}"]


def test_a_holder_that_lost_its_lease_publishes_nothing_and_fails(lake):
    storage, root = lake.settings.lake.storage(), lake.settings.lake.root
    state = SyncState(storage, root, lake.source.id)
    folder = root / "leases"
    lease = Lease(storage, folder, 60)
    assert lease.try_acquire()
    try:
        document = {"host": "machine-b", "pid": 1, "token": "b", "expires": time.time() + 600}
        storage.write(folder / lease_name(lease.number + 1), orjson.dumps(document))  # taken over
        manifest, staged, final = staged_move(lake, "20261122T104700123Z-1a2b", b"rows")
        said = []
        status = run_source(
            lake.settings, storage, lake.source,
            lambda hold: publish(manifest, Hold(lease), state, storage, root),
            failed=lambda status, exc: status, what="sync", say=said.append,
        )  # fmt: skip
    finally:
        lease.release()
    assert status == Status.FAILED and "LeaseLostError" in said[0] and "took the lease over" in said[0]
    assert state.pending() == [] and not storage.exists(final) and storage.exists(staged)


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def two_holders(lake):
    """Machine A holds the source's lease; after ``a_stalls()``, machine B may take it over."""
    storage, clock = lake.settings.lake.storage(), Clock()
    folder = state_layout.sync_lease_dir(lake.settings.lake.root, lake.source.id)
    a = Lease(storage, folder, 60, clock=clock, background=False)
    b = Lease(storage, folder, 60, clock=clock, background=False)
    assert a.try_acquire()

    def b_takes_over() -> None:
        clock.now += 61  # A stalled past its expiry
        assert b.try_acquire() and b.number == a.number + 1

    return a, b, b_takes_over


def test_a_manifest_written_after_its_holder_lost_the_lease_is_never_applied(lake):
    """Issue 34, defect 4: A checks its lease and stalls; B takes the lease over; A's manifest
    lands. Whether B's roll-forward lists it or a later holder's does, it is dropped: applying it
    would publish A's run, planned before B took over, after B's own runs (the same archive files
    twice, a partition switched back). Its files are synced again by the next sync."""
    storage, root = lake.settings.lake.storage(), lake.settings.lake.root
    state = SyncState(storage, root, lake.source.id)
    a, b, b_takes_over = two_holders(lake)
    manifest, staged, final = staged_move(lake, "20261122T104700123Z-1a2b", b"rows")
    Hold(a).check()  # A's publish: the lease is A's
    b_takes_over()
    state.write_pending(dataclasses.replace(manifest, lease=a.number))  # A's manifest lands; A dies
    said = []
    assert roll_forward(storage, root, lake.source.id, no_catalog, timedelta(0), said.append, lease=b) == ()
    assert not storage.exists(final) and state.pending() == []
    assert said == [
        f"dropping run {manifest.run_id}: written under lease {a.number} after its holder lost the "
        "lease, never confirmed; it published nothing (its archive files are synced again)"
    ]
    b.release()


def test_a_confirmed_manifest_of_an_older_lease_is_completed_by_the_next_holder(lake):
    """A durable commit intent: A wrote and confirmed its manifest, then died before applying it
    all. B (and, had B died too, whoever came next) completes it."""
    storage, root = lake.settings.lake.storage(), lake.settings.lake.root
    state = SyncState(storage, root, lake.source.id)
    a, b, b_takes_over = two_holders(lake)
    manifest, staged, final = staged_move(lake, "20261122T104700123Z-1a2b", b"rows")
    manifest = dataclasses.replace(manifest, lease=a.number)
    state.write_pending(manifest)
    a.confirm(manifest.run_id)  # A dies here
    b_takes_over()
    assert b.inherited == (manifest.run_id,)
    completed = roll_forward(storage, root, lake.source.id, no_catalog, timedelta(0), [].append, lease=b)
    assert completed == (manifest,) and storage.read(final) == b"rows" and state.pending() == []
    assert b.inherited == ()  # settled: the next holder inherits nothing
    b.release()


class PendingStalls(LocalStorage):
    """The lake's store, where the write of a pending manifest first runs ``meanwhile``: the
    holder stalled between its lease check and the write."""

    def __init__(self, meanwhile) -> None:
        self.meanwhile = meanwhile

    def write(self, path, data, *, private=False):
        if "pending" in str(path) and self.meanwhile is not None:
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()
        super().write(path, data, private=private)


def test_a_holder_that_loses_the_lease_between_its_check_and_its_manifest_publishes_nothing(lake):
    """Issue 34, defect 4: A's publish checks the lease, stalls, and B takes over before A's
    manifest is written. Before, A applied its manifest after B took over. Now A's confirmation
    (a compare-and-swap of its lease) fails: A drops its manifest, publishes nothing and fails."""
    root = lake.settings.lake.root
    a, b, b_takes_over = two_holders(lake)
    storage = PendingStalls(b_takes_over)
    state = SyncState(storage, root, lake.source.id)
    manifest, staged, final = staged_move(lake, "20261122T104700123Z-1a2b", b"rows")
    with pytest.raises(LeaseLostError, match="took the lease over"):
        publish(manifest, Hold(a), state, storage, root)
    assert not storage.exists(final) and state.pending() == []
    assert roll_forward(storage, root, lake.source.id, no_catalog, timedelta(0), [].append, lease=b) == ()
    b.release()


def test_a_manifest_of_a_newer_lease_at_roll_forward_means_the_lease_was_lost(lake):
    storage, root = lake.settings.lake.storage(), lake.settings.lake.root
    state = SyncState(storage, root, lake.source.id)
    a, b, b_takes_over = two_holders(lake)
    manifest, staged, final = staged_move(lake, "20261122T104700123Z-1a2b", b"rows")
    state.write_pending(dataclasses.replace(manifest, lease=a.number + 1))
    with pytest.raises(LeaseLostError, match="not older than this holder's"):
        roll_forward(storage, root, lake.source.id, no_catalog, timedelta(0), [].append, lease=a)
    assert not storage.exists(final) and len(state.pending()) == 1
    a.release()


def test_a_reports_merge_is_fenced_by_the_lease_like_any_commit(lake):
    """Issue 34, defect 4, where the reports' day merge (sync/protocol/report_days.py) meets the fence: A's
    sync checks its lease and stalls before writing the merge's manifest; B takes the lease over.
    The merge's manifest is confirmed under A's lease like a sync's commit: it fails, A publishes
    nothing (before, A wrote an unnumbered manifest and applied it under the lost lease)."""
    from eventlake.sync.protocol.report import (
        SyncResult,
        TableResult,
        note_report_day,
        report_path,
        report_rows,
        write_report_rows,
    )
    from eventlake.sync.protocol.report_days import checkpoint_reports
    from eventlake.timestamps import now_utc

    root, source_id = lake.settings.lake.root, lake.source.id
    now = now_utc().replace(hour=12, minute=0, second=0, microsecond=0)
    yesterday = now - timedelta(days=1)
    a, b, b_takes_over = two_holders(lake)
    storage = PendingStalls(b_takes_over)
    for n in (1, 2):  # yesterday's two runs, each with its report
        start = yesterday + timedelta(hours=n)
        table = TableResult("web", "pages", n, False, (), ({"day": f"{start:%Y-%m-%d}"},))
        result = SyncResult(
            "web", source_id, f"{start:%Y%m%dT%H%M%S}000Z-{n:04x}", "Success", start,
            start + timedelta(seconds=5), tables=(table,), input_files=1,
        )  # fmt: skip
        rows = report_rows(result, root)
        write_report_rows(storage, report_path(result, root), rows)
        note_report_day(storage, root, rows[0]["day"])
    storage.write(
        state_layout.report_days_file(root, source_id),
        orjson.dumps({"merged_through": f"{now - timedelta(days=2):%Y-%m-%d}"}),
    )
    state = SyncState(storage, root, source_id)

    with pytest.raises(LeaseLostError, match="took the lease over"):
        checkpoint_reports(storage, root, None, state, source_id, [].append, hold=Hold(a), now=now)

    assert state.pending() == []
    folder = layout.report_folder(root, f"{yesterday:%Y-%m-%d}", source_id)
    assert not [i for i in storage.list(folder, "**") if layout.marker_run_id(i.path.name)]  # not merged
    assert roll_forward(storage, root, source_id, no_catalog, timedelta(0), [].append, lease=b) == ()
    b.release()
