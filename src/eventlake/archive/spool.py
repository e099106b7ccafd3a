"""The collector's local write-ahead spool: group-committed, fsynced segments, sealed into the archive.

One writer thread owns every open segment. It drains everything queued, writes each source's lines
to that source's open segment (one per source and received day), fsyncs each touched file once,
and only then resolves the futures the HTTP handlers await. Full or aged segments are closed and
handed to one sealer thread, which gzips them and writes them to the raw archive through the lake's
:class:`~eventlake.storage.Storage` (:mod:`eventlake.archive.seal`): a local directory or a bucket.
The sealer drops the lines of users suppressed since they were acknowledged (it reads the source's
suppression list at each seal, before and after the upload), counted and logged.

A segment leaves the spool only once its archive object is fully written. When writing fails (the
store is down, throttles, the network is cut), the sealer retries with exponential backoff
(``retry_first_seconds`` doubling up to ``retry_max_seconds``), trying one segment per attempt so
that an outage costs one request per backoff step; the segments stay in the spool and keep counting
toward ``max_spool_bytes``, past which :meth:`Spool.append` refuses (the HTTP app answers 429). The
first failure of a streak is logged once (the store's error, never a credential), and so is the
recovery; every failure is counted (:class:`SpoolStats`).

Segment names are ``<day-ms>-<opened-unix-ms>-<process-token>-<seq>.ndjson``: the random token
makes names unique across processes, and the sealed archive file keeps the name, so recovery
after a crash never seals the same data twice. An exclusive ``flock`` on ``<spool>/.lock`` keeps a
second collector out of the same spool directory.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import secrets
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, fields
from pathlib import Path
from types import TracebackType
from typing import Any

from eventlake import state_layout
from eventlake.archive.errors import (
    ArchiveUploadError,
    SpoolBusyError,
    SpoolClosedError,
    SpoolFullError,
    SpoolLockedError,
    SpoolWriteError,
    SuppressionError,
)
from eventlake.archive.seal import Segment, seal_segment, spool_segments
from eventlake.flock import LockFile
from eventlake.storage import Location, Storage, load_storage
from eventlake.storage.local import fsync_dir, make_dirs

log = logging.getLogger("eventlake.archive")

_STOP: Any = object()
_WRITER_TICK_SECONDS = 0.25  # how often the writer looks for aged segments when idle
_SEALER_TICK_SECONDS = 0.5  # how long the idle sealer waits for work at a time
_MAX_GROUP = 10_000  # appends per group commit
DEFAULT_MAX_PENDING_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_SPOOL_BYTES = 1024 * 1024 * 1024
DEFAULT_RETRY_FIRST_SECONDS = 0.5  # the first wait after a failed seal; doubled after each failure ...
DEFAULT_RETRY_MAX_SECONDS = 30.0  # ... up to this


@dataclass(frozen=True)
class SpoolStats:
    """Counters since the spool was opened (for metrics)."""

    messages: int = 0  # messages stored durably (fsynced, acknowledged)
    bytes: int = 0  # bytes stored durably, newlines included
    group_commits: int = 0  # writer rounds (each fsyncs every segment it touched once)
    sealed_files: int = 0  # archive files written (recovered ones included)
    recovered_segments: int = 0  # segments of a previous process sealed (or found sealed) by recover()
    write_errors: int = 0  # group commits that failed (their messages were answered 503)
    seal_errors: int = 0  # failed seal attempts (retried), upload failures included
    upload_failures: int = 0  # seal attempts whose archive object could not be written (retried)
    suppressed_lines: int = 0  # lines of users suppressed after they were acknowledged, not sealed
    pending_bytes: int = 0  # bytes queued for the writer right now
    spool_bytes: int = 0  # bytes stored in spool segments that are not in the archive yet
    spool_segments: int = 0  # spool segments holding those bytes (open, or waiting to be sealed)


@dataclass
class _Append:
    source_id: str
    day_ms: int
    data: bytes
    count: int
    future: Future[None]


@dataclass
class _OpenSegment:
    segment: Segment
    fd: int
    size: int
    opened_at: float  # time.monotonic() of the first write


class Spool:
    """The collector's write-ahead spool under ``spool_dir``, sealing into the archive at
    ``lake_root`` on ``storage`` (default: the store that holds ``lake_root``)."""

    def __init__(
        self,
        spool_dir: Path,
        lake_root: Location,
        seal_max_bytes: int,
        seal_max_age_seconds: float,
        *,
        storage: Storage | None = None,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        max_spool_bytes: int = DEFAULT_MAX_SPOOL_BYTES,
        retry_first_seconds: float = DEFAULT_RETRY_FIRST_SECONDS,
        retry_max_seconds: float = DEFAULT_RETRY_MAX_SECONDS,
    ) -> None:
        if not 0 < retry_first_seconds <= retry_max_seconds:
            raise ValueError(
                f"seal retry backoff {retry_first_seconds} s to {retry_max_seconds} s: the first wait "
                "must be positive and at most the longest"
            )
        self.spool_dir = spool_dir
        self.lake_root = lake_root
        self.storage = storage if storage is not None else load_storage(lake_root)
        self.retry_first_seconds = retry_first_seconds
        self.retry_max_seconds = retry_max_seconds
        self.seal_max_bytes = seal_max_bytes
        self.seal_max_age_seconds = seal_max_age_seconds
        self.max_pending_bytes = max_pending_bytes
        self.max_spool_bytes = max_spool_bytes
        make_dirs(spool_dir)  # durable in its parents: a segment in it is acknowledged once fsynced
        self._lock = _acquire_lock(spool_dir)
        self.process_token = secrets.token_hex(4)
        self._seq = itertools.count(1)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._sealer_queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._open: dict[tuple[str, int], _OpenSegment] = {}
        self._state = threading.Lock()
        self._closed = False
        self._stats: dict[str, int] = {f.name: 0 for f in fields(SpoolStats)}
        self._segment_bytes: dict[Path, int] = {}  # stored bytes of each unsealed segment
        self._failing_since: float | None = None  # time.monotonic() of a failure streak's first failure
        self._streak = 0  # failed seal attempts since the last success
        self._writer = threading.Thread(target=self._write_loop, name="eventlake-spool-writer", daemon=True)
        self._sealer = threading.Thread(target=self._seal_loop, name="eventlake-spool-sealer", daemon=True)
        self._writer.start()
        self._sealer.start()

    # public API ---------------------------------------------------------------------------------

    def append(self, source_id: str, lines: Sequence[bytes], received_day_ms: int) -> Future[None]:
        """Queue ``lines`` (JSON documents without newline) for ``source_id``'s segment of that day.

        The future resolves once the lines are fsynced, or fails with :class:`SpoolWriteError`.
        Raises :class:`SpoolClosedError` after :meth:`close`; :class:`SpoolFullError` when the
        bytes not yet in the archive would pass ``max_spool_bytes`` (sealing or uploading falls
        behind, or the archive's store is down: segments waiting for their upload count), and
        :class:`SpoolBusyError` when more than ``max_pending_bytes`` wait for the writer.
        """
        if not source_id or source_id.startswith(".") or "/" in source_id:
            raise ValueError(f"source id {source_id!r} cannot name a spool directory")
        future: Future[None] = Future()
        if not lines:
            future.set_result(None)
            return future
        if any(b"\n" in line for line in lines):
            raise ValueError("spool lines must not contain a newline")
        data = b"\n".join(lines) + b"\n"
        with self._state:
            if self._closed:
                raise SpoolClosedError(self.spool_dir)
            pending = self._stats["pending_bytes"]
            stored = self._stats["spool_bytes"]
            if stored and stored + pending + len(data) > self.max_spool_bytes:
                raise SpoolFullError(stored + pending, self.max_spool_bytes)
            if pending and pending + len(data) > self.max_pending_bytes:
                raise SpoolBusyError(pending, self.max_pending_bytes)
            self._stats["pending_bytes"] = pending + len(data)
            self._queue.put(_Append(source_id, received_day_ms, data, len(lines), future))
        return future

    def recover(self) -> int:
        """Seal every segment a previous (crashed) process left in the spool; returns how many.

        Once one fails (the store is down), the rest are not tried here: they stay in the spool,
        counted toward ``max_spool_bytes``, and the sealer thread retries them with backoff.
        """
        recovered = 0
        failing = False
        for segment in spool_segments(self.spool_dir):
            if segment.process_token == self.process_token:
                continue
            try:
                size = segment.path.stat().st_size
            except FileNotFoundError:
                continue
            self._stored(segment.path, size)
            if not failing and self._seal(segment):
                recovered += 1
            else:
                failing = True
                self._sealer_queue.put(segment)
        self._count(recovered_segments=recovered)
        return recovered

    def close(self) -> None:
        """Stop accepting, store what is queued, seal every segment, stop the threads. Idempotent.

        While the archive's store fails, one last attempt is made; what still fails stays in the
        spool (logged), and the next start's :meth:`recover` seals it."""
        with self._state:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        self._writer.join()
        self._sealer.join()
        self._lock.close()

    def stats(self) -> SpoolStats:
        with self._state:
            return SpoolStats(**self._stats)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Spool:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # writer thread ------------------------------------------------------------------------------

    def _write_loop(self) -> None:
        while True:
            items = _drain(self._queue, _WRITER_TICK_SECONDS)
            appends = [item for item in items if item is not _STOP]
            if appends:
                try:
                    self._commit(appends)
                except Exception as exc:  # a bug must not leave handlers waiting forever
                    log.exception("spool writer failed")
                    _fail(appends, SpoolWriteError(self.spool_dir, repr(exc)))
                finally:
                    self._count(pending_bytes=-sum(len(a.data) for a in appends))
            stopping = len(appends) != len(items)
            self._rotate(everything=stopping)
            if stopping:
                self._sealer_queue.put(_STOP)
                return

    def _commit(self, appends: list[_Append]) -> None:
        """One group commit: write every group to its segment, fsync each once, then resolve."""
        groups: dict[tuple[str, int], list[_Append]] = {}
        for item in appends:
            groups.setdefault((item.source_id, item.day_ms), []).append(item)
        written: list[tuple[tuple[str, int], _OpenSegment, int, list[_Append]]] = []
        for key, group in groups.items():
            try:
                current = self._segment_for(key)
            except OSError as exc:
                self._abandon(key, None, 0, group, exc)
                continue
            start = current.size
            try:
                for item in group:
                    _write_all(current.fd, item.data)
                    current.size += len(item.data)
            except OSError as exc:
                self._abandon(key, current, start, group, exc)
                continue
            written.append((key, current, start, group))
        for key, current, start, group in written:
            try:
                os.fsync(current.fd)
            except OSError as exc:
                self._abandon(key, current, start, group, exc)
                continue
            self._count(messages=sum(a.count for a in group), bytes=current.size - start)
            self._stored(current.segment.path, current.size - start)
            for item in group:
                _settle(item.future)
        self._count(group_commits=1)

    def _segment_for(self, key: tuple[str, int]) -> _OpenSegment:
        current = self._open.get(key)
        if current is not None:
            return current
        source_id, day_ms = key
        directory = state_layout.spool_source_dir(self.spool_dir, source_id)
        make_dirs(directory)
        opened_ms = time.time_ns() // 1_000_000
        name = state_layout.spool_segment_name(day_ms, opened_ms, self.process_token, next(self._seq))
        path = state_layout.spool_segment_file(self.spool_dir, source_id, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            fsync_dir(directory)
        except OSError:
            os.close(fd)
            raise
        current = _OpenSegment(Segment(path, source_id, day_ms, name), fd, 0, time.monotonic())
        self._open[key] = current
        return current

    def _abandon(
        self,
        key: tuple[str, int],
        current: _OpenSegment | None,
        start: int,
        group: list[_Append],
        exc: OSError,
    ) -> None:
        """A write or fsync failed: cut the segment back to its last good size, close it, fail the group."""
        where = (
            state_layout.spool_source_dir(self.spool_dir, key[0]) if current is None else current.segment.path
        )
        log.error("spool write to %s failed: %s", where, exc)
        self._count(write_errors=1)
        if current is not None:
            self._open.pop(key, None)
            try:
                os.ftruncate(current.fd, start)
                os.fsync(current.fd)
            except OSError as cut_exc:
                log.error("could not truncate %s back to %d bytes: %s", where, start, cut_exc)
            _close_quietly(current.fd)
            self._sealer_queue.put(current.segment)
        _fail(group, SpoolWriteError(where, str(exc)))

    def _rotate(self, everything: bool) -> None:
        """Close full or aged segments (all of them when stopping) and hand them to the sealer."""
        now = time.monotonic()
        for key, current in list(self._open.items()):
            full = current.size >= self.seal_max_bytes
            aged = now - current.opened_at >= self.seal_max_age_seconds
            if everything or full or aged:
                del self._open[key]
                _close_quietly(current.fd)
                self._sealer_queue.put(current.segment)

    # sealer thread ------------------------------------------------------------------------------

    def _seal_loop(self) -> None:
        waiting: list[Segment] = []  # in the order they are tried
        retry_at = 0.0  # time.monotonic() before which nothing is tried (backing off)
        delay = 0.0  # the current backoff; 0 while sealing succeeds
        stopping = False
        while True:
            timeout = max(0.0, retry_at - time.monotonic()) if waiting else _SEALER_TICK_SECONDS
            items = _drain(self._sealer_queue, timeout)
            stopping = stopping or any(item is _STOP for item in items)
            waiting.extend(item for item in items if item is not _STOP)
            if waiting and (stopping or time.monotonic() >= retry_at):
                waiting, failed = self._seal_round(waiting)
                if failed:
                    delay = min(max(2 * delay, self.retry_first_seconds), self.retry_max_seconds)
                    retry_at = time.monotonic() + delay
                else:
                    delay = 0.0
            if stopping:
                if waiting:
                    log.error(
                        "%d spool segments could not be sealed into the archive at %s and stay in %s; "
                        "the next start seals them",
                        len(waiting), self.lake_root, self.spool_dir,
                    )  # fmt: skip
                return

    def _seal_round(self, waiting: list[Segment]) -> tuple[list[Segment], bool]:
        """Seal ``waiting`` in order until one fails: the segments left (the failed one last, so
        that a segment that cannot be sealed never holds the others back), and whether one failed."""
        for index, segment in enumerate(waiting):
            if not self._seal(segment):
                return [*waiting[index + 1 :], segment], True
        return [], False

    def _seal(self, segment: Segment) -> bool:
        try:
            result = seal_segment(segment, self.storage, self.lake_root)
        except Exception as exc:  # the store's, the spool disk's, or a bug: the sealer goes on
            self._seal_failed(segment, exc)
            return False
        with self._state:
            self._stats["spool_bytes"] -= self._segment_bytes.pop(segment.path, 0)
            self._stats["spool_segments"] = len(self._segment_bytes)
            if result.archive_path is not None:
                self._stats["sealed_files"] += 1
            self._stats["suppressed_lines"] += result.suppressed
            streak, since, self._streak, self._failing_since = self._streak, self._failing_since, 0, None
        if result.suppressed:
            log.warning(
                "spool segment %s: %d message%s of suppressed users dropped before sealing "
                "(acknowledged before the suppression)",
                segment.path, result.suppressed, "" if result.suppressed == 1 else "s",
            )  # fmt: skip
        if streak:
            log.warning(
                "sealing into the archive at %s works again, after %d failed attempts over %.0f s",
                self.lake_root, streak, time.monotonic() - (since or time.monotonic()),
            )  # fmt: skip
        return True

    def _seal_failed(self, segment: Segment, exc: Exception) -> None:
        """Count a failed seal; log the first one of a streak (the next ones only at debug level)."""
        upload = isinstance(exc, ArchiveUploadError)
        with self._state:
            self._stats["seal_errors"] += 1
            self._stats["upload_failures"] += int(upload)
            self._streak += 1
            first = self._streak == 1
            if first:
                self._failing_since = time.monotonic()
        if not first:
            log.debug("sealing %s failed again: %s", segment.path, exc)
            return
        if isinstance(exc, ArchiveUploadError):
            problem = f"cannot write spool segment {segment.path} to {exc.target}: {exc.problem}"
        else:
            problem = f"cannot seal spool segment {segment.path} into the archive: {exc}"
        log.error(
            "%s; it stays in the spool and is retried with backoff (up to %.0f s); requests are "
            "answered 429 once the spool holds %d bytes",
            problem, self.retry_max_seconds, self.max_spool_bytes,
            exc_info=None if isinstance(exc, (ArchiveUploadError, SuppressionError, OSError)) else exc,
        )  # fmt: skip

    def _stored(self, path: Path, size: int) -> None:
        with self._state:
            self._segment_bytes[path] = self._segment_bytes.get(path, 0) + size
            self._stats["spool_bytes"] += size
            self._stats["spool_segments"] = len(self._segment_bytes)

    def _count(self, **deltas: int) -> None:
        with self._state:
            for name, delta in deltas.items():
                self._stats[name] += delta


def _drain(source: queue.SimpleQueue[Any], timeout: float) -> list[Any]:
    """Everything queued (up to a group's size), waiting up to ``timeout`` for the first item."""
    try:
        items = [source.get(timeout=timeout)]
    except queue.Empty:
        return []
    while len(items) < _MAX_GROUP:
        try:
            items.append(source.get_nowait())
        except queue.Empty:
            break
    return items


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _settle(future: Future[None], error: BaseException | None = None) -> None:
    try:
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
    except InvalidStateError:  # the waiting request was cancelled (client went away)
        pass


def _fail(group: list[_Append], error: BaseException) -> None:
    for item in group:
        _settle(item.future, error)


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError as exc:
        log.warning("closing a spool segment failed: %s", exc)


def _acquire_lock(spool_dir: Path) -> LockFile:
    """The spool's lock, held until :meth:`Spool.close`; refused at once if another collector has it."""
    lock = LockFile(state_layout.spool_lock_file(spool_dir), mode=0o644)
    if not lock.try_lock():
        holder = lock.holder()
        lock.close()
        raise SpoolLockedError(spool_dir, holder)
    lock.claim()
    return lock
