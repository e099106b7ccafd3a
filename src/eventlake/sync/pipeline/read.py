"""Lake files into Spark through :mod:`eventlake.storage`: the workers read them, not Spark's own
file systems, so a lake on S3 or Azure needs no Hadoop connector (``s3a://``, ``abfss://``) and a
cluster's executors need nothing but the store's credentials.

A frame of file locations is spread over the executors; a ``mapInArrow`` worker reads each file
through the (pickled) storage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventlake.storage import Location


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
