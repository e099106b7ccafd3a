"""Segment Data Lakes lakes as SDL's documentation describes them, for `eventlake adopt` tests:
Parquet written with pyarrow into ``segment-data/data/<source-id>/segment_type=<folder>/day=/hr=/``
(files named as Spark names them), and Glue tables registered as SDL registered them (a table per
event type, partition keys day and hr, the flattened columns, Parquet SerDe)."""

from __future__ import annotations

import io
import uuid
from datetime import datetime, timedelta
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq

from eventlake import layout
from eventlake.storage import Location, Storage

# SDL's columns of a track table, in a lake's order (new columns appended as SDL detected them)
TRACK_COLUMNS = [
    ("anonymous_id", "string", pa.string()),
    ("context_library_name", "string", pa.string()),
    ("event", "string", pa.string()),
    ("message_id", "string", pa.string()),
    ("original_timestamp", "timestamp", pa.timestamp("us", tz="UTC")),
    ("properties_revenue", "decimal(38,6)", pa.decimal128(38, 6)),
    ("properties_quantity", "bigint", pa.int64()),
    ("properties_paid", "boolean", pa.bool_()),
    ("properties_discount", "double", pa.float64()),  # a type corrected to double (on request)
    ("received_at", "timestamp", pa.timestamp("us", tz="UTC")),
    ("sent_at", "timestamp", pa.timestamp("us", tz="UTC")),
    ("timestamp", "timestamp", pa.timestamp("us", tz="UTC")),
    ("type", "string", pa.string()),
    ("user_id", "string", pa.string()),
]
IDENTIFY_COLUMNS = [
    ("anonymous_id", "string", pa.string()),
    ("message_id", "string", pa.string()),
    ("received_at", "timestamp", pa.timestamp("us", tz="UTC")),
    ("timestamp", "timestamp", pa.timestamp("us", tz="UTC")),
    ("traits_email", "string", pa.string()),
    ("traits_age", "bigint", pa.int64()),
    ("type", "string", pa.string()),
    ("user_id", "string", pa.string()),
]


def track_row(message_id: str, received: datetime, event: str = "Page Viewed") -> dict:
    return {
        "anonymous_id": None, "context_library_name": "analytics.js", "event": event,
        "message_id": message_id, "original_timestamp": received, "properties_revenue": Decimal("9.990000"),
        "properties_quantity": 2, "properties_paid": True, "properties_discount": 0.25,
        "received_at": received, "sent_at": received, "timestamp": received, "type": "track", "user_id": "u1",
    }  # fmt: skip


def identify_row(message_id: str, received: datetime) -> dict:
    return {
        "anonymous_id": "a1", "message_id": message_id, "received_at": received, "timestamp": received,
        "traits_email": "a@b.c", "traits_age": 41, "type": "identify", "user_id": "u1",
    }  # fmt: skip


def write_partition(
    storage: Storage, lake: Location, source_id: str, folder: str, columns: list, rows: list[dict]
) -> Location:
    """One SDL file of ``rows`` (all received in one hour) in its partition folder."""
    received = rows[0]["received_at"]
    partition = f"day={received:%Y-%m-%d}/hr={received:%H}"
    schema = pa.schema([(name, arrow) for name, _, arrow in columns])
    table = pa.Table.from_pylist(rows, schema=schema)
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="snappy")
    name = f"part-00000-{uuid.uuid4()}.c000.snappy.parquet"
    path = layout.table_dir(lake, source_id, folder) / partition / name
    storage.write(path, buffer.getvalue())
    return path


def sdl_lake(
    storage: Storage, lake: Location, source_id: str, now: datetime, track_folder: str = "page_viewed"
):
    """A small SDL lake: a track event's folder and identify's, each with an hour 30 days ago
    (outside the dedupe window) and one 2 hours ago (inside). Returns {folder: message ids}."""
    old, recent = now - timedelta(days=30), now - timedelta(hours=2)
    tracks = {old: ["t-old-1", "t-old-2"], recent: ["t-new-1", "t-new-2", "t-new-3"]}
    identifies = {old: ["i-old-1"], recent: ["i-new-1"]}
    for received, ids in tracks.items():
        write_partition(
            storage, lake, source_id, track_folder, TRACK_COLUMNS, [track_row(i, received) for i in ids]
        )
    for received, ids in identifies.items():
        write_partition(
            storage, lake, source_id, "identify", IDENTIFY_COLUMNS, [identify_row(i, received) for i in ids]
        )
    return {
        track_folder: [i for ids in tracks.values() for i in ids],
        "identify": [i for ids in identifies.values() for i in ids],
    }


def register_glue(
    glue, database: str, lake: Location, source_id: str, tables: dict[str, tuple[str, list]], now: datetime
) -> None:
    """SDL's Glue database: ``tables`` maps a folder to (table name, columns); partitions of the
    hours :func:`sdl_lake` wrote."""
    serde = {
        "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
        "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
        "SerdeInfo": {"SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"},
    }
    glue.create_database(DatabaseInput={"Name": database})
    for folder, (name, columns) in tables.items():
        location = str(layout.table_dir(lake, source_id, folder)) + "/"
        glue_columns = [{"Name": n, "Type": t} for n, t, _ in columns]
        descriptor = {**serde, "Location": location, "Columns": glue_columns}
        glue.create_table(DatabaseName=database, TableInput={
            "Name": name, "TableType": "EXTERNAL_TABLE",
            "Parameters": {"EXTERNAL": "TRUE", "classification": "parquet"},
            "PartitionKeys": [{"Name": "day", "Type": "string"}, {"Name": "hr", "Type": "string"}],
            "StorageDescriptor": descriptor,
        })  # fmt: skip
        hours = [now - timedelta(days=30), now - timedelta(hours=2)]
        glue.batch_create_partition(DatabaseName=database, TableName=name, PartitionInputList=[
            {"Values": [f"{h:%Y-%m-%d}", f"{h:%H}"],
             "StorageDescriptor": {**serde, "Location": f"{location}day={h:%Y-%m-%d}/hr={h:%H}/"}}
            for h in hours
        ])  # fmt: skip
