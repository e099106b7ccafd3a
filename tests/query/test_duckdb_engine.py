"""The DuckDB engine on a hand-made lake (Parquet written by DuckDB, schema files as the sync writes
them): no Spark, no JVM. The same engine on data written by a real sync: test_engines_agree.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import duckdb
import orjson
import pytest
from click.testing import CliRunner

from eventlake import layout, state_layout
from eventlake.cli import cli
from eventlake.config import LakeSettings, Settings
from eventlake.query import run_query
from eventlake.query.errors import QueryError

UTC = timezone.utc
ORDERS = [
    ("message_id", "string"),
    ("properties_revenue", "decimal(38,6)"),
    ("properties_items", "bigint"),
    ("properties_paid", "boolean"),
    ("received_at", "timestamp"),
    ("properties_coupon", "string"),  # appended by a later sync: the first files lack it
]


def write_parquet(path: Path, select: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    duckdb.sql(f"COPY ({select}) TO '{path}' (FORMAT parquet)")


def write_schema(lake: Path, database: str, table: str, columns, keys, location: Path) -> None:
    path = state_layout.schema_file(lake, database, table)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "database": database,
        "table": table,
        "columns": [{"name": n, "type": t} for n, t in columns],
        "partition_keys": list(keys),
        "location": str(location),
    }
    path.write_bytes(orjson.dumps(doc))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    lake = tmp_path / "lake"
    orders = layout.table_dir(lake, "SRC1", "track_order_completed")
    write_parquet(
        orders / "day=2026-11-20" / "hr=07" / "part-0.parquet",
        "SELECT 'm1' AS message_id, 19.99::DECIMAL(38,6) AS properties_revenue,"
        " 2::BIGINT AS properties_items, true AS properties_paid,"
        " TIMESTAMP '2026-11-20 07:30:00.123456' AS received_at",
    )
    write_parquet(
        orders / "day=2026-11-21" / "hr=00" / "part-0.parquet",
        "SELECT 'm2' AS message_id, 5::DECIMAL(38,6) AS properties_revenue, 1::BIGINT AS properties_items,"
        " false AS properties_paid, TIMESTAMP '2026-11-21 00:01:00' AS received_at,"
        " 'WINTER' AS properties_coupon",
    )
    write_schema(lake, "web", "track_order_completed", ORDERS, ("day", "hr"), orders)
    # a table whose files are gone: it still exists, empty
    write_schema(lake, "web", "alias", [("user_id", "string")], ("day", "hr"), lake / "nowhere")
    # a second database; its file has a column the schema does not list (ignored)
    screens = layout.table_dir(lake, "SRC2", "screen")
    write_parquet(
        screens / "day=2026-11-20" / "hr=23" / "part-0.parquet", "SELECT 'Home' AS name, 1 AS stray"
    )
    write_schema(lake, "ios", "screen", [("name", "string")], ("day", "hr"), screens)
    return Settings(path=None, lake=LakeSettings(root=lake, state_dir=tmp_path / "state"))


def test_tables_have_the_schema_files_columns_in_order_then_partition_keys(settings: Settings) -> None:
    result = run_query(settings, "SELECT * FROM web.track_order_completed ORDER BY message_id", "duckdb")
    assert result.columns == (*(n for n, _ in ORDERS), "day", "hr")
    assert result.rows == (
        {
            "message_id": "m1",
            "properties_revenue": Decimal("19.990000"),
            "properties_items": 2,
            "properties_paid": True,
            "received_at": datetime(2026, 11, 20, 7, 30, 0, 123456, tzinfo=UTC),
            "properties_coupon": None,
            "day": "2026-11-20",
            "hr": "07",
        },
        {
            "message_id": "m2",
            "properties_revenue": Decimal("5.000000"),
            "properties_items": 1,
            "properties_paid": False,
            "received_at": datetime(2026, 11, 21, 0, 1, tzinfo=UTC),
            "properties_coupon": "WINTER",
            "day": "2026-11-21",
            "hr": "00",
        },
    )


@pytest.mark.parametrize(
    ("sql", "rows"),
    [
        (
            "SELECT sum(properties_revenue) AS revenue, sum(properties_items) AS items "
            "FROM web.track_order_completed",
            [{"revenue": Decimal("24.990000"), "items": 3}],
        ),
        (
            "SELECT message_id FROM web.track_order_completed WHERE day = '2026-11-21' AND hr = '00'",
            [{"message_id": "m2"}],
        ),
        (
            "SELECT `hr`, count(*) AS `n` FROM `web`.`track_order_completed` "
            "WHERE `properties_paid` GROUP BY `hr`",
            [{"hr": "07", "n": 1}],
        ),
        (
            "SELECT message_id FROM web.track_order_completed "
            "WHERE received_at >= TIMESTAMP '2026-11-21 00:00:00'",
            [{"message_id": "m2"}],
        ),
        ("SELECT count(*) AS n FROM web.alias", [{"n": 0}]),
        ("SELECT * FROM ios.screen", [{"name": "Home", "day": "2026-11-20", "hr": "23"}]),
        (  # the tables and the warehouse views over them, as Spark lists them too
            "SHOW TABLES IN web",
            [
                {"name": n}
                for n in (
                    "alias",
                    "aliases",
                    "groups",
                    "identifies",
                    "order_completed",
                    "pages",
                    "screens",
                    "track_order_completed",
                    "tracks",
                    "users",
                )
            ],  # fmt: skip
        ),
    ],
)
def test_queries(settings: Settings, sql: str, rows: list[dict]) -> None:
    assert list(run_query(settings, sql, "duckdb").rows) == rows


def test_a_query_opens_only_the_files_of_the_tables_it_names(settings: Settings, monkeypatch) -> None:
    """On a lake of years, a poll for a table not synced yet (or ``SHOW TABLES``) must not list
    every partition of every table: the tables it does not name have their columns and no rows."""
    from eventlake.query import duckdb_engine

    scanned: list[str] = []
    original = duckdb_engine.table_scan

    def counting(con, storage, spec, index):  # type: ignore[no-untyped-def]
        scanned.append(spec.name)
        return original(con, storage, spec, index)

    monkeypatch.setattr(duckdb_engine, "table_scan", counting)
    with pytest.raises(QueryError, match="track_not_synced_yet"):
        run_query(settings, "SELECT * FROM web.track_not_synced_yet", "duckdb")
    columns = run_query(
        settings,
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'web' "
        "AND table_name LIKE 'track_order_%' ORDER BY ordinal_position",
        "duckdb",
    ).rows
    assert [r["column_name"] for r in columns][-2:] == ["day", "hr"] and len(columns) > 4
    assert run_query(settings, "SELECT count(*) AS n FROM web.tracks", "duckdb").rows[0]["n"] > 0
    assert scanned == ["track_order_completed"]  # the warehouse view's table only


def test_errors_are_one_line_query_errors(settings: Settings) -> None:
    with pytest.raises(QueryError) as raised:
        run_query(settings, "SELECT nope FROM web.track_order_completed", "duckdb")
    assert "nope" in str(raised.value) and "\n" not in str(raised.value)
    with pytest.raises(QueryError, match="missing"):
        run_query(settings, "SELECT * FROM web.missing", "duckdb")


def test_an_empty_lake_says_where_tables_come_from(tmp_path: Path) -> None:
    settings = Settings(path=None, lake=LakeSettings(root=tmp_path / "lake", state_dir=tmp_path / "state"))
    with pytest.raises(QueryError, match="eventlake sync"):
        run_query(settings, "SELECT * FROM web.page", "duckdb")
    assert run_query(settings, "SELECT 1 AS one", "duckdb").rows == ({"one": 1},)


def test_a_moved_lake_is_found_under_the_new_root(settings: Settings, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    os.rename(settings.lake.root, moved)
    settings = Settings(path=None, lake=LakeSettings(root=moved, state_dir=settings.lake.state_dir))
    result = run_query(settings, "SELECT count(*) AS n FROM web.track_order_completed", "duckdb")
    assert result.rows == ({"n": 2},)


def test_the_cli_answers_without_starting_spark(settings: Settings, tmp_path: Path) -> None:
    config = tmp_path / "eventlake.toml"
    config.write_text(f'[lake]\nroot = "{settings.lake.root}"\nstate_dir = "{settings.lake.state_dir}"\n')
    code = (
        "import sys\nfrom eventlake.cli import cli\n"
        "try:\n"
        f"    cli(['--config', {str(config)!r}, 'sql', '--engine', 'duckdb', '--format', 'json',"
        " 'SELECT message_id, properties_revenue, received_at FROM web.track_order_completed ORDER BY 1'])\n"
        "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')), file=sys.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLAKE")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert json.loads(done.stdout) == [
        {"message_id": "m1", "properties_revenue": 19.99, "received_at": "2026-11-20T07:30:00.123456+00:00"},
        {"message_id": "m2", "properties_revenue": 5, "received_at": "2026-11-21T00:01:00+00:00"},
    ]
    assert done.stderr.strip().splitlines()[-1] == "[]"  # neither pyspark nor py4j was imported


def test_cli_error_is_one_line(settings: Settings, tmp_path: Path) -> None:
    config = tmp_path / "eventlake.toml"
    config.write_text(f'[lake]\nroot = "{settings.lake.root}"\nstate_dir = "{settings.lake.state_dir}"\n')
    result = CliRunner().invoke(cli, ["--config", str(config), "sql", "--engine", "duckdb", "SELEC 1"])
    assert result.exit_code == 1
    assert result.output.startswith("error: query failed:") and result.output.count("\n") == 1


def test_two_columns_with_one_name_are_refused_not_merged() -> None:
    from eventlake.query.errors import QueryError
    from eventlake.query.result import QueryResult

    assert QueryResult.of(["a", "b"], [(1, 2)]).rows == ({"a": 1, "b": 2},)
    with pytest.raises(QueryError, match="two columns named 'user_id'.*AS"):
        QueryResult.of(["user_id", "user_id"], [("u1", "u2")])
