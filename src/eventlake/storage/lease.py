"""A lease: one holder at a time across machines, on any store, with an expiry so that a dead
holder blocks the others only until its lease runs out.

Object stores have no ``flock``. A lease is a numbered object in a folder, created with
:meth:`Storage.write_new` (S3's conditional put ``If-None-Match: *``): of two processes that
create the same number, exactly one succeeds. The highest number is the lease. A holder renews
it (rewrites its expiry) every third of its length from a background thread; a contender takes
over only once the newest lease has expired (or its holder is a dead process on this same host),
by creating the next number. A holder that finds a higher number than its own has lost the lease
and must not publish (:meth:`Lease.check`).

Expiry compares the holder's written deadline with the contender's clock: clocks of the machines
sharing a lake must agree to well within the lease length (60 s by default; NTP does).
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from eventlake.errors import EventLakeError
from eventlake.storage.base import Storage
from eventlake.storage.location import Location

LEASE_NAME = re.compile(r"^lease-(\d{12})\.json$")


class LeaseLostError(EventLakeError):
    code = "lease_lost"


def lease_name(number: int) -> str:
    return f"lease-{number:012d}.json"


class Lease:
    """The lease in ``folder``; :meth:`acquire` takes it, :meth:`release` gives it back."""

    def __init__(self, storage: Storage, folder: Location, seconds: float) -> None:
        self.storage, self.folder, self.seconds = storage, folder, seconds
        self.token = secrets.token_hex(8)
        self.number = 0  # the number held; 0: none
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.lost = ""  # why the lease was lost while held ("" while held or never held)

    # -- taking and giving back -------------------------------------------------------------------

    def try_acquire(self) -> bool:
        """Take the lease if it is free or expired: True when taken, False (at once) if held."""
        number, holder = self._newest()
        if holder is not None and not self._expired(holder):
            return False
        mine = self.folder / lease_name(number + 1)
        if not self.storage.write_new(mine, self._document()):
            return False  # another contender took this number first
        if self._numbers()[-1:] != [number + 1]:
            # numbers restart at 1 once every lease is released: a contender that saw an older,
            # higher number may have taken it meanwhile; it holds the lease, not this one
            self.storage.delete(mine)
            return False
        self.number = number + 1
        for old in self._numbers():
            if old < self.number:
                self.storage.delete(self.folder / lease_name(old))
        self._renewer = threading.Thread(target=self._renew, name="eventlake-lease", daemon=True)
        self._renewer.start()
        return True

    def acquire(
        self, wait: bool, on_wait: Callable[[dict[str, Any]], None] | None = None, poll: float = 1.0
    ) -> bool:
        """Take the lease; ``wait``: poll until it is free (``on_wait(holder)`` once, first)."""
        told = False
        while not self.try_acquire():
            if not wait:
                return False
            if not told and on_wait is not None:
                on_wait(self._newest()[1] or {})
                told = True
            time.sleep(poll)
        return True

    def release(self) -> None:
        """Stop renewing and delete the lease (unless somebody took it over meanwhile)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if self.number and not self.lost:
            self.storage.delete(self.folder / lease_name(self.number))
        self.number = 0

    def check(self) -> None:
        """Raise :class:`LeaseLostError` unless this process still holds the lease."""
        if not self.lost and self._numbers()[-1:] != [self.number]:
            self.lost = "another process took the lease over (it had expired)"
        if self.lost:
            raise LeaseLostError(
                f"lost the lease {self.folder}: {self.lost}; nothing was published, run again"
            )

    # -- internals ------------------------------------------------------------------------------

    def _document(self) -> bytes:
        return orjson.dumps(
            {
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "token": self.token,
                "expires": time.time() + self.seconds,
            }
        )

    def _numbers(self) -> list[int]:
        found = (LEASE_NAME.match(f.path.name) for f in self.storage.list(self.folder, "*.json"))
        return sorted(int(m.group(1)) for m in found if m)

    def _newest(self) -> tuple[int, dict[str, Any] | None]:
        """The highest lease number and its holder's document (None: no lease, or it vanished)."""
        while True:
            numbers = self._numbers()
            if not numbers:
                return 0, None
            try:
                return numbers[-1], orjson.loads(self.storage.read(self.folder / lease_name(numbers[-1])))
            except FileNotFoundError:
                # released (or replaced) since the listing: look again. Taking number + 1 now could
                # race a contender that already took number 1 in the emptied folder.
                continue
            except orjson.JSONDecodeError:
                return numbers[-1], {"expires": 0}

    @staticmethod
    def _expired(holder: dict[str, Any]) -> bool:
        if float(holder.get("expires", 0)) < time.time():
            return True
        return holder.get("host") == socket.gethostname() and not _alive(int(holder.get("pid", 0)))

    def _renew(self) -> None:
        path = self.folder / lease_name(self.number)
        renewed = time.monotonic()
        while not self._stop.wait(self.seconds / 3):
            try:
                if self._numbers()[-1:] != [self.number]:
                    self.lost = "another process took the lease over (it had expired)"
                    return
                self.storage.write(path, self._document())
                renewed = time.monotonic()
            except Exception as exc:  # the store is unreachable: retry until the lease runs out
                if time.monotonic() - renewed > self.seconds:
                    self.lost = f"could not renew it for {self.seconds:.0f} s ({type(exc).__name__})"
                    return


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
