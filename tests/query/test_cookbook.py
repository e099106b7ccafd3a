"""The query cookbook, run as written: every fenced block of the "Query cookbook" section of
docs/querying.md.

``eventlake sql`` commands are parsed by the real click command and run on the engine they name
(the shared Spark session for ``spark``); ``python examples/...`` runs the example's ``main`` on
that session; the page's copy of the example must be the file itself. The demo's ``web``
database and source are this test's own.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest

from eventlake.cli import cli
from eventlake.query import run_query
from eventlake.sync import run_sync
from eventlake.timestamps import parse_timestamp

ROOT = Path(__file__).resolve().parents[2]
QUERYING = ROOT / "docs" / "querying.md"
BOTH_ENGINES = {
    "Messages per type for a source today",
    "Daily active users",
    "A funnel: Product Viewed → Order Completed",
    "Segment-warehouse SQL: orders and revenue per user and plan",
}


def cookbook() -> dict[str, list[tuple[str, str]]]:
    """``{recipe title: [(language, code), ...]}`` of the "Query cookbook" section of docs/querying.md."""
    section = QUERYING.read_text().split("\n## Query cookbook\n", 1)[1].split("\n## ", 1)[0]
    recipes = {}
    for chunk in re.split(r"^### ", section, flags=re.MULTILINE)[1:]:
        title, body = chunk.split("\n", 1)
        recipes[title.strip()] = re.findall(r"^```(\w*)\n(.*?)^```$", body, flags=re.MULTILINE | re.DOTALL)
    return recipes


def commands(block: str) -> list[list[str]]:
    """The shell commands of a block (a quoted argument may span lines); comments dropped."""
    found, pending = [], ""
    for line in block.splitlines():
        pending += line + "\n"
        try:
            argv = shlex.split(pending, comments=True)
        except ValueError:  # inside a quoted argument
            continue
        if argv:
            found.append(argv)
        pending = ""
    assert not pending.strip(), f"unterminated command: {pending}"
    return found


def test_the_cookbook_shows_the_example_verbatim() -> None:
    [(language, code)] = [b for b in cookbook()["A PySpark transform job"] if b[0] == "python"]
    assert code == (ROOT / "examples" / "daily_revenue.py").read_text()


def test_the_cookbook_snippets_parse() -> None:
    recipes = cookbook()
    assert set(recipes) == set(EXPECTED), "a recipe was added or renamed: give it expected results here"
    for title, blocks in recipes.items():
        runnable = [argv for language, code in blocks if language == "sh" for argv in commands(code)]
        assert len(runnable) == len(EXPECTED[title]), title
        for argv in runnable:
            assert argv[:2] in (["eventlake", "sql"], ["python", "examples/daily_revenue.py"]), argv


T0 = parse_timestamp("2026-11-02T10:00:00Z")


def at(minutes: int) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")


def web_traffic() -> list[dict]:
    """A small shop's day: 5 pages, 6 product views, 3 orders (one sent twice), identify, alias."""

    def message(kind: str, message_id: str, user: str | None, anon: str | None, **fields: object) -> dict:
        ids = {"userId": user} if user else {}
        return {
            "type": kind,
            "messageId": message_id,
            **ids,
            **({"anonymousId": anon} if anon else {}),
            **fields,
        }

    def viewed(message_id: str, user: str | None, anon: str | None) -> dict:
        return message(
            "track", message_id, user, anon, event="Product Viewed", timestamp=at(0), properties={"sku": "s1"}
        )

    def ordered(message_id: str, user: str, minutes: int, revenue: float) -> dict:
        properties = {"order_id": message_id, "revenue": revenue, "currency": "EUR"}
        return message(
            "track",
            message_id,
            user,
            None,
            event="Order Completed",
            timestamp=at(minutes),
            properties=properties,
        )

    return [
        message("page", "p1", "u1", "a1", name="Home"),
        message("page", "p2", "u1", "a1", name="Shop"),
        message("page", "p3", "u2", "a2", name="Home"),
        message("page", "p4", None, "a5", name="Home"),
        message("page", "p5", "u3", "a3", name="Cart"),
        message("identify", "i1", "u1", "a1", traits={"plan": "pro"}),
        message("identify", "i2", "u2", "a2", traits={"plan": "free"}),
        message("alias", "al1", "u1", None, previousId="a1"),
        viewed("v1", "u1", "a1"),
        viewed("v2", "u1", "a1"),
        viewed("v3", "u2", "a2"),
        viewed("v4", "u3", "a3"),
        viewed("v5", None, "a5"),
        viewed("v6", "u4", "a4"),
        ordered("o1", "u1", 5, 19.99),  # after viewing
        ordered("o1", "u1", 5, 19.99),  # a client retry: in the raw archive twice, in the lake once
        ordered("o2", "u2", 1, 5.5),  # after viewing
        ordered("o3", "u3", -10, 12),  # before viewing: not part of the funnel
    ]


def expected(today: str) -> dict[str, list[object]]:
    return {
        "Messages per type for a source today": [
            [
                {"segment_type": "track_product_viewed", "messages": 6},
                {"segment_type": "page", "messages": 5},
                {"segment_type": "track_order_completed", "messages": 3},
                {"segment_type": "identify", "messages": 2},
                {"segment_type": "alias", "messages": 1},
            ]
        ],
        "Daily active users": [[{"day": today, "active_users": 5}]],  # u1 u2 u3 u4 a5
        "A funnel: Product Viewed → Order Completed": [
            [{"day": today, "viewed_product": 4, "then_ordered": 2}]
        ],
        "Segment-warehouse SQL: orders and revenue per user and plan": [
            [
                {"id": "u1", "plan": "pro", "orders": 1, "revenue": Decimal("19.990000")},
                {"id": "u2", "plan": "free", "orders": 1, "revenue": Decimal("5.500000")},
            ]
        ],
        "Raw JSON or Parquet: the same count both ways": [
            [{"messages": 4, "orders": 3}],
            [{"orders": 3}],
        ],
        "A PySpark transform job": [
            "wrote analytics.daily_revenue, rows: 1",
            [{"day": today, "currency": "EUR", "orders": 3, "buyers": 3, "revenue": Decimal("37.490000")}],
        ],
    }


EXPECTED = expected("today")


def load_example(path: Path):
    spec = importlib.util.spec_from_file_location(f"cookbook_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.spark
def test_the_cookbook_runs(
    lake, spark, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    lake.archive(web_traffic())
    [result] = run_sync(lake.settings, [lake.slug], spark=spark, say=lambda line: None)
    assert result.status == "Success" and result.duplicates_dropped == 1
    monkeypatch.chdir(lake.root)  # the cookbook's commands run in the project directory
    db = lake.source.database
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    want = expected(today)
    sql_command = cli.commands["sql"]

    for title, blocks in cookbook().items():
        runnable = [argv for language, code in blocks if language == "sh" for argv in commands(code)]
        for argv, answer in zip(runnable, want[title], strict=True):
            if argv[0] == "python":
                example = load_example(ROOT / argv[1])
                args = [lake.slug if a == "web" else a for a in argv[2:]]
                example.main([*args, "--config", str(lake.config)], spark=spark)
                assert capsys.readouterr().out.strip() == answer, title
                continue
            params = sql_command.make_context("sql", argv[2:]).params
            sql = re.sub(r"\bweb\.", f"{db}.", params["query"])
            got = run_query(lake.settings, sql, params["engine"], spark=spark)
            assert [dict(row) for row in got.rows] == answer, f"{title}: {sql}"
            if title in BOTH_ENGINES:
                other = "duckdb" if params["engine"] == "spark" else "spark"
                again = run_query(lake.settings, sql, other, spark=spark)
                assert (again.columns, again.rows) == (got.columns, got.rows), f"{title} on {other}"
