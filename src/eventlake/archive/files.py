"""Read the raw archive: list a source's sealed files and read their lines."""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from eventlake import layout
from eventlake.archive.errors import DamagedArchiveFileError
from eventlake.storage import FileInfo, Location, Storage


@dataclass(frozen=True)
class ArchiveFile:
    """One sealed archive file: ``segment-logs/<source-id>/<day-ms>/<name>.gz``."""

    path: Location  # a local path or an object path (s3://...)
    key: str  # layout.lake_relative: the path relative to the lake root, with "/"
    size: int
    day_ms: int  # UTC midnight of the received day, Unix milliseconds


def list_archive_files(storage: Storage, lake_root: Location, source_id: str) -> list[ArchiveFile]:
    """Every sealed archive file of a source (hidden temporary files excluded), sorted by key: a
    listing of the source's whole history; a sync lists only the open days (:mod:`.days`)."""
    return archive_files(storage.list(layout.archive_source_dir(lake_root, source_id), "*/*"), lake_root)


def archive_files(listed: Iterable[FileInfo], lake_root: Location) -> list[ArchiveFile]:
    """The archive files among ``listed`` (paths ``.../<day-ms>/<name>.gz``), sorted by key."""
    found: list[ArchiveFile] = []
    for info in listed:
        day = info.path.parent.name
        if day.isdigit() and layout.is_archive_file_name(info.path.name):
            key = layout.lake_relative(lake_root, info.path)
            found.append(ArchiveFile(path=info.path, key=key, size=info.size, day_ms=int(day)))
    return sorted(found, key=lambda f: f.key)


def read_archive_lines(storage: Storage, path: Location) -> Iterator[bytes]:
    """The messages of an archive file, one JSON document per item, without newlines;
    :class:`DamagedArchiveFileError` naming ``path`` when it is not whole gzip."""
    return archive_lines(storage.read(path), path)


def archive_lines(data: bytes, path: Location | str | None = None) -> Iterator[bytes]:
    """The messages of an archive file's bytes (read already: see :mod:`eventlake.storage.prefetch`).

    All or nothing: the file is decompressed whole before its first line is given, so a truncated
    or non-gzip file raises :class:`DamagedArchiveFileError` (naming ``path``) here, never after
    some of its lines were taken for the file's content."""
    return _lines(archive_content(data, path))


def archive_content(data: bytes, path: Location | str | None = None) -> bytes:
    """An archive file's bytes decompressed whole; :class:`DamagedArchiveFileError` (naming
    ``path``) when they are not whole gzip."""
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
        raise DamagedArchiveFileError(path, str(exc) or type(exc).__name__) from None


def _lines(content: bytes) -> Iterator[bytes]:
    for line in io.BytesIO(content):
        line = line.rstrip(b"\r\n")
        if line:
            yield line
