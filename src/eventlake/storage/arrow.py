"""A read-only pyarrow file system over a :class:`~eventlake.storage.Storage`, so that Arrow
datasets (and DuckDB through them) read a lake on any store with the store's own credentials and
endpoint, without DuckDB's httpfs extension or a per-cloud Arrow file system.

Paths are the locations' text (``s3://bucket/key``). A file is read whole into memory when opened:
Parquet files of the lake are tens of MB at most.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from eventlake.storage.base import Storage, StorageError
from eventlake.storage.location import to_location


class StorageHandler(pafs.FileSystemHandler):  # type: ignore[misc]  # pyarrow has no type stubs
    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StorageHandler) and other.storage is self.storage

    def __ne__(self, other: object) -> bool:
        return not self == other

    def get_type_name(self) -> str:
        return "eventlake-storage"

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        infos = []
        for path in paths:
            location = to_location(path)
            if self.storage.exists(location):
                infos.append(pafs.FileInfo(path, pafs.FileType.File))
            elif self.storage.list(location, "**/*"):
                infos.append(pafs.FileInfo(path, pafs.FileType.Directory))
            else:
                infos.append(pafs.FileInfo(path, pafs.FileType.NotFound))
        return infos

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        base = to_location(selector.base_dir)
        pattern = "**/*" if selector.recursive else "*"
        return [
            pafs.FileInfo(str(f.path), pafs.FileType.File, size=f.size)
            for f in self.storage.list(base, pattern)
        ]

    def open_input_file(self, path: str) -> Any:
        return pa.BufferReader(self.storage.read(to_location(path)))

    def open_input_stream(self, path: str) -> Any:
        return pa.BufferReader(self.storage.read(to_location(path)))

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise StorageError("the lake's Arrow file system is read-only: write through eventlake.storage")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _read_only
    move = copy_file = open_output_stream = open_append_stream = _read_only


def arrow_filesystem(storage: Storage) -> pafs.FileSystem:
    """A pyarrow file system that reads through ``storage``."""
    return pafs.PyFileSystem(StorageHandler(storage))
