"""Exclusive ``flock`` locks on lock files, which the kernel releases when their holder dies.

Every lock eventlake takes goes through here: one sync per source, one collector per spool
directory, one writer of a suppression list, one process on the embedded Derby metastore, one
creator of a metastore schema. :class:`LockFile` opens the file (creating it and its folder) and
tries the lock without blocking, so the caller can refuse, wait or do something else;
:func:`exclusive` holds a lock for a ``with`` block, saying why it waits when it has to.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


class LockFile:
    """An open lock file (created, with its folder, when missing), not locked until
    :meth:`try_lock` or :meth:`lock`; :meth:`close` releases the lock. ``mode`` is the new file's
    permission bits before the umask (``open()``'s default: 0o666)."""

    def __init__(self, path: Path, mode: int = 0o666) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)

    def try_lock(self) -> bool:
        """Take the lock if nobody holds it; False, at once, if another process does."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def lock(self) -> None:
        """Take the lock, blocking while another process holds it."""
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def claim(self) -> None:
        """Write this process's id into the file, for whoever finds the lock taken."""
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def holder(self) -> str:
        """The process id the holder wrote with :meth:`claim` ("" when it wrote none)."""
        return os.pread(self.fd, 32, 0).decode("ascii", "replace").strip()

    def close(self) -> None:
        """Release the lock (also for a forked child sharing the file) and close it. Idempotent."""
        if self.fd < 0:
            return
        try:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> LockFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def exclusive(
    path: Path,
    *,
    wait: bool = True,
    say: Callable[[str], None] | None = None,
    waiting: str = "",
    claim: bool = False,
    mode: int = 0o666,
) -> Iterator[LockFile | None]:
    """Hold the exclusive lock on ``path`` for the ``with`` block; yields the held :class:`LockFile`.

    When another process holds it: with ``wait``, ``say`` the ``waiting`` line (when given) and
    block until it is free; without, yield None at once, holding nothing (the caller refuses or moves on).
    ``claim``: write this process's id into the file once the lock is held.
    """
    with LockFile(path, mode) as lock:
        if not lock.try_lock():
            if not wait:
                yield None
                return
            if waiting and say is not None:
                say(waiting)
            lock.lock()
        if claim:
            lock.claim()
        yield lock
