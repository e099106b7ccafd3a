"""The Azure store (ADLS Gen2 and Azure Blob Storage; Azurite) over the Blob API of
``azure-storage-blob`` (``pip install 'eventlake[azure]'``).

Paths are :class:`~eventlake.storage.location.ObjectPath`:
``abfss://container@account.dfs.core.windows.net/key`` (also ``abfs://``, and
``container@account.blob.core.windows.net``), or ``az://container/key``, whose account comes
from ``AZURE_STORAGE_CONNECTION_STRING`` or ``AZURE_STORAGE_ACCOUNT_NAME``. One store serves every
container of every account it has credentials for. Listing returns paths of the listed scheme.

Guarantees, as the interface asks:

- ``write`` and ``open_write`` are one upload of a block blob: one ``Put Blob``, or for a large
  file staged blocks and one ``Put Block List``, so the blob appears whole or not at all, and is
  durable when Azure answers. ``open_write`` buffers into a spooled temporary file (memory, then
  disk) and uploads only when the ``with`` block ends without an error.
- ``write_new`` is an upload with ``If-None-Match: *``: Azure answers 409 ``BlobAlreadyExists``
  (or 412 on a large upload's commit) when the blob exists; of two concurrent callers one wins.
- ``write_if_match`` is an upload with ``If-Match: <ETag>``: Azure answers 412 ``ConditionNotMet``
  when the blob was rewritten, 404 when it is gone.
- ``publish`` is a server-side ``Copy Blob`` then ``Delete Blob`` of the staged blob; a crash
  between the two leaves both, and the rerun copies again (the same bytes) and returns True. A copy
  within one account normally completes in the call; if Azure reports it pending, ``publish`` waits
  for it (while pending, the final blob reads as empty: Azure's own limit on ``Copy Blob``).
- ``commit`` does nothing: an acknowledged upload, copy or delete is already durable.
- ``private`` is ignored: blobs are private unless the container's access level says otherwise.
- On an ADLS Gen2 account (hierarchical namespace), the Blob API shows directories as empty blobs
  marked ``hdi_isfolder``: listings skip them, and ``delete_tree`` removes them, deepest first,
  after the files.

Credentials come from Azure's standard chain, in this order: ``AZURE_STORAGE_CONNECTION_STRING``;
else the account key ``AZURE_STORAGE_KEY`` (for the account the path names); else
``azure.identity.DefaultAzureCredential`` (managed identity, workload identity, a service
principal's ``AZURE_CLIENT_*`` variables, ``az login``) when azure-identity is installed. This
module never logs them and never puts them in an error or a repr. The blob endpoint comes from the
``endpoint_url`` argument (Azurite: ``http://127.0.0.1:PORT/devstoreaccount1``), else
``AZURE_STORAGE_BLOB_ENDPOINT``, else the connection string's ``BlobEndpoint``, else
``https://<account>.blob.core.windows.net``.
"""

from __future__ import annotations

import builtins
import os
import re
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, BinaryIO, cast
from urllib.parse import urlsplit

from eventlake.errors import DependencyError
from eventlake.storage import base
from eventlake.storage.base import FileInfo, Storage, StorageError, StoragePermissionsError, coalesce, cut
from eventlake.storage.keys import glob_match
from eventlake.storage.location import Location, ObjectPath

try:
    from azure.core import MatchConditions
    from azure.core.exceptions import (
        ClientAuthenticationError,
        HttpResponseError,
        ResourceExistsError,
        ResourceModifiedError,
        ResourceNotFoundError,
        ServiceRequestError,
        ServiceResponseError,
    )
    from azure.storage.blob import BlobServiceClient
except ImportError:  # the `azure` extra; local and S3 lakes never import this module
    raise DependencyError(
        "a lake on Azure (abfss://, az://) needs azure-storage-blob: pip install 'eventlake[azure]'"
    ) from None

SPOOL_BYTES = 16 * 1024 * 1024  # open_write keeps this much in memory before spilling to disk
DELETE_BATCH = 256  # a Blob Batch takes at most 256 sub-requests
COPY_TIMEOUT = 600.0  # seconds publish waits for a copy Azure reports as pending
SCHEMES = ("abfss", "abfs", "az")  # abfs(s): the Hadoop spelling; az: fsspec's (adlfs)
FOLDER_MARK = "hdi_isfolder"  # the metadata of a directory blob on an ADLS Gen2 account
# 3 to 63 lowercase letters, digits and single hyphens, starting and ending with a letter or digit
CONTAINER = re.compile(r"^[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}$")
CREDENTIALS_HELP = (
    "set AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_KEY (the account key), or give the "
    "machine a managed identity / a service principal (AZURE_CLIENT_ID, AZURE_TENANT_ID, "
    "AZURE_CLIENT_SECRET) / `az login` with azure-identity installed (pip install 'eventlake[azure]')"
)


def azure_endpoint(endpoint_url: str | None = None) -> str | None:
    """The blob endpoint every account is reached at: the setting, else
    ``AZURE_STORAGE_BLOB_ENDPOINT``, else None (each account's own, or the connection string's).
    Refused when it carries a query string: a SAS token belongs in the connection string."""
    endpoint = endpoint_url or os.environ.get("AZURE_STORAGE_BLOB_ENDPOINT") or None
    if endpoint and (urlsplit(endpoint).query or "?" in endpoint):
        shown = urlsplit(endpoint)._replace(query="", fragment="").geturl()
        raise StorageError(
            f"the Azure blob endpoint {shown} has a query string: give the endpoint alone, and a "
            "SAS token as SharedAccessSignature= in AZURE_STORAGE_CONNECTION_STRING"
        )
    return endpoint.rstrip("/") if endpoint else None


def _object(path: Location) -> ObjectPath:
    if not isinstance(path, ObjectPath) or path.scheme not in SCHEMES:
        raise StorageError(
            f"not an Azure location: {path} (expected abfss://container@account.dfs.core.windows.net/key)"
        )
    container = _container_name(path)
    if not CONTAINER.match(container):
        raise StorageError(
            f"{path}: {container!r} is not an Azure container name (3 to 63 lowercase letters, "
            "digits and single hyphens)"
        )
    return path


def _file(path: Location) -> ObjectPath:
    where = _object(path)
    if not where.key:
        raise StorageError(f"{where} names a container, not a file")
    return where


def _container_name(where: ObjectPath) -> str:
    return where.authority.partition("@")[0]


def _host(where: ObjectPath) -> str:
    """``account.dfs.core.windows.net`` of ``container@account.dfs.core.windows.net``; '' for
    ``az://container`` (the account then comes from the environment)."""
    _, at, host = where.authority.partition("@")
    return host if at else ""


def _account_url(host: str) -> str:
    """The blob endpoint of an account: ``account.dfs.<suffix>`` → ``https://account.blob.<suffix>``."""
    if "." not in host:
        return f"https://{host}.blob.core.windows.net"
    return "https://" + host.replace(".dfs.", ".blob.", 1)


def _code(error: Exception) -> str:  # of an azure-core HttpResponseError
    code = getattr(error, "error_code", None)
    code = getattr(code, "value", code)  # the SDK's StorageErrorCode enum, or a str
    if not code and getattr(error, "response", None) is not None:
        code = error.response.headers.get("x-ms-error-code")  # type: ignore[attr-defined]
    return str(code or "")


def _status(error: Exception) -> int:
    return int(getattr(error, "status_code", None) or 0)


def _is_folder(metadata: dict[str, str] | None) -> bool:
    return (metadata or {}).get(FOLDER_MARK, "").lower() == "true"


def _connection_settings() -> dict[str, str]:
    """``AZURE_STORAGE_CONNECTION_STRING`` as ``{lowercased name: value}``; {} when unset."""
    settings = {}
    for part in os.environ.get("AZURE_STORAGE_CONNECTION_STRING", "").split(";"):
        name, equals, value = part.partition("=")
        if equals and name.strip():
            settings[name.strip().lower()] = value.strip()
    return settings


class AzureStorage(Storage):
    """Every container of the Azure accounts the credential chain reaches. Pickled by its settings
    (Spark ships it to executors, which build their own clients from their own credential chain)."""

    def __init__(self, *, endpoint_url: str | None = None) -> None:
        self.endpoint_url = azure_endpoint(endpoint_url)
        self._clients: dict[str, Any] = {}  # by account host ('' for az://): BlobServiceClient
        self._sources: dict[str, tuple[str, str]] = {}  # by account host: (credential source, account)
        self._identity: Any = None  # one DefaultAzureCredential for every account

    def __reduce__(self) -> tuple[Any, ...]:
        return (_azure_storage, (self.endpoint_url,))

    def __repr__(self) -> str:
        return f"AzureStorage(endpoint_url={self.endpoint_url!r})"

    # -- clients and errors ---------------------------------------------------------------------

    def _service(self, where: ObjectPath) -> Any:
        host = _host(where)
        client = self._clients.get(host)
        if client is None:
            client = self._clients[host] = self._connect(where, host)
        return client

    def _connect(self, where: ObjectPath, host: str) -> Any:
        """A client for the account of ``host``, with the first credential of the chain."""
        account = host.split(".")[0]
        settings = _connection_settings()
        if settings:
            named = settings.get("accountname", "")
            if account and named and named != account:
                raise StorageError(
                    f"{where} is in the storage account {account}, but AZURE_STORAGE_CONNECTION_STRING "
                    f"is for {named}: use a connection string of {account}, or unset it to use "
                    "AZURE_STORAGE_KEY or a managed identity"
                )
            account = account or named
            if settings.get("accountkey") and account:
                credential: Any = {"account_name": account, "account_key": settings["accountkey"]}
            elif settings.get("sharedaccesssignature"):
                credential = settings["sharedaccesssignature"]
            else:
                raise StorageError(
                    "AZURE_STORAGE_CONNECTION_STRING has no AccountName with an AccountKey, nor a "
                    "SharedAccessSignature: give one of them"
                )
            protocol = settings.get("defaultendpointsprotocol", "https")
            suffix = settings.get("endpointsuffix", "core.windows.net")
            endpoint = (
                self.endpoint_url
                or settings.get("blobendpoint")
                or (f"{protocol}://{account}.blob.{suffix}" if account else "")
            )
            if not endpoint:
                raise StorageError(
                    "AZURE_STORAGE_CONNECTION_STRING names no AccountName nor BlobEndpoint: give one"
                )
            source = "AZURE_STORAGE_CONNECTION_STRING"
        else:
            account = (
                account
                or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
                or os.environ.get("AZURE_STORAGE_ACCOUNT", "")
            )
            if not account:
                raise StorageError(
                    f"{where} names no storage account: write "
                    f"abfss://{_container_name(where)}@ACCOUNT.dfs.core.windows.net/{where.key}, or set "
                    "AZURE_STORAGE_ACCOUNT_NAME (or AZURE_STORAGE_CONNECTION_STRING)"
                )
            key = os.environ.get("AZURE_STORAGE_KEY")
            if key:
                credential, source = {"account_name": account, "account_key": key}, "AZURE_STORAGE_KEY"
            else:
                credential, source = self._default_credential(account), "DefaultAzureCredential"
            endpoint = self.endpoint_url or _account_url(host or account)
        self._sources[host] = (source, account)
        return BlobServiceClient(endpoint, credential=credential)

    def _default_credential(self, account: str) -> Any:
        if self._identity is None:
            try:
                from azure.identity import DefaultAzureCredential
            except ImportError:
                raise StorageError(
                    f"no credentials for the Azure storage account {account}: {CREDENTIALS_HELP}"
                ) from None
            self._identity = DefaultAzureCredential()
        return self._identity

    def _blob(self, where: ObjectPath) -> Any:
        return self._service(where).get_blob_client(_container_name(where), where.key)

    def _container(self, where: ObjectPath) -> Any:
        return self._service(where).get_container_client(_container_name(where))

    def _refusal(self, call: str, where: ObjectPath, answer: str) -> StoragePermissionsError:
        """Azure's 401/403 to ``call`` on ``where``: which credentials, and the role they need."""
        host, container = _host(where), _container_name(where)
        source, account = self._sources.get(host, ("the credential chain", host.split(".")[0]))
        return StoragePermissionsError(
            "Azure", call, str(where), answer,
            f"check the credentials from {source} for the storage account {account}, and that they "
            f"hold the role Storage Blob Data Contributor on the container {container}; else "
            f"{CREDENTIALS_HELP}",
        )  # fmt: skip

    @contextmanager
    def _refusals(self, where: ObjectPath, call: str) -> Iterator[None]:
        """Azure's answers to ``call`` (an operation of the Blob API) that are the set-up's fault
        (credentials, roles, a missing container, an unreachable endpoint), as a
        :class:`StorageError` that names the fix and carries no credential (the SDK's own messages
        may show a request's URL, with a SAS token); a 401/403 as a
        :class:`StoragePermissionsError` (``insufficient_permissions``)."""
        try:
            yield
        except (ClientAuthenticationError, HttpResponseError) as error:
            # ClientAuthenticationError: 403 AuthenticationFailed, or no identity at all
            if _code(error) == "ContainerNotFound":
                host, container = _host(where), _container_name(where)
                account = self._sources.get(host, ("", host.split(".")[0]))[1]
                raise StorageError(
                    f"{where}: the container {container} does not exist in the storage account "
                    f"{account}: create it (az storage container create --name {container})"
                ) from None
            if isinstance(error, ClientAuthenticationError) or _status(error) in (401, 403):
                answer = _code(error) or f"{_status(error) or type(error).__name__}"
                raise self._refusal(call, where, answer) from None
            raise
        except (ServiceRequestError, ServiceResponseError) as error:
            client = self._clients.get(_host(where))
            endpoint = client.url.split("?")[0] if client is not None else _host(where)
            raise StorageError(
                f"cannot reach the Azure blob endpoint {endpoint} ({type(error).__name__}): check the "
                "endpoint setting (AZURE_STORAGE_BLOB_ENDPOINT) and the network"
            ) from None

    # -- the interface --------------------------------------------------------------------------

    def read(self, path: Location) -> bytes:
        where = _file(path)
        with self._refusals(where, "Get Blob"):
            try:
                return cast(bytes, self._blob(where).download_blob().readall())
            except ResourceNotFoundError as error:
                if _code(error) == "ContainerNotFound":
                    raise
                raise FileNotFoundError(str(where)) from None

    def read_ranges(self, path: Location, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Ranged downloads (``x-ms-range``), ranges closer than
        ``base.RANGE_GAP`` in one,
        ``base.RANGE_THREADS`` at a time."""
        where = _file(path)
        spans = coalesce(ranges, base.RANGE_GAP, base.RANGE_SPAN)
        blob = self._blob(where)

        def get(span: tuple[int, int]) -> bytes:
            with self._refusals(where, "Get Blob"):
                try:
                    return cast(bytes, blob.download_blob(offset=span[0], length=span[1]).readall())
                except ResourceNotFoundError as error:
                    if _code(error) == "ContainerNotFound":
                        raise
                    raise FileNotFoundError(str(where)) from None
                except HttpResponseError as error:
                    if _status(error) == 416:  # the span starts past the end
                        return b""
                    raise

        return cut(spans, base.in_parallel(get, spans, base.RANGE_THREADS), ranges)

    def write(self, path: Location, data: bytes, *, private: bool = False) -> None:
        where = _file(path)
        with self._refusals(where, "Put Blob"):
            self._blob(where).upload_blob(data, overwrite=True)

    def read_tagged(self, path: Location) -> tuple[bytes, str]:
        where = _file(path)
        with self._refusals(where, "Get Blob"):
            try:
                download = self._blob(where).download_blob()
                return cast(bytes, download.readall()), str(download.properties.etag)
            except ResourceNotFoundError as error:
                if _code(error) == "ContainerNotFound":
                    raise
                raise FileNotFoundError(str(where)) from None

    def write_if_match(self, path: Location, data: bytes, tag: str) -> str | None:
        """An upload with ``If-Match: <tag>``: 412 ``ConditionNotMet`` when the blob was rewritten,
        404 when it is gone (None)."""
        where = _file(path)
        with self._refusals(where, "Put Blob"):
            try:
                answer = self._blob(where).upload_blob(
                    data, overwrite=True, etag=tag, match_condition=MatchConditions.IfNotModified
                )
            except ResourceModifiedError:
                return None
            except ResourceNotFoundError as error:
                if _code(error) == "ContainerNotFound":
                    raise
                return None
            except HttpResponseError as error:
                if _status(error) == 412:
                    return None
                raise
        return str(answer["etag"])

    def write_new(self, path: Location, data: bytes) -> bool:
        """An upload with ``If-None-Match: *``: 409 ``BlobAlreadyExists`` (or 412 on the commit of
        a large upload) when the blob exists."""
        where = _file(path)
        with self._refusals(where, "Put Blob"):
            try:
                self._blob(where).upload_blob(data, overwrite=False)
            except (ResourceExistsError, ResourceModifiedError) as error:
                if _code(error) in ("BlobAlreadyExists", "ConditionNotMet") or _status(error) == 412:
                    return False
                raise
        return True

    @contextmanager
    def open_write(self, path: Location, *, durable: bool = True) -> Iterator[BinaryIO]:
        where = _file(path)
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as buffer:
            yield cast(BinaryIO, buffer)
            size = buffer.seek(0, os.SEEK_END)
            buffer.seek(0)
            with self._refusals(where, "Put Blob"):
                self._blob(where).upload_blob(buffer, length=size, overwrite=True)

    def exists(self, path: Location) -> bool:
        """Whether a file is there (an ADLS Gen2 directory is not a file)."""
        where = _file(path)
        with self._refusals(where, "Get Blob Properties"):
            try:
                properties = self._blob(where).get_blob_properties()
            except ResourceNotFoundError as error:
                if _code(error) == "ContainerNotFound":
                    raise
                return False
        return not _is_folder(properties.metadata)

    def _blobs(self, folder: ObjectPath) -> Iterator[tuple[str, int, bool]]:
        """Every (name, size, is a directory) under ``folder``, in name order."""
        prefix = f"{folder.key}/" if folder.key else ""
        with self._refusals(folder, "List Blobs"):
            for blob in self._container(folder).list_blobs(name_starts_with=prefix, include=["metadata"]):
                yield blob.name, int(blob.size or 0), _is_folder(blob.metadata)

    def list(self, folder: Location, pattern: str = "*") -> list[FileInfo]:
        folder = _object(folder)
        prefix = folder.key
        found = []
        for name, size, is_folder in self._blobs(folder):
            relative = name[len(prefix) + 1 :] if prefix else name
            if is_folder or not relative or relative.endswith("/"):  # directories and their markers
                continue
            if relative.rsplit("/", 1)[-1].startswith("."):
                continue
            if glob_match(relative, pattern):
                found.append(FileInfo(ObjectPath(folder.scheme, folder.authority, name), size))
        return sorted(found, key=lambda f: f.path)

    def delete(self, path: Location) -> None:
        where = _file(path)
        with self._refusals(where, "Delete Blob"):
            try:
                self._blob(where).delete_blob()
            except ResourceNotFoundError as error:
                if _code(error) == "ContainerNotFound":
                    raise

    def delete_many(self, paths: Iterable[Location]) -> None:
        """Blob Batch requests of up to 256 deletes, container by container (one by one where a
        batch is refused); a missing file is not an error."""
        containers: dict[tuple[str, str], builtins.list[str]] = {}
        for path in paths:
            where = _file(path)
            containers.setdefault((where.scheme, where.authority), []).append(where.key)
        for (scheme, authority), names in containers.items():
            for start in range(0, len(names), DELETE_BATCH):
                self._delete_batch(ObjectPath(scheme, authority, ""), names[start : start + DELETE_BATCH])

    def delete_tree(self, folder: Location) -> None:
        """The files in Blob Batch requests of 256 deletes (one by one where a batch is refused:
        older ADLS Gen2 accounts), then ADLS Gen2's directory blobs, deepest first, then the
        folder's own directory blob if it has one."""
        folder = _object(folder)
        files: builtins.list[str] = []
        folders: builtins.list[str] = []
        for name, _, is_folder in self._blobs(folder):
            (folders if is_folder else files).append(name)
        for start in range(0, len(files), DELETE_BATCH):
            self._delete_batch(folder, files[start : start + DELETE_BATCH])
        if folder.key and self._is_directory(folder):
            folders.append(folder.key)
        for name in sorted(folders, key=lambda n: n.count("/"), reverse=True):
            self.delete(ObjectPath(folder.scheme, folder.authority, name))

    def _delete_batch(self, folder: ObjectPath, names: builtins.list[str]) -> None:
        with self._refusals(folder, "Blob Batch (Delete Blob)"):
            try:
                responses = list(self._container(folder).delete_blobs(*names, raise_on_any_failure=False))
            except HttpResponseError as error:
                if _status(error) in (401, 403) or _code(error) == "ContainerNotFound":
                    raise
                responses = []  # the batch itself refused: delete one by one
        if not responses:
            for name in names:
                self.delete(ObjectPath(folder.scheme, folder.authority, name))
            return
        for name, response in zip(names, responses, strict=True):
            if response.status_code not in (200, 202, 204, 404):  # 404: gone already
                code = response.headers.get("x-ms-error-code", "") or response.status_code
                where = ObjectPath(folder.scheme, folder.authority, name)
                if response.status_code in (401, 403):
                    raise self._refusal("Blob Batch (Delete Blob)", where, str(code))
                raise StorageError(f"could not delete {where}: {code}")

    def _is_directory(self, where: ObjectPath) -> bool:
        with self._refusals(where, "Get Blob Properties"):
            try:
                return _is_folder(self._blob(where).get_blob_properties().metadata)
            except ResourceNotFoundError as error:
                if _code(error) == "ContainerNotFound":
                    raise
                return False

    def publish(self, staged: Location, final: Location) -> bool:
        staged, final = _file(staged), _file(final)
        if not self._copy_staged(staged, final):
            return False
        self.delete(staged)
        return True

    def publish_many(self, moves: Sequence[tuple[Location, Location]]) -> builtins.list[bool]:
        """Each staged file copied, one at a time, then the staged copies deleted in Blob Batch
        requests (a crash before the deletes leaves both: the rerun copies the same bytes again)."""
        pairs = [(_file(staged), _file(final)) for staged, final in moves]
        copied = [self._copy_staged(staged, final) for staged, final in pairs]
        self.delete_many([staged for (staged, _), done in zip(pairs, copied, strict=True) if done])
        return copied

    def _copy_staged(self, staged: ObjectPath, final: ObjectPath) -> bool:
        """Copy ``staged`` to ``final`` (and wait for it): True when copied; False when ``staged``
        is gone and ``final`` is there (published before a crash); a :class:`StorageError` when
        neither is."""
        source, target = self._blob(staged), self._blob(final)
        with self._refusals(final, "Copy Blob"):
            try:
                copy = target.start_copy_from_url(source.url)
            except ResourceNotFoundError as error:
                if _code(error) == "ContainerNotFound":
                    raise
                if self.exists(final):
                    return False
                raise StorageError(
                    f"staged file {staged} vanished before it was published to {final}"
                ) from None
            if copy.get("copy_status") != "success":
                self._await_copy(target, staged, final)
        return True

    def _await_copy(self, target: Any, staged: ObjectPath, final: ObjectPath) -> None:
        """Wait for a copy Azure reports as pending; raise if it fails or outlasts COPY_TIMEOUT."""
        deadline, pause = time.monotonic() + COPY_TIMEOUT, 0.05
        while True:
            copy = target.get_blob_properties().copy
            if copy.status == "success":
                return
            if copy.status != "pending":
                raise StorageError(f"copying {staged} to {final} {copy.status}: {copy.status_description}")
            if time.monotonic() > deadline:
                raise StorageError(f"copying {staged} to {final} still pending after {COPY_TIMEOUT:.0f} s")
            time.sleep(pause)
            pause = min(pause * 2, 2.0)

    def commit(self, published: Iterable[Location]) -> None:
        """Nothing to do: Azure acknowledges an upload, copy or delete only once it is durable."""


def _azure_storage(endpoint_url: str | None) -> AzureStorage:
    return AzureStorage(endpoint_url=endpoint_url)
