"""``eventlake schema set-type``: change a column's type on purpose.

A column's type never changes by itself. Changed on purpose, it changes everywhere at once: in the
catalog, in the table's schema file, and in the Parquet files already written, whose values are
cast again with the same rules as a sync (:func:`eventlake.schema.cast_value`). A value that does
not fit the new type becomes null and is kept in the source's quarantine.

The change is committed like a sync run: the rewritten files and the quarantined values are
staged, a manifest is written, and applying it publishes the files, changes the catalog and the
schema file. On a local disk each file is replaced in place; on an object store each partition
holding a file to rewrite is rewritten whole, as a compaction does (a new version folder and the
catalog's partition location moved to it: readers through the catalog see the partition's old
files or its new ones, never a mix). Killed at any point, the next sync or set-type completes
it (or, before the manifest, starts it again). A file already of the new type is left alone.
Values quarantined before (they did not fit the old type) come back only by re-loading them from
the raw archive.
"""

from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from eventlake import layout, partitions, state_layout
from eventlake.catalog import Catalog, TableSpec, load_catalog
from eventlake.catalog.schema_file import read_schema_file, source_tables
from eventlake.config import Settings, SourceSettings
from eventlake.errors import UsageError
from eventlake.progress import Say
from eventlake.schema import TYPES, cast_value
from eventlake.schema.arrow import ARROW_TYPES
from eventlake.storage import Storage, to_location
from eventlake.sync.pipeline.quarantine import quarantine_table, rows_table, value_row
from eventlake.sync.protocol.manifest import CHECK, RETYPE, Manifest, PartitionRewrite, TableEntry
from eventlake.sync.protocol.rewrite import RewriteKind, RewriteRun, finish_rewrite, stage_output
from eventlake.sync.protocol.runner import Hold, publish, run_source
from eventlake.sync.protocol.stage import REPLACE, VALUES, RunStage, StagedFile, new_run_id
from eventlake.sync.protocol.state import SyncState
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
    settings: Settings, spark: Any, qualified: str, column: str, kind: str, say: Say
) -> RetypeResult:
    if kind not in TYPES:
        raise UsageError(f"unknown type {kind!r}: use one of {', '.join(TYPES)}")
    database, _, table = qualified.partition(".")
    if not table:
        raise UsageError(
            f"name the table as DATABASE.TABLE (e.g. web.track_order_completed), not {qualified!r}"
        )
    storage = settings.lake.storage()
    source = _source_of(settings, storage, database, table)
    catalog = load_catalog(settings, spark)

    def work(hold: Hold) -> RetypeResult:  # no sync of this source meanwhile
        return _retype(settings, storage, catalog, source, hold, qualified, column, kind, say)

    return run_source(settings, storage, source, work, catalog=lambda: catalog, say=say)


def _retype(
    settings: Settings, storage: Storage, catalog: Catalog, source: SourceSettings, hold: Hold,
    qualified: str, column: str, kind: str, say: Say,
) -> RetypeResult:  # fmt: skip
    database, _, table = qualified.partition(".")
    lake = settings.lake.root
    state = SyncState(storage, lake, source.id)
    columns = catalog.table_columns(database, table)
    if columns is None:
        raise UsageError(f"no table {qualified} (tables: {', '.join(catalog.list_tables(database))})")
    types = dict(columns)
    if column not in types:
        raise UsageError(f"{qualified} has no column {column!r} (columns: {', '.join(types)})")
    old = types[column]
    described = read_schema_file(storage, state_layout.schema_file(lake, database, table), lake)
    spec = replace(described, columns=tuple((n, kind if n == column else t) for n, t in columns))
    stage = RunStage(lake, source.id, source.dir_name, new_run_id(now_utc(), "retype-"), spec.partition_keys)
    staged, rewrites, rewritten, rejected = _stage_rewrites(storage, stage, spec, table, column, kind)
    if old != kind:
        say(f"{qualified}.{column}: {old} -> {kind} in the catalog")
    manifest = _manifest(stage, source, spec, staged, rewrites, rejected)
    publish(manifest, hold, state, storage, lake, catalog)
    say(f"{table}.{column}: {rewritten} files rewritten, {rejected} values quarantined")
    return RetypeResult(qualified, column, old, kind, rewritten, rejected)


def _manifest(
    stage: RunStage,
    source: SourceSettings,
    spec: Any,
    staged: list[StagedFile],
    rewrites: list[PartitionRewrite],
    rejected: int,
) -> Manifest:
    tables = [TableEntry(spec, (), RETYPE)]
    if rejected:
        quarantine = quarantine_table(stage.lake, spec.database, source.id, source.table_prefix)
        tables.append(TableEntry(quarantine, ((stage.run_id,),), CHECK))
    return Manifest(
        run_id=stage.run_id, source_id=source.id, files=(), moves=tuple(stage.moves(staged)),
        tables=tuple(tables), report_path="", report=(), stage=str(stage.root), rewrites=tuple(rewrites),
    )  # fmt: skip


def _source_of(settings: Settings, storage: Storage, database: str, table: str) -> SourceSettings:
    """The source whose folders hold the table (sources may share a database)."""
    sharing = [s for s in settings.sources if settings.database_name(s) == database]
    if not sharing:
        known = ", ".join(sorted({settings.database_name(s) for s in settings.sources}))
        raise UsageError(f"no source has the database {database!r} (databases: {known})")
    for source in sharing:
        lake, folder = settings.lake.root, source.dir_name
        specs = source_tables(storage, lake, database, source.id, folder, quarantine=True)
        if any(spec.name == table for spec in specs):
            return source
    return sharing[0]  # no such table: said below, with the database's tables


def _stage_rewrites(
    storage: Storage, stage: RunStage, spec: TableSpec, table: str, column: str, kind: str
) -> tuple[list[StagedFile], list[PartitionRewrite], int, int]:
    """Stage a new version of every data file of the table whose ``column`` is not yet of type
    ``kind``, and the values that do not fit it (one quarantine file): on a local disk each file
    replaces the old one in place; elsewhere each partition holding such a file is rewritten whole
    (a new version folder, see :mod:`eventlake.sync.protocol.rewrite`). Returns the staged files, the
    rewrites,
    the files rewritten and the values quarantined."""
    target = ARROW_TYPES[kind]
    location = to_location(spec.location)
    in_place = storage.local_path(location) is not None
    run = RewriteRun.new(RewriteKind.SET_TYPE)
    staged: list[StagedFile] = []
    rewrites: list[PartitionRewrite] = []
    rejected: list[tuple[Any, ...]] = []
    count = 0
    listing = partitions.partition_listing(storage, location, len(spec.partition_keys))
    for folder, infos in sorted(listing.items(), key=lambda item: str(item[0])):
        outputs: list[str] = []
        replaced: list[str] = []
        for name in partitions.partition_files(storage, folder, infos):
            info = infos[name]
            data = pq.read_table(pa.BufferReader(storage.read(info.path)))
            index = data.schema.get_field_index(column)
            if index < 0 or data.schema.field(index).type == target:
                continue  # the column is not in this (older) file, or the file is done already
            ids = (
                data.column("message_id").to_pylist()
                if "message_id" in data.column_names
                else [None] * len(data)
            )
            received = data.column("received_at").to_pylist() if "received_at" in data.column_names else ids
            values = []
            for value, message_id, received_at in zip(
                data.column(index).to_pylist(), ids, received, strict=True
            ):
                cast, reason = cast_value(_as_json(value), kind) if value is not None else (None, None)
                if reason is not None:
                    rejected.append(
                        value_row(reason, message_id, table, column, kind, str(_as_json(value)), received_at)
                    )
                values.append(cast)
            data = data.set_column(index, pa.field(column, target), pa.array(values, target))
            count += 1
            if in_place:
                rewritten = StagedFile(REPLACE, layout.lake_relative(stage.lake, info.path), len(data))
                stage.write_parquet(storage, rewritten, data)
                staged.append(rewritten)
                continue
            outputs.append(stage_output(storage, stage, folder, info.path.name, data))
            replaced.append(name)
        if replaced:
            rewrites.append(finish_rewrite(storage, stage, folder, infos, outputs, replaced, run, spec))
    if rejected:
        values_file = StagedFile(VALUES, f"values-{table}-{column}.parquet", len(rejected))
        stage.write_parquet(storage, values_file, rows_table(rejected))
        staged.append(values_file)
    return staged, rewrites, count, len(rejected)


def _as_json(value: Any) -> Any:
    """A stored value as the JSON value a client would have sent (the input of the cast rules)."""
    if isinstance(value, decimal.Decimal):
        return format(value.normalize(), "f")
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")
    return value
