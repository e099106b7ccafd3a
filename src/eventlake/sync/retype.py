"""``eventlake schema set-type``: change a column's type on purpose.

A column's type never changes by itself. Changed on purpose, it changes everywhere at once: in the
catalog, in the table's schema file, and in the Parquet files already written, whose values are
cast again with the same rules as a sync (:func:`eventlake.schema.cast_value`). A value that does
not fit the new type becomes null and is kept in the source's quarantine. Files are replaced one at
a time atomically and a file already of the new type is left alone, so a run cut short is finished
by running the command again. Values quarantined before (they did not fit the old type) come back
only by re-loading them from the raw archive.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from eventlake import layout
from eventlake.catalog import TableSpec, load_catalog
from eventlake.config import Settings
from eventlake.errors import UsageError
from eventlake.schema import TYPES, cast_value
from eventlake.schema.arrow import ARROW_TYPES
from eventlake.sync.commit import schema_document
from eventlake.sync.job import QUARANTINE_COLUMNS, QUARANTINE_TABLE, database_name
from eventlake.sync.lock import source_lock
from eventlake.sync.state import write_json_atomic
from eventlake.sync.writer import REJECTED_SCHEMA, arrow_table, write_parquet
from eventlake.timestamps import now_utc


@dataclass(frozen=True)
class RetypeResult:
    table: str
    column: str
    old_type: str
    new_type: str
    files_rewritten: int
    values_quarantined: int


def set_column_type(
    settings: Settings, spark: Any, qualified: str, column: str, kind: str, say: Callable[[str], None]
) -> RetypeResult:
    if kind not in TYPES:
        raise UsageError(f"unknown type {kind!r}: use one of {', '.join(TYPES)}")
    database, _, table = qualified.partition(".")
    if not table:
        raise UsageError(
            f"name the table as DATABASE.TABLE (e.g. web.track_order_completed), not {qualified!r}"
        )
    by_database = {database_name(settings, s): s for s in settings.sources}
    if database not in by_database:
        raise UsageError(
            f"no source has the database {database!r} (databases: {', '.join(sorted(by_database))})"
        )
    source = by_database[database]
    lake = settings.lake.root
    catalog = load_catalog(settings, spark)
    with source_lock(lake, source.slug, source.id, True, say):  # no sync of this source meanwhile
        columns = catalog.table_columns(database, table)
        if columns is None:
            raise UsageError(f"no table {qualified} (tables: {', '.join(catalog.list_tables(database))})")
        types = dict(columns)
        if column not in types:
            raise UsageError(f"{qualified} has no column {column!r} (columns: {', '.join(types)})")
        old = types[column]
        schema_path = layout.schema_file(lake, database, table)
        described = orjson.loads(schema_path.read_bytes())
        spec = TableSpec(
            database, table, tuple((name, kind if name == column else t) for name, t in columns),
            tuple(described["partition_keys"]), described["location"],
        )  # fmt: skip
        if old != kind:
            say(f"{qualified}.{column}: {old} -> {kind} in the catalog")
            catalog.set_column_type(database, table, column, kind)
        write_json_atomic(schema_path, schema_document(spec))
        rewritten, rejected = _rewrite_files(Path(spec.location), table, column, kind, say)
        if rejected:
            run_id = "retype-" + now_utc().strftime("%Y%m%dT%H%M%S%fZ")
            path = (
                layout.quarantine_dir(lake, source.id)
                / f"run_id={run_id}"
                / f"values-{table}-{column}.parquet"
            )
            write_parquet(path, arrow_table([list(c) for c in zip(*rejected, strict=True)], REJECTED_SCHEMA))
            quarantine = TableSpec(
                database, source.table_prefix + QUARANTINE_TABLE, QUARANTINE_COLUMNS, ("run_id",),
                str(layout.quarantine_dir(lake, source.id)),
            )  # fmt: skip
            catalog.ensure_table(quarantine)
            catalog.add_partitions(quarantine, [(run_id,)])
    return RetypeResult(qualified, column, old, kind, rewritten, len(rejected))


def _rewrite_files(
    location: Path, table: str, column: str, kind: str, say: Callable[[str], None]
) -> tuple[int, list[tuple[Any, ...]]]:
    target = ARROW_TYPES[kind]
    rewritten = 0
    rejected: list[tuple[Any, ...]] = []
    for path in sorted(location.rglob("*.parquet")):
        data = pq.read_table(path)
        index = data.schema.get_field_index(column)
        if index < 0 or data.schema.field(index).type == target:
            continue  # the column is not in this (older) file, or the file is done already
        ids = (
            data.column("message_id").to_pylist() if "message_id" in data.column_names else [None] * len(data)
        )
        received = data.column("received_at").to_pylist() if "received_at" in data.column_names else ids
        values = []
        for value, message_id, received_at in zip(data.column(index).to_pylist(), ids, received, strict=True):
            cast, reason = cast_value(_as_json(value), kind) if value is not None else (None, None)
            if reason is not None:
                raw = _as_json(value)
                rejected.append(("value", reason, message_id, table, column, kind, str(raw), received_at))
            values.append(cast)
        data = data.set_column(index, pa.field(column, target), pa.array(values, target))
        tmp = path.with_name(f".{path.name}.retype.tmp")
        write_parquet(tmp, data)
        os.replace(tmp, path)
        rewritten += 1
    say(f"{table}.{column}: {rewritten} files rewritten, {len(rejected)} values quarantined")
    return rewritten, rejected


def _as_json(value: Any) -> Any:
    """A stored value as the JSON value a client would have sent (the input of the cast rules)."""
    if isinstance(value, decimal.Decimal):
        return format(value.normalize(), "f")
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")
    return value
