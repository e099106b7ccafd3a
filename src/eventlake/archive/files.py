"""Read the raw archive: list a source's sealed files and read their lines."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from eventlake import layout


@dataclass(frozen=True)
class ArchiveFile:
    """One sealed archive file: ``segment-logs/<source-id>/<day-ms>/<name>.gz``."""

    path: Path
    key: str  # layout.archive_relative: the path relative to the lake root, with "/"
    size: int
    day_ms: int  # UTC midnight of the received day, Unix milliseconds


def list_archive_files(lake_root: Path, source_id: str) -> list[ArchiveFile]:
    """The sealed archive files of a source (hidden temporary files excluded), sorted by key."""
    source_dir = layout.archive_source_dir(lake_root, source_id)
    if not source_dir.is_dir():
        return []
    found: list[ArchiveFile] = []
    for day_dir in source_dir.iterdir():
        if not day_dir.name.isdigit() or not day_dir.is_dir():
            continue
        for path in day_dir.iterdir():
            if not layout.is_archive_file_name(path.name):
                continue
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            key = layout.archive_relative(lake_root, path)
            found.append(ArchiveFile(path=path, key=key, size=stat.st_size, day_ms=int(day_dir.name)))
    return sorted(found, key=lambda f: f.key)


def read_archive_lines(path: Path) -> Iterator[bytes]:
    """The messages of an archive file, one JSON document per item, without newlines."""
    with gzip.open(path, "rb") as lines:
        for line in lines:
            line = line.rstrip(b"\r\n")
            if line:
                yield line
