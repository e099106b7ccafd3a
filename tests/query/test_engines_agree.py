"""Both engines give the same columns and rows for simple SQL over data written by a real sync."""

from __future__ import annotations

import pytest

from eventlake.query import run_query
from eventlake.sync import run_sync
from eventlake.timestamps import parse_timestamp

pytestmark = pytest.mark.spark


def order(message_id: str, user: str, when: str, **properties: object) -> dict:
    return {
        "type": "track",
        "userId": user,
        "event": "Order Completed",
        "messageId": message_id,
        "timestamp": when,
        "properties": properties,
    }


QUERIES = [
    "SELECT count(*) AS n FROM {db}.track_order_completed",
    "SELECT day, hr, count(*) AS n FROM {db}.track_order_completed GROUP BY day, hr ORDER BY day, hr",
    "SELECT message_id FROM {db}.track_order_completed WHERE day = '2026-11-20' AND hr = '07' ORDER BY 1",
    "SELECT message_id FROM {db}.track_order_completed WHERE day >= '2026-11-20' AND hr < '08' ORDER BY 1",
    "SELECT sum(properties_revenue) AS revenue, min(properties_revenue) AS low,"
    " max(properties_revenue) AS high, sum(properties_items) AS items FROM {db}.track_order_completed",
    "SELECT day, sum(properties_revenue) AS revenue FROM {db}.track_order_completed"
    " GROUP BY day ORDER BY day",
    "SELECT message_id, timestamp, received_at, original_timestamp, properties_at"
    " FROM {db}.track_order_completed ORDER BY message_id",
    "SELECT message_id FROM {db}.track_order_completed"
    " WHERE received_at >= TIMESTAMP '2026-11-20 08:00:00' ORDER BY message_id",
    "SELECT message_id, properties_coupon FROM {db}.track_order_completed ORDER BY message_id",
    "SELECT * FROM {db}.track_order_completed ORDER BY message_id",
    "SELECT * FROM {db}.identify",
    "SELECT * FROM {db}.page",
    "SELECT `day`, count(`message_id`) AS `orders`, sum(`properties_revenue`) AS `revenue`"
    " FROM `{db}`.`track_order_completed` GROUP BY `day` ORDER BY `day`",
    "SELECT count(DISTINCT user_id) AS buyers FROM {db}.track_order_completed WHERE properties_paid",
    "SELECT o.message_id, i.traits_email FROM {db}.track_order_completed o"
    " JOIN {db}.identify i ON o.user_id = i.user_id ORDER BY o.message_id",
    "SELECT kind, message_id, column_name, target_type, raw_value FROM {db}._quarantine ORDER BY message_id",
]


def test_spark_and_duckdb_agree(lake, spark) -> None:
    say = lambda line: None  # noqa: E731
    lake.archive(
        [
            order(
                "m1",
                "u1",
                "2026-11-20T07:29:00.123456Z",
                revenue=19.99,
                items=2,
                paid=True,
                at="2026-11-19T10:00:00Z",
            ),
            order("m2", "u2", "2026-11-20T07:31:00Z", revenue=5, items=1, paid=False),
            {"type": "identify", "userId": "u1", "messageId": "i1", "traits": {"email": "a@b.c", "age": 41}},
            {
                "type": "page",
                "anonymousId": "a1",
                "messageId": "p1",
                "name": "Home",
                "properties": {"path": "/", "tags": ["x", "y"]},
            },
        ],
        received_at=parse_timestamp("2026-11-20T07:30:00Z"),
    )
    lake.archive(
        [order("m4", "u1", "2026-11-20T08:10:00Z", revenue=12.345678, items=4)],
        received_at=parse_timestamp("2026-11-20T08:10:00Z"),
    )
    [first] = run_sync(lake.settings, [lake.slug], spark=spark, say=say)
    assert first.status == "Success"
    # a later sync adds a column: the older files lack it and read NULL in both engines
    lake.archive(
        [
            order("m5", "u2", "2026-11-21T00:04:00Z", revenue=100.25, items=3, paid=True, coupon="WINTER"),
            order("m3", "u3", "2026-11-21T00:04:30Z", revenue=0.5, items="lots", paid=True),  # -> quarantine
        ],
        received_at=parse_timestamp("2026-11-21T00:05:00Z"),
    )
    [second] = run_sync(lake.settings, [lake.slug], spark=spark, say=say)
    assert [t.new_columns for t in second.tables] == [(("properties_coupon", "string"),)]

    db = lake.source.database
    differ = []
    for template in QUERIES:
        sql = template.format(db=db)
        on_spark = run_query(lake.settings, sql, "spark", spark=spark)
        on_duckdb = run_query(lake.settings, sql, "duckdb")
        assert on_spark.rows, sql  # every query has an answer to compare
        if (on_spark.columns, on_spark.rows) != (on_duckdb.columns, on_duckdb.rows):
            differ.append((sql, on_spark, on_duckdb))
    assert not differ, "\n\n".join(f"{sql}\nspark:  {s}\nduckdb: {d}" for sql, s, d in differ)
