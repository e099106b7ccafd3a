"""Segment-warehouse SQL on the lake: the views a real sync registers (Spark, through the Hive
metastore) and the DuckDB engine defines give the same rows, follow the tables as columns are
added, and mean what Segment's warehouse tables mean (checked against plain SQL on the tables)."""

from __future__ import annotations

import pytest

from eventlake.query import run_query
from eventlake.sync import run_sync
from eventlake.timestamps import parse_timestamp

pytestmark = pytest.mark.spark
RECEIVED = parse_timestamp("2026-11-20T07:30:00Z")


def _order(message_id: str, user: str, when: str, **properties: object) -> dict:
    return {"type": "track", "userId": user, "event": "Order Completed", "messageId": message_id,
            "timestamp": when, "properties": properties, "context": {"ip": "10.0.0.1"}}  # fmt: skip


def _identify(message_id: str, user: str, when: str, **traits: object) -> dict:
    return {"type": "identify", "userId": user, "messageId": message_id, "timestamp": when, "traits": traits}


WAREHOUSE_QUERIES = [
    "SELECT id, user_id, event, event_text, context_ip, timestamp FROM {db}.tracks ORDER BY id",
    "SELECT id, revenue, event, uuid_ts, received_at FROM {db}.order_completed ORDER BY id",
    "SELECT id, plan, email, received_at FROM {db}.users ORDER BY id",
    "SELECT id, user_id, plan, email FROM {db}.identifies ORDER BY id",
    "SELECT id, anonymous_id, name, path, url FROM {db}.pages ORDER BY id",
    # Segment's standard columns no data has: NULL (dbt-labs/segment's segment_web_page_views selects these)
    "SELECT id, url, title, search, referrer, context_campaign_source, context_campaign_medium,"
    " context_campaign_name, context_campaign_term, context_campaign_content, context_ip, context_user_agent,"
    " sent_at FROM {db}.pages ORDER BY id",
    "SELECT id, context_page_url, context_campaign_name, context_ip FROM {db}.tracks ORDER BY id",
    "SELECT id, previous_id, context_library_name, context_page_url FROM {db}.aliases ORDER BY id",
    "SELECT id, user_id, previous_id FROM {db}.aliases ORDER BY id",
    "SELECT count(*) AS n FROM {db}.groups",
    "SELECT t.event, count(DISTINCT u.id) AS users FROM {db}.tracks t JOIN {db}.users u ON t.user_id = u.id"
    " GROUP BY t.event ORDER BY t.event",
]


def test_the_warehouse_views_on_both_engines(lake, spark) -> None:
    say = lambda line: None  # noqa: E731
    lake.archive(
        [
            _order("o1", "u1", "2026-11-20T07:00:00Z", revenue=10),
            _order("o2", "u2", "2026-11-20T07:05:00Z", revenue=20, id="shadowed"),
            {"type": "track", "userId": "u1", "event": "Signed Up", "messageId": "s1"},
            _identify("i1", "u1", "2026-11-20T06:00:00Z", plan="free", email="u1@example.com", name="Ann"),
            _identify("i2", "u1", "2026-11-20T07:10:00Z", plan="pro"),  # newer plan, no email: kept
            _identify("i3", "u2", "2026-11-20T07:11:00Z", plan="free"),
            {
                "type": "page",
                "anonymousId": "a1",
                "messageId": "p1",
                "name": "Home",
                "properties": {"path": "/", "url": "https://example.com/"},
            },  # fmt: skip
            {"type": "alias", "userId": "u1", "previousId": "a1", "messageId": "al1"},
        ],
        received_at=RECEIVED,
    )
    db = lake.source.database
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")  # a table of a view's name (a dbt model): left alone
    spark.sql(f"CREATE TABLE {db}.screens (screen_count BIGINT) USING parquet")
    [first] = run_sync(lake.settings, [lake.slug], spark=spark, say=say)
    assert first.status == "Success"
    assert run_query(lake.settings, f"SELECT * FROM {db}.screens", "spark", spark=spark).columns == (
        "screen_count",
    )

    users = run_query(
        lake.settings, f"SELECT id, plan, email, name FROM {db}.users ORDER BY id", "duckdb"
    ).rows
    assert users == ({"id": "u1", "plan": "pro", "email": "u1@example.com", "name": "Ann"},
                     {"id": "u2", "plan": "free", "email": None, "name": None})  # fmt: skip
    by_event = f"SELECT event, count(*) AS n FROM {db}.tracks GROUP BY 1 ORDER BY 1"
    tracks = run_query(lake.settings, by_event, "spark", spark=spark).rows
    plain = run_query(
        lake.settings,
        f"SELECT 'order_completed' AS event, count(*) AS n FROM {db}.track_order_completed "
        f"UNION ALL SELECT 'signed_up', count(*) FROM {db}.track_signed_up ORDER BY 1", "spark", spark=spark,
    ).rows  # fmt: skip
    assert tracks == plain

    # a later sync adds a property: the per-event view shows it on both engines
    lake.archive(
        [_order("o3", "u2", "2026-11-20T08:00:00Z", revenue=5, coupon="WINTER")], received_at=RECEIVED
    )
    [second] = run_sync(lake.settings, [lake.slug], spark=spark, say=say)
    assert [t.new_columns for t in second.tables] == [(("properties_coupon", "string"),)]
    sql = f"SELECT id, coupon FROM {db}.order_completed ORDER BY id"
    for engine in ("spark", "duckdb"):
        rows = run_query(lake.settings, sql, engine, spark=spark).rows
        assert rows == (
            {"id": "o1", "coupon": None},
            {"id": "o2", "coupon": None},
            {"id": "o3", "coupon": "WINTER"},
        )

    # the standard columns are there, typed, on both engines; a column the data has keeps its values
    pages = f"SELECT url, search, referrer, context_campaign_source, sent_at FROM {db}.pages"
    types = "SELECT typeof(search) AS s, typeof(context_campaign_source) AS c, typeof(sent_at) AS t"
    types += f" FROM {db}.pages"
    for engine, text in (("spark", "string"), ("duckdb", "varchar")):
        assert run_query(lake.settings, pages, engine, spark=spark).rows == (
            {"url": "https://example.com/", "search": None, "referrer": None, "context_campaign_source": None,
             "sent_at": None},
        )  # fmt: skip
        [typed] = run_query(lake.settings, types, engine, spark=spark).rows
        assert {k: v.lower() for k, v in typed.items()} == {"s": text, "c": text, "t": "timestamp"}, engine
    ips = run_query(lake.settings, f"SELECT DISTINCT context_ip FROM {db}.order_completed", "duckdb").rows
    assert ips == ({"context_ip": "10.0.0.1"},)

    differ = []
    for template in WAREHOUSE_QUERIES:
        sql = template.format(db=db)
        on_spark = run_query(lake.settings, sql, "spark", spark=spark)
        on_duckdb = run_query(lake.settings, sql, "duckdb")
        assert on_spark.rows, sql
        if (on_spark.columns, on_spark.rows) != (on_duckdb.columns, on_duckdb.rows):
            differ.append((sql, on_spark, on_duckdb))
    assert not differ, "\n\n".join(f"{sql}\nspark:  {s}\nduckdb: {d}" for sql, s, d in differ)
