"""The one per-source loop (sync/runner.py) on a local lake, with the real lock file and a real
lease: busy -> Skipped, raised -> Failed, interrupted runs completed first, a lost lease publishes
nothing. No Spark: the jobs here are plain functions."""

from __future__ import annotations

import time
from types import SimpleNamespace

import orjson
import pytest

from eventlake import layout
from eventlake.flock import LockFile
from eventlake.storage.lease import Lease, lease_name
from eventlake.sync.lock import SyncBusyError
from eventlake.sync.manifest import Manifest
from eventlake.sync.runner import EXIT_BUSY, Hold, exit_code, publish, run_source
from eventlake.sync.state import SyncState
from eventlake.sync.status import Status


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
    holder = LockFile(layout.sync_lock_file(lake.settings.lake.root, lake.source.id))
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
