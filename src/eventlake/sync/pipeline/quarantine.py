"""The quarantine: its one row format and table, for the sync and for ``schema set-type``.

A row is a message rejected whole (``kind = 'message'``: invalid, or its table would pass the
table limit) or one value that did not fit its column (``kind = 'value'``). Each run's rows are a
partition ``run_id=<run>`` of the source's ``<prefix>_quarantine`` table.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa

from eventlake import layout
from eventlake.catalog import TableSpec
from eventlake.schema.arrow import arrow_schema
from eventlake.storage import Location, Storage
from eventlake.sync.pipeline.transform import SUPPRESSED
from eventlake.sync.protocol.stage import MESSAGES, RunStage, StagedFile

QUARANTINE_TABLE = layout.QUARANTINE_TABLE
QUARANTINE_COLUMNS = (
    ("kind", "string"),  # message (rejected whole) | value (one column's value)
    ("reason", "string"),
    ("message_id", "string"),
    ("table_name", "string"),
    ("column_name", "string"),
    ("target_type", "string"),
    ("raw_value", "string"),
    ("received_at", "timestamp"),
)
QUARANTINE_ARROW = arrow_schema(QUARANTINE_COLUMNS)
COLUMN_NAMES = tuple(name for name, _ in QUARANTINE_COLUMNS)
TABLE_LIMIT_REASON = "table limit reached"


def quarantine_table(lake: Location, database: str, source_id: str, table_prefix: str) -> TableSpec:
    """The source's quarantine table, partitioned by run."""
    location = layout.quarantine_dir(lake, source_id)
    return TableSpec(
        database, table_prefix + QUARANTINE_TABLE, QUARANTINE_COLUMNS, ("run_id",), str(location)
    )


def value_row(
    reason: str, message_id: Any, table: str, column: str, kind: str, raw: str, received_at: datetime | None
) -> tuple[Any, ...]:
    """A value that did not fit ``column`` of type ``kind``, as a quarantine row."""
    return ("value", reason, message_id, table, column, kind, raw, received_at)


def rows_table(rows: Sequence[tuple[Any, ...]]) -> Any:
    """Quarantine rows as an Arrow table (for a Parquet file of the quarantine)."""
    columns = [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in COLUMN_NAMES]
    arrays = [pa.array(values, field.type) for values, field in zip(columns, QUARANTINE_ARROW, strict=True)]
    return pa.Table.from_arrays(arrays, schema=QUARANTINE_ARROW)


def message_row(
    reason: str, message_id: Any, table: str | None, raw: str | None, received_at: Any
) -> tuple[Any, ...]:
    """A message rejected whole, as a quarantine row (``table``: its table, when it has one)."""
    return ("message", reason, message_id, table, None, None, raw, received_at)


def stage_invalid_messages(parsed: Any, stage: RunStage, storage: Storage) -> list[StagedFile]:
    """Stage the invalid messages (``parsed`` rows not ``ok``, but for a suppressed user's: those
    are dropped) into one quarantine file. (Values that did not fit their column, and the messages
    of tables past the limit, are staged by the write pass.)"""
    from pyspark.sql import functions as F

    none = F.lit(None).cast("string")
    rejected = ~F.col("ok") & (F.col("reason") != F.lit(SUPPRESSED))
    rows = parsed.filter(rejected).select(
        F.lit("message").alias("kind"), "reason", "message_id", none.alias("table_name"),
        none.alias("column_name"), none.alias("target_type"), F.col("raw").alias("raw_value"), "received_at",
    )  # fmt: skip
    write = functools.partial(_write_messages, stage=stage, storage=storage)
    return [  # few rows: one file
        StagedFile(MESSAGES, row["name"], row["rows"])
        for row in rows.coalesce(1).mapInArrow(write, "name string, rows bigint").collect()
    ]


def _write_messages(
    batches: Iterable[pa.RecordBatch], *, stage: RunStage, storage: Storage
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` over one Spark partition: its rows into one staged file of rejected messages,
    and that file's name and rows; nothing for no rows."""
    tables = [pa.Table.from_batches([batch]) for batch in batches if batch.num_rows]
    if not tables:
        return
    table = pa.concat_tables(tables).cast(QUARANTINE_ARROW)
    written = StagedFile(MESSAGES, layout.part_file_name(stage.run_id, 0, "messages-"), table.num_rows)
    stage.write_parquet(storage, written, table)
    yield pa.RecordBatch.from_pydict({"name": [written.name], "rows": [written.rows]})
