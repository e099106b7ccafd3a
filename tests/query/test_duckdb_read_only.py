"""The DuckDB engine's read-only mode (the console's query box) and the sync reports table on
DuckDB: reports written by the sync's own writer, read through their schema file."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from eventlake import layout, state_layout
from eventlake.catalog.schema_file import write_schema_file
from eventlake.config import Settings
from eventlake.query.duckdb_engine import check_read_only, connect, duckdb_type, run_duckdb
from eventlake.query.errors import QueryError
from eventlake.storage import LocalStorage
from eventlake.sync.protocol.report import (
    SyncResult,
    TableResult,
    report_path,
    report_rows,
    reports_table,
    write_report_rows,
)
from eventlake.timestamps import now_utc
from tests.query.test_duckdb_engine import settings  # noqa: F401  (the hand-made lake fixture)


def _report(lake_settings: Settings, run_id: str, status: str = "Success", rows: int = 3) -> None:
    start = now_utc() - timedelta(minutes=5)
    table = TableResult(
        "web", "page", rows, True, (("name", "string"),), ({"day": "2026-11-20", "hr": "07"},)
    )
    result = SyncResult("web", "SRC1", run_id, status, start, start + timedelta(seconds=2), tables=(table,))
    lake = lake_settings.lake.root
    write_report_rows(LocalStorage(), report_path(result, lake), report_rows(result, lake))


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        ("INSERT INTO web.alias VALUES ('x')", "INSERT"),
        ("CREATE TABLE t AS SELECT 1", "CREATE"),
        ("COPY (SELECT 1) TO 'out.csv'", "COPY"),
        ("ATTACH 'other.db'", "ATTACH"),
        ("SET enable_external_access = true", "SET"),
        ("PRAGMA version", "PRAGMA"),
        ("DROP VIEW web.alias", "DROP"),
        ("EXPLAIN ANALYZE COPY (SELECT 1) TO 'x.csv'", "EXPLAIN"),  # EXPLAIN ANALYZE runs it
        ("EXPLAIN (ANALYZE) CREATE TABLE t AS SELECT 1", "EXPLAIN"),
    ],
)
def test_statements_that_are_not_queries_are_refused(sql: str, refused: str) -> None:
    with pytest.raises(QueryError, match=f"a {refused} statement is refused"):
        check_read_only(sql)


def test_one_statement_at_a_time() -> None:
    with pytest.raises(QueryError, match="one statement at a time"):
        check_read_only("SELECT 1; SELECT 2")
    check_read_only("WITH x AS (SELECT 1 AS a) SELECT * FROM x")
    check_read_only("SUMMARIZE SELECT 1 AS a")
    check_read_only("DESCRIBE SELECT 1 AS a")


def test_read_only_reads_the_lake_and_nothing_else(settings: Settings, tmp_path: Path) -> None:  # noqa: F811
    count = "SELECT count(*) AS n FROM web.track_order_completed"
    assert run_duckdb(settings, count, read_only=True).rows == ({"n": 2},)
    outside = tmp_path / "secret.csv"
    outside.write_text("a\n1\n")
    for sql in (f"SELECT * FROM read_csv('{outside}')", "SELECT * FROM glob('/etc/*')",
                f"SELECT * FROM read_text('{settings.lake.root}/../secret.csv')"):  # fmt: skip
        with pytest.raises(QueryError, match="reads the lake's tables by name, not files"):
            run_duckdb(settings, sql, read_only=True)
    assert run_duckdb(settings, f"SELECT * FROM read_csv('{outside}')").rows == ({"a": 1},)  # the CLI's mode


def test_read_only_opens_no_file_outside_the_tables_folders(settings: Settings, tmp_path: Path) -> None:  # noqa: F811
    """Past the query's check, the connection itself cannot open the lake's state (the deletion
    audit names erased users) nor the raw archive: only the tables' folders."""
    audit = state_layout.deletion_audit_file(settings.lake.root, "SRC1", "compact-1")
    LocalStorage().write(audit, b'{"user_id": "erased-user-42"}')
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    con = connect(settings, "SELECT * FROM web.track_order_completed", scratch, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM web.track_order_completed").fetchone() == (2,)
        for path in (audit, layout.archive_root(settings.lake.root) / "SRC1" / "1" / "a.gz"):
            with pytest.raises(duckdb.PermissionException):
                con.execute(f"SELECT * FROM read_text('{path}')").fetchall()
    finally:
        con.close()


def test_row_limit_and_time_limit(settings: Settings) -> None:  # noqa: F811
    result = run_duckdb(settings, "SELECT * FROM range(10) t(i)", read_only=True, max_rows=3)
    assert [r["i"] for r in result.rows] == [0, 1, 2] and result.truncated
    assert not run_duckdb(settings, "SELECT * FROM range(3) t(i)", max_rows=3).truncated
    slow = "SELECT count(*) AS n FROM range(1000000000000) a(i) WHERE i % 7 = 3"
    with pytest.raises(QueryError, match="ran past 0.5 s and was stopped"):
        run_duckdb(settings, slow, read_only=True, timeout=0.5)


def test_the_sync_reports_table_is_on_duckdb_too(settings: Settings) -> None:  # noqa: F811
    _report(settings, "r1")
    _report(settings, "r2", rows=4)
    write_schema_file(LocalStorage(), settings.lake.root, reports_table(settings.lake.root))
    sql = (
        "SELECT run_id, row_count, status, new_columns[1].name AS first_column, partitions[1]['hr'] AS hr "
        "FROM __segment_datalake.sync_reports WHERE type = 'source' OR table_name = 'page' "
        "ORDER BY run_id, type"
    )
    rows = run_duckdb(settings, sql, read_only=True).rows
    assert [(r["run_id"], r["row_count"]) for r in rows] == [("r1", 3), ("r1", 3), ("r2", 4), ("r2", 4)]
    assert {r["status"] for r in rows} == {"finished"}
    assert [r["first_column"] for r in rows if r["hr"] is not None and r["first_column"]] == ["name", "name"]


def test_hive_types_as_duckdb_types() -> None:
    assert duckdb_type("array<string>") == "VARCHAR[]"
    assert duckdb_type("map<string,array<bigint>>") == "MAP(VARCHAR, BIGINT[])"
