"""`eventlake catalog repair`: the catalog rebuilt from schema files and partition folders.

Fast tier: partition discovery and the repair steps against an in-memory catalog. Spark tier: a
real sync, its database dropped from the real metastore, repaired, and the same rows back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest

from eventlake import layout, state_layout
from eventlake.catalog import base
from eventlake.catalog.base import Catalog, Column, TableSpec
from eventlake.catalog.repair import repair_catalog, repair_table, repair_tables, table_partitions
from eventlake.catalog.schema_file import read_schema_files
from eventlake.config import CatalogSettings, LakeSettings, Settings, SourceSettings
from eventlake.config.settings import Secret
from eventlake.errors import UsageError
from eventlake.query import run_query
from eventlake.storage import LocalStorage
from eventlake.sync import run_sync
from eventlake.sync.protocol.report import reports_table

DISK = LocalStorage()
COLUMNS = (("message_id", "string"), ("properties_revenue", "decimal(38,6)"))


class MemoryCatalog(Catalog):
    """Just enough catalog to watch what the repair does."""

    def __init__(self) -> None:
        self.databases: set[str] = set()
        self.tables: dict[tuple[str, str], TableSpec] = {}
        self.parts: dict[tuple[str, str], set[tuple[str, ...]]] = {}
        self.views: dict[tuple[str, str], tuple[Column, ...]] = {}
        self.locations: dict[tuple[str, str, tuple[str, ...]], str] = {}  # moved partitions

    def replace_views(self, database: str, views) -> list[str]:
        self.views.update({(database, v.name): v.columns for v in views})
        return []

    def ensure_database(self, name: str) -> None:
        self.databases.add(name)

    def table_columns(self, database: str, table: str) -> tuple[Column, ...] | None:
        spec = self.tables.get((database, table))
        return None if spec is None else spec.columns

    def list_tables(self, database: str) -> list[str]:
        return sorted(t for d, t in self.tables if d == database)

    def create_table(self, spec: TableSpec) -> None:
        assert spec.database in self.databases
        self.tables.setdefault((spec.database, spec.name), spec)
        self.parts.setdefault((spec.database, spec.name), set())

    def add_columns(self, database: str, table: str, columns: Sequence[Column]) -> None:
        spec = self.tables[(database, table)]
        self.tables[(database, table)] = dataclasses.replace(spec, columns=(*spec.columns, *columns))

    def set_column_type(self, database: str, table: str, column: str, kind: str) -> None:
        spec = self.tables[(database, table)]
        columns = tuple((name, kind if name == column else old) for name, old in spec.columns)
        self.tables[(database, table)] = dataclasses.replace(spec, columns=columns)

    def add_partitions(self, spec: TableSpec, partitions: Sequence[tuple[str, ...]]) -> None:
        self.parts[(spec.database, spec.name)].update(partitions)

    def drop_partitions(self, spec: TableSpec, partitions: Sequence[tuple[str, ...]]) -> None:
        self.parts[(spec.database, spec.name)].difference_update(partitions)

    def partitions(self, database: str, table: str) -> list[tuple[str, ...]]:
        return sorted(self.parts.get((database, table), ()))

    def set_partition_location(self, database, table, partition_keys, values, location) -> bool:
        if (database, table) not in self.tables:
            return False
        self.parts[(database, table)].add(tuple(values))
        self.locations[(database, table, tuple(values))] = location
        return True

    def drop_table(self, database: str, table: str) -> None:
        self.tables.pop((database, table), None)

    def drop_database(self, database: str) -> None:
        self.databases.discard(database)


def touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")


def schema_file(lake: Path, spec: TableSpec) -> None:
    path = state_layout.schema_file(lake, spec.database, spec.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "database": spec.database,
        "table": spec.name,
        "columns": [{"name": n, "type": t} for n, t in spec.columns],
        "partition_keys": list(spec.partition_keys),
        "location": spec.location,
    }
    path.write_bytes(orjson.dumps(doc))


def test_partitions_on_disk_are_folders_holding_data_files(tmp_path: Path) -> None:
    table = tmp_path / "segment_type=page"
    touch(table / "day=2026-11-20" / "hr=07" / "part-0.parquet")
    touch(table / "day=2026-11-20" / "hr=07" / "part-1.parquet")
    touch(table / "day=2026-11-20" / "hr=08" / "part-0.parquet")
    touch(table / "day=2026-11-21" / "hr=00" / "_SUCCESS")  # no data file
    touch(table / "day=2026-11-21" / "hr=01" / ".part-0.parquet")  # hidden
    touch(table / "day=2026-11-21" / "x=01" / "part-0.parquet")  # not a partition of this table
    touch(table / "day=2026-11-22" / "part-0.parquet")  # too shallow
    spec = TableSpec("web", "page", COLUMNS, ("day", "hr"), str(table))
    assert table_partitions(DISK, spec).on_disk == [("2026-11-20", "07"), ("2026-11-20", "08")]
    assert table_partitions(DISK, dataclasses.replace(spec, location=str(tmp_path / "gone"))).on_disk == []


def test_partitions_of_a_table_with_its_own_folder_layout(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    touch(reports / "day=2026-11-20" / "source=s1" / "run_id=r1" / "report.json")
    touch(reports / "day=2026-11-21" / "source=s2" / "run_id=r2" / "report.json")
    touch(reports / "day=2026-11-21" / "source=s2" / "run_id=r3" / ".report.json.tmp")
    spec = TableSpec(
        "__segment_datalake",
        "sync_reports",
        (("status", "string"),),
        ("source_id", "day", "run_id"),
        str(reports),
        format="json",
        partition_path="day={day}/source={source_id}/run_id={run_id}",
    )
    assert table_partitions(DISK, spec).on_disk == [("s1", "2026-11-20", "r1"), ("s2", "2026-11-21", "r2")]


def test_a_reports_day_merged_on_an_object_store_is_registered_at_its_version_folder(tmp_path: Path) -> None:
    """After the daily merge on an object store, a source's day is one file in a version folder
    (the day's per-run files retired): the repair finds that day and points the catalog at it."""
    lake = tmp_path / "lake"
    merged = layout.report_folder(lake, "2026-11-20", "s1")
    version = layout.version_folder_name(1, "compact-20261121T000100123Z-1a2b")
    touch(layout.version_dir(merged, version) / layout.merged_report_name("compact-20261121T000100123Z-1a2b"))
    touch(
        layout.version_dir(merged, version)
        / layout.compaction_marker_name("compact-20261121T000100123Z-1a2b")
    )
    touch(layout.report_file(lake, "2026-11-21", "s1", "20261121T101500123Z-3c4d"))  # today: not merged
    spec = reports_table(lake)
    assert table_partitions(DISK, spec).on_disk == [("s1", "2026-11-21")]
    assert table_partitions(DISK, spec).moved == {("s1", "2026-11-20"): version}
    catalog = MemoryCatalog()
    assert repair_table(catalog, DISK, spec).partitions == 2
    assert catalog.partitions(spec.database, spec.name) == [("s1", "2026-11-20"), ("s1", "2026-11-21")]
    where = tmp_path / "lake/segment-data/versions/reports/day=2026-11-20/source=s1" / version
    assert catalog.locations == {(spec.database, spec.name, ("s1", "2026-11-20")): str(where)}


def test_a_partition_retention_dropped_is_not_registered_again(tmp_path: Path) -> None:
    """During its grace period a dropped partition keeps its files, and its current version is
    retention's empty one (a marker only): the repair does not bring it back into the catalog."""
    table = layout.table_dir(tmp_path / "lake", "src", "page")
    for hour in ("07", "08"):
        touch(table / "day=2026-11-20" / f"hr={hour}" / "part-20261120T070000123Z-1a2b-00000.parquet")
    dropped = table / "day=2026-11-20" / "hr=07"
    run = "compact-20261222T000100123Z-1a2b3c4d5e6f7a8b"
    empty = layout.version_dir(dropped, layout.version_folder_name(1, run))
    touch(empty / layout.compaction_marker_name(run))
    spec = TableSpec("web", "page", COLUMNS, ("day", "hr"), str(table))
    assert table_partitions(DISK, spec).all == [("2026-11-20", "08")]
    catalog = MemoryCatalog()
    repair_table(catalog, DISK, spec)
    assert catalog.partitions("web", "page") == [("2026-11-20", "08")]


def test_repair_table_creates_then_keeps_and_completes(tmp_path: Path) -> None:
    table = tmp_path / "t"
    touch(table / "day=2026-11-20" / "hr=07" / "part-0.parquet")
    spec = TableSpec("web", "track_x", (*COLUMNS, ("properties_plan", "string")), ("day", "hr"), str(table))
    catalog = MemoryCatalog()
    first = repair_table(catalog, DISK, spec)
    assert first.created and first.partitions == 1 and first.columns_added == ()
    assert catalog.table_columns("web", "track_x") == spec.columns
    assert catalog.partitions("web", "track_x") == [("2026-11-20", "07")]
    again = repair_table(catalog, DISK, spec)
    assert not again.created and again.columns_added == () and again.notice == ""

    # a catalog that lags behind the schema file gets the missing columns appended
    catalog.tables[("web", "track_x")] = dataclasses.replace(spec, columns=COLUMNS[:1])
    completed = repair_table(catalog, DISK, spec)
    assert completed.columns_added == spec.columns[1:]
    assert catalog.table_columns("web", "track_x") == spec.columns
    # a type the user changed in the catalog is reported, never changed back
    catalog.tables[("web", "track_x")] = dataclasses.replace(
        spec, columns=(COLUMNS[0], ("properties_revenue", "string"), spec.columns[2])
    )
    assert (
        "properties_revenue string (schema file: decimal(38,6))" in repair_table(catalog, DISK, spec).notice
    )


def test_repair_catalog_from_schema_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lake = tmp_path / "lake"
    specs = []
    for database, source_id, table in [
        ("web", "S1", "page"),
        ("web", "S1", "identify"),
        ("ios", "S2", "screen"),
    ]:
        location = layout.table_dir(lake, source_id, table)
        touch(location / "day=2026-11-20" / "hr=07" / "part-0.parquet")
        specs.append(TableSpec(database, table, COLUMNS, ("day", "hr"), str(location)))
        schema_file(lake, specs[-1])
    catalog = MemoryCatalog()
    monkeypatch.setitem(base.CATALOG_LOADERS, "memory", lambda settings, session: catalog)
    sources = tuple(
        SourceSettings(slug, sid, Secret(f"wk_{slug}"), slug) for slug, sid in [("web", "S1"), ("ios", "S2")]
    )
    settings = Settings(
        path=None,
        lake=LakeSettings(root=lake, state_dir=tmp_path / "state"),
        catalog=CatalogSettings(kind="memory"),
        sources=sources,
    )
    assert [s.qualified for s in read_schema_files(LocalStorage(), lake)] == [
        "ios.screen",
        "web.identify",
        "web.page",
    ]

    only_web = repair_catalog(settings, ["web"], say=lambda line: None)
    assert [(t.database, t.table, t.created) for t in only_web.tables] == [
        ("web", "identify", True),
        ("web", "page", True),
    ]
    assert catalog.databases == {"web"}

    everything = repair_catalog(settings, say=lambda line: None)
    assert [(t.table, t.created) for t in everything.tables] == [
        ("screen", True),
        ("identify", False),
        ("page", False),
    ]
    assert everything.partitions == 3
    assert catalog.partitions("ios", "screen") == [("2026-11-20", "07")]

    empty = dataclasses.replace(settings, lake=LakeSettings(root=tmp_path / "empty", state_dir=tmp_path))
    with pytest.raises(UsageError, match="no schema files"):
        repair_catalog(empty, say=lambda line: None)


def test_cli_repair_needs_schema_files(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from eventlake.cli import cli

    config = tmp_path / "eventlake.toml"
    config.write_text('[lake]\nroot = "lake"\n')
    result = CliRunner().invoke(cli, ["--config", str(config), "catalog", "repair"])
    assert result.exit_code == 2
    assert "no schema files" in result.output and result.output.count("\n") == 1


@pytest.mark.spark
def test_a_lost_metastore_is_rebuilt_and_queries_return_the_same_rows(lake, spark) -> None:
    from eventlake.timestamps import parse_timestamp

    def track(message_id: str, revenue: float, **extra: object) -> dict:
        properties = {"revenue": revenue, **extra}
        return {
            "type": "track",
            "userId": "u1",
            "event": "Order Completed",
            "messageId": message_id,
            "properties": properties,
        }

    say = lambda line: None  # noqa: E731
    lake.archive([track("m1", 19.99), track("m2", 5)], received_at=parse_timestamp("2026-11-20T07:30:00Z"))
    lake.archive([{"type": "identify", "userId": "u1", "messageId": "m3", "traits": {"plan": "pro"}}])
    run_sync(lake.settings, [lake.slug], spark=spark, say=say)
    lake.archive([track("m4", 1.5, coupon="X")], received_at=parse_timestamp("2026-11-21T00:05:00Z"))
    run_sync(lake.settings, [lake.slug], spark=spark, say=say)

    db = lake.source.database
    queries = [
        f"SELECT * FROM {db}.track_order_completed ORDER BY message_id",
        f"SELECT * FROM {db}.identify",
        f"SELECT day, hr, count(*) AS n FROM {db}.track_order_completed GROUP BY day, hr ORDER BY day, hr",
    ]
    before = [run_query(lake.settings, q, "spark", spark=spark) for q in queries]
    assert len(before[0].rows) == 3 and before[0].columns[-2:] == ("day", "hr")

    spark.sql(f"DROP DATABASE {db} CASCADE")  # the metastore lost them; the files stay
    assert not spark.catalog.databaseExists(db)
    result = repair_catalog(lake.settings, [lake.slug], spark=spark, say=say)
    assert {t.table: (t.created, t.partitions) for t in result.tables} == {
        "identify": (True, 1),
        "track_order_completed": (True, 2),
    }
    assert [run_query(lake.settings, q, "spark", spark=spark) for q in queries] == before
    again = repair_catalog(lake.settings, [lake.slug], spark=spark, say=say)
    assert not any(t.created or t.columns_added for t in again.tables)


def test_a_copied_or_moved_lake_is_read_where_it_is_now(tmp_path: Path) -> None:
    import shutil

    original = tmp_path / "a" / "lake"
    location = layout.table_dir(original, "S1", "page")
    touch(location / "day=2026-11-20" / "hr=07" / "part-0.parquet")
    schema_file(original, TableSpec("web", "page", COLUMNS, ("day", "hr"), str(location)))
    copy = tmp_path / "b" / "lake"
    shutil.copytree(original, copy)
    [spec] = read_schema_files(LocalStorage(), copy)
    assert spec.location == str(layout.table_dir(copy, "S1", "page"))
    shutil.rmtree(copy / layout.DATA / "data")  # not there: the recorded location stands
    assert read_schema_files(LocalStorage(), copy)[0].location == str(location)


def test_the_partitions_of_every_table_go_to_the_catalog_in_one_call(tmp_path: Path) -> None:
    """(A Hive metastore then registers several tables at once: ``HiveCatalog.add_partitions_of``.)"""
    specs = [
        TableSpec("web", name, COLUMNS, ("day", "hr"), str(tmp_path / name)) for name in ("page", "track_a")
    ]
    for spec in specs:
        touch(Path(spec.location) / "day=2026-11-20" / "hr=07" / "part-0.parquet")
    touch(Path(specs[1].location) / "day=2026-11-20" / "hr=08" / "part-0.parquet")
    calls: list[list[str]] = []

    class Watched(MemoryCatalog):
        def add_partitions_of(self, tables: Sequence[tuple[TableSpec, Sequence[tuple[str, ...]]]]) -> None:
            calls.append([spec.name for spec, _ in tables])
            super().add_partitions_of(tables)

    catalog, said = Watched(), []
    repaired = repair_tables(catalog, DISK, specs, said.append)
    assert calls == [["page", "track_a"]]
    assert said == [  # each table as it is done, then the partitions of all
        "web.page: created, 1 partitions",
        "web.track_a: created, 2 partitions",
        "registering the 3 partitions of 2 tables the catalog may lack ...",
    ]
    assert [(t.table, t.created, t.partitions) for t in repaired] == [("page", True, 1), ("track_a", True, 2)]
    assert catalog.partitions("web", "track_a") == [("2026-11-20", "07"), ("2026-11-20", "08")]
