"""The one per-source loop of every job that changes a source's lake (sync, replay, compaction,
retention, user deletion, ``schema set-type``, adoption).

:func:`run_source` takes the source's lock (a lease on an object store, :mod:`.lock`), rolls the
interrupted runs forward (:func:`roll_forward`), runs the job, and turns a busy source into
:attr:`Status.SKIPPED` and a failure into :attr:`Status.FAILED` (or lets them raise, for a
one-source command). A job publishes through :func:`publish`, which checks the lease first: a
holder that lost it publishes nothing. On an object store the commit is fenced by the lease
(:mod:`eventlake.storage.lease`): a manifest carries its lease's number and is applied only once
confirmed under it; :func:`roll_forward` drops a manifest that a holder wrote after losing its
lease. :func:`exit_code` is what the CLI exits with for the results.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, TypeVar

from eventlake import layout
from eventlake.catalog import Catalog
from eventlake.config import Settings, SourceSettings
from eventlake.progress import Say, prefixed
from eventlake.storage import Location, Storage, to_location
from eventlake.storage.lease import Lease, LeaseLostError
from eventlake.sync.protocol.commit import apply
from eventlake.sync.protocol.lock import SyncBusyError, source_lock
from eventlake.sync.protocol.manifest import Manifest
from eventlake.sync.protocol.rewrite import drop_retired
from eventlake.sync.protocol.state import SyncState
from eventlake.sync.protocol.status import Status

R = TypeVar("R")


class SourceResult(Protocol):
    """What every job's result says about its source (the rest is the job's own counts)."""

    @property
    def source(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def error(self) -> str: ...


@dataclass(frozen=True)
class Hold:
    """A job's hold on its source: the lease on an object store (None on a local lake, where the
    kernel's lock cannot be lost) and the interrupted runs completed on taking it."""

    lease: Lease | None = None
    completed: tuple[Manifest, ...] = ()

    def check(self) -> None:
        """Raise :class:`~eventlake.storage.lease.LeaseLostError` when the lease was lost (another
        process took the source over): call before each change."""
        if self.lease is not None:
            self.lease.check()


def run_source(
    settings: Settings, storage: Storage, source: SourceSettings, work: Callable[[Hold], R], *,
    failed: Callable[[Status, BaseException], R] | None = None, what: str = "",
    catalog: Callable[[], Catalog] | None = None, before: Callable[[], object] | None = None,
    wait: bool = True, say: Say,
) -> R:  # fmt: skip
    """Run ``work`` on ``source`` holding its lock; ``wait``: wait for the holder (else busy).

    ``catalog``: the runs a crash interrupted are completed first (:func:`roll_forward`; None: the
    job does not need them completed). ``before``: done first, before the lock is taken (a user
    deletion suppresses the user at once). ``failed``: the job's result for a source that is busy
    (:attr:`Status.SKIPPED`, said) or whose job raised (:attr:`Status.FAILED`, said as
    "``<what>`` failed"), so that a loop over sources goes on; None: both raise (one-source
    commands: :class:`~eventlake.sync.protocol.lock.SyncBusyError` exits 75)."""
    try:
        if before is not None:
            before()
        with source_lock(
            storage, settings.lake.root, source.slug, source.id, wait, say, settings.sync.lease_seconds
        ) as lease:
            completed: tuple[Manifest, ...] = ()
            if catalog is not None:
                tell = prefixed(say, source.slug)
                grace = timedelta(minutes=settings.sync.rewrite_grace_minutes)
                completed = roll_forward(
                    storage, settings.lake.root, source.id, catalog, grace, tell, lease=lease
                )
            return work(Hold(lease, completed))
    except SyncBusyError as exc:
        if failed is None:
            raise
        say(f"{source.slug}: {exc}")
        return failed(Status.SKIPPED, exc)
    except Exception as exc:  # said and returned: the caller goes on with the next source
        if failed is None:
            raise
        say(f"{source.slug}: {what} failed: {type(exc).__name__}: {exc}")
        return failed(Status.FAILED, exc)


def error_text(status: Status, exc: BaseException) -> str:
    """A busy or failed source's ``error``: why it was busy, or the failure with its type."""
    return str(exc) if status == Status.SKIPPED else f"{type(exc).__name__}: {exc}"


def roll_forward(
    storage: Storage, lake: Location, source_id: str, catalog: Callable[[], Catalog], grace: timedelta,
    say: Say, *, lease: Lease | None = None,
) -> tuple[Manifest, ...]:  # fmt: skip
    """Complete the source's interrupted runs (their manifests are pending), drop the staging of
    runs killed before their manifest, and delete the old files of rewritten partitions retired
    more than ``grace`` ago (and of the partitions retention dropped). Returns the manifests
    completed. ``catalog`` is called only for a manifest that needs it (a compaction's registers
    nothing) and for a dropped partition's record past its grace.

    ``lease``: the source's lease on an object store. A manifest written under an older lease is
    completed only when that lease confirmed it (it is among ``lease.inherited``); one that was
    not confirmed was written by a holder that had lost its lease (or died before confirming): it
    published nothing, and it is dropped. A manifest of this lease's number or a newer one means a
    newer holder exists: :class:`~eventlake.storage.lease.LeaseLostError`."""
    state = SyncState(storage, lake, source_id)
    completed = []
    for manifest in state.pending():
        if lease is not None and manifest.lease:
            if manifest.lease >= lease.number:
                raise LeaseLostError(
                    f"lost the lease {lease.folder}: run {manifest.run_id} is pending under lease "
                    f"{manifest.lease}, not older than this holder's {lease.number}; nothing was "
                    "published, run again"
                )
            if manifest.run_id not in lease.inherited:
                say(
                    f"dropping run {manifest.run_id}: written under lease {manifest.lease} after its "
                    "holder lost the lease, never confirmed; it published nothing (its archive files "
                    "are synced again)"
                )
                state.drop_pending(manifest.run_id)
                continue
        say(f"completing interrupted run {manifest.run_id}")
        apply(manifest, catalog() if manifest.tables else None, state, storage, lake, load_catalog=catalog)
        completed.append(manifest)
    if lease is not None:
        lease.settle()  # every inherited run is now applied or gone
    storage.delete_tree(layout.stage_root(lake, source_id))  # crashed runs' output
    drop_retired(storage, lake, source_id, grace, catalog=catalog)  # old files past their grace
    return tuple(completed)


def publish(
    manifest: Manifest, hold: Hold, state: SyncState, storage: Storage, lake: Location,
    catalog: Catalog | None = None, *, load_catalog: Callable[[], Catalog] | None = None,
) -> None:  # fmt: skip
    """Commit a run: check the lease (a holder that lost it publishes nothing), write the manifest,
    confirm it under the lease (the commit fence: from here the run is completed by the next holder
    if killed; a holder that lost the lease meanwhile drops its manifest and publishes nothing),
    then apply it. On a local lake the manifest is the commit point (its ``flock`` cannot be lost).
    What the manifest names is durable before it is: the run's stage, staged without a sync a file
    (:meth:`~eventlake.sync.protocol.stage.RunStage.open_write`), is made durable here at once."""
    storage.make_durable(to_location(manifest.stage))
    hold.check()
    if hold.lease is not None:
        manifest = dataclasses.replace(manifest, lease=hold.lease.number)
    state.write_pending(manifest)
    if hold.lease is not None:
        try:
            hold.lease.confirm(manifest.run_id)
        except LeaseLostError:
            try:  # never applied by anyone (it was not confirmed): the next holder drops it if this fails
                state.drop_pending(manifest.run_id)
            except Exception:  # noqa: S110 (the lost lease is the error to report)
                pass
            raise
    apply(manifest, catalog, state, storage, lake, load_catalog=load_catalog, resumed=False)


EXIT_FAILED = 1
EXIT_BUSY = SyncBusyError.exit_code  # 75, EX_TEMPFAIL: try again later


def exit_code(results: Iterable[SourceResult]) -> int:
    """The exit code of a command over sources: 1 when one failed, else 75 when one was busy
    (skipped: try again later), else 0.

    >>> from types import SimpleNamespace as R
    >>> exit_code([R(status=Status.SUCCESS), R(status=Status.SKIPPED), R(status="Failed")])
    1
    >>> exit_code([R(status=Status.NOTHING), R(status=Status.SKIPPED)]), exit_code([])
    (75, 0)
    """
    statuses = [r.status for r in results]
    if Status.FAILED in statuses:
        return EXIT_FAILED
    if Status.SKIPPED in statuses:
        return EXIT_BUSY
    return 0


def busy_sources(results: Iterable[SourceResult]) -> list[str]:
    """The sources skipped because another process held them."""
    return [r.source for r in results if r.status == Status.SKIPPED]


__all__ = [
    "Hold",
    "SourceResult",
    "busy_sources",
    "error_text",
    "exit_code",
    "publish",
    "roll_forward",
    "run_source",
]
