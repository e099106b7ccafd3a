"""Applying a run's :class:`~eventlake.sync.protocol.manifest.Manifest`: publish, rewrite, register, record.

Applying moves the staged files into the lake, switches the partitions a compaction rewrote to
their new files, writes the report, registers tables, columns and partitions, writes the schema
files, replaces the warehouse views of a database whose tables changed, records the archive files
found damaged (:mod:`.damaged`) and finally records the ledger. Every step is idempotent: a run
killed at any point after its manifest exists is completed by the next run; killed before, it left
nothing but staging.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from eventlake.catalog import Catalog, TableSpec
from eventlake.catalog.schema_file import read_schema_files, write_schema_file
from eventlake.catalog.views import database_views, lake_table
from eventlake.config import Settings
from eventlake.progress import say
from eventlake.storage import Location, Storage, to_location
from eventlake.sync.protocol.damaged import DamagedFile, record_run
from eventlake.sync.protocol.manifest import ADD_COLUMNS, CHECK, CREATE, NONE, RETYPE, Manifest
from eventlake.sync.protocol.report import (
    REPORT_PARTITION_KEYS,
    REPORTS_DATABASE,
    REPORTS_TABLE,
    note_report_day,
    write_report_rows,
)
from eventlake.sync.protocol.rewrite import retire, switch_later, switch_partitions
from eventlake.sync.protocol.state import SyncState
from eventlake.timestamps import parse_timestamp


class CatalogOnce:
    """A run's catalog, loaded at its first use (a run that registers nothing starts no Spark):
    ``catalog`` when given, else one from the settings on ``spark`` (None: built if needed)."""

    def __init__(self, settings: Settings, spark: Any = None, catalog: Catalog | None = None) -> None:
        self.settings, self.spark, self.catalog = settings, spark, catalog

    def __call__(self) -> Catalog:
        if self.catalog is None:
            from eventlake.catalog import load_catalog

            self.catalog = load_catalog(self.settings, self.spark)
        return self.catalog

    def for_manifest(self, manifest: Manifest) -> Catalog | None:
        """The catalog when ``manifest`` registers tables; None when it needs none."""
        return self() if manifest.tables else None


def apply(
    manifest: Manifest, catalog: Catalog | None, state: SyncState, storage: Storage, lake: Location,
    *, load_catalog: Callable[[], Catalog] | None = None, resumed: bool = True,
) -> None:  # fmt: skip
    """Publish a run. Safe to call again after a crash at any point. ``catalog`` may be None for a
    manifest that registers no table (a compaction's): ``load_catalog`` gives it when a rewritten
    partition's location is to move (on an object store). ``resumed``: False only for the first
    application of a manifest written just now, which nothing can have applied in part (a
    rewritten partition's version folder is then not looked for: see
    :func:`~eventlake.sync.protocol.rewrite.switch_partitions`)."""

    def the_catalog() -> Catalog:
        nonlocal catalog
        if catalog is None and load_catalog is not None:
            catalog = load_catalog()
        if catalog is None:
            raise ValueError(f"run {manifest.run_id} moves partitions: applying it needs the catalog")
        return catalog

    storage.publish_many([(to_location(staged), to_location(final)) for staged, final in manifest.moves])
    moved, later = switch_partitions(storage, manifest.rewrites, the_catalog, resumed=resumed)
    if manifest.report:
        write_report_rows(storage, to_location(manifest.report_path), list(manifest.report))
        note_report_day(storage, lake, manifest.report[0]["day"])  # where readers walking back stop
    if manifest.tables and catalog is None:
        raise ValueError(f"run {manifest.run_id} registers tables: applying it needs the catalog")
    databases: set[str] = set()
    registering: list[tuple[TableSpec, list[tuple[str, ...]]]] = []
    for entry in manifest.tables:
        assert catalog is not None
        spec = entry.spec
        if (spec.database, spec.name) == (REPORTS_DATABASE, REPORTS_TABLE) and (
            spec.partition_keys != REPORT_PARTITION_KEYS
        ):  # a run's of a version with a partition per run: its source's first sync merges it
            continue  # and registers its day (eventlake.sync.protocol.report_days)
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
            registering.append((spec, list(entry.partitions)))
        write_schema_file(storage, lake, spec)  # the reports table's too: the DuckDB engine reads it
    if registering:
        assert catalog is not None
        catalog.add_partitions_of(registering)  # every table exists by now: several at once
    if later:
        switch_later(the_catalog(), later, say)
    _replace_views(manifest, catalog, storage, lake)
    storage.commit(to_location(final) for _, final in manifest.moves)  # durable before the ledger says so
    if moved:
        retire(storage, lake, manifest.source_id, manifest.run_id, moved)
    if manifest.damaged or manifest.cleared:  # before the ledger counts the damaged files handled
        when = _report_time(manifest)
        found = [DamagedFile(key, problem, manifest.run_id, when) for key, problem in manifest.damaged]
        record_run(storage, lake, manifest.source_id, manifest.cleared, found)
    if manifest.files:
        state.record_synced(manifest.run_id, list(manifest.files))
    state.drop_pending(manifest.run_id)
    storage.delete_tree(to_location(manifest.stage))


def _report_time(manifest: Manifest) -> datetime | None:
    """When the run started (its report's): the time its damaged files were found."""
    head = next((r for r in manifest.report if r.get("type") == "source"), None)
    return parse_timestamp(head.get("start_time")) if head else None


def _replace_views(manifest: Manifest, catalog: Catalog | None, storage: Storage, lake: Location) -> None:
    """A run that created a lake table or changed its columns replaces its database's warehouse
    views (``tracks``, ``pages``, one per event, ...), so that they show the new columns."""
    changed = {
        e.spec.database for e in manifest.tables
        if e.change in (CREATE, ADD_COLUMNS, RETYPE) and lake_table(e.spec) is not None
    }  # fmt: skip
    for database in sorted(changed):
        assert catalog is not None
        try:
            for name, found in database_views(read_schema_files(storage, lake, [database])):
                left = catalog.replace_views(name, found.views)
                if left:
                    say(f"{name}: warehouse views {', '.join(left)} not made: tables of those names exist")
        except Exception as exc:  # the views must not hold the run: the data is published either way
            say(f"{database}: warehouse views not replaced ({type(exc).__name__}: {exc}); "
                "`eventlake catalog repair` replaces them")  # fmt: skip
