"""The write pass: one Spark shuffle groups the rows by (table, partition), then each Python worker
casts its rows to their table's columns and writes one Parquet file per group with pyarrow.

Spark hands each worker its rows sorted by (segment_type, partition values), so a group is
complete when the key changes and memory stays bounded by the largest group. Besides the table
files, each worker writes its slice of the dedupe index and the values that did not fit their
column (quarantine). Everything goes to the run's stage; each worker returns a
:class:`~eventlake.sync.stage.StagedFile` per file, which the driver collects.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.pandas.types import to_arrow_schema

from eventlake import layout
from eventlake.schema import BIGINT, BOOLEAN, STRING, cast_value
from eventlake.schema.arrow import arrow_schema
from eventlake.storage import Storage
from eventlake.sync.dedupe import INDEX_SCHEMA
from eventlake.sync.quarantine import rows_table, value_row
from eventlake.sync.stage import DEDUPE, TABLE, VALUES, RunStage, StagedFile
from eventlake.sync.transform import dumps, loads

DEDUPE_SCHEMA = to_arrow_schema(INDEX_SCHEMA, timezone="UTC")
# a StagedFile as Arrow, what the workers hand back to the driver
STAGED_ARROW = pa.schema(
    [
        ("kind", pa.string()),
        ("name", pa.string()),
        ("rows", pa.int64()),
        ("segment_type", pa.string()),
        ("partition", pa.list_(pa.string())),
    ]
)
STAGED_SCHEMA = "kind string, name string, rows bigint, segment_type string, partition array<string>"


# the Python type whose values a column of each type takes unchanged (bool is not an int here: type())
_SAME: dict[str, type] = {STRING: str, BIGINT: int, BOOLEAN: bool}
_BIGINT_MIN, _BIGINT_MAX = -(2**63), 2**63 - 1


def cast_values(
    values: Mapping[str, Any], columns: Sequence[tuple[str, str]]
) -> tuple[list[Any], list[tuple[str, str, str, str]]]:
    """One row's values in column order, and ``(column, type, raw value, reason)`` of each value
    that could not be cast (it becomes null)."""
    row: list[Any] = []
    rejected: list[tuple[str, str, str, str]] = []
    for name, kind in columns:
        value = values.get(name)
        if value is None:
            row.append(None)
            continue
        if type(value) is _SAME.get(kind) and (kind != BIGINT or _BIGINT_MIN <= value <= _BIGINT_MAX):
            row.append(value)  # already of the column's type: cast_value would return it as is
            continue
        cast, reason = cast_value(value, kind)
        if reason is not None:
            rejected.append((name, kind, value if isinstance(value, str) else dumps(value), reason))
        row.append(cast)
    return row, rejected


def arrow_table(columns: Sequence[list[Any]], schema: pa.Schema) -> pa.Table:
    arrays = [pa.array(values, field.type) for values, field in zip(columns, schema, strict=True)]
    return pa.Table.from_arrays(arrays, schema=schema)


def write_parquet(storage: Storage, path: Any, table: pa.Table) -> None:
    """A Parquet file, whole and durable before the driver can publish it."""
    with storage.open_write(path) as handle:
        pq.write_table(table, handle, compression="snappy")


def write_partition(
    index: int,
    rows: Iterable[Any],
    *,
    schemas: Mapping[str, Sequence[tuple[str, str]]],
    stage: RunStage,
    storage: Storage,
) -> Iterator[StagedFile]:
    """Write one Spark partition. ``rows`` are ``(segment_type, *partition values, message_id,
    received_at, payload)`` sorted by the first ``1 + len(stage.keys)`` fields."""
    name = layout.part_file_name(stage.run_id, index)
    width = 1 + len(stage.keys)
    ids: list[str] = []
    received: list[Any] = []
    rejected: list[tuple[Any, ...]] = []
    for group, members in itertools.groupby(rows, key=lambda row: tuple(row[:width])):
        segment_type, values = group[0], tuple(group[1:])
        columns = schemas[segment_type]
        data: list[list[Any]] = [[] for _ in columns]
        count = 0
        for row in members:
            message_id, received_at, payload = row[width:]
            cast, bad = cast_values(loads(payload), columns)
            for column, value in zip(data, cast, strict=True):
                column.append(value)
            for column_name, kind, raw, reason in bad:
                rejected.append(
                    value_row(reason, message_id, segment_type, column_name, kind, raw, received_at)
                )
            ids.append(message_id)
            received.append(received_at)
            count += 1
        written = StagedFile(TABLE, name, count, segment_type, values)
        write_parquet(storage, stage.staged(written), arrow_table(data, arrow_schema(columns)))
        yield written
    if ids:
        written = StagedFile(DEDUPE, name, len(ids))
        write_parquet(storage, stage.staged(written), arrow_table([ids, received], DEDUPE_SCHEMA))
        yield written
    if rejected:
        written = StagedFile(VALUES, layout.part_file_name(stage.run_id, index, "values-"), len(rejected))
        write_parquet(storage, stage.staged(written), rows_table(rejected))
        yield written


def write_batches(
    batches: Iterable[pa.RecordBatch],
    *,
    schemas: Mapping[str, Sequence[tuple[str, str]]],
    stage: RunStage,
    storage: Storage,
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` wrapper of :func:`write_partition`: one batch of :data:`STAGED_ARROW` rows."""
    rows = (row for batch in batches for row in zip(*(c.to_pylist() for c in batch.columns), strict=True))
    files = list(write_partition(_task_index(), rows, schemas=schemas, stage=stage, storage=storage))
    yield staged_batch(files)


def write_rows_file(
    batches: Iterable[pa.RecordBatch], *, schema: pa.Schema, kind: str, prefix: str, stage: RunStage,
    storage: Storage,
) -> Iterator[pa.RecordBatch]:  # fmt: skip
    """``mapInArrow``: the rows of one Spark partition, as they are (cast to ``schema``), into one
    staged file of ``kind`` named ``<prefix>part-<run>-<index>.parquet``; nothing for no rows."""
    tables = [pa.Table.from_batches([batch]) for batch in batches if batch.num_rows]
    files = []
    if tables:
        table = pa.concat_tables(tables).cast(schema)
        written = StagedFile(kind, layout.part_file_name(stage.run_id, _task_index(), prefix), table.num_rows)
        write_parquet(storage, stage.staged(written), table)
        files.append(written)
    yield staged_batch(files)


def staged_files(frame: Any, writer: Any) -> list[StagedFile]:
    """Run a ``mapInArrow`` writer over ``frame``: the files the workers staged, as they report."""
    return [
        StagedFile(row["kind"], row["name"], row["rows"], row["segment_type"] or "", tuple(row["partition"]))
        for row in frame.mapInArrow(writer, STAGED_SCHEMA).collect()
    ]


def staged_batch(files: Sequence[StagedFile]) -> pa.RecordBatch:
    """What a worker hands back to the driver: its staged files as :data:`STAGED_ARROW` rows."""
    columns = [[getattr(f, field.name) for f in files] for field in STAGED_ARROW]
    columns[-1] = [list(p) for p in columns[-1]]
    return pa.RecordBatch.from_arrays(
        [pa.array(c, f.type) for c, f in zip(columns, STAGED_ARROW, strict=True)], schema=STAGED_ARROW
    )


def _task_index() -> int:
    """The Spark partition this worker writes (0 outside Spark): it makes file names unique."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


def write_tables(
    deduped: Any, schemas: Mapping[str, Sequence[tuple[str, str]]], stage: RunStage, date_partition: str,
    storage: Storage,
) -> list[StagedFile]:  # fmt: skip
    """Stage every planned table's files in one pass; the files written, as the workers report."""
    from pyspark.sql import functions as F

    partition_cols = [
        F.date_format("received_at", pattern).alias(key)
        for key, pattern in layout.partition_patterns(date_partition)
    ]
    grouped = (
        deduped.filter(F.col("segment_type").isin(list(schemas)))
        .select("segment_type", *partition_cols, "message_id", "received_at", "payload")
        .repartition("segment_type", *stage.keys)
        .sortWithinPartitions("segment_type", *stage.keys)
    )
    return staged_files(
        grouped, functools.partial(write_batches, schemas=schemas, stage=stage, storage=storage)
    )
