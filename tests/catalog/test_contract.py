"""One contract, every catalog back end (after pyiceberg's test_catalog_behaviors): each test body
runs against the Hive metastore on embedded Derby, on PostgreSQL, on MariaDB, through a metastore
service URI (`eventlake metastore`), and against AWS Glue (moto), all on real servers."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import pytest

from eventlake.catalog import Catalog, TableSpec
from eventlake.catalog.glue import GlueCatalog
from eventlake.catalog.hive import HiveCatalog
from eventlake.sync.maintenance.adopt import same_location

from .worker import RemoteCatalog

BACK_ENDS = [
    pytest.param("hive_derby", marks=pytest.mark.spark, id="hive-derby"),
    pytest.param("hive_postgres", marks=pytest.mark.integration, id="hive-postgres"),
    pytest.param("hive_mariadb", marks=pytest.mark.integration, id="hive-mariadb"),
    pytest.param("hive_thrift", marks=pytest.mark.integration, id="hive-thrift"),
    pytest.param("glue", marks=pytest.mark.integration, id="glue"),
]
COLUMNS = (("message_id", "string"), ("received_at", "timestamp"), ("properties_revenue", "decimal(38,6)"))
_numbers = itertools.count(1)


@pytest.fixture(params=BACK_ENDS)
def catalog(request: pytest.FixtureRequest) -> Catalog:
    return request.getfixturevalue(request.param)


@pytest.fixture
def database(catalog: Catalog) -> str:
    """A database name no other test uses (back ends are shared by the whole run)."""
    return f"contract_{next(_numbers)}"


def spec(database: str, tmp_path: Path, name: str = "track_order_completed", columns=COLUMNS) -> TableSpec:
    location = tmp_path / "lake" / name
    location.mkdir(parents=True, exist_ok=True)
    return TableSpec(database, name, tuple(columns), ("day", "hr"), str(location))


def test_create_database_and_table_then_list_and_describe(
    catalog: Catalog, database: str, tmp_path: Path
) -> None:
    assert catalog.list_tables(database) == []
    assert catalog.table_schemas(database) == {}
    assert catalog.table_columns(database, "track_order_completed") is None
    catalog.ensure_database(database)
    catalog.ensure_database(database)  # idempotent
    assert catalog.list_tables(database) == []
    table = spec(database, tmp_path)
    catalog.create_table(table)
    catalog.create_table(table)  # an existing table is left as it is
    catalog.create_table(spec(database, tmp_path, "identify", (("message_id", "string"),)))
    assert catalog.list_tables(database) == ["identify", "track_order_completed"]
    assert catalog.table_columns(database, "track_order_completed") == COLUMNS  # partition keys excluded
    assert catalog.table_columns(database, "identify") == (("message_id", "string"),)
    assert catalog.table_schemas(database) == {  # what a sync plans against, in one call
        "identify": (("message_id", "string"),),
        "track_order_completed": COLUMNS,
    }
    locations = catalog.table_locations(database)  # as each catalog spells them (file:/..., /...)
    assert sorted(locations) == ["identify", "track_order_completed"]
    assert same_location(locations["identify"], spec(database, tmp_path, "identify").location)
    assert same_location(locations["track_order_completed"], table.location)
    assert catalog.partitions(database, "identify") == []


def test_append_columns_keeps_order_and_types(catalog: Catalog, database: str, tmp_path: Path) -> None:
    table = spec(database, tmp_path)
    assert catalog.ensure_table(table) == COLUMNS  # created (with its database)
    wider = spec(
        database, tmp_path, columns=(*COLUMNS, ("properties_coupon", "string"), ("context_active", "boolean"))
    )
    assert catalog.ensure_table(wider) == (("properties_coupon", "string"), ("context_active", "boolean"))
    assert catalog.ensure_table(wider) == ()  # nothing missing: nothing changes
    catalog.add_columns(database, table.name, [("user_id", "string"), ("properties_quantity", "bigint")])
    catalog.add_columns(database, table.name, [("properties_price", "double")])
    expected = (
        *COLUMNS,
        ("properties_coupon", "string"),
        ("context_active", "boolean"),
        ("user_id", "string"),
        ("properties_quantity", "bigint"),
        ("properties_price", "double"),
    )
    assert catalog.table_columns(database, table.name) == expected
    assert catalog.table_schemas(database) == {table.name: expected}


def test_add_partitions_idempotently(catalog: Catalog, database: str, tmp_path: Path) -> None:
    table = spec(database, tmp_path)
    catalog.ensure_table(table)
    catalog.add_partitions(table, [("2026-11-22", "07"), ("2026-11-22", "08"), ("2026-11-22", "07")])
    catalog.add_partitions(table, [("2026-11-22", "08"), ("2026-11-23", "00")])  # one old, one new
    catalog.add_partitions(table, [])
    assert catalog.partitions(database, table.name) == [
        ("2026-11-22", "07"),
        ("2026-11-22", "08"),
        ("2026-11-23", "00"),
    ]


def test_drop_partitions_keeps_the_others_and_the_files(
    catalog: Catalog, database: str, tmp_path: Path
) -> None:
    table = spec(database, tmp_path)
    catalog.ensure_table(table)
    every = hours(20, 2)
    catalog.add_partitions(table, every)
    kept_file = Path(table.partition_location(every[0]))
    kept_file.mkdir(parents=True, exist_ok=True)  # Hive made it
    (kept_file / "part-0.parquet").write_bytes(b"x")
    catalog.drop_partitions(table, every[:30] + [("2026-10-01", "00")])  # one that never existed
    catalog.drop_partitions(table, every[:30])  # again: nothing left to drop
    catalog.drop_partitions(table, [])
    assert catalog.partitions(database, table.name) == every[30:]
    assert (kept_file / "part-0.parquet").exists()  # an external table: the files are the caller's
    catalog.drop_partitions(spec(database, tmp_path, "no_such_table"), every[:1])  # not an error


def hours(first_day: int, days: int) -> list[tuple[str, str]]:
    return [
        (f"2026-11-{day:02d}", f"{hour:02d}")
        for day in range(first_day, first_day + days)
        for hour in range(24)
    ]


def partition_location(catalog: Catalog, spec: TableSpec, values: tuple[str, ...]) -> str:
    """Where the catalog says the partition's files are."""
    if isinstance(catalog, GlueCatalog):
        found = catalog.client.get_partition(
            DatabaseName=spec.database, TableName=spec.name, PartitionValues=list(values)
        )
        return found["Partition"]["StorageDescriptor"]["Location"]
    keys = ", ".join(f"{k}='{v}'" for k, v in zip(spec.partition_keys, values, strict=True))
    statement = f"DESCRIBE FORMATTED {spec.qualified} PARTITION ({keys})"
    assert isinstance(catalog, HiveCatalog | RemoteCatalog)
    rows = (
        catalog.sql(statement)
        if isinstance(catalog, RemoteCatalog)
        else catalog.spark.sql(statement).collect()
    )
    location = next(
        row[1] for row in rows if row[0] == "Location"
    )  # the partition's (the table's is after it)
    return location.removeprefix("file:")


def test_many_partitions_are_registered_in_batches(catalog: Catalog, database: str, tmp_path: Path) -> None:
    """250 partitions over 11 days: three BatchCreatePartition calls on Glue (the Hive statement
    batches are crossed in test_hive.py, with a small batch)."""
    table = spec(database, tmp_path)
    catalog.ensure_table(table)
    partitions = hours(1, 11)[:250]
    catalog.add_partitions(table, list(reversed(partitions)))
    assert catalog.partitions(database, table.name) == partitions
    for values in (partitions[0], partitions[99], partitions[100], partitions[-1]):
        assert partition_location(catalog, table, values) == table.partition_location(values)
    catalog.add_partitions(table, partitions)  # a rerun after a crash: all exist
    assert catalog.partitions(database, table.name) == partitions


def test_existing_partitions_are_kept_and_new_ones_added(
    catalog: Catalog, database: str, tmp_path: Path
) -> None:
    table = spec(database, tmp_path)
    catalog.ensure_table(table)
    catalog.add_partitions(table, hours(1, 1)[:6])
    catalog.add_partitions(table, hours(1, 1)[6:8])  # one day: the listing is narrowed to it
    # the same table, its files elsewhere now: existing partitions keep their location
    moved = TableSpec(database, table.name, table.columns, table.partition_keys, str(tmp_path / "moved"))
    mixed = hours(1, 1)[4:10] + hours(2, 1)[:3]
    catalog.add_partitions(moved, mixed)
    assert catalog.partitions(database, table.name) == hours(1, 1)[:10] + hours(2, 1)[:3]
    for values in hours(1, 1)[:8]:
        assert partition_location(catalog, table, values) == table.partition_location(values)
    for values in hours(1, 1)[8:10] + hours(2, 1)[:3]:
        assert partition_location(catalog, table, values) == moved.partition_location(values)


def test_a_partition_moves_to_a_new_location_in_one_call(
    catalog: Catalog, database: str, tmp_path: Path
) -> None:
    """A rewritten partition's version folder (see eventlake.layout): an existing partition moves,
    a missing one is registered there, a repeat changes nothing, a missing table is said."""
    table = spec(database, tmp_path)
    [first, second] = hours(1, 1)[:2]
    assert not catalog.set_partition_location(database, table.name, table.partition_keys, first, "/x")
    catalog.ensure_table(table)
    catalog.add_partitions(table, [first])
    for values in (first, second):
        version = Path(table.partition_location(values)) / "_v-000001-compact-1"
        version.mkdir(parents=True)
        for _ in range(2):  # the rerun of a run killed after the switch
            assert catalog.set_partition_location(
                database, table.name, table.partition_keys, values, str(version)
            )
        assert partition_location(catalog, table, values) == str(version)
    assert catalog.partitions(database, table.name) == [first, second]


def test_drop_table_and_database_keep_the_files(catalog: Catalog, database: str, tmp_path: Path) -> None:
    table = spec(database, tmp_path)
    catalog.ensure_table(table)
    catalog.ensure_table(spec(database, tmp_path, "page"))
    marker = Path(table.location) / "day=2026-11-22" / "hr=07" / "part-0.parquet"
    marker.parent.mkdir(parents=True)
    marker.write_bytes(b"not really parquet")
    catalog.drop_table(database, table.name)
    catalog.drop_table(database, table.name)  # missing: fine
    assert catalog.table_columns(database, table.name) is None
    assert catalog.list_tables(database) == ["page"]
    catalog.drop_database(database)
    catalog.drop_database(database)
    assert catalog.list_tables(database) == []
    assert marker.exists()  # external tables: the lake's files are never deleted by the catalog


REPORT_COLUMNS = (
    ("type", "string"),
    ("start_time", "timestamp"),
    ("row_count", "bigint"),
    ("partitions", "array<map<string,string>>"),
)
JSON_SERDE = "org.openx.data.jsonserde.JsonSerDe"  # the SerDe Trino, Athena and Glue read JSON with
TEXT_INPUT = "org.apache.hadoop.mapred.TextInputFormat"


def _spark_sql(catalog: Catalog, statement: str) -> list[tuple]:
    if isinstance(catalog, RemoteCatalog):
        return catalog.sql(statement)
    assert isinstance(catalog, HiveCatalog)
    return [tuple(row) for row in catalog.spark.sql(statement).collect()]


def _descriptor(catalog: Catalog, database: str, table: str) -> dict:
    if isinstance(catalog, RemoteCatalog):
        return catalog.call("hive_descriptor", database, table)
    assert isinstance(catalog, HiveCatalog)
    return json.loads(json.dumps(catalog.hive_descriptor(database, table)))  # as the worker answers


@pytest.mark.parametrize("catalog", [p for p in BACK_ENDS if p.values[0] != "glue"], indirect=True)
def test_a_json_table_is_described_for_readers_other_than_spark(
    catalog: Catalog, database: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The sync reports table (JSON lines) is Spark's `USING json` table, which Spark stores with a
    placeholder descriptor (`col array<string>`, SequenceFile) that Trino cannot read. A table left
    so by an earlier version gets, from the next ensure_table (a sync, `catalog repair`), the
    columns, location and JSON SerDe in its descriptor and its partitions' (as Glue has them);
    added columns and new partitions follow, Spark still reads it, and no Hive error is logged."""
    location = tmp_path / "lake" / "reports"
    table = TableSpec(database, "sync_reports", REPORT_COLUMNS, ("source_id", "day"), str(location),
                      format="json", partition_path="day={day}/source={source_id}")  # fmt: skip
    first = location / "day=2026-11-19" / "source=s1" / "report-r1.json"
    first.parent.mkdir(parents=True)
    first.write_text('{"type": "source", "start_time": "2026-11-19T07:00:01.5Z", "row_count": 7}\n')
    # the table as eventlake 0.4 created it: Spark's own DDL, a partition through the catalog
    catalog.ensure_database(database)
    _spark_sql(
        catalog,
        f"CREATE TABLE {database}.sync_reports (type string, start_time timestamp, row_count bigint,"
        " partitions array<map<string,string>>, source_id string, day string) USING json"
        f" PARTITIONED BY (source_id, day) LOCATION '{location}'",
    )
    catalog.add_partitions(table, [("s1", "2026-11-19")])
    before = _descriptor(catalog, database, "sync_reports")
    assert before["columns"] == [["col", "array<string>"]] and before["serde"] != JSON_SERDE

    assert catalog.ensure_table(table) == ()
    after = _descriptor(catalog, database, "sync_reports")
    readable = {"columns": [list(c) for c in REPORT_COLUMNS], "input_format": TEXT_INPUT, "serde": JSON_SERDE}
    assert {k: after[k] for k in readable} == readable
    assert same_location(after["location"], str(location))
    partition = after["partitions"]["s1/2026-11-19"]
    assert {k: partition[k] for k in readable} == readable
    assert same_location(partition["location"], str(first.parent))

    wider = dataclasses.replace(table, columns=(*REPORT_COLUMNS, ("error", "string")))
    assert catalog.ensure_table(wider) == (("error", "string"),)
    assert catalog.table_columns(database, "sync_reports") == wider.columns
    catalog.add_partitions(wider, [("s2", "2026-11-20")])
    widened = {**readable, "columns": [list(c) for c in wider.columns]}
    described = _descriptor(catalog, database, "sync_reports")
    assert {k: described[k] for k in widened} == widened
    for values, found in described["partitions"].items():
        assert {k: found[k] for k in widened} == widened, values
    rows = _spark_sql(catalog, f"SELECT type, row_count, error, source_id, day FROM {database}.sync_reports")
    assert rows == [("source", 7, None, "s1", "2026-11-19")]
    logged = catalog.log.read_text() if isinstance(catalog, RemoteCatalog) else capfd.readouterr().err
    assert "Unable to get field from serde" not in logged and "JsonSerDe not found" not in logged
