"""Several sources in one database, told apart by table prefix (Segment Data Lakes' documented
set-up): each source's tables, quarantine and warehouse views carry its prefix, queries on both
engines see only that source's rows, and `schema set-type` on one source's table leaves the other's."""

from __future__ import annotations

import dataclasses

import pytest

from eventlake.config import add_source, load_settings
from eventlake.query import run_query
from eventlake.sync import run_sync
from eventlake.sync.maintenance.retype import set_column_type
from tests.conftest import Lake
from tests.sync.test_sync import track

pytestmark = pytest.mark.spark


def test_two_sources_in_one_database(lake, spark) -> None:
    say = lambda line: None  # noqa: E731
    db = f"apps_{lake.slug}"  # the metastore is the test session's: a database of this test's own
    add_source(lake.config, f"{lake.slug}_ios", database=db, table_prefix="ios")  # as SDL users wrote it
    add_source(lake.config, f"{lake.slug}_android", database=db, table_prefix="android")
    settings = load_settings(lake.config, environ={})
    settings = dataclasses.replace(
        settings, lake=dataclasses.replace(settings.lake, state_dir=lake.settings.lake.state_dir)
    )
    ios = Lake(lake.root, lake.config, settings, f"{lake.slug}_ios")
    android = Lake(lake.root, lake.config, settings, f"{lake.slug}_android")
    ios.archive(
        [
            track("i1", revenue=1),
            track("i2", revenue=2),
            {"type": "identify", "userId": "u1", "messageId": "i3"},
        ]
    )
    android.archive(
        [
            track("a1", revenue=10),
            track("a1", revenue=10),
            {"type": "track", "userId": "u2", "messageId": "a2"},
        ]
    )

    results = run_sync(settings, [ios.slug, android.slug], spark=spark, say=say)
    assert [r.status for r in results] == ["Success", "Success"]
    assert {t.table for r in results for t in r.tables} == {
        "ios_track_order_completed", "ios_identify", "android_track_order_completed"
    }  # fmt: skip
    assert sorted(
        r.tableName for r in spark.sql(f"SHOW TABLES IN {db}").collect() if r.tableName.endswith("quarantine")
    ) == [
        "android__quarantine"
    ]  # android's track without an event; its duplicate is dropped, not quarantined

    for engine in ("spark", "duckdb"):

        def query(sql: str, engine: str = engine) -> tuple:
            return run_query(settings, sql, engine, spark=spark).rows

        assert query(f"SELECT id, revenue FROM {db}.ios_order_completed ORDER BY id") == (
            {"id": "i1", "revenue": 1}, {"id": "i2", "revenue": 2}
        )  # fmt: skip
        assert query(f"SELECT id, revenue FROM {db}.android_order_completed ORDER BY id") == (
            {"id": "a1", "revenue": 10},
        )
        assert query(f"SELECT id FROM {db}.ios_identifies") == ({"id": "i3"},)
        assert query(f"SELECT count(*) AS n FROM {db}.android_tracks") == ({"n": 1},)

    # set-type finds the source by the table's folders, not by the database
    result = set_column_type(
        settings, spark, f"{db}.android_track_order_completed", "properties_revenue", "string", say
    )
    assert (result.old_type, result.new_type) == ("bigint", "string")
    types = {
        name: {r.col_name: r.data_type for r in spark.sql(f"DESCRIBE {db}.{name}").collect()}[
            "properties_revenue"
        ]
        for name in ("ios_track_order_completed", "android_track_order_completed")
    }
    assert types == {"ios_track_order_completed": "bigint", "android_track_order_completed": "string"}
