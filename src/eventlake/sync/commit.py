"""Committing a run: the manifest a run writes before publishing, and applying it.

A run stages everything under ``segment-stage/``, then writes its manifest (atomically) to
``segment-data/_state/pending/<source-id>/<run-id>.json``. Applying the manifest moves the staged
files into the lake, writes the report, registers tables, columns and partitions, writes the
schema files and finally records the ledger. Every step is idempotent: a run killed at any point
after its manifest exists is completed by the next run; killed before, it left nothing but staging.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eventlake import layout
from eventlake.catalog import Catalog, TableSpec
from eventlake.durable import fsync_dir
from eventlake.errors import EventLakeError
from eventlake.sync.report import write_report_rows
from eventlake.sync.state import SyncState, write_json_atomic


def table_entry(
    lake: Path,
    spec: TableSpec,
    partitions: Sequence[tuple[str, ...]],
    change: tuple[bool, Sequence[tuple[str, str]]] | None = None,
) -> dict[str, Any]:
    """A table to register, as the manifest keeps it. ``change`` is what the run's plan knows
    (the table is new; the columns it gains), which spares the metastore look-ups."""
    schema_file = layout.schema_file(lake, spec.database, spec.name) if spec.format == "parquet" else ""
    return {
        "database": spec.database,
        "name": spec.name,
        "columns": [list(c) for c in spec.columns],
        "partition_keys": list(spec.partition_keys),
        "location": spec.location,
        "format": spec.format,
        "partition_path": spec.partition_path,
        "partitions": [list(p) for p in partitions],
        "schema_file": str(schema_file),
        "is_new": None if change is None else change[0],
        "new_columns": None if change is None else [list(c) for c in change[1]],
    }


def _spec(entry: dict[str, Any]) -> TableSpec:
    return TableSpec(
        entry["database"],
        entry["name"],
        tuple((name, kind) for name, kind in entry["columns"]),
        tuple(entry["partition_keys"]),
        entry["location"],
        entry["format"],
        entry["partition_path"],
    )


def schema_document(spec: TableSpec) -> dict[str, Any]:
    """The table's schema file (``segment-data/_state/schemas/<db>/<table>.json``) for tools without
    a metastore: columns in order with their types, partition keys, location."""
    return {
        "database": spec.database,
        "table": spec.name,
        "columns": [{"name": name, "type": kind} for name, kind in spec.columns],
        "partition_keys": list(spec.partition_keys),
        "location": spec.location,
    }


def apply_manifest(manifest: dict[str, Any], catalog: Catalog, state: SyncState) -> None:
    """Publish a run. Safe to call again after a crash at any point."""
    folders: set[Path] = set()
    for source, target in manifest["moves"]:
        src, dst = Path(source), Path(target)
        folders.add(dst.parent)
        if src.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
        elif not dst.exists():
            raise EventLakeError(
                f"run {manifest['run_id']}: staged file {src} vanished before it was published"
            )
    write_report_rows(Path(manifest["report_path"]), manifest["report"])
    databases: set[str] = set()
    for entry in manifest["tables"]:
        spec = _spec(entry)
        if entry["is_new"] is None or entry["new_columns"]:
            catalog.ensure_table(spec)  # looks the table up: creates it or appends what it lacks
        elif entry["is_new"]:
            if spec.database not in databases:
                catalog.ensure_database(spec.database)
                databases.add(spec.database)
            catalog.create_table(spec)  # IF NOT EXISTS: a rerun after a crash is a no-op
        catalog.add_partitions(spec, [tuple(p) for p in entry["partitions"]])
        if entry["schema_file"]:
            write_json_atomic(Path(entry["schema_file"]), schema_document(spec))
    for folder in folders:  # the renames are durable before the ledger says the files are in
        fsync_dir(folder)
    state.record_synced(manifest["run_id"], manifest["files"])
    state.drop_pending(manifest["run_id"])
    shutil.rmtree(manifest["stage"], ignore_errors=True)
