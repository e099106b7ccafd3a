"""One sync per source at a time: an ``flock`` the kernel releases when the process dies."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from eventlake import layout
from eventlake.errors import EventLakeError


class SyncBusyError(EventLakeError):
    exit_code = 75  # EX_TEMPFAIL: try again later
    code = "sync_running"


@contextmanager
def source_lock(
    lake: Path, source_slug: str, source_id: str, wait: bool, say: Callable[[str], None]
) -> Iterator[None]:
    path = layout.sync_lock_file(lake, source_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                raise SyncBusyError(
                    f"a sync of source {source_slug!r} is already running; retry later or drop --no-wait"
                ) from None
            say(f"{source_slug}: another sync of this source is running; waiting for it to finish")
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
