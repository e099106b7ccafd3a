"""Suppression lists: the userIds whose new messages the collector blocks, one JSON file per source.

The file (``layout.suppression_file``: ``segment-data/_state/suppression/<source-id>.json``)::

    {"source_id": "Ab12Cd34Ef", "users": {"u1": "2026-11-22T10:00:00.000Z", ...}}

maps each suppressed userId to when it was added. It is rewritten atomically (temporary file,
fsync, rename, directory fsync) under an exclusive ``flock``, so concurrent ``eventlake suppress``
commands never lose an update and a reader never sees half a file. The collector reads it through
:class:`SuppressionCache`, which looks at the file's ``stat`` at most once per interval and
re-reads it only when it changed: a running collector picks up a change within about a second.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import orjson

from eventlake import layout
from eventlake.archive.errors import SuppressionError
from eventlake.flock import LockFile
from eventlake.storage import Storage, load_storage
from eventlake.timestamps import format_timestamp, now_utc

log = logging.getLogger("eventlake.archive")

MAX_USER_ID_CHARS = 1024


@dataclass(frozen=True)
class SuppressedUser:
    user_id: str
    added_at: str  # ISO-8601, UTC


class SuppressionList:
    """The suppression list of one source, read from and written to the lake."""

    def __init__(self, lake_root: Path, source_id: str) -> None:
        self.lake_root = lake_root
        self.source_id = source_id
        self.storage = load_storage(lake_root)
        self.path = layout.suppression_file(lake_root, source_id)

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
        with self._locked():
            users = read_suppression_file(self.storage, self.path)
            added = [user_id for user_id in wanted if user_id not in users]
            if added:
                users.update(dict.fromkeys(added, added_at))
                self._write(users)
        return added

    def remove(self, user_ids: Iterable[str]) -> list[str]:
        """Lift the suppression of ``user_ids``; returns those that were suppressed."""
        wanted = _checked(user_ids)
        with self._locked():
            users = read_suppression_file(self.storage, self.path)
            removed = [user_id for user_id in wanted if user_id in users]
            if removed:
                for user_id in removed:
                    del users[user_id]
                self._write(users)
        return removed

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        lock_path = layout.suppression_lock_file(self.lake_root, self.source_id)
        try:
            lock = LockFile(lock_path, mode=0o644)
        except OSError as exc:
            raise SuppressionError(lock_path, f"cannot open the lock file: {exc}") from None
        with lock:  # released at the end
            lock.lock()
            yield

    def _write(self, users: dict[str, str]) -> None:
        data = orjson.dumps(
            {"source_id": self.source_id, "users": dict(sorted(users.items()))}, option=orjson.OPT_INDENT_2
        )
        try:
            self.storage.write(self.path, data + b"\n")
        except OSError as exc:
            raise SuppressionError(self.path, f"cannot write it: {exc}") from None


def read_suppression_file(storage: Storage, path: Path) -> dict[str, str]:
    """userId -> added-at of a suppression file; empty when the file does not exist."""
    try:
        data = storage.read(path)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise SuppressionError(path, f"cannot read it: {exc}") from None
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise SuppressionError(path, f"not valid JSON ({exc})") from None
    users = document.get("users") if isinstance(document, dict) else None
    if not isinstance(users, dict) or not all(isinstance(v, str) for v in users.values()):
        raise SuppressionError(path, 'expected {"users": {"<userId>": "<added at>", ...}}')
    return dict(users)


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


@dataclass
class _Cached:
    user_ids: frozenset[str]
    signature: tuple[int, int, int] | None  # (inode, size, mtime_ns) of the file read; None: no file
    checked_at: float  # time.monotonic() of the last stat


class SuppressionCache:
    """Suppressed userIds per source for the collector, re-read when the file changes.

    :meth:`user_ids` costs a dictionary lookup; at most once per ``interval`` seconds per source
    it also ``stat``s the file, and re-reads it when its inode, size or mtime changed. A file
    that cannot be read keeps the last good list (and logs why).
    """

    def __init__(self, lake_root: Path, interval: float = 1.0) -> None:
        self.lake_root = lake_root
        self.storage = load_storage(lake_root)
        self.interval = interval
        self._cached: dict[str, _Cached] = {}
        self._lock = threading.Lock()

    def user_ids(self, source_id: str) -> frozenset[str]:
        now = time.monotonic()
        cached = self._cached.get(source_id)
        if cached is not None and now - cached.checked_at < self.interval:
            return cached.user_ids
        with self._lock:
            return self._refresh(source_id, cached, now)

    def _refresh(self, source_id: str, cached: _Cached | None, now: float) -> frozenset[str]:
        path = layout.suppression_file(self.lake_root, source_id)
        try:
            stat = path.stat()
            signature: tuple[int, int, int] | None = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        except FileNotFoundError:
            signature = None
        except OSError as exc:
            log.warning("cannot stat suppression list %s (keeping the last one read): %s", path, exc)
            signature = cached.signature if cached else None
        if cached is not None and signature == cached.signature:
            cached.checked_at = now
            return cached.user_ids
        try:
            user_ids = (
                frozenset(read_suppression_file(self.storage, path)) if signature is not None else frozenset()
            )
        except SuppressionError as exc:
            log.warning("%s (keeping the last suppression list read)", exc)
            user_ids = cached.user_ids if cached else frozenset()
        self._cached[source_id] = _Cached(user_ids, signature, now)
        return user_ids
