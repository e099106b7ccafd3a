"""Seal a spool segment into the raw archive: gzip it locally, upload it whole, then drop it.

Sealing runs through the lake's :class:`~eventlake.storage.Storage`, so the archive may be a local
directory or a bucket. The steps, each idempotent to redo, so that a process killed at any instant
(or a store that fails at any step) neither loses nor duplicates data:

1. the source's suppression list is read (:func:`~eventlake.archive.suppression.read_suppressed_users`,
   straight from the lake, not the collector's cache; when it cannot be read the seal fails and is
   retried): a message acknowledged before its user was suppressed may still sit in the spool;
2. ``storage.exists(archive object)``: already there (a previous attempt uploaded it and was
   stopped before step 6) → the object is read back and, unless it holds a line of a user of the
   list, only the segment is dropped; if it does, it is staged and uploaded again (steps 3-4);
3. gzip the segment's complete lines (a torn last line was never acknowledged), but those of a
   suppressed userId, into a hidden ``.<name>.gz.tmp`` beside the segment in the spool, fsync it,
   rename it to ``.<name>.gz``: a staged file under that name is always complete, so retries (and a
   restart) upload it again without gzipping again (unless it holds a line of a user suppressed
   since it was staged);
4. write the staged file to ``layout.archive_file(...)`` with ``storage.open_write``: the object
   appears whole or not at all, durable when the call returns (a local lake keeps its temp file,
   fsync, rename and folder fsync);
5. the suppression list is read again, after the upload: a user suppressed while the object was
   being written (so that a ``users delete`` may have listed the archive before it appeared) and
   whose lines it holds → back to step 3 with the new list (the object is overwritten);
6. only then delete the staged file and the segment.

So once a segment is dropped, its archive object holds no line of a user suppressed before the
last read of step 5, and a user suppressed after that read finds the object in the archive when
their ``users delete`` lists it (see :mod:`eventlake.sync.maintenance.erase`). The lines dropped are counted
(:attr:`SealResult.suppressed`).

The archive name is derived from the segment name (unique per collector process), so a segment is
never archived under two names. A failure of the store in any step (the suppression list read
in step 1 or 5 included) raises :class:`ArchiveUploadError`; the segment and its staged file stay
in the spool for the next try.
"""

from __future__ import annotations

import gzip
import os
import shutil
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path

import orjson

from eventlake import layout, state_layout
from eventlake.archive.days import reopen_days
from eventlake.archive.errors import ArchiveUploadError, SuppressionError
from eventlake.archive.files import archive_lines
from eventlake.archive.suppression import is_suppressed, read_suppressed_users
from eventlake.storage import Location, Storage

_CHUNK = 1 << 20
_GZIP_LEVEL = 6
STAGED_SUFFIX = ".gz"  # the staged archive file in the spool: ``.<segment name>.gz``
TEMP_SUFFIX = ".tmp"  # while it is being written: ``.<segment name>.gz.tmp``


@dataclass(frozen=True)
class Segment:
    """A spool segment file: ``<spool>/<source-id>/<name>.ndjson``."""

    path: Path
    source_id: str
    day_ms: int
    name: str  # without suffix; the archive file is ``<name>.gz``

    @classmethod
    def from_path(cls, path: Path) -> Segment | None:
        day_ms = state_layout.spool_segment_day_ms(path.name)
        if day_ms is None:
            return None
        return cls(path, path.parent.name, day_ms, path.name[: -len(state_layout.SPOOL_SUFFIX)])

    @property
    def process_token(self) -> str:
        return self.name.split("-")[2]

    @property
    def staged_path(self) -> Path:
        """The complete gzipped segment, waiting for its upload (hidden: not a segment name)."""
        return self.path.with_name(f".{self.name}{STAGED_SUFFIX}")

    @property
    def temp_path(self) -> Path:
        """Where :attr:`staged_path` is written before its rename."""
        return self.path.with_name(f".{self.name}{STAGED_SUFFIX}{TEMP_SUFFIX}")


@dataclass(frozen=True)
class SealResult:
    segment: Segment
    archive_path: Location | None  # None when nothing was written (empty, or sealed before)
    suppressed: int = 0  # lines of suppressed users dropped (acknowledged before the suppression)


def spool_segments(spool_dir: Path) -> list[Segment]:
    """Every segment file under ``spool_dir``, oldest name first (staged files are not segments)."""
    found: list[Segment] = []
    if not spool_dir.is_dir():
        return found
    for source_dir in spool_dir.iterdir():
        if not source_dir.is_dir() or source_dir.name.startswith("."):
            continue
        for path in source_dir.iterdir():
            segment = Segment.from_path(path)
            if segment is not None and path.is_file():
                found.append(segment)
    return sorted(found, key=lambda s: (s.source_id, s.name))


def _suppressed(storage: Storage, lake_root: Location, segment: Segment, final: Location) -> frozenset[str]:
    """The source's suppressed userIds, read from the archive's store at each seal: a list that
    cannot be read fails the seal as the store's failure (:class:`ArchiveUploadError` naming the
    archive object, counted as an upload failure; the segment stays)."""
    try:
        return read_suppressed_users(storage, lake_root, segment.source_id)
    except SuppressionError as exc:
        raise ArchiveUploadError(final, exc) from exc


def seal_segment(
    segment: Segment, storage: Storage, lake_root: Location, now_ms: int | None = None
) -> SealResult:
    """Archive ``segment`` (its complete lines, gzipped, but those of suppressed users) at
    ``lake_root`` and delete it from the spool. ``now_ms``: the collector's clock (default: the
    machine's), which says whether the segment's day has ended (then the day is marked as written
    to again first: :func:`reopen_days`).

    Raises :class:`ArchiveUploadError` when the object cannot be written (the store is down,
    throttles, refuses it; the segment stays: call again) or the source's suppression list beside
    it cannot be read (the same), and ``OSError`` when the segment cannot
    be gzipped into the spool.
    """
    final = layout.archive_file(lake_root, segment.source_id, segment.day_ms, segment.name)
    staged = segment.staged_path
    if not segment.path.exists() and not staged.exists():
        return SealResult(segment, None)  # dealt with already (or removed by hand): nothing to retry
    users = _suppressed(storage, lake_root, segment, final)
    try:
        uploaded = storage.exists(final)
        if uploaded and not (users and _holds_lines_of(_read_object(storage, final), users)):
            _drop(segment)
            return SealResult(segment, None)
    except Exception as exc:  # the store's own errors (botocore, azure) are not OSErrors
        raise ArchiveUploadError(final, exc) from exc
    # (uploaded here: by an attempt stopped before its last check, with lines of a user suppressed since)
    restage = uploaded or not staged.exists() or _holds_lines_of(_staged_lines(staged), users)
    dropped = 0
    while True:
        if restage:
            kept, gone = _stage(segment, users)
            dropped += gone
            if kept == 0 and not uploaded:  # (uploaded: the object must become empty)
                _drop(segment)  # nothing acknowledged in it (empty, a torn line, suppressed users only)
                return SealResult(segment, None, dropped)
        _upload(segment, storage, lake_root, final, now_ms)
        uploaded = True
        later = _suppressed(storage, lake_root, segment, final)  # begun after the upload
        restage = _holds_lines_of(_staged_lines(staged), later - users)
        users = later
        if not restage:
            break
    _drop(segment)
    return SealResult(segment, final, dropped)


def _upload(
    segment: Segment, storage: Storage, lake_root: Location, final: Location, now_ms: int | None
) -> None:
    """Write the staged file to ``final``, whole (its day marked first if it ended)."""
    try:
        reopen_days(
            storage, lake_root, segment.source_id, [segment.day_ms], now_ms
        )  # a day that ended: marked first
        with open(segment.staged_path, "rb") as source, storage.open_write(final) as target:
            shutil.copyfileobj(source, target, _CHUNK)
    except Exception as exc:
        raise ArchiveUploadError(final, exc) from exc


def _stage(segment: Segment, users: AbstractSet[str]) -> tuple[int, int]:
    """Gzip the complete lines of the segment (or, when it is gone, of its staged file) but those
    of ``users`` into :attr:`Segment.staged_path` (fsynced, then renamed into place so that the
    name always means complete); the bytes kept (0 for none) and the lines dropped."""
    temp = segment.temp_path
    if segment.path.exists():
        written, dropped = _gzip_lines(_complete_blocks(segment.path), temp, users)
    else:  # only the staged file is left (the segment removed by hand): filter that
        written, dropped = _gzip_lines(list(_staged_lines(segment.staged_path)), temp, users)
    os.replace(temp, segment.staged_path)
    return written, dropped


def _complete_blocks(source: Path) -> Iterator[bytes]:
    """The newline-terminated lines of ``source`` in blocks of whole lines (a torn last line is
    left out: it was never acknowledged)."""
    with open(source, "rb") as src:
        tail = b""
        while chunk := src.read(_CHUNK):
            data = tail + chunk
            cut = data.rfind(b"\n") + 1
            if cut:
                yield data[:cut]
            tail = data[cut:]


def _gzip_lines(blocks: Iterable[bytes], target: Path, users: AbstractSet[str]) -> tuple[int, int]:
    """Write ``blocks`` (of whole lines) but the lines of ``users``, gzipped, to ``target``,
    fsynced; the bytes kept and the lines dropped."""
    written = dropped = 0
    with open(target, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=_GZIP_LEVEL, mtime=0) as gz:
            for block in blocks:
                if users:
                    lines = block.split(b"\n")[:-1]
                    kept = [line for line in lines if not _of(line, users)]
                    dropped += len(lines) - len(kept)
                    block = b"".join(line + b"\n" for line in kept)
                gz.write(block)
                written += len(block)
        raw.flush()
        os.fsync(raw.fileno())
    return written, dropped


def _holds_lines_of(lines: Iterable[bytes], users: AbstractSet[str]) -> bool:
    return bool(users) and any(_of(line, users) for line in lines)


def _of(line: bytes, users: AbstractSet[str]) -> bool:
    """Whether the spool line is a message of one of ``users`` (a line that is not JSON is not)."""
    try:
        return is_suppressed(orjson.loads(line), users)
    except orjson.JSONDecodeError:
        return False


def _staged_lines(path: Path) -> Iterator[bytes]:
    """The lines of a staged file, newline included (read only when they are looked at)."""
    with gzip.open(path, "rb") as gz:
        yield from gz


def _read_object(storage: Storage, path: Location) -> list[bytes]:
    """The lines of an archive object (read back only when the list is not empty)."""
    return [line + b"\n" for line in archive_lines(storage.read(path))]


def _drop(segment: Segment) -> None:
    """Delete the segment's staged files, then the segment (last: it is what recovery looks for)."""
    _unlink(segment.temp_path)
    _unlink(segment.staged_path)
    _unlink(segment.path)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
