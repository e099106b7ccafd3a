"""Suppression lists on a local lake: atomic updates, concurrent writers, and the collector's cache
(on S3: tests/collect/test_s3_lake.py)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from eventlake import state_layout
from eventlake.archive import SuppressionCache, SuppressionError, SuppressionList
from eventlake.storage import LocalStorage, Location
from eventlake.timestamps import parse_timestamp


def test_add_list_remove(tmp_path: Path) -> None:
    suppressions = SuppressionList(LocalStorage(), tmp_path, "src1")
    assert suppressions.users() == [] and suppressions.user_ids() == frozenset()
    assert suppressions.add(["u2", "u1", "u2"]) == ["u2", "u1"]
    assert suppressions.add(["u1", "u3"]) == ["u3"]
    assert [u.user_id for u in suppressions.users()] == ["u1", "u2", "u3"]
    assert all(parse_timestamp(u.added_at) is not None for u in suppressions.users())
    assert suppressions.remove(["u2", "nobody"]) == ["u2"]
    assert suppressions.user_ids() == {"u1", "u3"}
    assert SuppressionList(LocalStorage(), tmp_path, "src2").user_ids() == frozenset()  # one list per source


def test_the_file_is_json_in_the_lake_state_and_written_atomically(tmp_path: Path) -> None:
    SuppressionList(LocalStorage(), tmp_path, "src1").add(["u1"])
    path = state_layout.suppression_file(tmp_path, "src1")
    assert path == tmp_path / "segment-data" / "_state" / "suppression" / "src1.json"
    document = orjson.loads(path.read_bytes())
    assert document["source_id"] == "src1" and list(document["users"]) == ["u1"]
    assert sorted(p.name for p in path.parent.iterdir()) == [".src1.lock", "src1.json"]  # no temp left


def test_concurrent_writers_lose_no_update(tmp_path: Path) -> None:
    def add(n: int) -> None:
        for i in range(10):
            SuppressionList(LocalStorage(), tmp_path, "src").add([f"u{n}-{i}"])

    threads = [threading.Thread(target=add, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(SuppressionList(LocalStorage(), tmp_path, "src").user_ids()) == 60


@pytest.mark.parametrize("user_id", ["", "   ", "x" * 1025])
def test_invalid_user_ids_are_refused(tmp_path: Path, user_id: str) -> None:
    with pytest.raises(SuppressionError, match="userId"):
        SuppressionList(LocalStorage(), tmp_path, "src").add([user_id])


def test_a_corrupt_file_is_an_error_naming_it(tmp_path: Path) -> None:
    path = state_layout.suppression_file(tmp_path, "src")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(SuppressionError, match="not valid JSON") as caught:
        SuppressionList(LocalStorage(), tmp_path, "src").users()
    assert str(path) in str(caught.value)


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_cache_rereads_a_changed_file_in_the_background_after_its_interval(tmp_path: Path) -> None:
    storage = LocalStorage()
    cache = SuppressionCache(storage, tmp_path, interval=3600)
    assert cache.user_ids("src") == frozenset()  # the first read waits for the store
    SuppressionList(storage, tmp_path, "src").add(["u1"])
    assert cache.user_ids("src") == frozenset()  # not looked at again within the interval
    cache.interval = 0
    wait_until(lambda: cache.user_ids("src") == {"u1"})  # re-read in the background
    SuppressionList(storage, tmp_path, "src").remove(["u1"])
    assert cache.refresh("src") == frozenset()  # or now, on demand


class SlowStorage(LocalStorage):
    """Reads wait until ``release`` is set (a store that hangs)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.release.set()

    def read(self, path: Location) -> bytes:
        assert self.release.wait(10), "never released"
        return super().read(path)


def test_a_request_never_waits_for_a_slow_store(tmp_path: Path) -> None:
    storage = SlowStorage()
    SuppressionList(storage, tmp_path, "src").add(["u1"])
    cache = SuppressionCache(storage, tmp_path, interval=0)
    assert cache.user_ids("src") == {"u1"}
    storage.release.clear()  # the store hangs: every lookup answers the last list read, at once
    SuppressionList(LocalStorage(), tmp_path, "src").add(["u2"])
    for _ in range(100):
        assert cache.user_ids("src") == {"u1"}
    storage.release.set()
    wait_until(lambda: cache.user_ids("src") == {"u1", "u2"})


class UnreachableStorage(LocalStorage):
    """Reads fail as a client library does when its store is down (not with an OSError)."""

    def __init__(self) -> None:
        self.down = False

    def read(self, path: Location) -> bytes:
        if self.down:
            raise ConnectionError("Could not connect to the endpoint URL: http://127.0.0.1:9/bk/x.json")
        return super().read(path)


def test_cache_keeps_the_last_good_list_when_the_store_fails(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    storage = UnreachableStorage()
    SuppressionList(storage, tmp_path, "src").add(["u1"])
    cache = SuppressionCache(storage, tmp_path, interval=3600)
    assert cache.user_ids("src") == {"u1"}
    storage.down = True
    assert cache.refresh("src") == {"u1"} and cache.refresh("src") == {"u1"}
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "cannot read it: ConnectionError: Could not connect" in warnings[0]
    with pytest.raises(SuppressionError, match="cannot read it"):
        SuppressionList(storage, tmp_path, "src").add(["u2"])  # writers refuse what they cannot read
    storage.down = False
    SuppressionList(storage, tmp_path, "src").add(["u2"])
    assert cache.refresh("src") == {"u1", "u2"}


def test_cache_keeps_the_last_good_list_when_the_file_breaks(tmp_path: Path) -> None:
    storage = LocalStorage()
    cache = SuppressionCache(storage, tmp_path, interval=0)
    SuppressionList(storage, tmp_path, "src").add(["u1"])
    assert cache.refresh("src") == {"u1"}
    path = state_layout.suppression_file(tmp_path, "src")
    broken = path.with_name("broken")
    broken.write_text('{"users": ["not", "a", "map"]}')
    os.replace(broken, path)
    assert cache.refresh("src") == {"u1"}
    with pytest.raises(SuppressionError, match="expected"):
        SuppressionList(storage, tmp_path, "src").remove(["u1"])  # writers refuse what they cannot read
    path.write_bytes(orjson.dumps({"users": {"u2": "2026-11-22T00:00:00.000Z"}}))
    assert cache.refresh("src") == {"u2"}
