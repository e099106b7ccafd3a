"""Where the lake's files live: one interface (:class:`Storage`) and its back ends, by scheme."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from eventlake.errors import ConfigError
from eventlake.storage.base import FileInfo, Storage, StorageError
from eventlake.storage.local import LocalStorage

# a URI scheme (s3://, abfss://, gs://) at the start of a lake root
URI_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")

STORAGE_LOADERS: dict[str, Callable[[], Storage]] = {"file": LocalStorage}


def storage_scheme(root: str | Path) -> str:
    """``file`` for a local path, else the URI's scheme: ``storage_scheme("s3://b/p") == "s3"``."""
    match = URI_SCHEME.match(str(root))
    return match.group(1).lower() if match else "file"


def load_storage(root: str | Path) -> Storage:
    """The store that holds a lake root."""
    scheme = storage_scheme(root)
    if scheme not in STORAGE_LOADERS:
        raise ConfigError(
            "lake.root", f"{root}", f"use a local path; the {scheme}:// scheme is not supported yet"
        )
    return STORAGE_LOADERS[scheme]()


__all__ = ["FileInfo", "LocalStorage", "Storage", "StorageError", "load_storage", "storage_scheme"]
