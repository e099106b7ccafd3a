"""The storage interface, run against every back end: the local disk, and S3 (boto3 against a real
moto server on 127.0.0.1). Whole-file writes, listing without temporaries, idempotent publishing,
create-if-absent. Each back end gets a fresh root: ``tmp_path`` on disk, a unique key prefix in
the bucket. What only the local disk can show (no temporary left in a folder, folders removed,
file modes) is checked in the local-only tests at the end."""

from __future__ import annotations

import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from eventlake.errors import ConfigError
from eventlake.storage import LocalStorage, Storage, StorageError, load_storage, storage_scheme
from eventlake.storage.local import write_atomic

from .catalog.servers import AWS_ENV, Moto

BUCKET = "eventlake-storage-test"


@pytest.fixture(scope="session")
def s3_storage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Storage]:
    """An S3Storage on a bucket of a moto server of its own, with moto's fake credentials in the
    environment (boto3's default chain) while the session runs."""
    from eventlake.storage.s3 import S3Storage

    server = Moto.start(tmp_path_factory.mktemp("moto-s3") / "moto.log")
    try:
        with pytest.MonkeyPatch.context() as env:
            for key, value in {**AWS_ENV, "AWS_DEFAULT_REGION": "us-east-1"}.items():
                env.setenv(key, value)
            storage = S3Storage(BUCKET, endpoint_url=server.endpoint)
            storage.client.create_bucket(Bucket=BUCKET)
            yield storage
    finally:
        server.stop()


@pytest.fixture(params=["local", "s3"])
def backend(request, tmp_path) -> tuple[Storage, Path]:
    """A store and a fresh, empty root on it."""
    if request.param == "local":
        return LocalStorage(), tmp_path
    return request.getfixturevalue("s3_storage"), Path(f"t-{uuid.uuid4().hex}")


@pytest.fixture
def storage(backend) -> Storage:
    return backend[0]


@pytest.fixture
def root(backend) -> Path:
    return backend[1]


def names(storage: Storage, folder: Path, pattern: str = "**/*") -> list[str]:
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
    monkeypatch.setattr("eventlake.storage.s3.SPOOL_BYTES", 1024)  # S3: spill the buffer to disk
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


def test_local_delete_tree_removes_the_folder(tmp_path):
    LocalStorage().write(tmp_path / "t" / "a", b"1")
    LocalStorage().delete_tree(tmp_path / "t")
    assert not (tmp_path / "t").exists()


def test_write_atomic_can_keep_a_file_private(tmp_path):
    path = tmp_path / "hive-site.xml"
    write_atomic(path, b"<password/>", mode=0o600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# -- S3 only --------------------------------------------------------------------------------------


def test_s3_keys_are_paths_relative_to_the_bucket():
    from eventlake.storage.s3 import object_key

    assert object_key(Path("lake/segment-data/x.parquet")) == "lake/segment-data/x.parquet"
    assert object_key("/lake//a/./b") == "lake/a/b"
    assert object_key(Path(".")) == ""


def test_s3_endpoint_comes_from_the_standard_environment(monkeypatch):
    pytest.importorskip("boto3")
    from eventlake.storage.s3 import S3Storage

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    assert S3Storage("b").endpoint_url == "http://127.0.0.1:1"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:2")
    assert S3Storage("b").endpoint_url == "http://127.0.0.1:2"
    assert S3Storage("b", endpoint_url="http://127.0.0.1:3").endpoint_url == "http://127.0.0.1:3"


def test_an_unsupported_scheme_is_refused_naming_the_setting():
    assert storage_scheme("/srv/lake") == "file" and storage_scheme("S3://bucket/prefix") == "s3"
    with pytest.raises(ConfigError, match=r"lake\.root.*s3://.*not supported"):
        load_storage("s3://bucket/prefix")
