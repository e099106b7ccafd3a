"""Where the lake's files live: one interface (:class:`Storage`) and its back ends, by scheme.

A lake root is a local path or a URI; :func:`load_storage` gives the store that holds it, and
:mod:`.location` the path type of each (``Path`` on disk, :class:`ObjectPath` on object stores).
"""

from __future__ import annotations

from eventlake.errors import ConfigError
from eventlake.storage.base import FileInfo, Storage, StorageError, StoragePermissionsError
from eventlake.storage.local import LocalStorage
from eventlake.storage.location import (
    Location,
    ObjectPath,
    hadoop_uri,
    relative_to,
    to_location,
    uri_scheme,
)

storage_scheme = uri_scheme  # ``file`` for a local path, else the URI's scheme


def load_storage(root: str | Location, *, endpoint_url: str = "") -> Storage:
    """The store that holds a lake root. ``endpoint_url``: an S3-compatible or Azure endpoint
    (emulators, MinIO); else each cloud's standard environment variables."""
    scheme = storage_scheme(root)
    if scheme == "file":
        return LocalStorage()
    if scheme in ("s3", "s3a"):
        from eventlake.storage.s3 import S3Storage

        return S3Storage(endpoint_url=endpoint_url or None)
    if scheme in ("abfss", "abfs", "az"):
        from eventlake.storage.azure import AzureStorage

        return AzureStorage(endpoint_url=endpoint_url or None)
    raise ConfigError(
        "lake.root",
        f"{root}",
        f"the {scheme}:// scheme is not supported: use a local path, s3://bucket/prefix or "
        "abfss://container@account.dfs.core.windows.net/prefix",
    )


__all__ = [
    "FileInfo",
    "LocalStorage",
    "Location",
    "ObjectPath",
    "Storage",
    "StorageError",
    "StoragePermissionsError",
    "hadoop_uri",
    "load_storage",
    "relative_to",
    "storage_scheme",
    "to_location",
    "uri_scheme",
]
