"""The S3 store (AWS S3 and S3-compatible stores: MinIO, R2, Ceph, moto) over boto3.

Not wired into :func:`eventlake.storage.load_storage` yet (issue 9): only the tests use it.

Paths: a :class:`~pathlib.Path` names an object by its POSIX form relative to the bucket, so
``Path("lake/segment-data/x.parquet")`` is the key ``lake/segment-data/x.parquet`` (leading ``/``
and ``.`` are dropped; ``Path(".")`` is the bucket's top). Listing returns keys as such paths.

Guarantees, as the interface asks:

- ``write`` and ``open_write`` are one ``PutObject``: the object appears whole or not at all, and
  is durable when S3 answers. ``open_write`` buffers into a spooled temporary file (memory, then
  disk) and puts only when the ``with`` block ends without an error (so one object is at most
  5 GB, S3's limit for a single put).
- ``publish`` is ``CopyObject`` then ``DeleteObject`` of the staged key; a crash between the two
  leaves both, and the rerun copies again (the same bytes) and returns True.
- ``commit`` does nothing: an acknowledged put, copy or delete is already durable.
- ``private`` is ignored: objects are private to the bucket's owner unless its policy says
  otherwise.

Credentials come from boto3's default chain (environment, profile, instance role); this module
never logs them and never puts them in an error. The endpoint of an S3-compatible store comes from
the ``endpoint_url`` argument, else ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL``.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, cast

from eventlake.storage.base import FileInfo, Storage, StorageError

SPOOL_BYTES = 16 * 1024 * 1024  # open_write keeps this much in memory before spilling to disk
DELETE_BATCH = 1000  # DeleteObjects takes at most 1000 keys
CONFLICT_RETRIES = 3  # write_new's retries of a 409 ConditionalRequestConflict


def object_key(path: Path | str) -> str:
    """The S3 key of a path: its POSIX form without leading ``/`` or ``./``."""
    parts = [p for p in PurePosixPath(str(path)).parts if p not in ("/", ".")]
    return "/".join(parts)


def glob_match(relative: str, pattern: str) -> bool:
    """Whether a ``/``-separated relative key matches a pathlib-style glob: each segment is an
    ``fnmatch`` pattern for one path component (``*`` does not cross ``/``), and a ``**`` segment
    matches any number of components, none included."""
    return _match(tuple(relative.split("/")), tuple(p for p in pattern.split("/") if p))


def _match(parts: tuple[str, ...], patterns: tuple[str, ...]) -> bool:
    if not patterns:
        return not parts
    if patterns[0] == "**":
        return any(_match(parts[i:], patterns[1:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], patterns[0]) and _match(parts[1:], patterns[1:])


def _error_code(error: Exception) -> str:  # of a botocore ClientError
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _status(error: Exception) -> int:
    response = getattr(error, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def _not_found(error: Exception) -> bool:
    return _error_code(error) in ("404", "NoSuchKey", "NotFound") or _status(error) == 404


class S3Storage(Storage):
    def __init__(self, bucket: str, *, endpoint_url: str | None = None, region: str | None = None) -> None:
        import boto3  # the `glue` extra; imported here so that local lakes never need it

        self.bucket = bucket
        self.endpoint_url = (
            endpoint_url
            or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL")
            or None
        )
        self.client: Any = boto3.client("s3", endpoint_url=self.endpoint_url, region_name=region)

    def __repr__(self) -> str:
        return f"S3Storage(bucket={self.bucket!r}, endpoint_url={self.endpoint_url!r})"

    def _where(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def read(self, path: Path) -> bytes:
        key = object_key(path)
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=key)
        except self.client.exceptions.ClientError as error:
            if _not_found(error):
                raise FileNotFoundError(self._where(key)) from None
            raise
        return cast(bytes, response["Body"].read())

    def write(self, path: Path, data: bytes, *, private: bool = False) -> None:
        self.client.put_object(Bucket=self.bucket, Key=object_key(path), Body=data)

    def write_new(self, path: Path, data: bytes) -> bool:
        """A conditional put (``If-None-Match: *``): S3 answers 412 when the key exists, and 409
        when a concurrent conditional request on it was in flight; that one is retried."""
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                self.client.put_object(Bucket=self.bucket, Key=object_key(path), Body=data, IfNoneMatch="*")
            except self.client.exceptions.ClientError as error:
                if _error_code(error) == "PreconditionFailed" or _status(error) == 412:
                    return False
                if _status(error) != 409 or attempt == CONFLICT_RETRIES:
                    raise
                time.sleep(0.05 * 2**attempt)
            else:
                return True
        raise AssertionError("unreachable")

    @contextmanager
    def open_write(self, path: Path) -> Iterator[BinaryIO]:
        key = object_key(path)
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as buffer:
            yield cast(BinaryIO, buffer)
            buffer.seek(0)
            self.client.put_object(Bucket=self.bucket, Key=key, Body=buffer)

    def exists(self, path: Path) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=object_key(path))
        except self.client.exceptions.ClientError as error:
            if _not_found(error):
                return False
            raise
        return True

    def _keys(self, folder: Path) -> Iterator[tuple[str, int]]:
        """Every (key, size) under ``folder``, in key order."""
        prefix = object_key(folder)
        prefix = f"{prefix}/" if prefix else ""
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                yield item["Key"], int(item["Size"])

    def list(self, folder: Path, pattern: str = "*") -> list[FileInfo]:
        prefix = object_key(folder)
        found = []
        for key, size in self._keys(folder):
            relative = key[len(prefix) + 1 :] if prefix else key
            if not relative or relative.endswith("/"):  # a "folder" marker object
                continue
            if relative.rsplit("/", 1)[-1].startswith("."):
                continue
            if glob_match(relative, pattern):
                found.append(FileInfo(Path(key), size))
        return sorted(found, key=lambda f: f.path)

    def delete(self, path: Path) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=object_key(path))  # missing: no error

    def delete_tree(self, folder: Path) -> None:
        keys = [key for key, _ in self._keys(folder)]
        for start in range(0, len(keys), DELETE_BATCH):
            batch = [{"Key": key} for key in keys[start : start + DELETE_BATCH]]
            response = self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
            )
            if response.get("Errors"):
                failed = response["Errors"][0]
                raise StorageError(
                    f"could not delete {self._where(failed.get('Key', ''))}: {failed.get('Code', 'error')}"
                )

    def publish(self, staged: Path, final: Path) -> bool:
        staged_key, final_key = object_key(staged), object_key(final)
        try:
            self.client.copy_object(
                Bucket=self.bucket, Key=final_key, CopySource={"Bucket": self.bucket, "Key": staged_key}
            )
        except self.client.exceptions.ClientError as error:
            if not _not_found(error):
                raise
            if self.exists(final):
                return False
            raise StorageError(
                f"staged file {self._where(staged_key)} vanished before it was published to "
                f"{self._where(final_key)}"
            ) from None
        self.client.delete_object(Bucket=self.bucket, Key=staged_key)
        return True

    def commit(self, published: Iterable[Path]) -> None:
        """Nothing to do: S3 acknowledges a put, copy or delete only once it is durable."""
