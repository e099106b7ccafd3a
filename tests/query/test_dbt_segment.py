"""The dbt package dbt-labs/segment (vendored in tests/query/dbt_packages: no hub here) through the
example project examples/dbt-segment, on both engines: its sessions are the same on dbt-duckdb and
dbt-spark, and the same as plain SQL on the lake's `page` table; a second sync then a second
`dbt build` (incremental on DuckDB, rebuilt on Spark) keeps them so."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from eventlake.config import load_settings
from eventlake.query import run_query
from eventlake.timestamps import parse_timestamp
from tests.collect.harness import make_project
from tests.query.dbt_harness import archive, dbt, dbt_environment, eventlake, thrift_server

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PACKAGES = Path(__file__).resolve().parent / "dbt_packages"

MAC = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0"
IPHONE = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko)"
ANDROID = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0"
WINDOWS = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0"
IPAD = "Mozilla/5.0 (iPad; CPU OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko)"
GOOGLE, NEWSLETTER = (
    {"source": "google", "medium": "cpc", "name": "fall"},
    {"source": "news", "medium": "email"},
)


def _page(n: int, anonymous_id: str, at: str, path: str, agent: str, user_id: str | None = None,
          referrer: str | None = None, campaign: dict | None = None, search: str = "") -> dict:  # fmt: skip
    """A page call as analytics.js sends it: the page's properties, the campaign and the user agent."""
    url = f"https://shop.example.com{path}{search}"
    context = {"userAgent": agent, "ip": "203.0.113.7", "campaign": campaign or {}}
    properties = {"url": url, "path": path, "search": search, "title": path.strip("/") or "Home"}
    if referrer:
        properties["referrer"] = referrer
    who = {"anonymousId": anonymous_id} | ({"userId": user_id} if user_id else {})
    return {"type": "page", "messageId": f"p{n}", "timestamp": at, "context": context,
            "properties": properties, **who}  # fmt: skip


FIRST = [
    # a1 (a Mac): 45 s from Google's ad; 39 minutes later a second session, where a1 signs in as u1
    # and stays until a page exactly 30 minutes later (the same session: a new one needs more)
    _page(1, "a1", "2026-11-20T10:00:00Z", "/", MAC, referrer="https://www.google.com/search?q=shoes",
          campaign=GOOGLE, search="?utm_source=google&gclid=g1"),
    _page(2, "a1", "2026-11-20T10:00:45Z", "/shoes", MAC),
    _page(3, "a1", "2026-11-20T10:39:45Z", "/account", MAC, user_id="u1"),
    _page(4, "a1", "2026-11-20T11:09:45Z", "/orders", MAC),
    # a2: u1's phone, signed in on its second page (20 s from a tweet); a session 49:40 later
    _page(5, "a2", "2026-11-20T12:00:00Z", "/sale", IPHONE, referrer="https://t.co/x1"),
    _page(6, "a2", "2026-11-20T12:00:20Z", "/sale/boots", IPHONE, user_id="u1"),
    _page(7, "a2", "2026-11-20T12:50:00Z", "/", IPHONE),
    # a3 (Android) never signs in: a gap of 29:59 keeps the session, one of 30:01 starts one
    _page(8, "a3", "2026-11-20T09:00:00Z", "/", ANDROID, campaign=NEWSLETTER),
    _page(9, "a3", "2026-11-20T09:29:59Z", "/shoes", ANDROID),
    _page(10, "a3", "2026-11-20T10:00:00Z", "/boots", ANDROID),
    # a4 (Windows) is u2 on its first page, not on its second
    _page(11, "a4", "2026-11-20T15:00:00Z", "/", WINDOWS, user_id="u2", referrer="https://www.bing.com/"),
    _page(12, "a4", "2026-11-20T15:05:00Z", "/boots", WINDOWS),
    # a5 (an iPad) from Facebook, one page: the latest session
    _page(13, "a5", "2026-11-20T16:00:00Z", "/", IPAD, referrer="https://m.facebook.com/story"),
]  # fmt: skip
SECOND = [
    # a5's session goes on (the incremental run rebuilds it); a1 comes back the next day; a6 is new
    _page(14, "a5", "2026-11-20T16:10:00Z", "/sale", IPAD),
    _page(15, "a1", "2026-11-21T08:00:00Z", "/", MAC),
    _page(16, "a6", "2026-11-21T09:00:00Z", "/", ANDROID, referrer="https://duckduckgo.com/"),
    _page(17, "a6", "2026-11-21T09:00:25Z", "/shoes", ANDROID, user_id="u3"),
]  # fmt: skip

# segment_web_sessions, as plain SQL on the lake's `page` table (no views, no dbt): a visitor's pages
# (one anonymous id) with no gap of more than 30 minutes are a session; the user is the visitor's
# last user id, and sessions are numbered per user by their start
PLAIN_SESSIONS = r"""
WITH pages AS (
    SELECT anonymous_id, timestamp AS seen_at, properties_url AS url, context_campaign_source AS utm_source,
           regexp_extract(properties_referrer, '^[a-z]+://(www\.)?([^/?]+)', 2) AS referrer_host,
           CASE WHEN context_user_agent LIKE '%Android%' THEN 'Android'
                WHEN context_user_agent LIKE '%(iPhone%' THEN 'iPhone'
                WHEN context_user_agent LIKE '%(iPad%' OR context_user_agent LIKE '%(iPod%' THEN 'Tablet'
                WHEN regexp_matches(context_user_agent, '\((Windows|Macintosh|X11)') THEN 'Desktop'
                ELSE 'Uncategorized' END AS device_category,
           lag(timestamp) OVER (PARTITION BY anonymous_id ORDER BY timestamp) AS previous_at
    FROM web.page
), numbered AS (
    SELECT *, sum(CASE WHEN seen_at - previous_at <= INTERVAL 30 MINUTE THEN 0 ELSE 1 END)
                  OVER (PARTITION BY anonymous_id ORDER BY seen_at) AS visit,
              row_number() OVER (PARTITION BY anonymous_id ORDER BY seen_at) AS page_number
    FROM pages
), sessions AS (
    SELECT anonymous_id, min(seen_at) AS started_at, count(*) AS page_views,
           date_diff('second', min(seen_at), max(seen_at)) AS duration,
           min_by(struct_pack(url, utm_source, referrer_host, device_category), page_number) AS first_page
    FROM numbered GROUP BY anonymous_id, visit
), users AS (
    SELECT anonymous_id, user_id FROM (
        SELECT anonymous_id, user_id,
               row_number() OVER (PARTITION BY anonymous_id ORDER BY timestamp DESC) AS k
        FROM web.page WHERE user_id IS NOT NULL
    ) WHERE k = 1
)
SELECT coalesce(users.user_id, sessions.anonymous_id) AS blended_user_id,
       row_number() OVER (PARTITION BY coalesce(users.user_id, sessions.anonymous_id) ORDER BY started_at),
       sessions.anonymous_id, page_views, first_page.url, first_page.utm_source, first_page.referrer_host,
       first_page.device_category, duration,
       CASE WHEN duration < 10 THEN '0s to 9s' WHEN duration < 30 THEN '10s to 29s'
            WHEN duration < 60 THEN '30s to 59s' ELSE '60s or more' END
FROM sessions LEFT JOIN users USING (anonymous_id)
ORDER BY 1, 2
"""
# the same columns of the package's model, on either engine; then more of them (engines compared)
SESSIONS = (
    "SELECT blended_user_id, CAST(session_number AS BIGINT), anonymous_id, CAST(page_views AS BIGINT),"
    " first_page_url, utm_source, referrer_host, device_category, CAST(duration_in_s AS BIGINT),"
    " duration_in_s_tier FROM analytics.segment_web_sessions ORDER BY 1, 2"
)
MORE = (
    "SELECT session_id, utm_medium, utm_campaign, gclid, referrer, referrer_medium, referrer_source, device,"
    " first_page_url_path, first_page_url_query, last_page_url, last_page_url_host"
    " FROM analytics.segment_web_sessions ORDER BY 1"
)


def _rows(cursor, sql: str) -> list[tuple]:
    cursor.execute(sql)
    return [tuple(row) for row in cursor.fetchall()]


def test_dbt_labs_segment_sessions_on_both_engines(tmp_path: Path) -> None:
    project = make_project(tmp_path / "mylake")
    env = dbt_environment()
    settings = load_settings(project.config, environ={})
    lake_file = tmp_path / "lake.duckdb"

    def plain() -> list[tuple]:
        return [tuple(r.values()) for r in run_query(settings, PLAIN_SESSIONS, engine="duckdb").rows]

    def on_duckdb() -> tuple[list[tuple], list[tuple]]:
        with duckdb.connect(str(lake_file), read_only=True) as con:  # closed: dbt writes the file next
            return _rows(con, SESSIONS), _rows(con, MORE)

    # the example project, with the vendored packages in place of the hub's
    dbt_project = tmp_path / "dbt-segment"
    shutil.copytree(
        EXAMPLES / "dbt-segment",
        dbt_project,
        ignore=shutil.ignore_patterns("target", "dbt_packages", "logs", "package-lock.yml"),
    )
    (dbt_project / "packages.yml").write_text(
        f"packages:\n  - local: {PACKAGES / 'segment'}\n  - local: {PACKAGES / 'dbt_utils'}\n"
    )
    profiles = EXAMPLES / "dbt"
    dbt("deps", dbt_project, profiles, env, tmp_path)

    # dbt-duckdb: a first build, then a second (incremental) one after a sync of later pages
    archive(project, FIRST, parse_timestamp("2026-11-20T17:00:00Z"), "first")
    eventlake(project, "sync", env=env)
    eventlake(project, "catalog", "duckdb", str(lake_file), env=env)
    duckdb_env = env | {"EVENTLAKE_DUCKDB_FILE": str(lake_file)}
    dbt("build", dbt_project, profiles, duckdb_env, tmp_path, "--target", "duckdb")
    expected = plain()
    assert [(user, n, visitor) for user, n, visitor, *_ in expected] == [
        ("a3", 1, "a3"), ("a3", 2, "a3"), ("a5", 1, "a5"),
        ("u1", 1, "a1"), ("u1", 2, "a1"), ("u1", 3, "a2"), ("u1", 4, "a2"), ("u2", 1, "a4"),
    ]  # fmt: skip
    assert on_duckdb()[0] == expected

    archive(project, SECOND, parse_timestamp("2026-11-21T10:00:00Z"), "second")
    eventlake(project, "sync", env=env)
    eventlake(project, "catalog", "duckdb", str(lake_file), env=env)
    dbt("build", dbt_project, profiles, duckdb_env, tmp_path, "--target", "duckdb")
    # the package's incremental branch ran: it numbers new sessions after the user's earlier ones
    compiled = tmp_path / "dbt-duckdb" / "compiled" / "segment" / "models" / "sessionization"
    assert "starting_session_number" in (compiled / "segment_web_sessions.sql").read_text()
    expected = plain()
    assert len(expected) == 10  # u1's fifth session; a5's session has two pages now; u3's (a6)
    assert [row[:4] for row in expected if row[2] in ("a5", "a6")] == [("a5", 1, "a5", 2), ("u3", 1, "a6", 2)]
    duckdb_sessions, duckdb_more = on_duckdb()
    assert duckdb_sessions == expected

    # dbt-spark through `eventlake thrift`: the same sessions, and again after a second run (which
    # rebuilds the package's incremental models on Spark: appended, they would hold every row twice)
    from pyhive import hive

    with thrift_server(project, env) as port:
        spark_env = env | {"EVENTLAKE_THRIFT_PORT": str(port)}
        for _ in range(2):
            dbt("build", dbt_project, profiles, spark_env, tmp_path, "--target", "spark")
            cursor = hive.connect(host="127.0.0.1", port=port).cursor()
            assert (_rows(cursor, SESSIONS), _rows(cursor, MORE)) == (duckdb_sessions, duckdb_more)
