"""The storage interface, run against every back end: the local disk, S3 (boto3 against a real
moto server on 127.0.0.1) and Azure (azure-storage-blob against a real Azurite on 127.0.0.1).
Whole-file writes, listing without temporaries, idempotent publishing, create-if-absent. Each back
end gets a fresh root: ``tmp_path`` on disk, a unique key prefix in the bucket or the container.
What only the local disk can show (no temporary left in a folder, folders removed, file modes) is
checked in the local-only tests at the end."""

from __future__ import annotations

import ctypes
import errno
import os
import pickle
import stat
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from eventlake.errors import ConfigError
from eventlake.storage import (
    LocalStorage,
    Storage,
    StorageError,
    StoragePermissionsError,
    load_storage,
    storage_scheme,
)
from eventlake.storage.local import make_dirs, write_atomic
from eventlake.storage.location import Location, ObjectPath

from .catalog.servers import AWS_ENV, AZURITE_ACCOUNT, AZURITE_KEY, Azurite, Moto

BUCKET = "eventlake-storage-test"
CONTAINER = "eventlake-storage-test"


@pytest.fixture(scope="session")
def s3_storage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Storage]:
    """An S3Storage on a bucket of a moto server of its own, with moto's fake credentials in the
    environment (boto3's default chain) while the session runs."""
    pytest.importorskip("boto3")
    from eventlake.storage.s3 import S3Storage

    server = Moto.start(tmp_path_factory.mktemp("moto-s3") / "moto.log")
    try:
        with pytest.MonkeyPatch.context() as env:
            for key, value in {**AWS_ENV, "AWS_DEFAULT_REGION": "us-east-1"}.items():
                env.setenv(key, value)
            storage = S3Storage(endpoint_url=server.endpoint)
            storage.client.create_bucket(Bucket=BUCKET)
            yield storage
    finally:
        server.stop()


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    """An Azurite blob service of its own, with the container CONTAINER."""
    blob = pytest.importorskip("azure.storage.blob")
    server = Azurite.start(tmp_path_factory.mktemp("azurite") / "azurite.log")
    try:
        blob.BlobServiceClient.from_connection_string(server.connection_string).create_container(CONTAINER)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def azure_storage(azurite: Azurite) -> Iterator[Storage]:
    """An AzureStorage on Azurite, with the account key in the environment (AZURE_STORAGE_KEY, the
    second link of the chain) while the session runs."""
    from eventlake.storage.azure import AzureStorage

    with pytest.MonkeyPatch.context() as env:
        env.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
        env.setenv("AZURE_STORAGE_KEY", AZURITE_KEY)
        yield AzureStorage(endpoint_url=azurite.endpoint)


def azure_root() -> ObjectPath:
    return ObjectPath.parse(
        f"abfss://{CONTAINER}@{AZURITE_ACCOUNT}.dfs.core.windows.net/t-{uuid.uuid4().hex}"
    )


@pytest.fixture(
    params=[
        "local",
        pytest.param("s3", marks=pytest.mark.integration),
        pytest.param("azure", marks=pytest.mark.integration),
    ]
)
def backend(request, tmp_path) -> tuple[Storage, Location]:
    """A store and a fresh, empty root on it."""
    if request.param == "local":
        return LocalStorage(), tmp_path
    if request.param == "s3":
        return request.getfixturevalue("s3_storage"), ObjectPath.parse(f"s3://{BUCKET}/t-{uuid.uuid4().hex}")
    return request.getfixturevalue("azure_storage"), azure_root()


@pytest.fixture
def storage(backend) -> Storage:
    return backend[0]


@pytest.fixture
def root(backend) -> Location:
    return backend[1]


def names(storage: Storage, folder: Location, pattern: str = "**/*") -> list[str]:
    return [f.path.relative_to(folder).as_posix() for f in storage.list(folder, pattern)]


def test_write_replaces_whole(storage, root):
    path = root / "state" / "state.json"
    storage.write(path, b"old")
    storage.write(path, b"new content")
    assert storage.read(path) == b"new content"
    assert names(storage, root) == ["state/state.json"]
    assert [f.size for f in storage.list(root / "state")] == [len(b"new content")]


def test_read_of_a_missing_file_is_file_not_found(storage, root):
    with pytest.raises(FileNotFoundError):
        storage.read(root / "nothing")
    assert not storage.exists(root / "nothing")


def test_a_streamed_write_appears_whole_when_the_block_ends(storage, root, monkeypatch):
    if hasattr(sys.modules[type(storage).__module__], "SPOOL_BYTES"):  # Azure: spill the buffer to disk
        monkeypatch.setattr(sys.modules[type(storage).__module__], "SPOOL_BYTES", 1024)
    path = root / "day=1" / "part.parquet"
    with storage.open_write(path) as handle:
        for chunk in range(3):
            handle.write(bytes([chunk]) * 1000)
        assert not storage.exists(path)
    assert storage.read(path) == b"\x00" * 1000 + b"\x01" * 1000 + b"\x02" * 1000


def test_an_aborted_streamed_write_leaves_nothing(storage, root):
    path = root / "part.parquet"
    with pytest.raises(RuntimeError), storage.open_write(path) as handle:
        handle.write(b"half")
        raise RuntimeError("worker died")
    assert not storage.exists(path) and storage.list(root, "**/*") == []


def test_list_matches_a_pattern_sorted_and_hides_temporaries(storage, root):
    for name in ["b/2.json", "a/1.json", "a/.1.json.123.tmp", "a/x.txt"]:
        storage.write(root / name, b"{}")
    assert names(storage, root, "*/*.json") == ["a/1.json", "b/2.json"]
    assert storage.list(root / "missing") == []


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("*", ["top.json"]),
        ("*.json", ["top.json"]),
        ("*/*", ["a/1.json", "a/x.txt", "b/2.json"]),
        ("**/*", ["a/1.json", "a/deep/er/3.json", "a/x.txt", "b/2.json", "top.json"]),
        ("**/*.json", ["a/1.json", "a/deep/er/3.json", "b/2.json", "top.json"]),
        ("a/**/*.json", ["a/1.json", "a/deep/er/3.json"]),
        ("a/*/*/*.json", ["a/deep/er/3.json"]),
        ("?/[12].json", ["a/1.json", "b/2.json"]),
        ("nothing/*", []),
    ],
)
def test_list_glob_semantics_are_the_same_on_every_store(storage, root, pattern, expected):
    for name in ["top.json", "a/1.json", "a/x.txt", "a/deep/er/3.json", "b/2.json", "b/.hidden"]:
        storage.write(root / name, b"{}")
    assert names(storage, root, pattern) == expected


def test_publish_moves_once_and_a_repeat_is_a_no_op(storage, root):
    staged, final = root / "stage" / "f", root / "lake" / "day=1" / "f"
    storage.write(staged, b"rows")
    assert storage.publish(staged, final) is True
    assert storage.publish(staged, final) is False  # a rerun after a crash
    storage.commit([final])
    assert storage.read(final) == b"rows" and not storage.exists(staged)
    with pytest.raises(StorageError, match="vanished"):
        storage.publish(root / "stage" / "gone", root / "lake" / "gone")


def test_publish_replaces_what_is_at_the_final_place(storage, root):
    staged, final = root / "stage" / "f", root / "lake" / "f"
    storage.write(final, b"old")
    storage.write(staged, b"new")
    assert storage.publish(staged, final) is True
    assert storage.read(final) == b"new" and names(storage, root) == ["lake/f"]


def test_publish_many_moves_each_file_and_a_rerun_after_a_crash_completes_it(storage, root):
    moves = [(root / "stage" / f"f{i}", root / "lake" / f"hr={i % 2}" / f"f{i}") for i in range(5)]
    for i, (staged, _) in enumerate(moves):
        storage.write(staged, b"rows %d" % i)
    storage.write(moves[0][1], b"old")  # replaced
    assert storage.publish_many(moves) == [True] * 5
    assert [storage.read(final) for _, final in moves] == [b"rows %d" % i for i in range(5)]
    assert not storage.list(root / "stage", "**/*")
    # killed between the copies and the deletes of their staged copies: both are there
    storage.write(moves[1][0], b"rows 1")
    assert storage.publish_many(moves) == [False, True, False, False, False]
    storage.commit(final for _, final in moves)
    assert names(storage, root) == [
        "lake/hr=0/f0",
        "lake/hr=0/f2",
        "lake/hr=0/f4",
        "lake/hr=1/f1",
        "lake/hr=1/f3",
    ]
    with pytest.raises(StorageError, match="vanished"):
        storage.publish_many([(root / "stage" / "gone", root / "lake" / "gone")])


def test_delete_many_deletes_every_path_and_accepts_missing_ones(storage, root):
    paths = [root / "t" / f"day={i % 3}" / f"f{i}" for i in range(7)]
    for path in [*paths, root / "keep"]:
        storage.write(path, b"x")
    storage.delete_many([*paths, root / "t" / "missing"])
    storage.delete_many(paths)
    assert names(storage, root) == ["keep"]


def _s3_requests(storage: Storage, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """The S3 client's object writes from now on: (call, bytes sent)."""
    sent: list[tuple[str, int]] = []
    client = storage.client  # type: ignore[attr-defined]
    for call in ("put_object", "upload_part", "create_multipart_upload", "complete_multipart_upload",
                 "abort_multipart_upload"):  # fmt: skip

        def recorded(
            *args: object, _call: str = call, _real: object = getattr(client, call), **kwargs: object
        ):
            body = kwargs.get("Body", b"")
            sent.append((_call, len(body) if isinstance(body, bytes) else -1))
            return _real(*args, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(client, call, recorded)
    return sent


def test_s3_streams_a_big_object_in_parts_holding_one_part(s3_storage, monkeypatch):
    """Past one part, a streamed write is a multipart upload sent as it is written (S3 takes at
    most 5 GB in one put: a merged index day of a busy source is more), completed at the end."""
    from eventlake.storage import s3

    monkeypatch.setattr(s3, "PART_BYTES", 5 * 1024 * 1024, raising=False)  # S3's smallest part
    sent = _s3_requests(s3_storage, monkeypatch)
    path = ObjectPath("s3", BUCKET, f"{uuid.uuid4().hex}/merged.keys")
    chunk = bytes(range(256)) * 4096  # 1 MiB
    with s3_storage.open_write(path) as handle:
        for n in range(12):
            handle.write(chunk)
            if n == 7:  # a part is sent once written, not at the end
                assert [call for call, _ in sent] == ["create_multipart_upload", "upload_part"]
        assert not s3_storage.exists(path)
    assert [call for call, _ in sent] == [
        "create_multipart_upload",
        *["upload_part"] * 3,
        "complete_multipart_upload",
    ]
    assert max(size for _, size in sent) <= s3.PART_BYTES
    assert s3_storage.read(path) == chunk * 12

    sent.clear()
    with pytest.raises(RuntimeError), s3_storage.open_write(path.parent / "aborted.keys") as handle:
        handle.write(chunk * 6)
        raise RuntimeError("killed")
    assert [call for call, _ in sent] == ["create_multipart_upload", "upload_part", "abort_multipart_upload"]
    assert not s3_storage.exists(path.parent / "aborted.keys")
    sent.clear()
    with s3_storage.open_write(path.parent / "small.json") as handle:
        handle.write(b"{}")
    assert sent == [("put_object", 2)]


def test_s3_publishes_many_with_copies_then_delete_objects_in_batches(s3_storage, monkeypatch):
    from eventlake.storage import s3

    root = ObjectPath.parse(f"s3://{BUCKET}/t-{uuid.uuid4().hex}")
    calls: list[str] = []
    count = lambda model, **_: calls.append(model.name)  # noqa: E731
    s3_storage.client.meta.events.register("before-call.s3", count)
    monkeypatch.setattr(s3, "DELETE_BATCH", 2)
    try:
        moves = [(root / "stage" / f"f{i}", root / "lake" / f"f{i}") for i in range(5)]
        for staged, _ in moves:
            s3_storage.write(staged, b"rows")
        calls.clear()
        assert s3_storage.publish_many(moves) == [True] * 5
        assert sorted(calls) == ["CopyObject"] * 5 + ["DeleteObjects"] * 3  # 2 + 2 + 1 keys
        calls.clear()
        s3_storage.delete_many([final for _, final in moves])
        assert calls == ["DeleteObjects"] * 3
    finally:
        s3_storage.client.meta.events.unregister("before-call.s3", count)


def test_delete_and_delete_tree_accept_missing_paths(storage, root):
    storage.write(root / "t" / "a", b"1")
    storage.write(root / "t" / "deep" / ".hidden", b"2")
    storage.write(root / "keep", b"3")
    storage.delete(root / "t" / "a")
    storage.delete(root / "t" / "a")
    assert not storage.exists(root / "t" / "a")
    storage.delete_tree(root / "t")
    storage.delete_tree(root / "t")
    assert not storage.exists(root / "t" / "deep" / ".hidden")
    assert names(storage, root) == ["keep"]


def test_write_new_creates_only_when_nothing_is_there(storage, root):
    lease = root / "_state" / "lease"
    assert storage.write_new(lease, b"holder-1") is True
    assert storage.write_new(lease, b"holder-2") is False
    assert storage.read(lease) == b"holder-1"
    assert names(storage, root) == ["_state/lease"]
    storage.delete(lease)
    assert storage.write_new(lease, b"holder-2") is True
    assert storage.read(lease) == b"holder-2"


def test_write_if_match_replaces_only_the_version_read(storage, root):
    """The compare-and-swap a lease's renewal, release and takeover stand on: of two writers that
    read one version, the first replaces it and the second is refused; a deleted file is not
    brought back. (moto and Azurite both honour If-Match on a put: the S3 and Azure runs of this
    test fail if a store ignored it.)"""
    lease = root / "_state" / "lease"
    storage.write(lease, b"holder-1")
    data, tag = storage.read_tagged(lease)
    assert data == b"holder-1"
    renewed = storage.write_if_match(lease, b"holder-1 renewed", tag)
    assert renewed is not None and renewed != tag
    assert storage.write_if_match(lease, b"taken over", tag) is None  # the version read is gone
    assert storage.read_tagged(lease) == (b"holder-1 renewed", renewed)
    taken = storage.write_if_match(lease, b"taken over", renewed)
    assert taken is not None and storage.read(lease) == b"taken over"
    storage.delete(lease)
    assert storage.write_if_match(lease, b"brought back", taken) is None
    assert not storage.exists(lease)
    assert names(storage, root) == []
    with pytest.raises(FileNotFoundError):
        storage.read_tagged(lease)


def test_read_ranges_returns_each_range_in_the_order_asked(storage, root, monkeypatch):
    from eventlake.storage import base

    monkeypatch.setattr(base, "RANGE_GAP", 8)  # object stores: some ranges share a request, some not
    data = bytes(range(256)) * 64  # 16 KiB
    storage.write(root / "index.keys", data)
    ranges = [(4000, 16), (0, 3), (10, 5), (16_380, 100), (5000, 0), (12, 2), (9000, 4096)]
    assert storage.read_ranges(root / "index.keys", ranges) == [
        data[o : o + n] for o, n in ranges
    ]  # the range past the end cut short there; overlapping ranges each whole
    assert storage.read_ranges(root / "index.keys", []) == []
    with pytest.raises(FileNotFoundError):
        storage.read_ranges(root / "missing.keys", [(0, 4)])


# -- the local disk only --------------------------------------------------------------------------


def test_local_writes_leave_no_temporary_file_in_the_folder(tmp_path):
    storage, folder = LocalStorage(), tmp_path / "state"
    storage.write(folder / "state.json", b"old")
    storage.write(folder / "state.json", b"new")
    with pytest.raises(RuntimeError), storage.open_write(folder / "part.parquet") as handle:
        handle.write(b"half")
        raise RuntimeError("worker died")
    assert storage.write_new(folder / "lease", b"1") and not storage.write_new(folder / "lease", b"2")
    assert sorted(p.name for p in folder.iterdir()) == ["lease", "state.json"]
    assert stat.S_IMODE((folder / "lease").stat().st_mode) == 0o644


def test_a_local_streamed_write_never_follows_a_link_planted_at_a_temporary_name(tmp_path):
    """Another user of a shared folder plants a symlink where a writer used to put its temporary
    (``.<name>.<pid>.tmp``, predictable): the writer must neither write through it nor publish it."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    folder = tmp_path / "lake"
    folder.mkdir()
    path = folder / "state.json"
    planted = folder / f".state.json.{os.getpid()}.tmp"
    planted.symlink_to(victim)
    with LocalStorage().open_write(path) as handle:
        handle.write(b"new")
    assert victim.read_bytes() == b"keep me"
    assert not path.is_symlink() and path.read_bytes() == b"new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_local_delete_tree_removes_the_folder(tmp_path):
    LocalStorage().write(tmp_path / "t" / "a", b"1")
    LocalStorage().delete_tree(tmp_path / "t")
    assert not (tmp_path / "t").exists()


def test_write_atomic_can_keep_a_file_private(tmp_path):
    path = tmp_path / "hive-site.xml"
    write_atomic(path, b"<password/>", mode=0o600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# -- the object stores only ----------------------------------------------------------------------


def test_object_stores_refuse_a_location_they_do_not_hold():
    pytest.importorskip("boto3")
    pytest.importorskip("azure.storage.blob")
    from eventlake.storage.azure import AzureStorage
    from eventlake.storage.s3 import S3Storage

    with pytest.raises(StorageError, match=r"not an S3 location: lake/x"):
        S3Storage().read(Path("lake/x"))
    with pytest.raises(StorageError, match=r"not an Azure location: s3://bk/x.*abfss://"):
        AzureStorage().read(ObjectPath.parse("s3://bk/x"))
    with pytest.raises(StorageError, match=r"'My_Lake' is not an Azure container name"):
        AzureStorage().read(ObjectPath.parse("abfss://My_Lake@acct.dfs.core.windows.net/x"))


def test_s3_endpoint_comes_from_the_standard_environment(monkeypatch):
    pytest.importorskip("boto3")
    from eventlake.storage.s3 import S3Storage

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    assert S3Storage().endpoint_url == "http://127.0.0.1:1"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:2")
    assert S3Storage().endpoint_url == "http://127.0.0.1:2"
    assert S3Storage(endpoint_url="http://127.0.0.1:3").endpoint_url == "http://127.0.0.1:3"


def test_azure_endpoint_comes_from_the_setting_else_the_environment(monkeypatch):
    pytest.importorskip("azure.storage.blob")
    from eventlake.storage.azure import AzureStorage

    monkeypatch.setenv("AZURE_STORAGE_BLOB_ENDPOINT", "http://127.0.0.1:1/devstoreaccount1/")
    assert AzureStorage().endpoint_url == "http://127.0.0.1:1/devstoreaccount1"
    assert AzureStorage(endpoint_url="http://127.0.0.1:2/a").endpoint_url == "http://127.0.0.1:2/a"
    monkeypatch.setenv("AZURE_STORAGE_BLOB_ENDPOINT", "https://a.blob.core.windows.net/?sv=1&sig=SECRET")
    with pytest.raises(StorageError, match=r"https://a.blob.core.windows.net/ has a query string") as error:
        AzureStorage()
    assert "SECRET" not in str(error.value)


def test_object_stores_pickle_by_their_settings_and_never_show_a_credential(azurite, monkeypatch):
    """Spark ships a store to its executors: it travels as its settings, without a client or a
    credential, and works where it lands. No credential shows in a repr, a pickle or an error."""
    pytest.importorskip("boto3")
    from eventlake.storage.azure import AzureStorage
    from eventlake.storage.s3 import S3Storage

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA-NEVER-SHOWN")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-never-shown")
    s3 = S3Storage(endpoint_url="http://127.0.0.1:1", region="us-east-1")
    assert s3.client is not None  # built: holds the credentials
    shipped = pickle.dumps(s3)
    copy = pickle.loads(shipped)
    assert (copy.endpoint_url, copy.region, copy._client) == ("http://127.0.0.1:1", "us-east-1", None)
    for secret in ("AKIA-NEVER-SHOWN", "aws-secret-never-shown"):
        assert secret not in repr(s3) and secret.encode() not in shipped

    # a wrong account key: the error names where the key came from, never the key
    wrong = "A" * 20 + AZURITE_KEY[20:]
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    monkeypatch.setenv("AZURE_STORAGE_KEY", wrong)
    storage, path = AzureStorage(endpoint_url=azurite.endpoint), azure_root() / "f"
    with pytest.raises(
        StorageError, match=r"Azure refused Get Blob on .*check the credentials from AZURE_STORAGE_KEY"
    ) as error:
        storage.read(path)
    assert error.value.code == "insufficient_permissions"
    shipped = pickle.dumps(storage)
    assert wrong not in str(error.value) and wrong not in repr(storage) and wrong.encode() not in shipped

    # the right key where the copy lands: it builds its own client from its own environment
    monkeypatch.setenv("AZURE_STORAGE_KEY", AZURITE_KEY)
    copy = pickle.loads(shipped)
    assert copy.endpoint_url == azurite.endpoint and copy._clients == {}
    copy.write(path, b"shipped")
    assert pickle.loads(pickle.dumps(copy)).read(path) == b"shipped"
    assert AZURITE_KEY.encode() not in pickle.dumps(copy) and AZURITE_KEY not in repr(copy)


def test_an_azure_refusal_is_insufficient_permissions_naming_the_call_and_the_blob(azurite, monkeypatch):
    """A shared access signature that may read and list but not write: Azure's 403 to the write
    (AuthorizationPermissionMismatch) names the call, the blob and the role to grant."""
    from datetime import timedelta

    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    from eventlake.storage.azure import AzureStorage
    from eventlake.timestamps import now_utc

    root = azure_root()
    AzureStorage(endpoint_url=azurite.endpoint).write(root / "kept", b"1")  # the account key
    sas = generate_container_sas(
        AZURITE_ACCOUNT, CONTAINER, account_key=AZURITE_KEY,
        permission=ContainerSasPermissions(read=True, list=True), expiry=now_utc() + timedelta(hours=1),
    )  # fmt: skip
    monkeypatch.delenv("AZURE_STORAGE_KEY", raising=False)
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING", f"BlobEndpoint={azurite.endpoint};SharedAccessSignature={sas}"
    )
    storage = AzureStorage()
    assert storage.read(root / "kept") == b"1" and [f.path for f in storage.list(root)] == [root / "kept"]
    for attempt in (lambda: storage.write(root / "new", b"2"), lambda: storage.delete(root / "kept")):
        with pytest.raises(StoragePermissionsError) as error:
            attempt()
        refused = error.value
        assert refused.code == "insufficient_permissions" and isinstance(refused, StorageError)
        assert refused.call in ("Put Blob", "Delete Blob") and refused.resource.startswith(str(root))
        assert f"Azure refused {refused.call} on {refused.resource} (AuthorizationPermissionMismatch)" in str(
            refused
        )
        assert f"Storage Blob Data Contributor on the container {CONTAINER}" in str(refused)
        assert sas not in str(refused)


def test_azure_credentials_come_from_the_connection_string_else_say_what_to_set(azurite, monkeypatch):
    from eventlake.storage.azure import AzureStorage

    # az://container/key: the account and the endpoint come from the connection string
    monkeypatch.delenv("AZURE_STORAGE_KEY", raising=False)
    monkeypatch.delenv("AZURE_STORAGE_BLOB_ENDPOINT", raising=False)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    path = ObjectPath.parse(f"az://{CONTAINER}/t-{uuid.uuid4().hex}/f")
    storage = AzureStorage()
    storage.write(path, b"1")
    assert [f.path for f in storage.list(path.parent)] == [path]
    with pytest.raises(StorageError, match=r"account other.*AZURE_STORAGE_CONNECTION_STRING is for "):
        storage.read(ObjectPath.parse(f"abfss://{CONTAINER}@other.dfs.core.windows.net/f"))
    with pytest.raises(StorageError, match=r"the container absent does not exist.*create it") as error:
        storage.read(ObjectPath.parse("az://absent/f"))
    assert AZURITE_KEY not in str(error.value)

    # nothing in the chain (and no azure-identity): the error says what to set
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING")
    monkeypatch.setitem(sys.modules, "azure.identity", None)
    with pytest.raises(StorageError, match=r"no credentials for the Azure storage account acct: set "
                       r"AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_KEY"):  # fmt: skip
        AzureStorage().read(ObjectPath.parse("abfss://lake@acct.dfs.core.windows.net/f"))
    with pytest.raises(StorageError, match=r"names no storage account.*AZURE_STORAGE_ACCOUNT_NAME"):
        AzureStorage().read(ObjectPath.parse("az://lake/f"))


def test_azure_delete_tree_deletes_one_by_one_where_a_batch_is_refused(azure_storage, monkeypatch):
    """Blob Batch is not available on every ADLS Gen2 account: the files still go."""
    from azure.core.exceptions import HttpResponseError

    def refused(*names, **options):
        raise HttpResponseError(message="batch not supported")

    root = azure_root()
    for name in ["a", "b/c"]:
        azure_storage.write(root / name, b"1")
    monkeypatch.setattr("azure.storage.blob.ContainerClient.delete_blobs", refused)
    azure_storage.delete_tree(root)
    assert azure_storage.list(root, "**/*") == []


def test_load_storage_serves_each_scheme_and_refuses_the_others():
    pytest.importorskip("boto3")
    pytest.importorskip("azure.storage.blob")
    assert storage_scheme("/srv/lake") == "file" and storage_scheme("S3://bucket/prefix") == "s3"
    assert isinstance(load_storage("/srv/lake"), LocalStorage)
    assert type(load_storage("s3://bk/ev", endpoint_url="http://127.0.0.1:1")).__name__ == "S3Storage"
    azure = load_storage("abfss://c0@acct.dfs.core.windows.net/ev", endpoint_url="http://127.0.0.1:2/acct")
    assert type(azure).__name__ == "AzureStorage" and azure.endpoint_url == "http://127.0.0.1:2/acct"
    with pytest.raises(ConfigError, match=r"lake\.root.*gs://.*not supported"):
        load_storage("gs://bucket/prefix")


@pytest.mark.parametrize("how", ["write", "open_write", "write_new", "write_atomic"])
def test_local_writes_make_each_new_folder_durable_in_its_parent(tmp_path, fsynced_dirs, how):
    (tmp_path / "lake").mkdir()
    path = tmp_path / "lake" / "segment-logs" / "src" / "1795305600000" / "file.gz"
    if how == "write":
        LocalStorage().write(path, b"data")
    elif how == "open_write":
        with LocalStorage().open_write(path) as handle:
            handle.write(b"data")
    elif how == "write_new":
        assert LocalStorage().write_new(path, b"data")
    else:
        write_atomic(path, b"data")
    new_folders = [path.parent, path.parent.parent, path.parent.parent.parent]
    # each new folder's entry in its parent, then the file's entry in its folder
    assert set(fsynced_dirs) == {tmp_path / "lake", *new_folders}
    assert fsynced_dirs[-1] == path.parent


def synced_paths(monkeypatch) -> list[Path]:
    """Every file and folder fsynced from now on (the real ``os.fsync`` still runs)."""
    synced: list[Path] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    return synced


def test_a_write_made_durable_later_is_whole_at_once_and_synced_with_its_folder(tmp_path, monkeypatch):
    """``open_write(durable=False)`` (a run's staged files): renamed into place whole, with no
    fsync; ``make_durable`` of a folder holding it then syncs its file system once (``syncfs``)."""
    from eventlake.storage import local

    synced = synced_paths(monkeypatch)
    stage = tmp_path / "lake" / "segment-stage" / "src" / "run"
    path = stage / "table" / "track" / "day=2026-11-20" / "part.parquet"
    with LocalStorage().open_write(path, durable=False) as handle:
        handle.write(b"data")
    assert path.read_bytes() == b"data" and os.listdir(path.parent) == ["part.parquet"]
    assert synced == []
    calls: list[Path] = []
    real_syncfs = local.SYNCFS
    assert real_syncfs is not None  # Linux, glibc

    def recording_syncfs(fd: int) -> int:
        calls.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
        return real_syncfs(fd)

    monkeypatch.setattr(local, "SYNCFS", recording_syncfs)
    LocalStorage().make_durable(stage)
    LocalStorage().make_durable(tmp_path / "never-made")  # nothing written there: nothing to do
    assert calls == [stage] and synced == []

    def failing(fd: int) -> int:
        ctypes.set_errno(errno.EIO)
        return -1

    monkeypatch.setattr(local, "SYNCFS", failing)
    with pytest.raises(OSError, match="Input/output error") as failed:
        LocalStorage().make_durable(stage)
    assert failed.value.errno == errno.EIO and failed.value.filename == str(stage)


def test_without_syncfs_every_file_and_folder_under_the_folder_is_fsynced(tmp_path, monkeypatch):
    from eventlake.storage import local

    monkeypatch.setattr(local, "SYNCFS", None)
    stage = tmp_path / "stage"
    files = [stage / "table" / "a" / "1.parquet", stage / "table" / "b" / "2.parquet", stage / "keys"]
    for path in files:
        with LocalStorage().open_write(path, durable=False) as handle:
            handle.write(b"x")
    synced = synced_paths(monkeypatch)
    LocalStorage().make_durable(stage)
    folders = [stage / "table" / "a", stage / "table" / "b", stage / "table", stage]
    assert sorted(synced) == sorted([*files, *folders, *stage.parents])
    for path in files:  # a file before its folder's entry, a folder before its parent's
        assert synced.index(path) < synced.index(path.parent)
    assert synced.index(stage / "table") < synced.index(stage) < synced.index(tmp_path)


def test_make_dirs_syncs_a_folder_another_process_created_meanwhile(tmp_path, fsynced_dirs, monkeypatch):
    folder = tmp_path / "day"
    real_mkdir = Path.mkdir

    def raced_mkdir(self, *args, **kwargs):
        real_mkdir(self)  # the other process wins the race, not yet having synced its parent
        real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", raced_mkdir)
    make_dirs(folder)
    assert folder.is_dir() and fsynced_dirs == [tmp_path]
