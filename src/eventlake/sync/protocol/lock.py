"""One sync per source at a time, across processes and machines.

On a local lake: an ``flock`` the kernel releases when the process dies. On an object store: a
:class:`~eventlake.storage.lease.Lease` (a conditional put with an expiry), since a bucket has
no locks; a killed holder blocks others until its lease expires (at once on its own host).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from eventlake import state_layout
from eventlake.errors import EventLakeError
from eventlake.flock import exclusive
from eventlake.storage import Location, Storage
from eventlake.storage.lease import Lease

LEASE_SECONDS = 60.0


class SyncBusyError(EventLakeError):
    exit_code = 75  # EX_TEMPFAIL: try again later
    code = "sync_running"


@contextmanager
def source_lock(
    storage: Storage, lake: Location, source_slug: str, source_id: str, wait: bool,
    say: Callable[[str], None], lease_seconds: float = LEASE_SECONDS,
) -> Iterator[Lease | None]:  # fmt: skip
    """Hold the source's lock for the ``with`` block; yields the :class:`Lease` on object stores
    (check it before publishing), None on a local lake. Raises :class:`SyncBusyError` when
    another sync holds it and not ``wait``."""
    waiting = f"{source_slug}: another sync of this source is running; waiting for it to finish"
    busy = (
        f"source {source_slug!r} is busy: another process holds its lock (a sync, replay, compaction, "
        "retention, schema set-type or users delete); retry later or drop --no-wait"
    )
    local = storage.local_path(state_layout.sync_lock_file(lake, source_id))
    if local is not None:
        with exclusive(local, wait=wait, say=say, waiting=waiting, claim=True) as held:
            if held is None:
                raise SyncBusyError(busy)
            yield None
        return
    lease = Lease(storage, state_layout.sync_lease_dir(lake, source_id), lease_seconds)
    if not lease.acquire(wait, lambda holder: say(f"{waiting} (held by {_holder(holder)})")):
        raise SyncBusyError(busy)
    try:
        yield lease
    finally:
        lease.release()


def _holder(document: dict[str, Any]) -> str:
    return f"{document.get('host', '?')}, process {document.get('pid', '?')}"
