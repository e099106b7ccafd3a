"""Read the raw archive: list a source's sealed files and read their lines."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

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


@dataclass
class FileLines:
    """A decompressed archive file's lines: ``starts`` and ``ends`` (exclusive, line end and any
    ``\\r`` before it excluded) of every ``\\n``-separated line, blank ones included (their number
    is their position in the file)."""

    content: bytes
    starts: np.ndarray
    ends: np.ndarray

    @classmethod
    def of(cls, content: bytes) -> FileLines:
        buffer = np.frombuffer(content, np.uint8)
        if not len(buffer):  # an empty archive file (a day an import found no message of the source in)
            return cls(content, np.zeros(0, np.int64), np.zeros(0, np.int64))
        breaks = np.flatnonzero(buffer == 10)
        starts = np.concatenate(([0], breaks + 1)).astype(np.int64)
        ends = np.concatenate((breaks, [len(buffer)])).astype(np.int64)
        if len(content) and content[-1:] == b"\n":  # no line after the last line end
            starts, ends = starts[:-1], ends[:-1]
        while True:  # line.rstrip(b"\r\n") after a split at \n: any run of \r
            carriage = (ends > starts) & (buffer[np.maximum(ends - 1, 0)] == 13)
            if not carriage.any():
                break
            ends = ends - carriage
        return cls(content, starts, ends)

    def __len__(self) -> int:
        return len(self.starts)

    def line(self, number: int) -> bytes:
        return self.content[self.starts[number] : self.ends[number]]

    def holding(self, needle: bytes) -> np.ndarray:
        """Whether each line holds ``needle`` (which holds no line end): one ``bytes.find`` after
        another over the whole content, a few times faster than a substring search line by line."""
        found = []
        at = self.content.find(needle)
        while at >= 0:
            found.append(at)
            at = self.content.find(needle, at + len(needle))
        holds = np.zeros(len(self.starts), bool)
        if found:
            holds[np.searchsorted(self.starts, np.array(found, np.int64), "right") - 1] = True
        return holds

    def objects(self) -> np.ndarray:
        """The numbers of the lines that start with ``{`` and end with ``}``: what the reader may read."""
        buffer = np.frombuffer(self.content, np.uint8)
        filled = self.ends > self.starts
        numbers = np.flatnonzero(filled)
        opens = buffer[self.starts[numbers]] == ord("{")
        closes = buffer[self.ends[numbers] - 1] == ord("}")
        found: np.ndarray = numbers[opens & closes]
        return found


def _lines(content: bytes) -> Iterator[bytes]:
    """The non-blank lines of decompressed archive content (:class:`FileLines`)."""
    lines = FileLines.of(content)
    for start, end in zip(lines.starts.tolist(), lines.ends.tolist(), strict=True):
        if end > start:
            yield content[start:end]
