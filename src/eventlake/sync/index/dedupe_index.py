"""The dedupe index on disk: which of its files a run reads, and the lookup of a run's ids.

Each sync or replay run adds a folder ``run_id=<run>`` of small key files (the keys of the message
ids it brought into the lake, with their received time; see :mod:`.index_keys`). A run looks up
only the ids received in the window before its first message, and every message of a run was
received before the run started, so a folder named after a run that started well before the window
holds nothing the run needs: it is not read (:func:`index_files`). Compaction merges each UTC day's
files (:mod:`.index_merge`). :func:`seen` reads, of each file, only the buckets of the run's keys.

Lakes written before key files hold ``*.parquet`` files of (message_id, received_at): they are
read whole until the next merge converts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from eventlake.storage import FileInfo, Location, Storage
from eventlake.sync.index.index_keys import SUFFIX, drop_filter_copies, keys, lookup, open_keys
from eventlake.sync.protocol.cutoffs import index_floor
from eventlake.sync.protocol.stage import run_started
from eventlake.timestamps import as_utc

# the rows of the index's files in lakes written before key files: a message id a run brought
# into the lake, and when it was received
INDEX_ARROW = pa.schema([("message_id", pa.string()), ("received_at", pa.timestamp("us", tz="UTC"))])
LEGACY_SUFFIX = ".parquet"


def folder_started(folder_name: str) -> datetime | None:
    """When the run that names an index folder started (UTC); None for another name.

    >>> folder_started("run_id=20261122T104700123Z-1a2b")
    datetime.datetime(2026, 11, 22, 10, 47, 0, 123000, tzinfo=datetime.timezone.utc)
    """
    run_id = folder_name.removeprefix("run_id=")
    if run_id == folder_name:
        return None
    return run_started(run_id, prefix="")  # a merge's folder (compact-...) holds older runs' ids


def index_files(storage: Storage, index: Location, since: datetime) -> list[FileInfo]:
    """The index's files, but those of runs that started before :func:`.cutoffs.index_floor` of
    ``since`` (aware, or naive in UTC; they hold only ids received before it)."""
    floor = index_floor(since)
    return [
        info
        for info in index_listing(storage, index)
        if (started := folder_started(info.path.parent.name)) is None or started >= floor
    ]


def index_listing(storage: Storage, index: Location) -> list[FileInfo]:
    """Every file of the index: key files, and the Parquet files of lakes written before them."""
    return [f for f in storage.list(index, "*/*") if f.path.name.endswith((SUFFIX, LEGACY_SUFFIX))]


def index_days_before(storage: Storage, index: Location, before: datetime) -> dict[str, list[FileInfo]]:
    """The index's files of the runs that started before ``before``, by the UTC day they started
    (retention deletes them: see :mod:`.retention`)."""
    days = runs_by_day(index_listing(storage, index))
    kept = {day: [info for started, info in runs if started < before] for day, runs in days.items()}
    return {day: infos for day, infos in kept.items() if infos}


def runs_by_day(files: Sequence[FileInfo]) -> dict[str, list[tuple[datetime, FileInfo]]]:
    """Index files by the UTC day their run started, each day's oldest run first (files whose
    folder is not a run's are left out)."""
    days: dict[str, list[tuple[datetime, FileInfo]]] = {}
    for info in files:
        started = folder_started(info.path.parent.name)
        if started is not None:
            days.setdefault(f"{started:%Y-%m-%d}", []).append((started, info))
    return {day: sorted(runs, key=lambda run: (run[0], str(run[1].path))) for day, runs in days.items()}


def seen(
    storage: Storage, files: Sequence[FileInfo], message_ids: pa.Array, since: datetime,
    until: datetime | None = None, filters: Path | None = None,
) -> pa.Array:  # fmt: skip
    """Those of ``message_ids`` (distinct) that the index's ``files`` (:func:`index_files`) hold
    received at or after ``since`` (and before ``until``): of a key file its filter's blocks of
    their keys and the buckets of those it passes, a Parquet file (of a lake written before key
    files) whole. ``filters``: the local folder of the filters' copies on an object store
    (:func:`eventlake.state_layout.dedupe_filter_dir`; copies of files not in ``files`` are dropped)."""
    since, until = as_utc(since), as_utc(until) if until is not None else None
    floor, ceiling = _micros(since), _micros(until) if until is not None else None
    records = keys(message_ids)
    order = np.lexsort((records["lo"], records["hi"]))
    wanted, found = records[order], np.zeros(len(records), bool)
    legacy: list[pa.Array] = []
    for info in files:
        if info.path.name.endswith(SUFFIX):
            found[order] |= lookup(storage, open_keys(storage, info), wanted, floor, ceiling, filters=filters)
        else:
            legacy.append(_legacy_seen(storage, info, message_ids, since, until))
    if filters is not None:  # (on a local disk there are none)
        drop_filter_copies(filters, files)
    matched = message_ids.filter(pa.array(found))
    return pa.concat_arrays([matched, *legacy]).unique() if legacy else matched


def _legacy_seen(
    storage: Storage, info: FileInfo, message_ids: pa.Array, since: datetime, until: datetime | None
) -> pa.Array:
    table = pq.read_table(pa.BufferReader(storage.read(info.path))).cast(INDEX_ARROW)
    keep = pc.and_(
        pc.is_in(table["message_id"], value_set=message_ids),
        pc.greater_equal(table["received_at"], pa.scalar(since, INDEX_ARROW.field("received_at").type)),
    )
    if until is not None:
        keep = pc.and_(
            keep, pc.less(table["received_at"], pa.scalar(until, INDEX_ARROW.field("received_at").type))
        )
    return table["message_id"].filter(keep).combine_chunks().cast(message_ids.type)


def _micros(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1)


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
