"""The storage interface: every read, write, list, delete and publish of lake and state files.

Modelled on pyiceberg's ``FileIO``: a small set of whole-file operations that every store can
offer. Nothing above this layer knows which store holds the lake; a back end (local disk today;
object stores next) implements these methods with the same guarantees:

- ``write`` and ``open_write`` make a file appear whole or not at all, durable on return;
- ``write_new`` creates a file only if none is there, atomically (the base of a lease);
- ``publish`` moves a staged file to its final place so that it appears whole, and is safe to
  repeat after a crash (the second call finds the file in place and does nothing);
- ``list`` never shows a file half-written by ``write``/``open_write`` (their temporaries are hidden).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from eventlake.errors import EventLakeError


class StorageError(EventLakeError):
    code = "storage_error"


@dataclass(frozen=True)
class FileInfo:
    path: Path
    size: int


class Storage(ABC):
    """Whole-file operations on one store (see the module docstring for the guarantees)."""

    @abstractmethod
    def read(self, path: Path) -> bytes:
        """The file's bytes; ``FileNotFoundError`` when it does not exist."""

    @abstractmethod
    def write(self, path: Path, data: bytes, *, private: bool = False) -> None:
        """Create or replace ``path`` with ``data``, whole or not at all, durable on return.
        ``private``: readable by the owner only (files holding secrets)."""

    @abstractmethod
    def write_new(self, path: Path, data: bytes) -> bool:
        """Create ``path`` with ``data`` only if nothing is there, as one atomic step: True when
        created (whole and durable, as by :meth:`write`), False when ``path`` already exists. Of
        two concurrent callers at most one gets True (a lease or lock object)."""

    @abstractmethod
    def open_write(self, path: Path) -> AbstractContextManager[BinaryIO]:
        """A handle to stream a new file into; the file appears whole (and durable) when the
        ``with`` block ends without an error, and not at all otherwise."""

    @abstractmethod
    def exists(self, path: Path) -> bool: ...

    @abstractmethod
    def list(self, folder: Path, pattern: str = "*") -> list[FileInfo]:
        """Files under ``folder`` whose relative path matches the glob ``pattern`` (``*`` does not
        cross ``/``; ``**`` does), sorted by path; hidden temporaries excluded; [] for no folder."""

    @abstractmethod
    def delete(self, path: Path) -> None:
        """Remove a file; a missing file is not an error."""

    @abstractmethod
    def delete_tree(self, folder: Path) -> None:
        """Remove a folder and everything under it; a missing folder is not an error."""

    @abstractmethod
    def publish(self, staged: Path, final: Path) -> bool:
        """Move a staged file to ``final``, replacing what is there. True when moved; False when
        ``staged`` is gone and ``final`` exists (a repeat after a crash). Raises
        :class:`StorageError` when neither exists. Not durable until :meth:`commit` of ``final``."""

    @abstractmethod
    def commit(self, published: Iterable[Path]) -> None:
        """Make the publishing of these files durable (before anything records them as done)."""

    def read_lines(self, path: Path) -> Iterator[bytes]:
        """The non-empty lines of a text file, without their line ends."""
        return (line for line in self.read(path).splitlines() if line.strip())
