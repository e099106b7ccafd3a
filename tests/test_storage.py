"""The storage interface, run against every back end (only the local one so far): whole-file
writes, listing without temporaries, idempotent publishing."""

from __future__ import annotations

import stat

import pytest

from eventlake.errors import ConfigError
from eventlake.storage import LocalStorage, StorageError, load_storage, storage_scheme
from eventlake.storage.local import write_atomic


@pytest.fixture(params=["local"])
def storage(request):
    return {"local": LocalStorage}[request.param]()


def test_write_replaces_whole_and_leaves_no_temp_file(storage, tmp_path):
    path = tmp_path / "state" / "state.json"
    storage.write(path, b"old")
    storage.write(path, b"new content")
    assert storage.read(path) == b"new content"
    assert [f.path.name for f in storage.list(tmp_path, "**/*")] == ["state.json"]
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]


def test_an_aborted_streamed_write_leaves_nothing(storage, tmp_path):
    path = tmp_path / "part.parquet"
    with pytest.raises(RuntimeError), storage.open_write(path) as handle:
        handle.write(b"half")
        raise RuntimeError("worker died")
    assert not storage.exists(path) and list(tmp_path.iterdir()) == []


def test_list_matches_a_pattern_sorted_and_hides_temporaries(storage, tmp_path):
    for name in ["b/2.json", "a/1.json", "a/.1.json.123.tmp", "a/x.txt"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"{}")
    assert [f.path.relative_to(tmp_path).as_posix() for f in storage.list(tmp_path, "*/*.json")] == [
        "a/1.json",
        "b/2.json",
    ]
    assert storage.list(tmp_path / "missing") == []


def test_publish_moves_once_and_a_repeat_is_a_no_op(storage, tmp_path):
    staged, final = tmp_path / "stage" / "f", tmp_path / "lake" / "day=1" / "f"
    storage.write(staged, b"rows")
    assert storage.publish(staged, final) is True
    assert storage.publish(staged, final) is False  # a rerun after a crash
    storage.commit([final])
    assert storage.read(final) == b"rows" and not storage.exists(staged)
    with pytest.raises(StorageError, match="vanished"):
        storage.publish(tmp_path / "stage" / "gone", tmp_path / "lake" / "gone")


def test_delete_and_delete_tree_accept_missing_paths(storage, tmp_path):
    storage.write(tmp_path / "t" / "a", b"1")
    storage.delete(tmp_path / "t" / "a")
    storage.delete(tmp_path / "t" / "a")
    storage.delete_tree(tmp_path / "t")
    storage.delete_tree(tmp_path / "t")
    assert not (tmp_path / "t").exists()


def test_write_atomic_can_keep_a_file_private(tmp_path):
    path = tmp_path / "hive-site.xml"
    write_atomic(path, b"<password/>", mode=0o600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_unsupported_scheme_is_refused_naming_the_setting():
    assert storage_scheme("/srv/lake") == "file" and storage_scheme("S3://bucket/prefix") == "s3"
    with pytest.raises(ConfigError, match=r"lake\.root.*s3://.*not supported"):
        load_storage("s3://bucket/prefix")
