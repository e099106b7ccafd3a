"""What the Trino tier puts into a lake and asks of it: one small source with every table kind
(a track table, ``identify``, ``page``, the quarantine, the sync reports), every column type a sync
writes, two days and two hours; and the queries whose answers on Trino must equal eventlake's DuckDB
engine's."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from eventlake.query import run_query

DAY = dt.datetime(2026, 11, 19, tzinfo=dt.timezone.utc)
# (received at, messages): two hours of one day and one hour of the next
RECEIVED = (DAY + dt.timedelta(hours=7), DAY + dt.timedelta(hours=8), DAY + dt.timedelta(days=1, hours=7))


def messages(batch: int) -> list[dict[str, Any]]:
    """The messages received at ``RECEIVED[batch]``: every type a sync infers (bigint, boolean,
    decimal(38,6), string, timestamp, with microseconds), an identify and a page per user, and one
    message whose ``timestamp`` is not a time (quarantined: its value reads NULL in its table)."""
    found: list[dict[str, Any]] = []
    for n in range(3):
        user = f"u{n}"
        sent = f"2026-11-19T0{7 + batch % 2}:1{n}:0{batch}.{123456 + n:06d}Z"
        found += [
            {"type": "track", "event": "Order Completed", "userId": user, "messageId": f"o-{batch}-{n}",
             "timestamp": sent,
             "properties": {"revenue": 10.5 + n + batch / 4, "quantity": n + batch, "gift": n % 2 == 0,
                            "coupon": f"C{n}", "delivered_at": f"2026-11-2{batch}T10:00:0{n}.5Z"}},
            {"type": "identify", "userId": user, "messageId": f"i-{batch}-{n}", "timestamp": sent,
             "traits": {"email": f"{user}@example.com", "plan": ("free", "pro")[(n + batch) % 2],
                        "logins": n * 10 + batch}},
            {"type": "page", "userId": user, "messageId": f"p-{batch}-{n}", "name": "Home", "timestamp": sent,
             "properties": {"path": f"/{n}", "title": "Home"}},
        ]  # fmt: skip
    found.append(
        {
            "type": "page",
            "userId": "u0",
            "messageId": f"bad-{batch}",
            "name": "Home",
            "timestamp": "not a time",
        }
    )
    return found


# The queries both engines answer: (name, SQL on the source's database {db}); each names its columns
# and orders its rows completely
QUERIES: Sequence[tuple[str, str]] = (
    ("track table, every type",
     "SELECT message_id, user_id, properties_revenue, properties_quantity, properties_gift,"
     " properties_coupon, properties_delivered_at, \"timestamp\", received_at, day, hr"
     " FROM {db}.track_order_completed ORDER BY message_id"),
    ("identify", "SELECT message_id, user_id, traits_email, traits_plan, traits_logins, \"timestamp\","
                 " day, hr FROM {db}.identify ORDER BY message_id"),
    ("page", "SELECT message_id, user_id, name, properties_path, \"timestamp\", day, hr FROM {db}.page"
             " ORDER BY message_id"),
    ("quarantine", "SELECT kind, message_id, reason, raw_value, received_at, run_id FROM {db}._quarantine"
                   " ORDER BY message_id"),
    ("aggregate", "SELECT day, hr, count(*) AS n, sum(properties_revenue) AS revenue,"
                  " count_if(properties_gift) AS gifts, max(properties_delivered_at) AS last_delivery"
                  " FROM {db}.track_order_completed GROUP BY day, hr ORDER BY day, hr"),
    ("pruned to one hour", "SELECT count(*) AS n FROM {db}.page WHERE day = '2026-11-19' AND hr = '08'"),
)  # fmt: skip
REPORTS = (  # a row for the run and one for each table it wrote
    "SELECT run_id, type, table_name, status, row_count, rejected_messages, input_files, start_time,"
    " duration_mins FROM __segment_datalake.sync_reports WHERE source_id = '{source_id}'"
    " ORDER BY run_id, type, table_name"
)
VIEWS: Sequence[tuple[str, str]] = (
    ("tracks", "SELECT event, event_text, count(*) AS n FROM {db}.tracks GROUP BY event, event_text"
               " ORDER BY event"),
    ("order_completed", "SELECT id, revenue, quantity, gift, coupon FROM {db}.order_completed ORDER BY id"),
    ("pages", "SELECT id, name, path, title FROM {db}.pages ORDER BY id"),
    ("identifies", "SELECT id, user_id, email, plan FROM {db}.identifies ORDER BY id"),
    ("users", "SELECT id, email, plan, logins FROM {db}.users ORDER BY id"),
)  # fmt: skip


def normal(value: Any) -> Any:
    """One form for a value from either client: timestamps as naive UTC, decimals as Decimal."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value
    if isinstance(value, float):
        return Decimal(str(value))
    return value


def duckdb_rows(settings, sql: str) -> list[tuple]:
    result = run_query(settings, sql, engine="duckdb")
    return [tuple(normal(v) for v in row.values()) for row in result.rows]


def trino_rows(trino, catalog: str, sql: str, **session: Any) -> list[tuple]:
    return [tuple(normal(v) for v in row) for row in trino.rows(sql, catalog=catalog, **session)]
