"""Bounded read-ahead (:mod:`eventlake.storage.prefetch`) and its users: the sync's parse pass and
the archive import read several files at once, in order, with the bytes held bounded.

Concurrency is shown without timing: :class:`OverlapStorage` (a real local store) holds each read
until a second one has started, so a reader that reads one file at a time fails on the barrier."""

from __future__ import annotations

import gzip
import threading
from pathlib import Path

import orjson
import pyarrow as pa
import pytest

from eventlake.storage import LocalStorage
from eventlake.storage.prefetch import prefetched


class OverlapStorage(LocalStorage):
    """A local store whose reads wait (up to ``wait`` seconds) until ``together`` of them run at
    once, and that records how many ran at once at most."""

    def __init__(self, together: int = 2, wait: float = 20.0) -> None:
        super().__init__()
        self.barrier = threading.Barrier(together, timeout=wait)
        self.lock = threading.Lock()
        self.running = self.most = self.reads = 0

    def read(self, path):  # type: ignore[no-untyped-def]
        with self.lock:
            self.running += 1
            self.reads += 1
            self.most = max(self.most, self.running)
        try:
            if self.reads <= self.barrier.parties:  # the first ones meet; later reads go straight on
                self.barrier.wait()
            return super().read(path)
        finally:
            with self.lock:
                self.running -= 1


def test_results_come_in_order_with_at_most_ahead_in_work() -> None:
    lock = threading.Lock()
    state = {"running": 0, "most": 0}

    def work(n: int) -> int:
        with lock:
            state["running"] += 1
            state["most"] = max(state["most"], state["running"])
        with lock:
            state["running"] -= 1
        return n * n

    assert [r for _, r in prefetched(work, range(50), ahead=3)] == [n * n for n in range(50)]
    assert state["most"] <= 3


def test_the_bytes_in_work_or_waiting_stay_under_the_bound() -> None:
    sizes = [40, 40, 40, 200, 10, 10]
    lock = threading.Lock()
    held = {"now": 0, "most": 0}

    def work(n: int) -> int:
        with lock:  # an item counts from its start until the caller takes it
            held["now"] += sizes[n]
            held["most"] = max(held["most"], held["now"])
        return n

    for n, _ in prefetched(work, range(len(sizes)), size=lambda n: sizes[n], ahead=4, max_bytes=100):
        with lock:
            held["now"] -= sizes[n]
    assert held["most"] <= 200  # never more than the bound, or one item alone when it is bigger


def test_an_error_is_raised_at_its_items_turn() -> None:
    def work(n: int) -> int:
        if n == 2:
            raise OSError("boom")
        return n

    results = prefetched(work, range(5))
    assert [next(results)[1], next(results)[1]] == [0, 1]
    with pytest.raises(OSError, match="boom"):
        next(results)


def test_ahead_must_be_positive() -> None:
    with pytest.raises(ValueError, match="ahead must be at least 1, not 0"):
        list(prefetched(lambda n: n, [1], ahead=0))


def _archive(path: Path, ids: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        orjson.dumps({"type": "track", "event": "E", "userId": "u", "messageId": i,
                      "receivedAt": "2026-11-22T10:00:00.000Z", "timestamp": "2026-11-22T10:00:00.000Z"})
        for i in ids
    ]  # fmt: skip
    path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    return path


def test_the_parse_pass_reads_the_next_files_while_it_parses(tmp_path: Path) -> None:
    from eventlake.sync.pipeline.transform import PARSED_ARROW, parse_files

    files = [_archive(tmp_path / f"a{n}.gz", [f"m{n}-{k}" for k in range(3)]) for n in range(6)]
    sizes = [f.stat().st_size for f in files]
    locations = [str(f) for f in files]
    batch = pa.RecordBatch.from_pydict({"location": locations, "number": list(range(6)), "size": sizes})
    storage = OverlapStorage()
    out = pa.Table.from_batches(
        list(parse_files([batch], storage=storage, pieces=tmp_path / "pieces")), schema=PARSED_ARROW
    ).to_pylist()
    ids = [row["message_id"] for row in out if row["ok"]]
    assert ids == [f"m{n}-{k}" for n in range(6) for k in range(3)]  # the files' order, whatever the reads'
    assert storage.most >= 2 and storage.reads == 6


def test_the_import_copies_several_files_at_once(tmp_path: Path) -> None:
    from eventlake.archive import list_archive_files
    from eventlake.archive.importer import import_segment_archive

    export = tmp_path / "export"
    for n in range(5):
        _archive(export / "segment-logs" / "AbC" / "1566086400000" / f"15660{n}.gz", [f"m{n}"])
    storage = OverlapStorage()
    result = import_segment_archive(storage, export, LocalStorage(), tmp_path / "lake", "ours")
    assert (result.files, result.broken) == (5, [])
    assert len(list_archive_files(LocalStorage(), tmp_path / "lake", "ours")) == 5
    assert storage.most >= 2
