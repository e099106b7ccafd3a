"""The dedupe index on disk: which of its files a run reads, and how it is kept to a few files.

Each sync or replay run adds a folder ``run_id=<run>`` of small Parquet files (the message ids it
brought into the lake, with their received time; see :mod:`.dedupe`). A run looks up only the ids
received in the window before its first message, and every message of a run was received before
the run started, so a folder named after a run that started well before the window holds nothing
the run needs: it is not read (:func:`index_files`). An ``up`` engine syncing every 30 s adds
thousands of folders a day; :func:`merge_index` (run by compaction, under the source's lock)
merges each UTC day's folders into one file, in the folder of the day's newest run: the name still
tells when the newest id in it was brought in. Killed at any step, the index holds every (id,
received time) it held (the merged file is whole before the files it replaces are deleted), some
twice, which a lookup does not mind; the next merge finishes the day.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq

from eventlake.storage import FileInfo, Location, Storage
from eventlake.timestamps import as_utc

# the index's rows: a message id a run brought into the lake, and when it was received
INDEX_ARROW = pa.schema([("message_id", pa.string()), ("received_at", pa.timestamp("us", tz="UTC"))])
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


def index_files(storage: Storage, index: Location, since: datetime) -> list[FileInfo]:
    """The index's files, but those of runs that started more than :data:`CLOCK_MARGIN` before
    ``since`` (aware, or naive in UTC; they hold only ids received before it)."""
    floor = as_utc(since) - CLOCK_MARGIN
    return [
        info
        for info in storage.list(index, "*/*.parquet")
        if (started := run_started(info.path.parent.name)) is None or started >= floor
    ]


def index_days_before(storage: Storage, index: Location, before: datetime) -> dict[str, list[FileInfo]]:
    """The index's files of the runs that started before ``before``, by the UTC day they started
    (retention deletes them: see :mod:`.retention`)."""
    days = _runs_by_day(storage.list(index, "*/*.parquet"))
    kept = {day: [info for started, info in runs if started < before] for day, runs in days.items()}
    return {day: infos for day, infos in kept.items() if infos}


def merge_index(
    storage: Storage, index: Location, check: Callable[[], None] = lambda: None
) -> tuple[int, int]:
    """Merge the index's files, a UTC day of runs at a time, into one file per day in the folder of
    the day's newest run (each (id, received time) once: an id synced again after it left the
    window keeps both times); a day with one file is left alone. ``check`` is called before each
    day's change (the source lock's lease, on an object store). Returns the number of files
    before and after."""
    files = storage.list(index, "*/*.parquet")
    after = len(files)
    for _, runs in sorted(_runs_by_day(files).items()):
        if len(runs) > 1:
            check()
            _merge(storage, [info for _, info in runs])
            after -= len(runs) - 1
    return len(files), after


def _runs_by_day(files: Sequence[FileInfo]) -> dict[str, list[tuple[datetime, FileInfo]]]:
    """Index files by the UTC day their run started, each day's oldest run first (files whose
    folder is not a run's are left out)."""
    days: dict[str, list[tuple[datetime, FileInfo]]] = {}
    for info in files:
        started = run_started(info.path.parent.name)
        if started is not None:
            days.setdefault(f"{started:%Y-%m-%d}", []).append((started, info))
    return {day: sorted(runs, key=lambda run: (run[0], str(run[1].path))) for day, runs in days.items()}


def _merge(storage: Storage, members: Sequence[FileInfo]) -> None:
    """``members`` (oldest run first) into one file in the newest run's folder; then the other
    members go, with the older runs' folders."""
    tables = [pq.read_table(pa.BufferReader(storage.read(info.path))).cast(INDEX_ARROW) for info in members]
    merged = pa.concat_tables(tables).group_by(["message_id", "received_at"]).aggregate([])
    newest = members[-1].path.parent
    target = newest / f"{MERGED_PREFIX}{newest.name.removeprefix('run_id=')}.parquet"
    with storage.open_write(target) as handle:  # whole before anything it replaces goes
        pq.write_table(merged.select(INDEX_ARROW.names).sort_by("received_at"), handle, compression="snappy")
    for info in members:
        if info.path.parent == newest and info.path != target:
            storage.delete(info.path)
    for folder in sorted({info.path.parent for info in members} - {newest}, key=str):
        storage.delete_tree(folder)  # an older run's folder: its files are all members
