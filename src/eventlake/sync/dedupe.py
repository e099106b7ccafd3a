"""Dedupe by messageId: the first copy within the run, and nothing already synced in the window.

Rows are named by ``position``, a number the parse pass gives each row of a run (see
:mod:`.pieces`), so that two identical copies of a message are still two rows."""

from __future__ import annotations

from datetime import datetime, timedelta

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eventlake.storage import Location, Storage
from eventlake.sync.dedupe_index import index_files
from eventlake.sync.read import read_parquet

# the dedupe index's rows: the message ids a run brought into the lake, with their received time
INDEX_SCHEMA = T.StructType(
    [T.StructField("message_id", T.StringType()), T.StructField("received_at", T.TimestampType())]
)

# a run of at most this many messages looks its ids up in the index's readers (see dedupe)
LOOKUP_IDS = 200_000


def dedupe(
    spark: SparkSession,
    valid: DataFrame,
    first_received: datetime | None,
    index: Location,
    window_days: int,
    storage: Storage,
    until: datetime | None = None,
    messages: int | None = None,
) -> DataFrame:
    """The ``position`` of each ``valid`` row to drop: every copy of a messageId but the first
    (earliest received; then the smaller hash of its values, then the earlier position), and every
    row whose messageId is in the dedupe ``index`` received up to ``window_days`` before the run's
    first message (and, for a replay, before ``until``: the range's own ids are in the index from
    the syncs that first brought them). ``messages``: how many ``valid`` rows there are, if known: a
    run of at most :data:`LOOKUP_IDS` hands its ids to the tasks reading the index, which keep only
    the rows they match (a micro-batch's lookup then shuffles nothing of the index).

    Only message ids and positions are shuffled, and the result is small (repeats are rare: client
    retries), so the caller drops the rows by position (a broadcast anti-join in Spark, a filter in
    the write pass) and never copies the messages themselves: the ids seen more than once and the
    ids already synced are found first and broadcast, and only the repeated rows are ordered."""
    ids = valid.select("message_id")
    repeated = F.broadcast(ids.groupBy("message_id").count().filter("count > 1").select("message_id"))
    first = Window.partitionBy("message_id").orderBy("received_at", "payload_hash", "position")
    drop = (
        valid.join(repeated, "message_id", "left_semi")
        .withColumn("_n", F.row_number().over(first))
        .filter("_n > 1")
        .select("position")
    )
    since = first_received - timedelta(days=window_days) if first_received is not None else None
    files = [f.path for f in index_files(storage, index, since)] if since is not None else []
    if files:
        lookup = None
        if messages is not None and messages <= LOOKUP_IDS:
            lookup = ids.distinct().toArrow().column(0).combine_chunks()
        seen = read_parquet(spark, storage, files, INDEX_SCHEMA, since, message_ids=lookup)
        if until is not None:
            seen = seen.filter(F.col("received_at") < F.lit(until))
        if lookup is None:
            seen = seen.join(ids, "message_id", "left_semi")
        synced = seen.select("message_id").distinct()
        drop = drop.unionByName(valid.join(F.broadcast(synced), "message_id", "left_semi").select("position"))
    return drop
