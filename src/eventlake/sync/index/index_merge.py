"""The dedupe index's merge: a few key files per UTC day, merged with bounded memory.

Compaction (``eventlake compact``, ``up`` every hour, under the source's lock) calls
:func:`merge_index`. For each UTC day of runs (the day a run started names its folder):

1. the day's Parquet files (a lake written before key files) become key files in their run's
   folder, :data:`MERGE_RECORDS` ids at a time, and are deleted;
2. the day's key files to merge are chosen (:func:`choose`): all of them once the day is over,
   else the smallest ones while each is at most twice the ones before it together (the hour's run
   files, then the tiers they grew into: an open day keeps a few files, not a rewrite of the whole
   day every hour);
3. they are merged into one file in the folder of the newest run among them, a range of keys at a
   time (the keys whose top bits are the range's number: :func:`.index_keys.records_in`), so the
   merge holds about :data:`MERGE_RECORDS` records (96 MB) whatever the day's size, streamed
   through the store's ``open_write`` (on S3 a multipart upload, a part sent as it fills: a busy
   source's day is over 5 GB, S3's limit for one put); then the inputs are deleted.

Killed at any step, every (id, received time) the index held is still in it: a new file is whole
(``open_write``) before anything it replaces is deleted; some are there twice until the next merge,
which a lookup does not mind.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from eventlake import layout
from eventlake.storage import FileInfo, Location, Storage
from eventlake.sync.index.dedupe_index import INDEX_ARROW, LEGACY_SUFFIX, index_listing, runs_by_day
from eventlake.sync.index.index_keys import (
    RECORD,
    KeyFile,
    KeyWriter,
    open_keys,
    records_in,
    records_of,
    write_keys,
)
from eventlake.sync.protocol.cutoffs import index_day_over

MERGE_RECORDS = 4_000_000  # a merge step holds about this many records (24 bytes each)
LEGACY_ROWS = 500_000  # a Parquet file of a lake written before key files is read this many rows at a time
TIER = 2  # an open day's files are merged while each is at most TIER times the smaller ones together


def merge_index(
    storage: Storage, index: Location, check: Callable[[], None] = lambda: None, now: datetime | None = None
) -> tuple[int, int]:
    """Convert and merge the index's files, a UTC day at a time (see the module's docstring).
    ``check`` is called before each day's change (the source lock's lease, on an object store).
    Returns the number of files before and after."""
    now = now or datetime.now(timezone.utc)
    files = index_listing(storage, index)
    for day, runs in sorted(runs_by_day(files).items()):
        infos = [info for _, info in runs]
        legacy = [info for info in infos if info.path.name.endswith(LEGACY_SUFFIX)]
        if legacy:
            check()
            converted = [made for info in legacy for made in convert(storage, info)]
            infos = [info for info in infos if info not in legacy] + converted
        chosen = choose([open_keys(storage, info) for info in infos], whole=index_day_over(day, now))
        if len(chosen) > 1:
            check()
            merge(storage, chosen, {info.path.name for info in infos}, infos)
    return len(files), len(index_listing(storage, index))


def choose(files: Sequence[KeyFile], whole: bool) -> list[KeyFile]:
    """The files of a day to merge: all (``whole``), else the smallest while each holds at most
    :data:`TIER` times as many records as the ones before it together (the run files of the last
    hour merge; an hour's file joins the day's next tier once the hours before it add up to half
    its size)."""
    ordered = sorted(files, key=lambda f: (f.count, str(f.info.path)))
    if whole:
        return ordered
    chosen, total = ordered[:1], sum(f.count for f in ordered[:1])
    for file in ordered[1:]:
        if file.count > TIER * total:
            break
        chosen.append(file)
        total += file.count
    return chosen


def merge(storage: Storage, files: Sequence[KeyFile], names: set[str], day: Sequence[FileInfo]) -> Location:
    """``files`` into one key file in the folder of the newest run among them, a key range at a
    time; then the files go (a run folder left with none of the day's files goes whole)."""
    folder = max((f.info.path.parent for f in files), key=lambda p: p.name)
    run_id = folder.name.removeprefix(layout.run_folder(""))
    number = 0
    while layout.index_file_name(run_id, number, "merged-") in names:
        number += 1
    target = folder / layout.index_file_name(run_id, number, "merged-")
    total = sum(f.count for f in files)
    parts_bits = (max(0, total - 1) // MERGE_RECORDS).bit_length()
    with storage.open_write(target) as handle:  # whole before anything it replaces goes
        writer = KeyWriter(handle, total)
        for part in range(2**parts_bits):
            chunk = [records_in(storage, f, part, parts_bits) for f in files]
            writer.add(merge_sorted(chunk))
        writer.close()
    merged = {f.info.path for f in files}
    by_folder: dict[Location, list[Location]] = {}
    for info in day:
        by_folder.setdefault(info.path.parent, []).append(info.path)
    for where, paths in sorted(by_folder.items(), key=lambda item: str(item[0])):
        if where != folder and all(p in merged for p in paths):
            storage.delete_tree(where)  # an older run's folder: all its files were merged
        else:
            for path in paths:
                if path in merged:
                    storage.delete(path)
    return target


def merge_sorted(runs: Sequence[np.ndarray]) -> np.ndarray:
    """Sorted record arrays into one, sorted by key then time, each (key, time) once: a stable
    sort by ``hi`` (timsort merges the sorted runs), then the rare rows that share a ``hi`` in
    full order."""
    records = (
        np.concatenate([r for r in runs if len(r)]) if any(len(r) for r in runs) else np.zeros(0, RECORD)
    )
    if len(runs) > 1:
        records = records[np.argsort(records["hi"], kind="stable")]
    if len(records) < 2:
        return records
    tie = records["hi"][1:] == records["hi"][:-1]
    if tie.any():
        rows = np.zeros(len(records), bool)
        rows[1:] |= tie
        rows[:-1] |= tie
        group = records[rows]
        records[rows] = group[np.lexsort((group["at"], group["lo"], group["hi"]))]
        same = tie & (records["lo"][1:] == records["lo"][:-1]) & (records["at"][1:] == records["at"][:-1])
        records = records[np.concatenate(([True], ~same))]
    return records


def convert(storage: Storage, info: FileInfo) -> list[FileInfo]:
    """A Parquet file of (message_id, received_at) into key files beside it, :data:`MERGE_RECORDS`
    ids each (read :data:`LEGACY_ROWS` rows at a time); then it goes. Killed before, a rerun
    writes the same files again."""
    stem = info.path.name.removesuffix(LEGACY_SUFFIX)
    parquet = pq.ParquetFile(_RangeReader(storage, info))
    made: list[FileInfo] = []
    pending: list[np.ndarray] = []

    def flush() -> None:
        target = info.path.parent / f"{stem}-{len(made):05d}.keys"
        with storage.open_write(target) as handle:
            write_keys(handle, np.concatenate(pending))
        made.append(storage.list(target.parent, target.name)[0])
        pending.clear()

    for batch in parquet.iter_batches(LEGACY_ROWS, columns=INDEX_ARROW.names):
        pending.append(records_of(batch.column(0).cast(pa.string()), batch.column(1)))
        if sum(len(p) for p in pending) >= MERGE_RECORDS:
            flush()
    if pending:
        flush()
    storage.delete(info.path)
    return made


class _RangeReader(io.RawIOBase):
    """A file of the store, read by ranges (pyarrow reads a Parquet file's footer, then its column
    chunks: never the whole file at once)."""

    def __init__(self, storage: Storage, info: FileInfo) -> None:
        self.storage, self.info, self.position = storage, info, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.info.size}[whence]
        self.position = base + offset
        return self.position

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        size = min(len(buffer), max(0, self.info.size - self.position))
        if not size:
            return 0
        [data] = self.storage.read_ranges(self.info.path, [(self.position, size)])
        buffer[: len(data)] = data
        self.position += len(data)
        return len(data)
