"""The dedupe index on disk: which of its files a run reads, and how it is kept to a few files.

Each sync run adds a folder ``run_id=<run>`` of small Parquet files (the message ids it brought
into the lake, with their received time; see :mod:`.dedupe`). A run looks up only the ids received
in the window before its first message, and every message of a run was received before the run
started, so a folder named after a run that started well before the window holds nothing the run
needs: it is not read (:func:`index_files`). An ``up`` engine syncing every 30 s adds thousands of
folders a day; :func:`merge_index` (run by compaction, under the source's lock) merges each UTC
day's folders into one file, in the folder of the day's newest run: the name still tells when the
newest id in it was brought in. Killed at any step, the index holds each id at least once (the
merged file is whole before the files it replaces are deleted), which is all a lookup needs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq

from eventlake.storage import FileInfo, Location, Storage

# a margin for the clocks of the collector (which sets receivedAt) and of the sync (which names runs)
CLOCK_MARGIN = timedelta(days=1)
MERGED_PREFIX = "merged-"
_RUN_STARTED = re.compile(r"run_id=(\d{8}T\d{6})(\d{3})Z")  # see stage.new_run_id


def run_started(folder_name: str) -> datetime | None:
    """When the run that names an index folder started (UTC); None for another name.

    >>> run_started("run_id=20261122T104700123Z-1a2b")
    datetime.datetime(2026, 11, 22, 10, 47, 0, 123000, tzinfo=datetime.timezone.utc)
    """
    found = _RUN_STARTED.match(folder_name)
    if found is None:
        return None
    started = datetime.strptime(found.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=timezone.utc)
    return started + timedelta(milliseconds=int(found.group(2)))


def index_files(storage: Storage, index: Location, since: datetime | None = None) -> list[FileInfo]:
    """The index's files, but those of runs that started more than :data:`CLOCK_MARGIN` before
    ``since`` (they hold only ids received before it)."""
    files = storage.list(index, "*/*.parquet")
    if since is None:
        return files
    if since.tzinfo is None:
        since = since.replace(tzinfo=timezone.utc)  # Spark's naive datetimes are in its UTC zone
    floor = since - CLOCK_MARGIN
    return [f for f in files if (started := run_started(f.path.parent.name)) is None or started >= floor]


def merge_index(storage: Storage, index: Location) -> tuple[int, int]:
    """Merge the index's files, a UTC day of runs at a time, into one file per day in the folder of
    the day's newest run (each id once, at its earliest received time); a day with one file is
    left alone. Returns the number of files before and after."""
    days: dict[str, list[tuple[datetime, FileInfo]]] = {}
    files = storage.list(index, "*/*.parquet")
    for info in files:
        started = run_started(info.path.parent.name)
        if started is not None:
            days.setdefault(f"{started:%Y-%m-%d}", []).append((started, info))
    after = len(files)
    for day in sorted(days):
        members = [info for _, info in sorted(days[day], key=lambda pair: (pair[0], str(pair[1].path)))]
        if len(members) > 1:
            _merge(storage, members)
            after -= len(members) - 1
    return len(files), after


def _merge(storage: Storage, members: Sequence[FileInfo]) -> None:
    """``members`` (oldest run first) into one file in the newest run's folder, then the members and
    the other folders go."""
    table = pa.concat_tables(
        [pq.read_table(pa.BufferReader(storage.read(info.path))) for info in members],
        promote_options="default",
    )
    first = table.group_by("message_id").aggregate([("received_at", "min")])
    merged = pa.table({"message_id": first["message_id"], "received_at": first["received_at_min"]})
    newest = members[-1].path.parent
    target = newest / f"{MERGED_PREFIX}{newest.name.removeprefix('run_id=')}.parquet"
    with storage.open_write(target) as handle:  # whole before anything it replaces goes
        pq.write_table(merged.sort_by("received_at").cast(table.schema), handle, compression="snappy")
    for info in members:
        if info.path.parent == newest and info.path != target:
            storage.delete(info.path)
    for folder in sorted({info.path.parent for info in members} - {newest}, key=str):
        storage.delete_tree(folder)
