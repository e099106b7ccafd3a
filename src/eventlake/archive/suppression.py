"""Suppression lists: the userIds whose new messages the collector blocks, one JSON file per source.

The file (``state_layout.suppression_file``: ``segment-data/_state/suppression/<source-id>.json``)::

    {"source_id": "Ab12Cd34Ef", "users": {"u1": "2026-11-22T10:00:00.000Z", ...}}

maps each suppressed userId to when it was added. It lives in the lake, on the lake's
:class:`~eventlake.storage.Storage` (a local directory or a bucket), and is rewritten whole
(``storage.write``: a reader never sees half a file) while its writer holds the source's lock, so
concurrent ``eventlake suppress`` commands never lose an update: an exclusive ``flock`` on a local
lake (released by the kernel when its holder dies), a :class:`~eventlake.storage.lease.Lease` on an
object store (a conditional put with an expiry; a writer killed while holding it blocks the others
until it expires, :data:`LEASE_SECONDS`, at once on its own host).

The collector reads it through :class:`SuppressionCache`, which re-reads it in the background at
most once per interval (a whole-file read that any store can serve; the list is only re-parsed
when its bytes changed): a running collector picks up a change within about a second, and a slow
or unreachable store never delays a request.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime

import orjson

from eventlake import state_layout
from eventlake.archive.errors import SuppressionError, describe_store_error
from eventlake.flock import LockFile
from eventlake.storage import Location, Storage
from eventlake.storage.lease import Lease
from eventlake.timestamps import format_timestamp, now_utc

log = logging.getLogger("eventlake.archive")

MAX_USER_ID_CHARS = 1024
LEASE_SECONDS = 30.0  # a writer's lease on an object store (an update takes a read and a write)
LEASE_POLL_SECONDS = 0.2  # how often a waiting writer looks at the lease again


@dataclass(frozen=True)
class SuppressedUser:
    user_id: str
    added_at: str  # ISO-8601, UTC


def is_suppressed(message: object, users: AbstractSet[str]) -> bool:
    """Whether ``message`` (a parsed line) is a suppressed user's: its ``userId`` is in ``users``.
    The one rule of the collector (blocks it), the sealer (drops it from a segment acknowledged
    before the suppression) and the sync (drops it from the archive it reads)."""
    if not users or not isinstance(message, dict):
        return False
    user_id = message.get("userId")
    return isinstance(user_id, str) and user_id in users


def read_suppressed_users(storage: Storage, lake_root: Location, source_id: str) -> frozenset[str]:
    """The source's suppressed userIds, read now from the lake (no cache);
    :class:`SuppressionError` when the file cannot be read or parsed."""
    return frozenset(read_suppression_file(storage, state_layout.suppression_file(lake_root, source_id)))


class SuppressionList:
    """The suppression list of one source, read from and written to the lake at ``lake_root`` on
    ``storage`` (``settings.lake.storage()``)."""

    def __init__(self, storage: Storage, lake_root: Location, source_id: str) -> None:
        self.storage = storage
        self.lake_root = lake_root
        self.source_id = source_id
        self.path = state_layout.suppression_file(lake_root, source_id)

    def users(self) -> list[SuppressedUser]:
        """Every suppressed user, sorted by userId."""
        users = read_suppression_file(self.storage, self.path)
        return [SuppressedUser(user_id, added_at) for user_id, added_at in sorted(users.items())]

    def user_ids(self) -> frozenset[str]:
        return frozenset(read_suppression_file(self.storage, self.path))

    def add(self, user_ids: Iterable[str], now: datetime | None = None) -> list[str]:
        """Suppress ``user_ids``; returns those that were not suppressed yet."""
        wanted = _checked(user_ids)
        added_at = format_timestamp(now or now_utc())
        with self._locked() as lease:
            users = read_suppression_file(self.storage, self.path)
            added = [user_id for user_id in wanted if user_id not in users]
            if added:
                users.update(dict.fromkeys(added, added_at))
                self._write(users, lease)
        return added

    def remove(self, user_ids: Iterable[str]) -> list[str]:
        """Lift the suppression of ``user_ids``; returns those that were suppressed."""
        wanted = _checked(user_ids)
        with self._locked() as lease:
            users = read_suppression_file(self.storage, self.path)
            removed = [user_id for user_id in wanted if user_id in users]
            if removed:
                for user_id in removed:
                    del users[user_id]
                self._write(users, lease)
        return removed

    @contextlib.contextmanager
    def _locked(self) -> Iterator[Lease | None]:
        """Hold the source's writer lock: yields the :class:`Lease` on an object store (checked
        before writing), None on a local lake (an ``flock``)."""
        lock_path = state_layout.suppression_lock_file(self.lake_root, self.source_id)
        local = self.storage.local_path(lock_path)
        if local is not None:
            try:
                lock = LockFile(local, mode=0o644)
            except OSError as exc:
                raise SuppressionError(lock_path, f"cannot open the lock file: {exc}") from None
            with lock:  # released at the end
                lock.lock()
                yield None
            return
        lease = Lease(self.storage, lock_path, LEASE_SECONDS)  # on an object store: a folder of leases
        try:
            lease.acquire(wait=True, poll=LEASE_POLL_SECONDS)
        except Exception as exc:
            raise SuppressionError(lock_path, f"cannot take the lease: {describe_store_error(exc)}") from None
        try:
            yield lease
        finally:
            lease.release()

    def _write(self, users: dict[str, str], lease: Lease | None) -> None:
        data = orjson.dumps(
            {"source_id": self.source_id, "users": dict(sorted(users.items()))}, option=orjson.OPT_INDENT_2
        )
        if lease is not None:
            lease.check()  # another writer took an expired lease over: write nothing
        try:
            self.storage.write(self.path, data + b"\n")
        except Exception as exc:
            raise SuppressionError(self.path, f"cannot write it: {describe_store_error(exc)}") from None


def read_suppression_file(storage: Storage, path: Location) -> dict[str, str]:
    """userId -> added-at of a suppression file; empty when the file does not exist."""
    data = _read(storage, path)
    return {} if data is None else parse_suppression_file(path, data)


def parse_suppression_file(path: Location, data: bytes) -> dict[str, str]:
    """userId -> added-at of a suppression file's bytes (:class:`SuppressionError` naming ``path``
    when they are not a suppression list)."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise SuppressionError(path, f"not valid JSON ({exc})") from None
    users = document.get("users") if isinstance(document, dict) else None
    if not isinstance(users, dict) or not all(isinstance(v, str) for v in users.values()):
        raise SuppressionError(path, 'expected {"users": {"<userId>": "<added at>", ...}}')
    return dict(users)


def _read(storage: Storage, path: Location) -> bytes | None:
    """The file's bytes, None when it does not exist; :class:`SuppressionError` when the store fails."""
    try:
        return storage.read(path)
    except FileNotFoundError:
        return None
    except Exception as exc:  # OSError on disk; the store's own errors on object stores
        raise SuppressionError(path, f"cannot read it: {describe_store_error(exc)}") from None


def _checked(user_ids: Iterable[str]) -> list[str]:
    checked: list[str] = []
    for user_id in user_ids:
        if not isinstance(user_id, str) or not user_id.strip():
            raise SuppressionError(None, f"a userId must be a non-empty string, not {user_id!r}")
        if len(user_id) > MAX_USER_ID_CHARS:
            raise SuppressionError(None, f"userId {user_id[:40]!r}... is over {MAX_USER_ID_CHARS} characters")
        if user_id not in checked:
            checked.append(user_id)
    return checked


@dataclass(frozen=True)
class _Cached:
    user_ids: frozenset[str]
    data: bytes | None  # the bytes parsed into user_ids; None: no file
    read_at: float  # time.monotonic() when the read began
    ticket: int  # the read's number: a slow read never replaces the result of a later one
    failing: bool = False  # the last read failed (user_ids are those of the last good one)


class SuppressionCache:
    """Suppressed userIds per source for the collector, kept fresh from the lake's store.

    :meth:`user_ids` waits for the store only the first time a source is asked for (the app asks
    for every configured source at start). After that it returns the list last read, at the cost
    of a dictionary lookup, and when that list is older than ``interval`` seconds it starts one
    background re-read of the source (never two at once): a change is seen within about
    ``interval`` plus one read, and a slow or unreachable store never delays a request. A file
    that cannot be read or parsed keeps the last good list (logged once until a read succeeds).
    """

    def __init__(self, storage: Storage, lake_root: Location, interval: float = 1.0) -> None:
        self.storage = storage
        self.lake_root = lake_root
        self.interval = interval
        self._cached: dict[str, _Cached] = {}
        self._refreshing: set[str] = set()
        self._tickets = 0
        self._lock = threading.Lock()

    def user_ids(self, source_id: str) -> frozenset[str]:
        cached = self._cached.get(source_id)
        if cached is None:
            return self.refresh(source_id)
        if time.monotonic() - cached.read_at >= self.interval:
            with self._lock:
                start = source_id not in self._refreshing
                self._refreshing.add(source_id)
            if start:
                threading.Thread(
                    target=self._refresh_in_background,
                    args=(source_id,),
                    name="eventlake-suppression",
                    daemon=True,
                ).start()
        return cached.user_ids

    def refresh(self, source_id: str) -> frozenset[str]:
        """Read the source's list now (waiting for the store); the userIds to use from now on."""
        with self._lock:
            self._tickets += 1
            ticket = self._tickets
        started = time.monotonic()
        path = state_layout.suppression_file(self.lake_root, source_id)
        previous = self._cached.get(source_id)
        try:
            data = _read(self.storage, path)
            if previous is not None and not previous.failing and data == previous.data:
                user_ids = previous.user_ids
            else:
                user_ids = frozenset(parse_suppression_file(path, data)) if data is not None else frozenset()
        except SuppressionError as exc:
            if previous is None or not previous.failing:
                log.warning("%s (keeping the last suppression list read)", exc)
            kept = previous.user_ids if previous else frozenset()
            fresh = _Cached(kept, None, started, ticket, failing=True)
        else:
            if previous is not None and previous.failing:
                log.warning("suppression list %s read again", path)
            fresh = _Cached(user_ids, data, started, ticket)
        with self._lock:
            current = self._cached.get(source_id)
            if current is None or current.ticket < fresh.ticket:
                self._cached[source_id] = current = fresh
        return current.user_ids

    def _refresh_in_background(self, source_id: str) -> None:
        try:
            self.refresh(source_id)
        except Exception:  # a bug must not end the refreshing of this source
            log.exception("re-reading the suppression list of source %s failed", source_id)
        finally:
            with self._lock:
                self._refreshing.discard(source_id)
