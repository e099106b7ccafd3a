"""Which warehouse views a database gets: its lake tables (from their specs) grouped by source
(table prefix), through the pure rules of :mod:`eventlake.schema.warehouse`."""

from __future__ import annotations

from collections.abc import Sequence

from eventlake.catalog.base import TableSpec
from eventlake.schema.warehouse import LakeTable, Views, warehouse_views
from eventlake.storage import to_location

_SEGMENT_TYPE = "segment_type="


def lake_table(spec: TableSpec) -> LakeTable | None:
    """A lake table (``.../segment_type=<type>`` under a source's data folder) named ``<prefix><type>``;
    None for other tables (quarantine, sync reports)."""
    folder = to_location(spec.location).name
    if spec.format != "parquet" or not folder.startswith(_SEGMENT_TYPE):
        return None
    kind = folder[len(_SEGMENT_TYPE) :]
    return LakeTable(spec.name, kind, spec.columns) if spec.name.endswith(kind) else None


def database_views(specs: Sequence[TableSpec]) -> list[tuple[str, Views]]:
    """``(database, views)`` for each database and table prefix among ``specs``."""
    groups: dict[tuple[str, str], list[LakeTable]] = {}
    for spec in specs:
        table = lake_table(spec)
        if table is not None:
            prefix = spec.name[: len(spec.name) - len(table.segment_type)]
            groups.setdefault((spec.database, prefix), []).append(table)
    return [
        (database, warehouse_views(tables, prefix)) for (database, prefix), tables in sorted(groups.items())
    ]
