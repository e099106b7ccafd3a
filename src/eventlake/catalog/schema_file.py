"""The table schema file, ``segment-data/_state/schemas/<database>/<table>.json``: its one reader
and writer.

The sync writes it beside every table it registers (columns in order with their types, partition
keys, location), so tools without a metastore can use the table: ``catalog repair`` rebuilds a
lost catalog from these files and the DuckDB engine queries the lake through them.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import orjson

from eventlake import layout, state_layout
from eventlake.catalog.base import TableSpec
from eventlake.errors import EventLakeError
from eventlake.storage import Location, Storage, relative_to, to_location


class SchemaFileError(EventLakeError):
    """A schema file that cannot be read."""

    code = "internal_error"

    def __init__(self, path: Location, problem: str) -> None:
        super().__init__(f"schema file {path}: {problem}", path=str(path), problem=problem)


def schema_document(spec: TableSpec) -> dict[str, Any]:
    """The file's content: columns in order with their types, partition keys, location (and the
    format and partition path of a table that is not Parquet in Hive's ``key=value`` folders)."""
    document: dict[str, Any] = {
        "database": spec.database,
        "table": spec.name,
        "columns": [{"name": name, "type": kind} for name, kind in spec.columns],
        "partition_keys": list(spec.partition_keys),
        "location": spec.location,
    }
    if spec.format != "parquet":
        document["format"] = spec.format
    if spec.partition_path:
        document["partition_path"] = spec.partition_path
    return document


def write_schema_file(storage: Storage, lake: Location, spec: TableSpec) -> None:
    path = state_layout.schema_file(lake, spec.database, spec.name)
    storage.write(path, orjson.dumps(schema_document(spec), option=orjson.OPT_INDENT_2))


def resolve_location(storage: Storage, lake: Location, location: str) -> str:
    """Where a table's files are in *this* lake: a recorded local location is re-anchored on the
    current lake root (from its ``segment-data/`` on) when that place exists, so a lake moved,
    copied or mounted elsewhere is read where it is now; otherwise the recorded location. URIs
    (``s3a://...``) are returned as they are.

    >>> from eventlake.storage import LocalStorage
    >>> resolve_location(LocalStorage(), Path("/new/lake"), "s3a://bucket/lake/segment-data/data/x")
    's3a://bucket/lake/segment-data/data/x'
    >>> resolve_location(LocalStorage(), Path("/new/lake"), "/gone/lake/segment-data/data/x")
    '/gone/lake/segment-data/data/x'
    """
    if "://" in location:
        return location
    parts = Path(location).parts
    if layout.DATA not in parts:
        return location
    here = lake / "/".join(parts[len(parts) - 1 - parts[::-1].index(layout.DATA) :])
    on_disk = storage.local_path(here)
    return str(here) if on_disk is None or on_disk.exists() else location


def read_schema_file(storage: Storage, path: Location, lake: Location) -> TableSpec:
    """The table a schema file describes, with its location resolved against ``lake``."""
    try:
        doc: dict[str, Any] = orjson.loads(storage.read(path))
        # optional: a table that is not Parquet in Hive's key=value folders says so
        optional = {key: doc[key] for key in ("format", "partition_path") if doc.get(key)}
        return TableSpec(
            database=doc["database"],
            name=doc["table"],
            columns=tuple((c["name"], c["type"]) for c in doc["columns"]),
            partition_keys=tuple(doc["partition_keys"]),
            location=resolve_location(storage, lake, doc["location"]),
            **optional,
        )
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise SchemaFileError(path, f"{type(exc).__name__}: {exc}") from None


def read_schema_files(
    storage: Storage, lake: Location, databases: Collection[str] | None = None
) -> list[TableSpec]:
    """Every table of the lake (or of ``databases``), sorted by database and name."""
    files = storage.list(state_layout.schemas_root(lake), "*/*.json")
    return [
        read_schema_file(storage, f.path, lake)
        for f in files
        if databases is None or f.path.parent.name in databases
    ]


def source_tables(
    storage: Storage,
    lake: Location,
    database: str,
    source_id: str,
    source_dir: str,
    *,
    quarantine: bool = False,
) -> list[TableSpec]:
    """A source's Parquet tables from their schema files: its event tables (under its data folder)
    and, with ``quarantine``, its quarantine table; not another lake's nor another source's."""
    roots = [layout.source_data_dir(lake, source_dir)] + (
        [layout.quarantine_dir(lake, source_id)] if quarantine else []
    )
    return [
        spec
        for spec in read_schema_files(storage, lake, [database])
        if spec.format == "parquet" and any(is_under(to_location(spec.location), root) for root in roots)
    ]


def is_under(location: Location, root: Location) -> bool:
    """Whether ``location`` is ``root`` or below it (both local paths, or both object paths)."""
    try:
        relative_to(location, root)
        return True
    except ValueError:
        return False
