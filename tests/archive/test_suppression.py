"""Suppression lists on disk: atomic updates, concurrent writers, and the collector's cache."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import orjson
import pytest

from eventlake import layout
from eventlake.archive import SuppressionCache, SuppressionError, SuppressionList
from eventlake.timestamps import parse_timestamp


def test_add_list_remove(tmp_path: Path) -> None:
    suppressions = SuppressionList(tmp_path, "src1")
    assert suppressions.users() == [] and suppressions.user_ids() == frozenset()
    assert suppressions.add(["u2", "u1", "u2"]) == ["u2", "u1"]
    assert suppressions.add(["u1", "u3"]) == ["u3"]
    assert [u.user_id for u in suppressions.users()] == ["u1", "u2", "u3"]
    assert all(parse_timestamp(u.added_at) is not None for u in suppressions.users())
    assert suppressions.remove(["u2", "nobody"]) == ["u2"]
    assert suppressions.user_ids() == {"u1", "u3"}
    assert SuppressionList(tmp_path, "src2").user_ids() == frozenset()  # one list per source


def test_the_file_is_json_in_the_lake_state_and_written_atomically(tmp_path: Path) -> None:
    SuppressionList(tmp_path, "src1").add(["u1"])
    path = layout.suppression_file(tmp_path, "src1")
    assert path == tmp_path / "segment-data" / "_state" / "suppression" / "src1.json"
    document = orjson.loads(path.read_bytes())
    assert document["source_id"] == "src1" and list(document["users"]) == ["u1"]
    assert sorted(p.name for p in path.parent.iterdir()) == [".src1.lock", "src1.json"]  # no temp left


def test_concurrent_writers_lose_no_update(tmp_path: Path) -> None:
    def add(n: int) -> None:
        for i in range(10):
            SuppressionList(tmp_path, "src").add([f"u{n}-{i}"])

    threads = [threading.Thread(target=add, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(SuppressionList(tmp_path, "src").user_ids()) == 60


@pytest.mark.parametrize("user_id", ["", "   ", "x" * 1025])
def test_invalid_user_ids_are_refused(tmp_path: Path, user_id: str) -> None:
    with pytest.raises(SuppressionError, match="userId"):
        SuppressionList(tmp_path, "src").add([user_id])


def test_a_corrupt_file_is_an_error_naming_it(tmp_path: Path) -> None:
    path = layout.suppression_file(tmp_path, "src")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(SuppressionError, match="not valid JSON") as caught:
        SuppressionList(tmp_path, "src").users()
    assert str(path) in str(caught.value)


def test_cache_rereads_a_changed_file_only_after_its_interval(tmp_path: Path) -> None:
    cache = SuppressionCache(tmp_path, interval=3600)
    assert cache.user_ids("src") == frozenset()
    SuppressionList(tmp_path, "src").add(["u1"])
    assert cache.user_ids("src") == frozenset()  # not looked at again within the interval
    cache.interval = 0
    assert cache.user_ids("src") == {"u1"}
    SuppressionList(tmp_path, "src").remove(["u1"])
    assert cache.user_ids("src") == frozenset()


def test_cache_keeps_the_last_good_list_when_the_file_breaks(tmp_path: Path) -> None:
    cache = SuppressionCache(tmp_path, interval=0)
    SuppressionList(tmp_path, "src").add(["u1"])
    assert cache.user_ids("src") == {"u1"}
    path = layout.suppression_file(tmp_path, "src")
    broken = path.with_name("broken")
    broken.write_text('{"users": ["not", "a", "map"]}')
    os.replace(broken, path)
    assert cache.user_ids("src") == {"u1"}
    with pytest.raises(SuppressionError, match="expected"):
        SuppressionList(tmp_path, "src").remove(["u1"])  # writers refuse to overwrite what they cannot read
    path.write_bytes(orjson.dumps({"users": {"u2": "2026-11-22T00:00:00.000Z"}}))
    assert cache.user_ids("src") == {"u2"}
