"""Applying a run's :class:`~eventlake.sync.manifest.Manifest`: publish, register, record.

Applying moves the staged files into the lake, writes the report, registers tables, columns and
partitions, writes the schema files and finally records the ledger. Every step is idempotent: a
run killed at any point after its manifest exists is completed by the next run; killed before,
it left nothing but staging.
"""

from __future__ import annotations

from eventlake.catalog import Catalog
from eventlake.catalog.schema_file import write_schema_file
from eventlake.storage import Location, Storage, to_location
from eventlake.sync.manifest import ADD_COLUMNS, CHECK, CREATE, NONE, RETYPE, Manifest
from eventlake.sync.report import write_report_rows
from eventlake.sync.state import SyncState


def apply(manifest: Manifest, catalog: Catalog, state: SyncState, storage: Storage, lake: Location) -> None:
    """Publish a run. Safe to call again after a crash at any point."""
    for staged, final in manifest.moves:
        storage.publish(to_location(staged), to_location(final))
    if manifest.report:
        write_report_rows(storage, to_location(manifest.report_path), list(manifest.report))
    databases: set[str] = set()
    for entry in manifest.tables:
        spec = entry.spec
        if entry.change in (CHECK, ADD_COLUMNS):
            catalog.ensure_table(spec)  # looks the table up: creates it or appends what it lacks
        elif entry.change == CREATE:
            if spec.database not in databases:
                catalog.ensure_database(spec.database)
                databases.add(spec.database)
            catalog.create_table(spec)  # IF NOT EXISTS: a rerun after a crash is a no-op
        elif entry.change == RETYPE:
            have = dict(catalog.table_columns(spec.database, spec.name) or ())
            for column, kind in spec.columns:
                if column in have and have[column] != kind:
                    catalog.set_column_type(spec.database, spec.name, column, kind)
        elif entry.change != NONE:
            raise ValueError(f"run {manifest.run_id}: unknown table change {entry.change!r}")
        if entry.partitions:
            catalog.add_partitions(spec, list(entry.partitions))
        if spec.format == "parquet":
            write_schema_file(storage, lake, spec)
    storage.commit(to_location(final) for _, final in manifest.moves)  # durable before the ledger says so
    if manifest.files:
        state.record_synced(manifest.run_id, list(manifest.files))
    state.drop_pending(manifest.run_id)
    storage.delete_tree(to_location(manifest.stage))
