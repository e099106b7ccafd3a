"""The example dbt project (examples/dbt) with `dbt build` on a synced lake, on both engines:
dbt-duckdb over the file `eventlake catalog duckdb` writes, dbt-spark through `eventlake thrift`.
Its models (sessions, daily active users, a funnel) are checked against plain SQL on the lake's
tables; the BI connections docs/querying.md gives are used too: the DuckDB file opened by a client, the
JDBC URL by beeline (the Hive JDBC driver of the pyspark wheel)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyspark
import pytest

from eventlake.config import load_settings
from eventlake.query import run_query
from eventlake.timestamps import parse_timestamp
from tests.collect.harness import make_project
from tests.query.dbt_harness import archive, dbt, dbt_environment, eventlake, run, thrift_server

pytestmark = pytest.mark.integration
PROJECT = Path(__file__).resolve().parents[2] / "examples" / "dbt"
SPARK_HOME = Path(pyspark.__file__).parent  # the wheel: its bin/beeline and the Hive JDBC driver


def _page(n: int, who: dict, at: str) -> dict:
    return {"type": "page", "name": "Home", "messageId": f"p{n}", "timestamp": at, **who}


def _track(n: int, who: dict, event: str, at: str) -> dict:
    return {"type": "track", "event": event, "messageId": f"t{n}", "timestamp": at, **who}


U1, U2, U3, A9 = {"userId": "u1"}, {"userId": "u2"}, {"userId": "u3"}, {"anonymousId": "a9"}
MESSAGES = [
    # u1: a session of view -> order, then 50 minutes later a second session; a second day
    _page(1, U1, "2026-11-20T10:00:00Z"), _track(2, U1, "Product Viewed", "2026-11-20T10:05:00Z"),
    _track(3, U1, "Order Completed", "2026-11-20T10:10:00Z"), _page(4, U1, "2026-11-20T11:00:00Z"),
    _page(5, U1, "2026-11-21T09:00:00Z"),
    # u2 views and leaves; u3 ordered before viewing (not converted by the funnel's rule); a gap of 30
    # minutes or more starts a new session
    _track(6, U2, "Product Viewed", "2026-11-20T12:00:00Z"),
    _track(7, U3, "Order Completed", "2026-11-20T08:00:00Z"),
    _track(8, U3, "Product Viewed", "2026-11-20T08:20:00Z"),
    # an anonymous visitor: sessions and the funnel count it, daily active users do not
    _page(9, A9, "2026-11-21T15:00:00Z"), _track(10, A9, "Product Viewed", "2026-11-21T15:29:00Z"),
    _track(11, A9, "Order Completed", "2026-11-21T16:00:00Z"),
]  # fmt: skip
RECEIVED = parse_timestamp("2026-11-21T16:30:00Z")

# the same answers in plain SQL on the lake's tables (no views, no dbt)
PLAIN_DAU = """
SELECT CAST(timestamp AS DATE) AS day, count(DISTINCT user_id) AS active_users FROM (
    SELECT user_id, timestamp FROM web.page UNION ALL SELECT user_id, timestamp FROM web.track_product_viewed
    UNION ALL SELECT user_id, timestamp FROM web.track_order_completed
) WHERE user_id IS NOT NULL GROUP BY 1 ORDER BY 1
"""
PLAIN_FUNNEL = """
WITH viewed AS (
    SELECT coalesce(user_id, anonymous_id) AS who, min(timestamp) AS first_at FROM web.track_product_viewed
    GROUP BY 1
), orders AS (
    SELECT coalesce(user_id, anonymous_id) AS who, timestamp AS ordered_at FROM web.track_order_completed
)
SELECT (SELECT count(*) FROM viewed) AS viewed,
       (SELECT count(DISTINCT viewed.who) FROM viewed JOIN orders
          ON orders.who = viewed.who AND orders.ordered_at >= viewed.first_at) AS ordered
"""
PLAIN_SESSIONS = """
WITH e AS (
    SELECT coalesce(user_id, anonymous_id) AS who, timestamp AS event_at FROM web.page
    UNION ALL SELECT coalesce(user_id, anonymous_id), timestamp FROM web.track_product_viewed
    UNION ALL SELECT coalesce(user_id, anonymous_id), timestamp FROM web.track_order_completed
), g AS (SELECT who, event_at - lag(event_at) OVER (PARTITION BY who ORDER BY event_at) AS gap FROM e)
SELECT who, count(*) FILTER (WHERE gap IS NULL OR gap >= INTERVAL 30 MINUTE) AS sessions, count(*) AS events
FROM g GROUP BY who ORDER BY who
"""


def test_the_example_dbt_project_on_both_engines(tmp_path: Path) -> None:
    project = make_project(tmp_path / "mylake")
    archive(project, MESSAGES, RECEIVED, "dbt-example")
    env = dbt_environment()
    eventlake(project, "sync", env=env)
    settings = load_settings(project.config, environ={})

    def plain(sql: str) -> list[tuple]:
        return [tuple(r.values()) for r in run_query(settings, sql, engine="duckdb").rows]

    dau, ((viewed, ordered),), sessions = plain(PLAIN_DAU), plain(PLAIN_FUNNEL), plain(PLAIN_SESSIONS)
    assert (viewed, ordered) == (4, 2)  # u1, u2, u3, a9 viewed; u1 and a9 ordered after viewing
    assert [(who, n) for who, n, _ in sessions] == [("a9", 2), ("u1", 3), ("u2", 1), ("u3", 1)]

    # dbt-duckdb, over the lake's DuckDB file
    lake_file = tmp_path / "lake.duckdb"
    eventlake(project, "catalog", "duckdb", str(lake_file), env=env)
    dbt(
        "build",
        PROJECT,
        PROJECT,
        env | {"EVENTLAKE_DUCKDB_FILE": str(lake_file)},
        tmp_path,
        "--target",
        "duckdb",
    )
    on_duckdb = _results(duckdb.connect(str(lake_file), read_only=True))
    assert on_duckdb["daily_active_users"] == [(str(d), n) for d, n in dau]
    assert on_duckdb["funnel"] == [(1, "product_viewed", viewed), (2, "order_completed", ordered)]
    assert on_duckdb["sessions"] == sessions
    # written again after a sync, the file keeps dbt's schema
    eventlake(project, "catalog", "duckdb", str(lake_file), env=env)
    assert _results(duckdb.connect(str(lake_file), read_only=True)) == on_duckdb

    # dbt-spark, through `eventlake thrift`; the same answers
    with thrift_server(project, env) as port:
        dbt(
            "build",
            PROJECT,
            PROJECT,
            env | {"EVENTLAKE_THRIFT_PORT": str(port)},
            tmp_path,
            "--target",
            "spark",
        )
        from pyhive import hive

        on_spark = _results(hive.connect(host="127.0.0.1", port=port).cursor())
        assert on_spark == on_duckdb
        # a BI tool's JDBC connection: beeline with the Hive JDBC driver, on the documented URL
        url = f"jdbc:hive2://127.0.0.1:{port}/default"
        beeline = [str(SPARK_HOME / "bin" / "beeline"), "-u", url, "--outputformat=csv2", "-e",
                   "SELECT count(*) AS n FROM web.tracks"]  # fmt: skip
        out = run(beeline, env | {"SPARK_HOME": str(SPARK_HOME)}, tmp_path, timeout=120)
        assert out.strip().splitlines()[-1] == str(sum(1 for m in MESSAGES if m["type"] == "track"))


def _results(cursor) -> dict[str, list[tuple]]:
    """The example project's models, in a stable order, from a DuckDB or a Hive (DB-API) cursor."""
    queries = {
        "daily_active_users": "SELECT CAST(day AS STRING) AS day, active_users"
        " FROM analytics.daily_active_users ORDER BY 1",
        "funnel": "SELECT step, event, visitors FROM analytics.funnel ORDER BY step",
        "sessions": "SELECT visitor_id, count(*) AS sessions, sum(events) AS events FROM analytics.sessions"
        " GROUP BY 1 ORDER BY 1",
    }
    found = {}
    for name, sql in queries.items():
        cursor.execute(sql)
        found[name] = [tuple(row) for row in cursor.fetchall()]
    return found
