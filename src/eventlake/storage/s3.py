"""The S3 store (AWS S3 and S3-compatible stores: MinIO, R2, Ceph, moto) over boto3.

Paths are :class:`~eventlake.storage.location.ObjectPath` (``s3://bucket/key``): one store
serves every bucket. Listing returns such paths.

Guarantees, as the interface asks:

- ``write`` is one ``PutObject``: the object appears whole or not at all, and is durable when S3
  answers. ``open_write`` streams: up to :data:`PART_BYTES` it is one ``PutObject`` when the
  ``with`` block ends; a bigger object is a multipart upload, a part sent each time
  :data:`PART_BYTES` are written (memory: one part, whatever the object's size; S3's 5 GB limit
  of a single put does not apply), completed only when the block ends without an error (the
  object appears then, whole) and aborted otherwise (best effort: a process killed midway leaves
  its parts until the bucket's ``AbortIncompleteMultipartUpload`` lifecycle rule drops them).
- ``write_if_match`` is a conditional put (``If-Match: <ETag>``): S3 answers 412 when the object
  was rewritten, 404 when it is gone (AWS S3 honours ``If-Match`` on ``PutObject`` since
  November 2024; a store that ignores the header would replace unconditionally).
- ``publish`` is ``CopyObject`` then ``DeleteObject`` of the staged key; a crash between the two
  leaves both, and the rerun copies again (the same bytes) and returns True. ``publish_many``
  copies ``base.BATCH_THREADS`` at once, then deletes the staged keys with ``DeleteObjects``
  (1,000 a request), with the same answer to a crash; ``delete_many`` and ``delete_tree`` use
  ``DeleteObjects`` too.
- ``commit`` does nothing: an acknowledged put, copy or delete is already durable.
- ``private`` is ignored: objects are private to the bucket's owner unless its policy says
  otherwise.

A refusal (403: ``AccessDenied``, or credentials S3 does not accept) is a
:class:`~eventlake.storage.base.StoragePermissionsError` (``insufficient_permissions``) naming the
S3 call, the object and the IAM action to allow.

Credentials come from boto3's default chain (environment, profile, instance role); this module
never logs them and never puts them in an error. The endpoint of an S3-compatible store comes from
the ``endpoint_url`` argument, else ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL``.
"""

from __future__ import annotations

import builtins
import io
import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, BinaryIO, cast

from eventlake.storage import base
from eventlake.storage.base import FileInfo, Storage, StorageError, StoragePermissionsError, coalesce, cut
from eventlake.storage.keys import glob_match
from eventlake.storage.location import Location, ObjectPath

PART_BYTES = 16 * 1024 * 1024  # open_write's parts (S3: at least 5 MiB but the last), ...
PART_GROWTH = 1000  # ... doubled every this many parts (S3: at most 10,000 parts an object)
DELETE_BATCH = 1000  # DeleteObjects takes at most 1000 keys
CONFLICT_RETRIES = 3  # write_new's retries of a 409 ConditionalRequestConflict
_CLIENT_LOCK = threading.Lock()
SCHEMES = ("s3", "s3a")  # s3a: the Hadoop spelling of the same buckets
# the IAM action each S3 call of this module needs on its object (ListObjectsV2: on the bucket)
IAM_ACTIONS = {
    "GetObject": "s3:GetObject", "HeadObject": "s3:GetObject", "PutObject": "s3:PutObject",
    "CopyObject": "s3:PutObject", "DeleteObject": "s3:DeleteObject", "DeleteObjects": "s3:DeleteObject",
    "ListObjectsV2": "s3:ListBucket", "CreateMultipartUpload": "s3:PutObject", "UploadPart": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject",
}  # fmt: skip
# 403s that are about the credentials themselves, not about what they may do
CREDENTIAL_CODES = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken")


def _error_code(error: Exception) -> str:  # of a botocore ClientError
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _status(error: Exception) -> int:
    response = getattr(error, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def _not_found(error: Exception) -> bool:
    return _error_code(error) in ("404", "NoSuchKey", "NotFound") or _status(error) == 404


def _refused(error: Exception) -> bool:
    return _error_code(error) in ("AccessDenied", *CREDENTIAL_CODES) or _status(error) == 403


class _PartWriter(io.RawIOBase):
    """What :meth:`S3Storage.open_write` yields: the bytes written are held until a part's worth
    (:data:`PART_BYTES`) is there, then sent as a part of a multipart upload (started by the first
    part); :meth:`finish` puts a small object whole, or sends the last part and completes."""

    def __init__(self, client: Any, where: ObjectPath) -> None:
        self.client, self.where = client, where
        self.buffer = bytearray()
        self.part_bytes = PART_BYTES
        self.upload_id: str | None = None
        self.parts: list[dict[str, Any]] = []
        self.written = 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.written

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.buffer += view
        self.written += view.nbytes
        while len(self.buffer) >= self.part_bytes:
            self._send(bytes(self.buffer[: self.part_bytes]))
            del self.buffer[: self.part_bytes]
        return view.nbytes

    def _send(self, body: bytes) -> None:
        where = self.where
        if self.upload_id is None:
            with _refusals("CreateMultipartUpload", where):
                started = self.client.create_multipart_upload(Bucket=where.authority, Key=where.key)
            self.upload_id = str(started["UploadId"])
        number = len(self.parts) + 1
        with _refusals("UploadPart", where):
            sent = self.client.upload_part(
                Bucket=where.authority, Key=where.key, UploadId=self.upload_id, PartNumber=number, Body=body
            )
        self.parts.append({"ETag": sent["ETag"], "PartNumber": number})
        if number % PART_GROWTH == 0:
            self.part_bytes *= 2

    def finish(self) -> None:
        """Make the object appear, whole."""
        where = self.where
        if self.upload_id is None:
            with _refusals("PutObject", where):
                self.client.put_object(Bucket=where.authority, Key=where.key, Body=bytes(self.buffer))
            return
        if self.buffer:
            self._send(bytes(self.buffer))
            self.buffer.clear()
        with _refusals("CompleteMultipartUpload", where):
            self.client.complete_multipart_upload(
                Bucket=where.authority, Key=where.key, UploadId=self.upload_id,
                MultipartUpload={"Parts": self.parts},
            )  # fmt: skip

    def abort(self) -> None:
        """Drop the parts sent (best effort: nothing appears either way)."""
        if self.upload_id is None:
            return
        try:
            self.client.abort_multipart_upload(
                Bucket=self.where.authority, Key=self.where.key, UploadId=self.upload_id
            )
        except Exception:  # noqa: BLE001 (refused or unreachable: the lifecycle rule drops them)
            pass


def _arn(where: ObjectPath) -> str:
    return f"arn:aws:s3:::{where.authority}/{where.key}"


def _refusal(
    call: str, where: ObjectPath, answer: str, source: ObjectPath | None = None
) -> StoragePermissionsError:
    """S3's refusal of ``call`` on ``where`` (``source``: a copy's), with the permission it needs."""
    if answer in CREDENTIAL_CODES:
        fix = (
            "S3 does not accept the AWS credentials: check boto3's credential chain (AWS_ACCESS_KEY_ID "
            "and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or the machine's role)"
        )
    elif call == "ListObjectsV2":
        fix = f"allow s3:ListBucket on arn:aws:s3:::{where.authority} for the prefix {where.key}"
    elif call == "CopyObject" and source is not None:
        fix = f"allow s3:GetObject on {_arn(source)} and s3:PutObject on {_arn(where)}"
    else:
        fix = f"allow {IAM_ACTIONS.get(call, 's3:' + call)} on {_arn(where)}"
        if call == "HeadObject":  # S3 answers a missing object with 403 when ListBucket is not allowed
            fix += f" and s3:ListBucket on arn:aws:s3:::{where.authority}"
    return StoragePermissionsError(
        "S3", call, str(where), answer, fix + " (see the IAM policy in docs/operations.md)"
    )


@contextmanager
def _refusals(call: str, where: ObjectPath, source: ObjectPath | None = None) -> Iterator[None]:
    """S3's refusals inside the block as :class:`StoragePermissionsError`; other errors as they are."""
    try:
        yield
    except Exception as error:
        if getattr(error, "response", None) and _refused(error):
            raise _refusal(call, where, _error_code(error) or str(_status(error)), source) from error
        raise


def s3_endpoint(endpoint_url: str | None = None) -> str | None:
    """The endpoint of an S3-compatible store: the setting, else ``AWS_ENDPOINT_URL_S3``, else
    ``AWS_ENDPOINT_URL``, else None (AWS itself)."""
    return endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def _object(path: Location) -> ObjectPath:
    if not isinstance(path, ObjectPath) or path.scheme not in SCHEMES:
        raise StorageError(f"not an S3 location: {path} (expected s3://bucket/key)")
    return path


class S3Storage(Storage):
    """Every bucket of one S3 endpoint. Pickled by its settings (Spark ships it to executors,
    which build their own client from their own credential chain)."""

    def __init__(self, *, endpoint_url: str | None = None, region: str | None = None) -> None:
        self.endpoint_url = s3_endpoint(endpoint_url)
        self.region = region or None
        self._client: Any = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (_s3_storage, (self.endpoint_url, self.region))

    @property
    def client(self) -> Any:
        with _CLIENT_LOCK:  # boto3's default session is not safe to use from several threads at once
            if self._client is None:
                import boto3  # the `glue` extra; imported here so that local lakes never need it

                self._client = boto3.client("s3", endpoint_url=self.endpoint_url, region_name=self.region)
        return self._client

    def __repr__(self) -> str:
        return f"S3Storage(endpoint_url={self.endpoint_url!r})"

    def read(self, path: Location) -> bytes:
        return self.read_tagged(path)[0]

    def read_ranges(self, path: Location, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Ranged GETs (``Range: bytes=a-b``), ranges closer than
        ``base.RANGE_GAP`` in one,
        ``base.RANGE_THREADS`` at a time."""
        where = _object(path)
        spans = coalesce(ranges, base.RANGE_GAP, base.RANGE_SPAN)
        client = self.client

        def get(span: tuple[int, int]) -> bytes:
            start, length = span
            try:
                with _refusals("GetObject", where):
                    response = client.get_object(
                        Bucket=where.authority, Key=where.key, Range=f"bytes={start}-{start + length - 1}"
                    )
            except client.exceptions.ClientError as error:
                if _not_found(error):
                    raise FileNotFoundError(str(where)) from None
                if _status(error) == 416:  # the span starts past the end
                    return b""
                raise
            return cast(bytes, response["Body"].read())

        return cut(spans, base.in_parallel(get, spans, base.RANGE_THREADS), ranges)

    def write(self, path: Location, data: bytes, *, private: bool = False) -> None:
        where = _object(path)
        with _refusals("PutObject", where):
            self.client.put_object(Bucket=where.authority, Key=where.key, Body=data)

    def read_tagged(self, path: Location) -> tuple[bytes, str]:
        where = _object(path)
        try:
            with _refusals("GetObject", where):
                response = self.client.get_object(Bucket=where.authority, Key=where.key)
        except self.client.exceptions.ClientError as error:
            if _not_found(error):
                raise FileNotFoundError(str(where)) from None
            raise
        return cast(bytes, response["Body"].read()), str(response["ETag"])

    def write_if_match(self, path: Location, data: bytes, tag: str) -> str | None:
        """A conditional put (``If-Match: <tag>``): 412 when the object was rewritten, 404 when it
        is gone (None); a 409 (a concurrent conditional request on the key) is retried."""
        where = _object(path)
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                with _refusals("PutObject", where):
                    response = self.client.put_object(
                        Bucket=where.authority, Key=where.key, Body=data, IfMatch=tag
                    )
            except self.client.exceptions.ClientError as error:
                if _error_code(error) == "PreconditionFailed" or _status(error) == 412 or _not_found(error):
                    return None
                if _status(error) != 409 or attempt == CONFLICT_RETRIES:
                    raise
                time.sleep(0.05 * 2**attempt)
            else:
                return str(response["ETag"])
        raise AssertionError("unreachable")

    def write_new(self, path: Location, data: bytes) -> bool:
        """A conditional put (``If-None-Match: *``): S3 answers 412 when the key exists, and 409
        when a concurrent conditional request on it was in flight; that one is retried."""
        where = _object(path)
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                with _refusals("PutObject", where):
                    self.client.put_object(Bucket=where.authority, Key=where.key, Body=data, IfNoneMatch="*")
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
    def open_write(self, path: Location, *, durable: bool = True) -> Iterator[BinaryIO]:
        writer = _PartWriter(self.client, _object(path))
        try:
            yield cast(BinaryIO, writer)
            writer.finish()
        except BaseException:
            writer.abort()
            raise

    def exists(self, path: Location) -> bool:
        where = _object(path)
        try:
            with _refusals("HeadObject", where):
                self.client.head_object(Bucket=where.authority, Key=where.key)
        except self.client.exceptions.ClientError as error:
            if _not_found(error):
                return False
            raise
        return True

    def _keys(self, folder: ObjectPath) -> Iterator[tuple[str, int]]:
        """Every (key, size) under ``folder``, in key order."""
        prefix = f"{folder.key}/" if folder.key else ""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=folder.authority, Prefix=prefix)
        with _refusals("ListObjectsV2", ObjectPath(folder.scheme, folder.authority, prefix)):
            for page in pages:
                for item in page.get("Contents", []):
                    yield item["Key"], int(item["Size"])

    def list(self, folder: Location, pattern: str = "*") -> list[FileInfo]:
        folder = _object(folder)
        prefix = folder.key
        found = []
        for key, size in self._keys(folder):
            relative = key[len(prefix) + 1 :] if prefix else key
            if not relative or relative.endswith("/"):  # a "folder" marker object
                continue
            if relative.rsplit("/", 1)[-1].startswith("."):
                continue
            if glob_match(relative, pattern):
                found.append(FileInfo(ObjectPath(folder.scheme, folder.authority, key), size))
        return sorted(found, key=lambda f: f.path)

    def delete(self, path: Location) -> None:
        where = _object(path)
        with _refusals("DeleteObject", where):
            self.client.delete_object(Bucket=where.authority, Key=where.key)  # missing: no error

    def delete_many(self, paths: Iterable[Location]) -> None:
        """``DeleteObjects`` of up to ``DELETE_BATCH`` keys a request, bucket by bucket (a missing
        key is not an error)."""
        buckets: dict[tuple[str, str], builtins.list[str]] = {}
        for path in paths:
            where = _object(path)
            buckets.setdefault((where.scheme, where.authority), []).append(where.key)
        for (scheme, bucket), keys in buckets.items():
            self._delete_keys(ObjectPath(scheme, bucket, ""), keys)

    def _delete_keys(self, folder: ObjectPath, keys: builtins.list[str]) -> None:
        """Delete ``keys`` of ``folder``'s bucket, ``DELETE_BATCH`` a request."""
        for start in range(0, len(keys), DELETE_BATCH):
            batch = [{"Key": key} for key in keys[start : start + DELETE_BATCH]]
            with _refusals("DeleteObjects", folder):
                response = self.client.delete_objects(
                    Bucket=folder.authority, Delete={"Objects": batch, "Quiet": True}
                )
            if response.get("Errors"):
                failed = response["Errors"][0]
                where = ObjectPath(folder.scheme, folder.authority, failed.get("Key", ""))
                if failed.get("Code") == "AccessDenied":  # each key's own answer
                    raise _refusal("DeleteObjects", where, "AccessDenied")
                raise StorageError(f"could not delete {where}: {failed.get('Code', 'error')}")

    def delete_tree(self, folder: Location) -> None:
        folder = _object(folder)
        self._delete_keys(folder, [key for key, _ in self._keys(folder)])

    def publish(self, staged: Location, final: Location) -> bool:
        staged, final = _object(staged), _object(final)
        if not self._copy_staged(staged, final):
            return False
        with _refusals("DeleteObject", staged):
            self.client.delete_object(Bucket=staged.authority, Key=staged.key)
        return True

    def publish_many(self, moves: Sequence[tuple[Location, Location]]) -> builtins.list[bool]:
        """``CopyObject`` of each staged file, ``base.BATCH_THREADS`` at once, then
        ``DeleteObjects`` of the staged keys copied, 1,000 a request (a crash before the deletes
        leaves both copies: the rerun copies the same bytes again)."""
        pairs = [(_object(staged), _object(final)) for staged, final in moves]
        copied = base.in_parallel(lambda pair: self._copy_staged(*pair), pairs, base.BATCH_THREADS)
        self.delete_many([staged for (staged, _), done in zip(pairs, copied, strict=True) if done])
        return copied

    def _copy_staged(self, staged: ObjectPath, final: ObjectPath) -> bool:
        """Copy ``staged`` to ``final``: True when copied; False when ``staged`` is gone and
        ``final`` is there (published before a crash); a :class:`StorageError` when neither is."""
        try:
            with _refusals("CopyObject", final, source=staged):
                self.client.copy_object(
                    Bucket=final.authority, Key=final.key,
                    CopySource={"Bucket": staged.authority, "Key": staged.key},
                )  # fmt: skip
        except self.client.exceptions.ClientError as error:
            if not _not_found(error):
                raise
            if self.exists(final):
                return False
            raise StorageError(f"staged file {staged} vanished before it was published to {final}") from None
        return True

    def copy(self, source: Location, target: Location) -> None:
        source, target = _object(source), _object(target)
        with _refusals("CopyObject", target, source=source):
            self.client.copy_object(
                Bucket=target.authority, Key=target.key,
                CopySource={"Bucket": source.authority, "Key": source.key},
            )  # fmt: skip

    def commit(self, published: Iterable[Location]) -> None:
        """Nothing to do: S3 acknowledges a put, copy or delete only once it is durable."""


def _s3_storage(endpoint_url: str | None, region: str | None) -> S3Storage:
    return S3Storage(endpoint_url=endpoint_url, region=region)
