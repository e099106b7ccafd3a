"""Seal a spool segment into the raw archive: gzip it locally, upload it whole, then drop it.

Sealing runs through the lake's :class:`~eventlake.storage.Storage`, so the archive may be a local
directory or a bucket. The steps, each idempotent to redo, so that a process killed at any instant
(or a store that fails at any step) neither loses nor duplicates data:

1. ``storage.exists(archive object)``: already there (a previous attempt uploaded it and was
   stopped before dropping the segment) → only drop the segment.
2. gzip the segment's complete lines (a torn last line was never acknowledged) into a hidden
   ``.<name>.gz.tmp`` beside the segment in the spool, fsync it, rename it to ``.<name>.gz``: a
   staged file under that name is always complete, so retries (and a restart) upload it again
   without gzipping again.
3. write the staged file to ``layout.archive_file(...)`` with ``storage.open_write``: the object
   appears whole or not at all, durable when the call returns (a local lake keeps its temp file,
   fsync, rename and folder fsync).
4. only then delete the staged file and the segment.

The archive name is derived from the segment name (unique per collector process), so a segment is
never archived under two names. A failure of the store in step 1 or 3 raises
:class:`ArchiveUploadError`; the segment and its staged file stay in the spool for the next try.
"""

from __future__ import annotations

import gzip
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from eventlake import layout
from eventlake.archive.days import reopen_days
from eventlake.archive.errors import ArchiveUploadError
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
        day_ms = layout.spool_segment_day_ms(path.name)
        if day_ms is None:
            return None
        return cls(path, path.parent.name, day_ms, path.name[: -len(layout.SPOOL_SUFFIX)])

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


def seal_segment(
    segment: Segment, storage: Storage, lake_root: Location, now_ms: int | None = None
) -> SealResult:
    """Archive ``segment`` (its complete lines, gzipped) at ``lake_root`` and delete it from the spool.
    ``now_ms``: the collector's clock (default: the machine's), which says whether the segment's
    day has ended (then the day is marked as written to again first: :func:`reopen_days`).

    Raises :class:`ArchiveUploadError` when the object cannot be written (the store is down,
    throttles, refuses it; the segment stays: call again), and ``OSError`` when the segment cannot
    be gzipped into the spool.
    """
    final = layout.archive_file(lake_root, segment.source_id, segment.day_ms, segment.name)
    staged = segment.staged_path
    if not segment.path.exists() and not staged.exists():
        return SealResult(segment, None)  # dealt with already (or removed by hand): nothing to retry
    try:
        uploaded = storage.exists(final)
    except Exception as exc:  # the store's own errors (botocore, azure) are not OSErrors
        raise ArchiveUploadError(final, exc) from exc
    if uploaded:
        _drop(segment)
        return SealResult(segment, None)
    if not staged.exists() and _stage(segment) == 0:
        _drop(segment)  # nothing acknowledged in it (empty, or only a torn line)
        return SealResult(segment, None)
    try:
        reopen_days(
            storage, lake_root, segment.source_id, [segment.day_ms], now_ms
        )  # a day that ended: marked first
        with open(staged, "rb") as source, storage.open_write(final) as target:
            shutil.copyfileobj(source, target, _CHUNK)
    except Exception as exc:
        raise ArchiveUploadError(final, exc) from exc
    _drop(segment)
    return SealResult(segment, final)


def _stage(segment: Segment) -> int:
    """Gzip the segment's complete lines into :attr:`Segment.staged_path` (fsynced, then renamed
    into place so that the name always means complete); the bytes taken in, 0 for none."""
    temp = segment.temp_path
    written = _gzip_complete_lines(segment.path, temp)
    if written == 0:
        _unlink(temp)
        return 0
    os.replace(temp, segment.staged_path)
    return written


def _gzip_complete_lines(source: Path, target: Path) -> int:
    """Write the newline-terminated lines of ``source`` gzipped to ``target``, fsynced; bytes in."""
    written = 0
    with open(source, "rb") as src, open(target, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=_GZIP_LEVEL, mtime=0) as gz:
            tail = b""
            while chunk := src.read(_CHUNK):
                data = tail + chunk
                cut = data.rfind(b"\n") + 1
                if cut:
                    gz.write(data[:cut])
                    written += cut
                tail = data[cut:]
        raw.flush()
        os.fsync(raw.fileno())
    return written


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
