"""Dedupe by messageId: the first copy within the run, and nothing already synced in the window.

Rows are named by ``position``, a number the parse pass gives each row of a run (see
:mod:`.pieces`), so that two identical copies of a message are still two rows."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from eventlake.storage import Location, Storage
from eventlake.sync.index.dedupe_index import index_files, seen
from eventlake.sync.pipeline.plan import Kind
from eventlake.sync.protocol.cutoffs import dedupe_since

# the driver looks a run's distinct ids up in the index this many at a time (each pass: the ids'
# strings and 24-byte keys, well under 1 GiB): a bigger run is split by the hash of its ids
LOOKUP_IDS = 5_000_000

# the 64-bit key the repeated ids are searched by (a hash of the id: fixed-width keys aggregate and
# shuffle faster than the ids' strings); two ids of one key are told apart by the window over the
# ids themselves
ID_KEY = "_id_key"


def id_key() -> Column:
    """The :data:`ID_KEY` of a row's ``message_id``."""
    return F.xxhash64("message_id")


# what the dedupe says of each row it drops: its position, and its kind (see .plan.observe)
DROPPED = ("position", "segment_type", "shape", "collisions")


def dedupe(
    spark: SparkSession,
    valid: DataFrame,
    first_received: datetime | None,
    index: Location,
    window_days: int,
    storage: Storage,
    until: datetime | None = None,
    messages: int | None = None,
    filters: Path | None = None,
) -> DataFrame:
    """The ``position`` and :data:`~.plan.Kind` (``segment_type``, ``shape``, ``collisions``) of
    each ``valid`` row to drop (a row may be named twice: a repeat of an id the index holds):
    every copy of a messageId but the first (earliest received; then the smaller hash of its
    archive line, then the earlier position), and every row whose messageId is in the dedupe
    ``index`` received up to ``window_days`` before the run's first message (and, for a replay,
    before ``until``: the range's own ids are in the index from the syncs that first brought them).
    ``messages``: how many ``valid`` rows there are, if known. ``filters``: where the key files'
    filters are copied on an object store (see :func:`.seen`).

    The index is looked up in the driver (:func:`.dedupe_index.seen`: of each file only the
    buckets of the run's keys), :data:`LOOKUP_IDS` distinct ids at a time. Only the ids' keys are
    shuffled (and the repeated rows' ids, positions and kinds), and the result is small (repeats are
    rare: client retries), so the write pass drops the rows by position and the plan subtracts
    their kinds (:func:`.plan.observe`), never copying the messages themselves: the ids seen more
    than once and the ids already synced are found first and broadcast, and only the repeated
    rows are ordered. The ids seen more than once are searched by a 64-bit hash (:func:`id_key`):
    the rows of an id that shares its hash with another are ordered too, each id on its own."""
    ids = valid.select("message_id")
    keyed = valid.withColumn(ID_KEY, id_key())
    repeated = F.broadcast(keyed.groupBy(ID_KEY).count().filter("count > 1").select(ID_KEY))
    first = Window.partitionBy("message_id").orderBy("received_at", "line_hash", "position")
    drop = (
        keyed.join(repeated, ID_KEY, "left_semi")
        .withColumn("_n", F.row_number().over(first))
        .filter("_n > 1")
        .select(*DROPPED)
    )
    since = dedupe_since(first_received, window_days) if first_received is not None else None
    files = index_files(storage, index, since) if since is not None else []
    if files and since is not None:
        passes = max(1, -(-(messages or 0) // LOOKUP_IDS))
        distinct = ids.distinct()
        found = []
        for number in range(passes):
            part = (
                distinct
                if passes == 1
                else distinct.filter(F.pmod(F.hash("message_id"), F.lit(passes)) == number)
            )
            wanted = part.toArrow().column(0).combine_chunks().cast(pa.string())
            if len(wanted):
                found.append(seen(storage, files, wanted, since, until, filters))
        synced = pa.concat_arrays(found) if found else pa.array([], pa.string())
        if len(synced):
            frame = spark.createDataFrame(pa.table({"message_id": synced}))  # a local relation
            drop = drop.unionByName(
                valid.join(F.broadcast(frame), "message_id", "left_semi").select(*DROPPED)
            )
    return drop


def dropped_rows(dropped: pa.Table) -> tuple[pa.Array, list[Kind]]:
    """:func:`dedupe`'s rows (as Arrow) each once: their positions and their kinds, in one order."""
    _, first = np.unique(dropped.column("position").to_numpy(), return_index=True)
    once = dropped.take(pa.array(first, pa.int64()))
    kinds = [
        (segment_type, shape, tuple(collisions or ()))
        for segment_type, shape, collisions in zip(
            *(once.column(c).to_pylist() for c in DROPPED[1:]), strict=True
        )
    ]
    return once.column("position").combine_chunks(), kinds
