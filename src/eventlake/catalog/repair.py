"""Rebuild the catalog from the lake itself: the tables' schema files and the partition folders.

The sync writes, beside every table it registers, a schema file
(``segment-data/_state/schemas/<database>/<table>.json``: columns in order with their types,
partition keys, location). With those and the ``key=value`` folders on disk, a lost, moved or
new metastore (or Glue) gets every database, table, column and partition back. The DuckDB
engine reads the same files to query the lake without any metastore.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eventlake import layout, progress, state_layout
from eventlake.catalog.base import Catalog, Column, TableSpec, load_catalog
from eventlake.catalog.schema_file import read_schema_files
from eventlake.catalog.views import database_views
from eventlake.config import CatalogKind, Settings
from eventlake.errors import UsageError
from eventlake.partitions import list_partition_files
from eventlake.progress import Say
from eventlake.storage import Storage, to_location


def partition_template(spec: TableSpec) -> str:
    """Where a partition's files are under the table's location, e.g. ``day={day}/hr={hr}``."""
    return spec.partition_path or "/".join(f"{k}={{{k}}}" for k in spec.partition_keys)


def _template_pattern(template: str) -> re.Pattern[str]:
    """``day={day}/hr={hr}`` as a pattern of a partition folder's relative path, one group a key."""
    return re.compile(
        "".join(
            f"(?P<{part[1:-1]}>[^/]+)" if part.startswith("{") else re.escape(part)
            for part in re.split(r"(\{\w+\})", template)
            if part
        )
    )


def _template_glob(template: str) -> str:
    return re.sub(r"\{\w+\}", "*", template)


@dataclass(frozen=True)
class TablePartitions:
    """A table's partition folders as one listing of its location finds them."""

    on_disk: list[tuple[str, ...]]  # holding at least one data file (values in partition key order)
    moved: dict[tuple[str, ...], str]  # rewritten into a version folder, with the folder's name

    @property
    def all(self) -> list[tuple[str, ...]]:
        return sorted(set(self.on_disk) | set(self.moved))


def table_partitions(storage: Storage, spec: TableSpec) -> TablePartitions:
    """The partitions whose folder under the table's location holds a data file (``*.parquet`` for
    Parquet tables; hidden and ``_``-prefixed files do not count, as in Spark), and those whose data
    is in a version folder (rewritten on an object store, see :mod:`eventlake.sync.protocol.rewrite`: a
    compacted table partition, a reports day merged into one file): one listing of the table's folder,
    one of its versions tree. A partition whose current version holds no file is neither."""
    if not spec.partition_keys:
        return TablePartitions([], {})
    template = partition_template(spec)
    pattern, depth = _template_pattern(template), template.count("/") + 1
    suffix = ".parquet" if spec.format == "parquet" else ""
    root = to_location(spec.location)
    found: set[tuple[str, ...]] = set()
    versions: dict[tuple[str, ...], list[str]] = {}
    for parts, _ in list_partition_files(storage, root, _template_glob(template) + "/**/*"):
        match = pattern.fullmatch("/".join(parts[:depth]))
        if match is None:
            continue
        values, inside = tuple(match[key] for key in spec.partition_keys), parts[depth:]
        if len(inside) == 1 and not inside[0].startswith((".", "_")) and inside[0].endswith(suffix):
            found.add(values)
        elif len(inside) == 2:  # a version folder's files
            versions.setdefault(values, []).append("/".join(inside))
    moved = {
        values: version
        for values, names in versions.items()
        if (version := layout.current_version(names)) is not None
    }
    # a current version holding nothing but its marker: a partition retention dropped (its old
    # files wait for the grace period), not registered again
    empty = {
        values
        for values, version in moved.items()
        if not any(
            n.startswith(version + "/") and layout.marker_run_id(n.split("/", 1)[1]) is None
            for n in versions[values]
        )
    }
    return TablePartitions(sorted(found - empty), {v: n for v, n in moved.items() if v not in empty})


@dataclass(frozen=True)
class RepairedTable:
    database: str
    table: str
    created: bool  # the catalog did not have it
    columns_added: tuple[Column, ...]  # appended to a table the catalog had (empty when created)
    partitions: int  # partitions found on disk (registered if missing)
    location: str
    notice: str = ""  # e.g. a column whose type differs between the catalog and the schema file


@dataclass(frozen=True)
class RepairResult:
    tables: tuple[RepairedTable, ...]
    views: tuple[str, ...] = ()  # the warehouse views created or replaced (database.view)

    @property
    def created(self) -> int:
        return sum(t.created for t in self.tables)

    @property
    def partitions(self) -> int:
        return sum(t.partitions for t in self.tables)


def repair_table(catalog: Catalog, storage: Storage, spec: TableSpec) -> RepairedTable:
    """Bring one table of the catalog in line with its schema file and its partition folders."""
    (repaired,) = repair_tables(catalog, storage, [spec])
    return repaired


def repair_tables(
    catalog: Catalog, storage: Storage, specs: Sequence[TableSpec], say: Say | None = None
) -> list[RepairedTable]:
    """Bring these tables of the catalog in line with their schema files and partition folders:
    every table and its columns first (each said as it is done), then every table's partitions in
    one :meth:`~eventlake.catalog.base.Catalog.add_partitions_of` (several tables at once on a Hive
    metastore); the partitions a rewrite moved go straight to their version folders."""
    repaired, registering = [], []
    for spec in specs:
        existing = catalog.table_columns(spec.database, spec.name)
        added = catalog.ensure_table(spec)
        notice = ""
        if existing is not None:
            declared = dict(spec.columns)
            differ = [f"{n} {t} (schema file: {declared[n]})" for n, t in existing if declared.get(n, t) != t]
            if differ:
                notice = "catalog types differ from the schema file: " + ", ".join(differ)
        listed = table_partitions(storage, spec)
        if listed.moved:  # rewritten on an object store: the catalog reads the version folder
            moves = [
                (values, str(layout.version_dir(to_location(spec.partition_location(values)), version)))
                for values, version in listed.moved.items()
            ]
            catalog.set_partition_locations(spec.database, spec.name, spec.partition_keys, moves)
        in_place = [values for values in listed.all if values not in listed.moved]
        if in_place:
            registering.append((spec, in_place))
        table = RepairedTable(
            spec.database, spec.name, existing is None, added if existing is not None else (),
            len(listed.all), spec.location, notice,
        )  # fmt: skip
        repaired.append(table)
        if say is not None:
            columns = ", ".join(n for n, _ in table.columns_added)
            say(
                f"{spec.qualified}: {'created' if table.created else 'present'}, "
                f"{table.partitions} partitions"
                + (f", columns added: {columns}" if columns else "")
                + (f"; {table.notice}" if table.notice else "")
            )
    if say is not None and registering:
        count = sum(len(partitions) for _, partitions in registering)
        say(f"registering the {count} partitions of {len(registering)} tables the catalog may lack ...")
    catalog.add_partitions_of(registering)
    return repaired


def repair_catalog(
    settings: Settings,
    slugs: Sequence[str] = (),
    *,
    tables: Sequence[TableSpec] = (),
    spark: Any = None,
    say: Say = progress.say,
) -> RepairResult:
    """Recreate databases, tables, columns and partitions of the given sources (default: every
    table that has a schema file) in the configured catalog. Idempotent: what exists is kept.

    Each source's warehouse views (``tracks``, ``pages``, ... see :mod:`eventlake.schema.warehouse`)
    are created or replaced over its tables as they are.

    ``tables`` are repaired too: tables the sync registers that may have no schema file yet (its
    reports table, whose schema file the first successful run writes). ``spark`` is an existing
    SparkSession for the hive catalog; otherwise one is built from the settings and stopped at the
    end.
    """
    lake = settings.lake.root
    databases = {settings.database_name(settings.source(s)) for s in slugs} or None
    storage = settings.lake.storage()
    specs = read_schema_files(storage, lake, databases)
    if not specs:
        raise UsageError(
            f"no schema files under {state_layout.schemas_root(lake)}"
            + (f" for database {', '.join(sorted(databases))}" if databases else "")
            + ": nothing to repair (they are written by `eventlake sync`)"
        )
    named = {(s.database, s.name) for s in specs}
    specs = [*specs, *(t for t in tables if (t.database, t.name) not in named)]
    if settings.catalog.kind != CatalogKind.HIVE:  # the other back ends need no Spark
        return _repair(load_catalog(settings, spark), storage, specs, say)
    from eventlake.jvm.session import owned_session

    with owned_session(settings, "eventlake-catalog-repair", spark, say) as session:
        return _repair(load_catalog(settings, session), storage, specs, say)


def _repair(catalog: Catalog, storage: Storage, specs: Sequence[TableSpec], say: Say) -> RepairResult:
    repaired = repair_tables(catalog, storage, specs, say)
    views = []
    for database, found in database_views(specs):
        left = catalog.replace_views(database, found.views)
        views += [f"{database}.{v.name}" for v in found.views if v.name not in left]
        skipped = [*found.skipped, *left]
        say(
            f"{database}: warehouse views {', '.join(v.name for v in found.views if v.name not in left)}"
            + (f" (not made: tables have or could have their names: {', '.join(skipped)})" if skipped else "")
        )
    return RepairResult(tuple(repaired), tuple(views))
