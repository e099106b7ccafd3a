"""One sync per source at a time: an ``flock`` the kernel releases when the process dies."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from eventlake import layout
from eventlake.errors import EventLakeError
from eventlake.flock import exclusive


class SyncBusyError(EventLakeError):
    exit_code = 75  # EX_TEMPFAIL: try again later
    code = "sync_running"


@contextmanager
def source_lock(
    lake: Path, source_slug: str, source_id: str, wait: bool, say: Callable[[str], None]
) -> Iterator[None]:
    waiting = f"{source_slug}: another sync of this source is running; waiting for it to finish"
    with exclusive(
        layout.sync_lock_file(lake, source_id), wait=wait, say=say, waiting=waiting, claim=True
    ) as held:
        if held is None:
            raise SyncBusyError(
                f"a sync of source {source_slug!r} is already running; retry later or drop --no-wait"
            )
        yield
