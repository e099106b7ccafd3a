"""One contract, every catalog back end (after pyiceberg's test_catalog_behaviors): each test body
runs against the Hive metastore on embedded Derby, on PostgreSQL, on MariaDB, through a metastore
service URI (`eventlake metastore`), and against AWS Glue (moto), all on real servers."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from eventlake.catalog import Catalog, TableSpec

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
    assert catalog.partitions(database, "identify") == []


def test_append_columns_keeps_order_and_types(catalog: Catalog, database: str, tmp_path: Path) -> None:
    table = spec(database, tmp_path)
    assert catalog.ensure_table(table) == COLUMNS  # created (with its database)
    wider = spec(
        database, tmp_path, columns=(*COLUMNS, ("properties_coupon", "string"), ("context_active", "boolean"))
    )
    assert catalog.ensure_table(wider) == (("properties_coupon", "string"), ("context_active", "boolean"))
    assert catalog.ensure_table(wider) == ()  # nothing missing: nothing changes
    catalog.add_columns(database, table.name, [("user_id", "string")])
    assert catalog.table_columns(database, table.name) == (
        *COLUMNS,
        ("properties_coupon", "string"),
        ("context_active", "boolean"),
        ("user_id", "string"),
    )


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
