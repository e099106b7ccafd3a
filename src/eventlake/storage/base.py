"""The storage interface: every read, write, list, delete and publish of lake and state files.

Modelled on pyiceberg's ``FileIO``: a small set of whole-file operations that every store can
offer. Nothing above this layer knows which store holds the lake; a back end (local disk today;
S3, Azure) implements these methods with the same guarantees:

- ``write`` and ``open_write`` make a file appear whole or not at all, durable on return;
- ``write_new`` creates a file only if none is there, atomically (the base of a lease);
- ``write_if_match`` replaces a file only if it is still the version ``read_tagged`` returned,
  atomically (a compare-and-swap: a lease's renewal, release and takeover);
- ``publish`` moves a staged file to its final place so that it appears whole, and is safe to
  repeat after a crash (the second call finds the file in place and does nothing);
  ``publish_many`` is the same for many files (object stores: copies at once, the staged copies
  deleted in batches), safe to repeat after a crash at any point of it;
- ``list`` never shows a file half-written by ``write``/``open_write`` (their temporaries are hidden).
"""

from __future__ import annotations

import bisect
import builtins
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeVar

from eventlake.errors import EventLakeError, PermissionsError
from eventlake.storage.location import Location

# an object store's read_ranges: ranges closer than RANGE_GAP bytes share one ranged request of at
# most RANGE_SPAN bytes (a request costs more than reading a few hundred KB more); RANGE_THREADS at once
RANGE_GAP = 1024 * 1024
RANGE_SPAN = 64 * 1024 * 1024
RANGE_THREADS = 16
# an object store's requests of a batch at once (publish_many's copies, a commit's look-ups)
BATCH_THREADS = 8


class StorageError(EventLakeError):
    code = "storage_error"


class StoragePermissionsError(PermissionsError, StorageError):
    """The store refused ``call`` (its API operation) on ``resource`` (a path): the credentials
    lack a permission, or are not valid. Its code is ``insufficient_permissions``; ``fix`` says
    which permission to grant."""

    def __init__(self, store: str, call: str, resource: str, answer: str, fix: str) -> None:
        super().__init__(
            f"{store} refused {call} on {resource} ({answer}): {fix}", call=call, resource=resource
        )
        self.call = call
        self.resource = resource


@dataclass(frozen=True)
class FileInfo:
    path: Location
    size: int


class Storage(ABC):
    """Whole-file operations on one store (see the module docstring for the guarantees)."""

    @abstractmethod
    def read(self, path: Location) -> bytes:
        """The file's bytes; ``FileNotFoundError`` when it does not exist."""

    @abstractmethod
    def write(self, path: Location, data: bytes, *, private: bool = False) -> None:
        """Create or replace ``path`` with ``data``, whole or not at all, durable on return.
        ``private``: readable by the owner only (files holding secrets)."""

    @abstractmethod
    def write_new(self, path: Location, data: bytes) -> bool:
        """Create ``path`` with ``data`` only if nothing is there, as one atomic step: True when
        created (whole and durable, as by :meth:`write`), False when ``path`` already exists. Of
        two concurrent callers at most one gets True (a lease or lock object)."""

    @abstractmethod
    def read_tagged(self, path: Location) -> tuple[bytes, str]:
        """The file's bytes and the tag of this version of it (an object store's ETag): every write
        of the file gives it a new tag. ``FileNotFoundError`` when it does not exist."""

    @abstractmethod
    def write_if_match(self, path: Location, data: bytes, tag: str) -> str | None:
        """Replace ``path`` with ``data`` only if it is still the version tagged ``tag`` (from
        :meth:`read_tagged` or an earlier call), as one atomic step: the new version's tag, or None
        when the file was rewritten or deleted since (nothing written). Of callers with the same
        tag at most one succeeds (S3: ``If-Match``; Azure: ``If-Match`` on the ETag; the local disk:
        compare and rename under an ``flock`` of the folder)."""

    @abstractmethod
    def open_write(self, path: Location, *, durable: bool = True) -> AbstractContextManager[BinaryIO]:
        """A handle to stream a new file into; the file appears whole (and durable) when the
        ``with`` block ends without an error, and not at all otherwise. ``durable=False``: whole
        but durable only once :meth:`make_durable` of a folder holding it returns (a run's staged
        files, made durable together before its manifest names them); an object store's writes
        are durable either way."""

    def make_durable(self, folder: Location) -> None:
        """Every file written under ``folder`` with ``durable=False`` durable, with the folders'
        entries. Nothing to do on an object store (this default)."""
        return

    @abstractmethod
    def exists(self, path: Location) -> bool: ...

    @abstractmethod
    def list(self, folder: Location, pattern: str = "*") -> list[FileInfo]:
        """Files under ``folder`` whose relative path matches the glob ``pattern`` (``*`` does not
        cross ``/``; ``**`` does), sorted by path; hidden temporaries excluded; [] for no folder."""

    @abstractmethod
    def delete(self, path: Location) -> None:
        """Remove a file; a missing file is not an error."""

    def delete_many(self, paths: Iterable[Location]) -> None:
        """Remove files, as :meth:`delete` each (a missing one is not an error); object stores
        delete them in batches (S3: 1,000 keys a request). This default deletes one at a time."""
        for path in paths:
            self.delete(path)

    @abstractmethod
    def delete_tree(self, folder: Location) -> None:
        """Remove a folder and everything under it; a missing folder is not an error."""

    @abstractmethod
    def publish(self, staged: Location, final: Location) -> bool:
        """Move a staged file to ``final``, replacing what is there. True when moved; False when
        ``staged`` is gone and ``final`` exists (a repeat after a crash). Raises
        :class:`StorageError` when neither exists. Not durable until :meth:`commit` of ``final``."""

    def publish_many(self, moves: Sequence[tuple[Location, Location]]) -> builtins.list[bool]:
        """:meth:`publish` of each ``(staged, final)`` pair (finals all different, none of them a
        staged file of another pair): every file is in place on return and its staged copy gone.
        Safe to call again after a crash at any point: a pair is then done again or found done
        (False). Object stores copy ``BATCH_THREADS`` at once, then delete the staged copies in
        batches (a crash in between leaves both: the rerun copies the same bytes again); this
        default publishes one at a time, in order."""
        return [self.publish(staged, final) for staged, final in moves]

    def copy(self, source: Location, target: Location) -> None:
        """Create or replace ``target`` with the bytes of ``source``, which stays (a file a rewritten
        partition keeps, copied into its new folder). Whole or not at all, like :meth:`write`. This
        default reads and writes; object stores copy on the server."""
        self.write(target, self.read(source))

    @abstractmethod
    def commit(self, published: Iterable[Location]) -> None:
        """Make the publishing of these files durable (before anything records them as done)."""

    def local_path(self, path: Location) -> Path | None:
        """``path`` on this machine's disk, when this store is the local disk (where ``flock``
        works); None for object stores."""
        return None

    def read_ranges(self, path: Location, ranges: Sequence[tuple[int, int]]) -> builtins.list[bytes]:
        """The bytes of each ``(offset, length)`` range of the file, in the order asked (a range
        that runs past the end is cut short there); ``FileNotFoundError`` when it does not exist.
        This default reads the whole file; the back ends read only the ranges (object stores in
        few requests: see :func:`coalesce`)."""
        data = self.read(path)
        return [data[offset : offset + length] for offset, length in ranges]

    def read_lines(self, path: Location) -> Iterator[bytes]:
        """The non-empty lines of a text file, without their line ends."""
        return (line for line in self.read(path).splitlines() if line.strip())


def coalesce(ranges: Sequence[tuple[int, int]], gap: int, most: int) -> list[tuple[int, int]]:
    """Spans ``(offset, length)`` that cover ``ranges``, sorted: ranges less than ``gap`` bytes
    apart share a span, as long as it stays within ``most`` bytes (a request to an object store
    costs more than reading a few hundred KB more).

    >>> coalesce([(100, 10), (0, 10), (15, 5), (1000, 1)], gap=10, most=50)
    [(0, 20), (100, 10), (1000, 1)]
    """
    spans: list[tuple[int, int]] = []
    for offset, length in sorted(r for r in ranges if r[1] > 0):
        if spans:
            start, size = spans[-1]
            end = max(start + size, offset + length)
            if offset - (start + size) < gap and end - start <= most:
                spans[-1] = (start, end - start)
                continue
        spans.append((offset, length))
    return spans


T = TypeVar("T")
R = TypeVar("R")


def in_parallel(call: Callable[[T], R], items: Sequence[T], threads: int) -> list[R]:
    """``call`` of each item, ``threads`` at a time (on an object store each is a request), in
    order; one item is called in this thread."""
    if len(items) <= 1:
        return [call(item) for item in items]
    with ThreadPoolExecutor(min(threads, len(items))) as pool:
        return list(pool.map(call, items))


def cut(
    spans: Sequence[tuple[int, int]], data: Sequence[bytes], ranges: Sequence[tuple[int, int]]
) -> list[bytes]:
    """Each of ``ranges`` out of the bytes read for ``spans`` (from :func:`coalesce`)."""
    starts = [start for start, _ in spans]
    found = []
    for offset, length in ranges:
        if length <= 0:
            found.append(b"")
            continue
        n = bisect.bisect_right(starts, offset) - 1
        begin = offset - starts[n]
        found.append(bytes(data[n][begin : begin + length]))
    return found
