"""Seal a spool segment into the raw archive: gzip, fsync, atomic rename, then drop the segment.

Each step is idempotent to redo, so a process killed at any instant neither loses nor duplicates
data: the archive name is derived from the segment name, and a segment whose archive file already
exists (killed between the rename and the unlink) is only deleted.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path

from eventlake import layout
from eventlake.storage.local import fsync_dir

_CHUNK = 1 << 20
_GZIP_LEVEL = 6


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


@dataclass(frozen=True)
class SealResult:
    segment: Segment
    archive_path: Path | None  # None when nothing was written (empty, or sealed before)


def spool_segments(spool_dir: Path) -> list[Segment]:
    """Every segment file under ``spool_dir``, oldest name first."""
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


def seal_segment(segment: Segment, lake_root: Path) -> SealResult:
    """Gzip ``segment`` into the archive (dropping a torn last line) and delete it from the spool."""
    final = layout.archive_file(lake_root, segment.source_id, segment.day_ms, segment.name)
    if final.exists():
        _unlink(segment.path)
        return SealResult(segment, None)
    temp = layout.archive_temp_file(lake_root, segment.source_id, segment.day_ms, segment.name)
    final.parent.mkdir(parents=True, exist_ok=True)
    written = _gzip_complete_lines(segment.path, temp)
    if written == 0:
        _unlink(temp)
        _unlink(segment.path)
        return SealResult(segment, None)
    os.replace(temp, final)
    fsync_dir(final.parent)
    _unlink(segment.path)
    return SealResult(segment, final)


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


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
