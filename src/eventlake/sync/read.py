"""Lake files into Spark through :mod:`eventlake.storage`: the workers read them, not Spark's own
file systems, so a lake on S3 or Azure needs no Hadoop connector (``s3a://``, ``abfss://``) and a
cluster's executors need nothing but the store's credentials.

A frame of file locations is spread over the executors; a ``mapInArrow`` worker reads each file
through the (pickled) storage and yields its rows.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from eventlake.storage import Location, Storage, to_location
from eventlake.timestamps import as_utc


def files_frame(
    spark: Any, locations: Sequence[Location], tasks_per_core: int = 8, sizes: Sequence[int] | None = None
) -> Any:
    """A frame of ``location``, ``number`` (the file's index in ``locations``: a name for what
    a task computes that stays the same when Spark recomputes it elsewhere) and ``size`` (its
    bytes, from ``sizes``; 0 when not given: what bounds a worker's read-ahead), one row per file, in
    as many partitions as there are files up to ``tasks_per_core`` per core of the cluster: each
    file is read by one task, and small tasks keep the cores equally busy (ten archive files on two
    cores in four tasks of 2, 3, 2 and 3 files kept one core busy for six files and the other for
    four). Small files are better read by one task per core: a task costs tens of ms."""
    slices = max(1, min(len(locations), tasks_per_core * spark.sparkContext.defaultParallelism))
    known = list(sizes) if sizes is not None else [0] * len(locations)
    rows = spark.sparkContext.parallelize(
        [(str(loc), n, known[n]) for n, loc in enumerate(locations)], slices
    )
    return spark.createDataFrame(rows, "location string, number bigint, size bigint")


def read_parquet(
    spark: Any, storage: Storage, locations: Sequence[Location], schema: Any, since: datetime | None = None,
    message_ids: pa.Array | None = None,
) -> Any:  # fmt: skip
    """The rows of these Parquet files (small ones: a task per core reads them) as a frame of
    ``schema`` (a Spark ``StructType``); ``since``: only rows whose ``received_at`` is at or after it;
    ``message_ids``: only rows whose ``message_id`` is one of these (filtered by the readers)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(schema, timezone="UTC")
    read = functools.partial(
        _read_parquet_files, storage=storage, schema=arrow, since=since, message_ids=message_ids
    )
    return files_frame(spark, locations, tasks_per_core=1).mapInArrow(read, schema)


def _read_parquet_files(
    batches: Iterable[pa.RecordBatch], *, storage: Storage, schema: pa.Schema, since: datetime | None,
    message_ids: pa.Array | None,
) -> Iterator[pa.RecordBatch]:  # fmt: skip
    since = as_utc(since) if since is not None else None
    for batch in batches:
        for location in batch.column(0).to_pylist():
            table = pq.read_table(io.BytesIO(storage.read(to_location(location))), columns=schema.names)
            table = table.cast(schema)
            if since is not None:
                floor = pa.scalar(since, schema.field("received_at").type)
                table = table.filter(pc.greater_equal(table["received_at"], floor))
            if message_ids is not None:
                table = table.filter(pc.is_in(table["message_id"], value_set=message_ids))
            yield from table.to_batches()
