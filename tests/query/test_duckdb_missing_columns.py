"""The DuckDB engine on tables whose files lack columns the table has (files from before a column
was added, another writer's files from an older schema): such a column reads NULL of the table's
type whatever files the table has (only narrow ones, a mix, none), and one table DuckDB cannot
read leaves the others readable. Parquet written by pyarrow, schema files as the sync writes them."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventlake import layout
from eventlake.config import LakeSettings, Settings
from eventlake.query import run_query
from eventlake.query.duckdb_engine import write_database_file
from eventlake.query.errors import QueryError
from tests.query.test_duckdb_engine import write_schema

TRACK = [
    ("message_id", "string"),
    ("event", "string"),
    ("received_at", "timestamp"),
    ("price", "decimal(38,6)"),
]


def write(path: Path, **columns: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    lake = tmp_path / "lake"
    # only narrow files: an older writer's, without `event` nor `price`
    narrow = layout.table_dir(lake, "SRC1", "track_narrow")
    write(narrow / "day=2026-11-20" / "hr=07" / "old-0.parquet", message_id=["m1"],
          received_at=[datetime(2026, 11, 20, 7, 30)])  # fmt: skip
    write_schema(lake, "web", "track_narrow", TRACK, ("day", "hr"), narrow)
    # a mix: `price` is in no file, `event` in one of two
    mixed = layout.table_dir(lake, "SRC1", "track_mixed")
    write(mixed / "day=2026-11-20" / "hr=07" / "old-0.parquet", message_id=["m2"],
          received_at=[datetime(2026, 11, 20, 7, 0)])  # fmt: skip
    write(mixed / "day=2026-11-20" / "hr=08" / "part-0.parquet", message_id=["m3"], event=["Bought"],
          received_at=[datetime(2026, 11, 20, 8, 0)])  # fmt: skip
    write_schema(lake, "web", "track_mixed", TRACK, ("day", "hr"), mixed)
    # a table DuckDB cannot read: its only file is damaged
    broken = layout.table_dir(lake, "SRC1", "track_broken")
    (broken / "day=2026-11-20" / "hr=07").mkdir(parents=True)
    (broken / "day=2026-11-20" / "hr=07" / "part-0.parquet").write_bytes(b"not parquet")
    write_schema(lake, "web", "track_broken", TRACK, ("day", "hr"), broken)
    return Settings(path=None, lake=LakeSettings(root=lake, state_dir=tmp_path / "state"))


def test_a_column_no_file_has_reads_null_of_the_tables_type(settings: Settings) -> None:
    sql = (
        "SELECT message_id, event, price, typeof(event) AS event_type, typeof(price) AS price_type, day, hr"
        " FROM web.track_narrow"
    )
    assert run_query(settings, sql, "duckdb").rows == (
        {"message_id": "m1", "event": None, "price": None, "event_type": "VARCHAR",
         "price_type": "DECIMAL(38,6)", "day": "2026-11-20", "hr": "07"},
    )  # fmt: skip
    result = run_query(settings, "SELECT * FROM web.track_narrow", "duckdb")
    assert result.columns == ("message_id", "event", "received_at", "price", "day", "hr")


def test_a_mix_of_files_reads_each_column_by_name(settings: Settings) -> None:
    sql = "SELECT message_id, event, price, typeof(price) AS t FROM web.track_mixed ORDER BY message_id"
    assert run_query(settings, sql, "duckdb").rows == (
        {"message_id": "m2", "event": None, "price": None, "t": "DECIMAL(38,6)"},
        {"message_id": "m3", "event": "Bought", "price": None, "t": "DECIMAL(38,6)"},
    )


def test_a_table_duckdb_cannot_read_leaves_the_others_readable(settings: Settings, tmp_path: Path) -> None:
    both = "SELECT count(*) AS n FROM web.track_narrow UNION ALL SELECT count(*) FROM web.track_mixed"
    # a query naming track_broken (here in a comment) opens its files too: the lake still opens
    every = run_query(settings, f"{both} /* not track_broken */", "duckdb")
    assert [r["n"] for r in every.rows] == [1, 2]
    with pytest.raises(QueryError, match=r"web\.track_broken.*(parquet|Parquet)"):
        run_query(settings, "SELECT count(*) FROM web.track_broken", "duckdb")
    columns = run_query(settings, "DESCRIBE web.track_broken", "duckdb").rows
    assert [r["column_name"] for r in columns] == ["message_id", "event", "received_at", "price", "day", "hr"]


def test_the_database_file_has_every_table(settings: Settings, tmp_path: Path) -> None:
    path = tmp_path / "lake.duckdb"
    made = write_database_file(settings, path)
    assert {"web.track_narrow", "web.track_mixed", "web.track_broken"} <= set(made)
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert con.execute("SELECT count(*), count(event) FROM web.track_mixed").fetchone() == (2, 1)
        assert con.execute("SELECT event FROM web.track_narrow").fetchall() == [(None,)]
        with pytest.raises(duckdb.Error, match="track_broken"):
            con.execute("SELECT * FROM web.track_broken").fetchall()
    finally:
        con.close()
