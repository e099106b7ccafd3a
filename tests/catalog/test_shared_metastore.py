"""Two Spark processes use one metastore database (PostgreSQL, MariaDB) at the same time."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from eventlake.catalog import TableSpec

from .conftest import clean_env
from .worker import RemoteCatalog

pytestmark = pytest.mark.integration
COLUMNS = (("message_id", "string"), ("received_at", "timestamp"), ("properties_revenue", "decimal(38,6)"))


@pytest.mark.parametrize("database_kind", ["postgres", "mariadb"])
def test_two_spark_processes_share_one_metastore(
    database_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    first: RemoteCatalog = request.getfixturevalue(f"hive_{database_kind}")
    project: Path = request.getfixturevalue(f"{database_kind}_project")
    second = RemoteCatalog(project, project.parent / "worker-b.log", env=clean_env())
    database = f"shared_{database_kind}"
    try:
        shared = TableSpec(database, "events", COLUMNS, ("day", "hr"), str(tmp_path / "events"))
        first.ensure_table(shared)

        def work(catalog: RemoteCatalog, number: int) -> None:
            catalog.ensure_table(
                TableSpec(database, f"t{number}", COLUMNS, ("day", "hr"), str(tmp_path / f"t{number}"))
            )
            for hour in range(5):
                catalog.add_partitions(shared, [("2026-11-22", f"{number}{hour}")])

        with ThreadPoolExecutor(2) as pool:  # both processes at once
            for future in [pool.submit(work, catalog, n) for n, catalog in enumerate((first, second))]:
                future.result()

        expected = sorted(("2026-11-22", f"{n}{h}") for n in range(2) for h in range(5))
        for catalog in (first, second):
            assert catalog.list_tables(database) == ["events", "t0", "t1"]
            assert catalog.partitions(database, "events") == expected
        # a column added by one process (syncs of one source never alter a table concurrently:
        # Hive has no optimistic concurrency for ALTER TABLE) and rows written through one
        # process are seen by the other
        first.add_columns(database, "t0", [("user_id", "string")])
        assert second.table_columns(database, "t0") == (*COLUMNS, ("user_id", "string"))
        first.sql(
            f"INSERT INTO {database}.t0 PARTITION (day='2026-11-22', hr='07') "
            "SELECT 'm1', TIMESTAMP'2026-11-22 07:00:00', 19.99, 'u1'"
        )
        assert second.sql(f"SELECT message_id, hr FROM {database}.t0") == [("m1", "07")]
    finally:
        second.close()
