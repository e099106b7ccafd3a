"""A lease: one holder at a time across machines, on any store, with an expiry so that a dead
holder blocks the others only until its lease runs out.

Object stores have no ``flock``. A lease is a numbered object in a folder; the highest number is
the lease. Every change of a lease object is atomic on the store: a number is created with
:meth:`Storage.write_new` (``If-None-Match: *``: of two contenders exactly one creates it), and
every later write of it is a compare-and-swap, :meth:`Storage.write_if_match` (``If-Match`` on the
version read: S3, Azure; an ``flock`` and a rename on a local disk).

- **Renewing**: the holder rewrites its expiry every third of the lease's length, from a
  background thread (:meth:`renew`), conditionally on the version it wrote last. A renewal after
  a takeover fails (the version changed, or the object is gone) and is never written: a stalled
  holder cannot bring a lease back.
- **Taking over** (:meth:`look`, then :meth:`take`): only once the newest lease has expired (by
  the contender's clock; at once when its holder is a dead process on this same host) or was
  released. The contender first marks it taken over with a compare-and-swap on the version it
  read, then creates the next number. Of a renewal and a takeover of one version exactly one
  succeeds; a contender that read a version that changed meanwhile takes nothing.
- **Numbers are never reused**: releasing rewrites the lease as released (it is not deleted), and
  a contender deletes the older numbers only after creating its own, so the folder always shows
  the highest number given so far. (Before, numbers restarted at 1 once every lease was released:
  a contender that had read number n before a release could create n + 1 beside a new holder's 1.)
- A holder that finds its lease changed or a higher number has lost it and must not publish
  (:meth:`check`).

**The commit fence.** A commit manifest carries the number of the lease it was written under. The
holder writes the manifest, then confirms it (:meth:`confirm`): a compare-and-swap of its lease
that records the run as confirmed. Only a confirmed manifest is ever applied:

- by its writer, right after the confirmation succeeded (a failed one: it lost the lease; it
  applies nothing and deletes the manifest);
- by a later holder's roll-forward, when the run is one of the lease's :attr:`inherited` runs:
  the confirmed runs of the earlier leases, carried from each lease object to the next at every
  takeover. A pending manifest of an older number that is not among them was written by a holder
  that had lost the lease (or died before confirming): it published nothing, and it is dropped,
  never applied. A manifest of the holder's own or a newer number at roll-forward means a newer
  holder exists: the holder has lost the lease.

**The rule** (docs/sync.md says it too): a confirmed manifest is a durable commit intent, completed
by whoever holds the lease next; a manifest written under an older lease and never confirmed is
dropped, never applied; a holder that lost its lease applies and writes nothing more (its next
check, confirmation or renewal fails), so nothing it writes after another took over is applied.
What remains: a
holder that stalls for longer than the lease *while applying its own confirmed commit* may finish
that commit's (idempotent) steps after the next holder completed it; it publishes nothing else.
Manifests without a number (a local lake's ``flock`` cannot be lost; a version before the fence)
are applied as before.

Expiry compares the holder's written deadline with the contender's clock: clocks of the machines
sharing a lake must agree to well within the lease length (60 s by default; NTP does). The clock is
an argument (``clock``), so that tests drive expiries without sleeping; ``background=False`` leaves
renewing to the caller (:meth:`renew`), so that a test can interleave every step of two holders.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from eventlake.errors import EventLakeError
from eventlake.storage.base import Storage
from eventlake.storage.local import process_alive
from eventlake.storage.location import Location

LEASE_NAME = re.compile(r"^lease-(\d{12})\.json$")
TAKEN_OVER = "another process took the lease over (it had expired)"


class LeaseLostError(EventLakeError):
    code = "lease_lost"


def lease_name(number: int) -> str:
    return f"lease-{number:012d}.json"


@dataclass(frozen=True)
class Sighting:
    """What a contender saw of the newest lease: its number (0: none), its holder's document
    (None: no lease) and the version's tag (what a takeover's compare-and-swap is conditional on)."""

    number: int
    holder: dict[str, Any] | None
    tag: str = ""


class Lease:
    """The lease in ``folder``; :meth:`acquire` takes it, :meth:`release` gives it back.

    ``clock``: the time of day in seconds (expiries are written and compared with it).
    ``background``: renew from a thread while held (False: the caller calls :meth:`renew`)."""

    def __init__(
        self, storage: Storage, folder: Location, seconds: float, *,
        clock: Callable[[], float] = time.time, background: bool = True,
    ) -> None:  # fmt: skip
        self.storage, self.folder, self.seconds = storage, folder, seconds
        self.clock, self.background = clock, background
        self.token = secrets.token_hex(8)
        self.number = 0  # the number held; 0: none
        self.lost = ""  # why the lease was lost while held ("" while held or never held)
        self.confirmed: tuple[str, ...] = ()  # runs whose commit was confirmed under this lease
        self.inherited: tuple[str, ...] = ()  # confirmed runs of earlier leases (maybe still pending)
        self._tag = ""  # the version of the lease object written last
        self._expires = 0.0
        self._writing = threading.Lock()  # one write of the lease object at a time (renewer, confirm)
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    # -- taking and giving back -------------------------------------------------------------------

    def try_acquire(self) -> bool:
        """Take the lease if it is free, expired or released: True when taken, False (at once) if
        held (or another contender took it first)."""
        return self.take(self.look())

    def look(self) -> Sighting:
        """The newest lease as it is now (the first step of :meth:`try_acquire`)."""
        while True:
            numbers = self._numbers()
            if not numbers:
                return Sighting(0, None)
            try:
                data, tag = self.storage.read_tagged(self.folder / lease_name(numbers[-1]))
            except FileNotFoundError:
                continue  # replaced since the listing (its taker deleted it): look again
            try:
                return Sighting(numbers[-1], orjson.loads(data), tag)
            except orjson.JSONDecodeError:
                return Sighting(numbers[-1], {"expires": 0}, tag)

    def take(self, seen: Sighting) -> bool:
        """Take the lease over from what :meth:`look` saw (the second step of :meth:`try_acquire`):
        False when it is held, or when it changed since it was seen (renewed, released or taken)."""
        if seen.holder is not None and not self._expired(seen.holder):
            return False
        number = seen.number + 1
        inherited: tuple[str, ...] = ()
        if seen.holder is not None:
            holder = seen.holder
            inherited = _runs(holder.get("inherited", ())) + _runs(holder.get("confirmed", ()))
            ended = {**holder, "expires": 0, "taken_over_by": number}
            if (
                self.storage.write_if_match(
                    self.folder / lease_name(seen.number), orjson.dumps(ended), seen.tag
                )
                is None
            ):
                return False  # renewed, released or taken over since it was seen
        mine = self.folder / lease_name(number)
        self.inherited, self.confirmed = inherited, ()
        self._expires = self.clock() + self.seconds
        if not self.storage.write_new(mine, self._document()):
            return False  # another contender took this number first
        if self._numbers()[-1:] != [number]:
            # a contender that saw an empty folder created number 1 after a newer holder deleted
            # it: that newer holder holds the lease, not this one
            self.storage.delete(mine)
            return False
        data, self._tag = self.storage.read_tagged(mine)
        if orjson.loads(data).get("token") != self.token:  # (cannot happen: write_new created it)
            return False
        self.number, self.lost = number, ""
        self.storage.delete_many(self.folder / lease_name(old) for old in self._numbers() if old < number)
        if self.background:
            self._stop.clear()
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
                on_wait(self.look().holder or {})
                told = True
            time.sleep(poll)
        return True

    def release(self) -> None:
        """Stop renewing and mark the lease released (unless somebody took it over meanwhile). The
        object stays, so that the next holder takes the next number (numbers are never reused)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
        if self.number and not self.lost:
            with self._writing:
                self.storage.write_if_match(
                    self.folder / lease_name(self.number), self._document(released=True), self._tag
                )
        self.number = 0

    def renew(self) -> bool:
        """Push the expiry one lease length on, conditionally on the version written last: False
        (and :attr:`lost` said) when the lease was taken over. Store errors are raised."""
        return self._rewrite()

    def check(self) -> None:
        """Raise :class:`LeaseLostError` unless this process still holds the lease."""
        if not self.lost and self.number and self.clock() > self._expires - self.seconds / 3:
            self._rewrite()  # the renewer is late: renew now (fails if taken over)
        if not self.lost and self._numbers()[-1:] != [self.number]:
            self.lost = TAKEN_OVER
        if self.lost:
            raise LeaseLostError(
                f"lost the lease {self.folder}: {self.lost}; nothing was published, run again"
            )

    def confirm(self, run: str) -> None:
        """The commit fence: record ``run`` (whose manifest is written) as confirmed under this
        lease, with a compare-and-swap of the lease. Raises :class:`LeaseLostError` when the lease
        was lost: the manifest must then be dropped, not applied (see the module docstring)."""
        self._rewrite(confirmed=(*self.confirmed, run))
        self.check()

    def settle(self) -> None:
        """Forget the inherited runs once the roll-forward has applied or dropped every pending
        manifest (an inherited run's manifest was written before this lease was taken, so the
        roll-forward saw it). Raises :class:`LeaseLostError` when the lease was lost."""
        if self.inherited:
            self._rewrite(inherited=())
        self.check()

    # -- internals ------------------------------------------------------------------------------

    def _rewrite(
        self, *, confirmed: tuple[str, ...] | None = None, inherited: tuple[str, ...] | None = None
    ) -> bool:
        """Rewrite the held lease (a new expiry, and the runs given) if nobody changed it since
        this holder's last write: False and :attr:`lost` said when somebody did."""
        with self._writing:
            if not self.number or self.lost:
                return False
            before = self.confirmed, self.inherited, self._expires
            if confirmed is not None:
                self.confirmed = confirmed
            if inherited is not None:
                self.inherited = inherited
            self._expires = self.clock() + self.seconds
            tag = self.storage.write_if_match(
                self.folder / lease_name(self.number), self._document(), self._tag
            )
            if tag is None:
                self.confirmed, self.inherited, self._expires = before
                self.lost = TAKEN_OVER
                return False
            self._tag = tag
            return True

    def _document(self, released: bool = False) -> bytes:
        return orjson.dumps(
            {
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "token": self.token,
                "expires": 0 if released else self._expires,
                **({"released": True} if released else {}),
                "confirmed": list(self.confirmed),
                "inherited": list(self.inherited),
            }
        )

    def _numbers(self) -> list[int]:
        found = (LEASE_NAME.match(f.path.name) for f in self.storage.list(self.folder, "*.json"))
        return sorted(int(m.group(1)) for m in found if m)

    def _expired(self, holder: dict[str, Any]) -> bool:
        if holder.get("released") or float(holder.get("expires", 0)) < self.clock():
            return True
        return holder.get("host") == socket.gethostname() and not process_alive(int(holder.get("pid", 0)))

    def _renew(self) -> None:
        renewed = time.monotonic()
        while not self._stop.wait(self.seconds / 3):
            try:
                if not self._rewrite():
                    return  # lost: taken over
                renewed = time.monotonic()
            except Exception as exc:  # the store is unreachable: retry until the lease runs out
                if time.monotonic() - renewed > self.seconds:
                    self.lost = f"could not renew it for {self.seconds:.0f} s ({type(exc).__name__})"
                    return


def _runs(found: Any) -> tuple[str, ...]:
    return tuple(str(run) for run in found) if isinstance(found, list | tuple) else ()
