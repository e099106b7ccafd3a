"""The write pass, run by Spark's Python workers: cast each row to its table's columns and write
every (table, partition) group of a Spark partition as one Parquet file with pyarrow.

Spark hands each worker its rows sorted by (segment_type, partition values), so a group is
complete when the key changes and memory stays bounded by the largest group. Besides the lake
files, each worker writes its slice of the dedupe index and the values that did not fit their
column (quarantine). It yields one small record per file written, which the driver collects.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from eventlake import layout
from eventlake.schema import cast_value
from eventlake.schema.arrow import arrow_schema
from eventlake.sync.transform import dumps, loads

DEDUPE_SCHEMA = pa.schema([("message_id", pa.string()), ("received_at", pa.timestamp("us", tz="UTC"))])
REJECTED_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("reason", pa.string()),
        ("message_id", pa.string()),
        ("table_name", pa.string()),
        ("column_name", pa.string()),
        ("target_type", pa.string()),
        ("raw_value", pa.string()),
        ("received_at", pa.timestamp("us", tz="UTC")),
    ]
)


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
        cast, reason = cast_value(value, kind)
        if reason is not None:
            rejected.append((name, kind, value if isinstance(value, str) else dumps(value), reason))
        row.append(cast)
    return row, rejected


WRITTEN_ARROW = pa.schema(
    [
        ("segment_type", pa.string()),
        ("values", pa.list_(pa.string())),
        ("rows", pa.int64()),
        ("path", pa.string()),
    ]
)


def write_batches(
    batches: Iterable[pa.RecordBatch],
    *,
    schemas: Mapping[str, Sequence[tuple[str, str]]],
    keys: Sequence[str],
    stage: str,
    run_id: str,
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` wrapper of :func:`write_partition`: one batch of :data:`WRITTEN_ARROW` records."""
    from pyspark import TaskContext

    context = TaskContext.get()
    index = context.partitionId() if context is not None else 0
    rows = (row for batch in batches for row in zip(*(c.to_pylist() for c in batch.columns), strict=True))
    records = list(write_partition(index, rows, schemas=schemas, keys=keys, stage=stage, run_id=run_id))
    columns = list(zip(*records, strict=True)) if records else [()] * 4
    yield pa.RecordBatch.from_arrays(
        [pa.array(list(c), f.type) for c, f in zip(columns, WRITTEN_ARROW, strict=True)], schema=WRITTEN_ARROW
    )


def arrow_table(columns: Sequence[list[Any]], schema: pa.Schema) -> pa.Table:
    arrays = [pa.array(values, field.type) for values, field in zip(columns, schema, strict=True)]
    return pa.Table.from_arrays(arrays, schema=schema)


def write_parquet(path: Path, table: pa.Table) -> None:
    """A Parquet file, on disk (fsync) before the driver can publish it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        pq.write_table(table, handle, compression="snappy")
        handle.flush()
        os.fsync(handle.fileno())


def write_partition(
    index: int,
    rows: Iterable[Any],
    *,
    schemas: Mapping[str, Sequence[tuple[str, str]]],
    keys: Sequence[str],
    stage: str,
    run_id: str,
) -> Iterator[tuple[str, tuple[str, ...], int, str]]:
    """Write one Spark partition. ``rows`` are ``(segment_type, *partition values, message_id,
    received_at, payload)`` sorted by the first ``1 + len(keys)`` fields. Yields ``(segment_type,
    partition values, rows, path)`` per lake file; quarantine and dedupe files are named by kind."""
    root = Path(stage)
    name = f"part-{run_id}-{index:05d}.parquet"
    width = 1 + len(keys)
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
                    ("value", reason, message_id, segment_type, column_name, kind, raw, received_at)
                )
            ids.append(message_id)
            received.append(received_at)
            count += 1
        path = root / "tables" / segment_type / layout.partition_subdir(tuple(keys), values) / name
        write_parquet(path, arrow_table(data, arrow_schema(columns)))
        yield segment_type, values, count, str(path)
    if ids:
        write_parquet(root / "dedupe" / name, arrow_table([ids, received], DEDUPE_SCHEMA))
    if rejected:
        path = root / "quarantine" / f"values-{name}"
        write_parquet(path, arrow_table([list(c) for c in zip(*rejected, strict=True)], REJECTED_SCHEMA))
        yield "", (), len(rejected), str(path)
