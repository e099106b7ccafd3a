"""The local-disk store: temp file + fsync + rename + directory fsync for every write (a run's
staged files: temp file + rename, then the whole stage synced at once before its manifest)."""

from __future__ import annotations

import builtins
import ctypes
import fcntl
import fnmatch
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from eventlake.storage.base import FileInfo, Storage, StorageError
from eventlake.storage.location import Location, ObjectPath


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` of this machine runs (one another user owns counts; 0 and below
    never do)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a created, renamed or deleted file) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(folder: Path) -> None:
    """Create ``folder`` and its missing parents, each durable in its own parent: a file written
    into a new folder survives a power loss only once every new folder's entry is synced too."""
    folder = Path(folder)
    if folder.is_dir():
        return
    make_dirs(folder.parent)
    try:
        folder.mkdir()
    except FileExistsError:
        if not folder.is_dir():
            raise
    # also when another process created it just now: it may not have synced the entry yet
    fsync_dir(folder.parent)


def _syncfs() -> Callable[[int], int] | None:
    """Linux's ``syncfs(fd)`` (glibc 2.14), or None where the C library lacks it."""
    try:
        return ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):
        return None


SYNCFS = _syncfs()


def sync_tree(folder: Path) -> None:
    """Make durable every file and folder under ``folder`` and the folder's own entry (in each of
    its parents): one ``syncfs`` of its file system where the system has it (a run's 2,500
    staged files of 40 kB: 0.3-0.6 s, where an ``fsync`` of each file and folder as it was
    written took 6 s in all), else an ``fsync`` of each, deepest first."""
    if not folder.is_dir():
        return
    if SYNCFS is not None:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if SYNCFS(fd) != 0:
                error = ctypes.get_errno()
                raise OSError(error, os.strerror(error), str(folder))
        finally:
            os.close(fd)
        return
    for root, _, files in os.walk(folder, topdown=False):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(root))
    for parent in folder.parents:
        fsync_dir(parent)


CAS_LOCK = ".write-if-match.lock"  # the hidden lock file of a folder's compare-and-swap writes


def _tag(stat: os.stat_result) -> str:
    """A file version's tag: every write is a new file renamed into place (a new inode)."""
    return f"{stat.st_ino}-{stat.st_mtime_ns}-{stat.st_size}"


def open_temp(path: Path, mode: int) -> tuple[int, Path]:
    """A new hidden temporary file beside ``path`` (where it is written before its rename), open
    for writing, and its path: an unpredictable name created with ``O_EXCL`` (``mkstemp``: a file
    or symlink someone planted there is never opened or followed), unique between threads too;
    its permission bits ``mode``."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        os.unlink(name)
        raise
    return fd, Path(name)


def _durable_temp(path: Path, data: bytes) -> tuple[Path, os.stat_result]:
    """``data`` written and fsynced into a new temporary beside ``path`` (:func:`open_temp`): its
    path and its status (removed again when the write fails)."""
    fd, temp = open_temp(path, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            return temp, os.fstat(handle.fileno())
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` atomically (temp file, fsync, rename, fsync of the folder).
    For local files outside the lake (the metastore's configuration) and for :class:`LocalStorage`."""
    with LocalStorage().open_write(path, mode) as handle:
        handle.write(data)


def _walk(folder: str, prefix: str, parts: builtins.list[str], sizes: dict[str, int]) -> None:
    """Adds to ``sizes`` the files under ``folder`` (named ``prefix`` + name) that match ``parts``."""
    first, rest = parts[0], parts[1:]
    if first == "**":  # this folder and every folder under it
        if rest:
            _walk(folder, prefix, rest, sizes)
        for entry in _entries(folder):
            if entry.is_dir() and not entry.is_symlink():  # (as Path.glob: no loops)
                _walk(entry.path, f"{prefix}{entry.name}/", parts, sizes)
        return
    for entry in _entries(folder):
        if not fnmatch.fnmatchcase(entry.name, first):
            continue
        try:
            if rest:
                if entry.is_dir():
                    _walk(entry.path, f"{prefix}{entry.name}/", rest, sizes)
            elif not entry.name.startswith(".") and entry.is_file():
                sizes[prefix + entry.name] = entry.stat().st_size
        except FileNotFoundError:  # deleted while listing
            continue


def _entries(folder: str) -> builtins.list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return builtins.list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return []


def on_disk(path: Location) -> Path:
    """A location of the local disk as a ``Path``; a ``StorageError`` for an object store's."""
    if isinstance(path, ObjectPath):
        raise StorageError(f"{path} is on an object store, not the local disk")
    return Path(path)


class LocalStorage(Storage):
    def local_path(self, path: Location) -> Path:
        return on_disk(path)

    def read(self, path: Location) -> bytes:
        return on_disk(path).read_bytes()

    def read_ranges(self, path: Location, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """One ``pread`` per range (the page cache makes small ones cheap)."""
        fd = os.open(on_disk(path), os.O_RDONLY)
        try:
            return [os.pread(fd, length, offset) if length > 0 else b"" for offset, length in ranges]
        finally:
            os.close(fd)

    def read_tagged(self, path: Location) -> tuple[bytes, str]:
        with open(on_disk(path), "rb") as handle:
            return handle.read(), _tag(os.fstat(handle.fileno()))

    def write_if_match(self, path: Location, data: bytes, tag: str) -> str | None:
        """Under an exclusive ``flock`` of the folder's hidden lock file (every compare-and-swap
        in the folder takes it): compare the file's tag, write a temporary (fsynced) and rename it
        over the file."""
        path = on_disk(path)
        if not path.parent.is_dir():
            return None
        fd = os.open(path.parent / CAS_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if _tag(path.stat()) != tag:
                    return None
            except FileNotFoundError:
                return None
            temp, stat = _durable_temp(path, data)
            written = _tag(stat)  # a rename keeps the inode and mtime
            try:
                os.replace(temp, path)
            except BaseException:
                temp.unlink(missing_ok=True)
                raise
            fsync_dir(path.parent)
            return written
        finally:
            os.close(fd)  # releases the flock

    def write(self, path: Location, data: bytes, *, private: bool = False) -> None:
        with self.open_write(path, mode=0o600 if private else 0o644) as handle:
            handle.write(data)

    def write_new(self, path: Location, data: bytes) -> bool:
        """The whole file is written and fsynced under a hidden temporary name, then hard-linked
        to ``path``: ``link`` fails when ``path`` exists, so the file appears whole or not at all
        (an ``O_EXCL`` create followed by writes could leave an empty or partial file after a
        crash, blocking every later caller)."""
        path = on_disk(path)
        make_dirs(path.parent)
        temp, _ = _durable_temp(path, data)
        try:
            try:
                os.link(temp, path)
            except FileExistsError:
                return False
        finally:
            temp.unlink(missing_ok=True)
        fsync_dir(path.parent)
        return True

    @contextmanager
    def open_write(self, path: Location, mode: int = 0o644, *, durable: bool = True) -> Iterator[BinaryIO]:
        path = on_disk(path)
        if durable:
            make_dirs(path.parent)
        else:  # synced with the rest of its folder by make_durable
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = open_temp(path, mode)
        try:
            with os.fdopen(fd, "wb") as handle:
                yield handle
                if durable:
                    handle.flush()
                    os.fsync(handle.fileno())
            os.replace(temp, path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        if durable:
            fsync_dir(path.parent)

    def make_durable(self, folder: Location) -> None:
        sync_tree(on_disk(folder))

    def exists(self, path: Location) -> bool:
        return on_disk(path).exists()

    def list(self, folder: Location, pattern: str = "*") -> list[FileInfo]:
        """The files under ``folder`` matching ``pattern`` (``Path.glob``'s: ``*``, ``?``, ``[..]``
        within a name, ``**`` for any depth), hidden names (temporaries) left out, sorted. A walk
        with ``scandir``, one ``stat`` a file (``Path.glob`` stats each twice: a day of the archive,
        17,280 files, took twice as long)."""
        sizes: dict[str, int] = {}
        base = on_disk(folder)
        _walk(os.fspath(base), "", pattern.split("/"), sizes)
        return [FileInfo(base / name, sizes[name]) for name in sorted(sizes, key=lambda n: n.split("/"))]

    def delete(self, path: Location) -> None:
        path = on_disk(path)
        try:
            path.unlink()
        except FileNotFoundError:
            return
        fsync_dir(path.parent)  # a dropped manifest must not come back after a power loss

    def delete_many(self, paths: Iterable[Location]) -> None:
        """Each file unlinked, then each folder that lost one synced once."""
        folders = set()
        for path in map(on_disk, paths):
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            folders.add(path.parent)
        for folder in sorted(folders):
            fsync_dir(folder)

    def delete_tree(self, folder: Location) -> None:
        shutil.rmtree(on_disk(folder), ignore_errors=True)

    def publish(self, staged: Location, final: Location) -> bool:
        staged, final = on_disk(staged), on_disk(final)
        if staged.exists():
            make_dirs(final.parent)
            os.replace(staged, final)
            return True
        if final.exists():
            return False
        raise StorageError(f"staged file {staged} vanished before it was published to {final}")

    def commit(self, published: Iterable[Location]) -> None:
        for folder in sorted({on_disk(p).parent for p in published}):
            fsync_dir(folder)
