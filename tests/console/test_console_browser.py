"""The web console in headless Chromium, used as a person would: `eventlake up` on a lake that
receives messages through the collector, then every page opened, checked against the lake (report
files, schema files, DuckDB counts), the filters and the query box used, a CSV downloaded.

Each page's screenshot is saved in ``build/screenshots/console/`` (looked at by whoever changes
the pages).
"""

from __future__ import annotations

import csv
import io
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from eventlake.config import load_settings
from eventlake.query.engine import run_query
from eventlake.sync.protocol.report import (
    SyncResult,
    read_report_rows,
    report_files,
    report_path,
    write_report_rows,
)
from tests.clients.tools import chromium
from tests.collect.harness import EVENTLAKE, WRITE_KEY, clean_environment, free_port, make_project
from tests.scheduler.harness import start_up, wait_for

pytestmark = pytest.mark.integration
SHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots" / "console"
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                "--disable-background-networking", "--disable-component-update"]  # fmt: skip


def _batch(port: int, messages: list[dict[str, Any]]) -> None:
    response = httpx.post(
        f"http://127.0.0.1:{port}/v1/batch", json={"batch": messages}, auth=(WRITE_KEY, ""), timeout=10
    )
    assert response.status_code == 200, response.text


def _order(n: int, amount: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "track", "event": "Order Completed", "userId": f"u{n}", "messageId": f"order-{n}",
            "properties": {"amount": amount, **extra}}  # fmt: skip


def _runs(settings) -> list[dict[str, Any]]:
    storage = settings.lake.storage()
    heads = []
    for path in report_files(storage, settings.lake.root):
        heads += [r for r in read_report_rows(storage, path) if r["type"] == "source"]
    return heads


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium(), args=BROWSER_ARGS)
        yield launched
        launched.close()


def test_the_console_shows_the_lake_as_it_is(tmp_path: Path, browser: Any) -> None:
    project = make_project(tmp_path / "mylake")
    port, console_port = free_port(), free_port()
    env = clean_environment(seal_max_age_seconds=0.5)
    env |= {"EVENTLAKE__SYNC__INTERVAL_SECONDS": "2", "EVENTLAKE__QUERY__THRIFT_PORT": str(free_port())}
    log_path = tmp_path / "up.log"
    up = start_up(project, port, env, log_path, "--console-port", str(console_port))
    base = f"http://127.0.0.1:{console_port}"
    settings = load_settings(project.config, environ={})
    try:
        assert f"eventlake console on {base}/" in log_path.read_text()
        # first run: three orders (amount a number: a bigint column), a page view
        home = {"type": "page", "name": "Home", "anonymousId": "a1", "messageId": "page-1"}
        _batch(port, [_order(1, 5), _order(2, 7), _order(3, 9), home])
        wait_for(
            lambda: "web: Success, 4 rows" in log_path.read_text(), "first batch not synced", up, log_path
        )
        # second run: a new column (coupon), and an amount that is no number: quarantined
        _batch(port, [_order(4, "lots", coupon="FALL"), _order(5, 11, coupon="WINTER")])
        wait_for(
            lambda: "web: Success, 2 rows" in log_path.read_text(), "second batch not synced", up, log_path
        )
        # a failed run, as a sync that failed writes its report
        failed = SyncResult.failure(
            "web", project.source_id, RuntimeError("metastore unreachable"), run_id="f1"
        )
        from eventlake.sync.protocol.report import report_rows

        write_report_rows(settings.lake.storage(), report_path(failed, settings.lake.root),
                          report_rows(failed, settings.lake.root))  # fmt: skip
        runs = _runs(settings)
        second = next(r for r in runs if r["row_count"] == 2)

        SHOTS.mkdir(parents=True, exist_ok=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))

        # overview: the failed run first in what needs attention, the quarantined value, the rate
        def overview_is_current() -> bool:
            page.goto(base + "/")
            return "the last sync failed" in page.inner_text("ul.attention")

        wait_for(overview_is_current, "the console never showed the failed run", up, log_path, timeout=60)
        attention = page.inner_text("ul.attention")
        assert "metastore unreachable" in attention
        assert "quarantined in the last 24 h" in attention
        row = page.inner_text("table.sources tbody tr")
        assert row.startswith("web") and "Failed" in row
        page.screenshot(path=str(SHOTS / "overview.png"), full_page=True)

        # sync history: every run of the lake, then the filters
        page.click("header >> text=Sync history")
        assert page.inner_text("p.pager").endswith(f"of {len(runs)}")
        page.select_option("select[name=status]", "Success")
        page.click("form.filters button")
        successes = [r for r in runs if r["status"] == "finished"]
        assert len(page.query_selector_all("table.runs tbody tr")) == len(successes)
        assert "status=Success" in page.url
        assert "Failed" not in page.inner_text("table.runs")
        assert page.query_selector("svg[aria-label^='Rows synced per day']") is not None
        assert page.query_selector("svg[aria-label^='Sync durations'] rect") is not None
        page.screenshot(path=str(SHOTS / "runs.png"), full_page=True)
        page.click(f"a[href='/runs/{second['run_id']}']")
        assert second["run_id"] in page.inner_text("h1")
        tables = page.inner_text("table.tables")
        assert "web.track_order_completed" in tables and "coupon string" in tables
        page.screenshot(path=str(SHOTS / "run.png"), full_page=True)

        # schemas: the table's columns with their types and the run that added coupon
        page.click("header >> text=Schemas")
        page.click("a[href='/schemas/web/track_order_completed']")
        columns = {
            r.query_selector_all("td")[0].inner_text(): [c.inner_text() for c in r.query_selector_all("td")]
            for r in page.query_selector_all("table.columns tbody tr")
        }
        assert columns["properties_amount"][1] == "bigint"
        assert columns["properties_coupon"][2] == second["run_id"]
        counted = run_query(settings, "SELECT day, count(*) AS n FROM web.track_order_completed GROUP BY day",
                            engine="duckdb")  # fmt: skip
        day_rows = [r.inner_text().split("\t") for r in page.query_selector_all("table.days tbody tr")]
        assert day_rows == [[r["day"], f"{r['n']:,}"] for r in counted.rows]
        page.screenshot(path=str(SHOTS / "schema.png"), full_page=True)

        # quarantine: the value that did not fit, and the command that fixes it
        page.click("header >> text=Quarantine")
        quarantine = page.inner_text("table.quarantine")
        assert "lots" in quarantine and "properties_amount" in quarantine and "bigint" in quarantine
        assert "eventlake schema set-type web.track_order_completed properties_amount string" in quarantine
        page.screenshot(path=str(SHOTS / "quarantine.png"), full_page=True)

        # the query box: a lake table, the reports table, a CSV, and what it refuses
        page.click("header >> text=Query")
        page.fill("textarea[name=sql]", "SELECT count(*) AS n FROM web.track_order_completed")
        page.click("button:text('Run')")
        assert page.inner_text("table.result tbody") == "5"
        by_status = (
            "SELECT status, count(*) AS runs FROM __segment_datalake.sync_reports "
            "WHERE type = 'source' GROUP BY status ORDER BY status"
        )
        page.fill("textarea[name=sql]", by_status)
        page.click("button:text('Run')")
        assert page.inner_text("table.result tbody").split("\n") == [
            "failed\t1",
            f"finished\t{len(successes)}",
        ]
        page.screenshot(path=str(SHOTS / "query.png"), full_page=True)
        page.fill("input[name=limit]", "1")
        with page.expect_download() as download:
            page.click("button:text('Download CSV')")
        rows = list(csv.reader(io.StringIO(Path(download.value.path()).read_text())))
        assert rows == [["status", "runs"], ["failed", "1"]]
        for refused, why in [
            ("CREATE TABLE web.x AS SELECT 1", "a CREATE statement is refused"),
            ("COPY (SELECT 1) TO 'x.csv'", "a COPY statement is refused"),
            ("SELECT * FROM read_csv('/etc/passwd')", "not files: read_csv() is refused"),
            (f"SELECT * FROM read_text('{project.config}')", "not files: read_text() is refused"),
        ]:
            page.fill("textarea[name=sql]", refused)
            page.click("button:text('Run')")
            assert why in page.inner_text("p.error"), refused
        page.screenshot(path=str(SHOTS / "query-refused.png"), full_page=True)

        # the rate of accepted messages: one more (a duplicate: nothing new in the lake), then the
        # overview counts it within the minute (sent now: a loaded machine may have taken more
        # than a minute since the batches above)
        _batch(port, [home])

        def rate_is_counted() -> bool:
            page.goto(base + "/")
            return page.inner_text("table.sources tbody tr").split("\t")[1] not in ("–", "0")

        wait_for(rate_is_counted, "the overview never counted the accepted message", up, log_path, timeout=60)

        # nothing came from anywhere but the console
        assert requested and all(url.startswith(base) for url in requested), requested
        page.close()
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=120)


def test_with_a_token_every_route_needs_it(tmp_path: Path) -> None:
    project = make_project(tmp_path / "mylake")
    port = free_port()
    env = clean_environment() | {"EVENTLAKE__CONSOLE__TOKEN": "s3cret-token"}
    console = subprocess.Popen(
        [str(EVENTLAKE), "--config", str(project.config), "console", "--port", str(port)],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        started = console.stderr.readline()
        assert "every page needs the token" in started and "s3cret" not in started
        routes = ["/", "/runs", "/runs/x", "/schemas", "/schemas/web/page", "/quarantine", "/query",
                  "/static/console.css", "/nowhere"]  # fmt: skip
        for route in routes:
            assert httpx.get(base + route).status_code == 401, route
            assert httpx.get(base + route, headers={"Authorization": "Bearer wrong"}).status_code == 401
            assert httpx.get(base + route, cookies={"eventlake_console": "wrong"}).status_code == 401
        assert httpx.post(base + "/query.csv", data={"sql": "SELECT 1"}).status_code == 401
        assert httpx.get(base + "/?token=wrong").status_code == 401
        bearer = {"Authorization": "Bearer s3cret-token"}
        assert httpx.get(base + "/static/console.css", headers=bearer).status_code == 200
        with httpx.Client(base_url=base) as client:  # ?token= once: a cookie, and the URL without it
            first = client.get("/runs?token=s3cret-token&status=Failed")
            assert first.status_code == 303 and first.headers["location"] == "/runs?status=Failed"
            assert client.get(first.headers["location"]).status_code == 200
    finally:
        console.send_signal(signal.SIGTERM)
        assert console.wait(timeout=30) == 0


@pytest.mark.parametrize(
    ("trusted_proxies", "secure"),
    [(None, True), ("10.9.9.9", False)],  # uvicorn's default trusts 127.0.0.1 (the test's client)
)
def test_behind_a_trusted_https_proxy_the_token_cookie_is_secure(
    tmp_path: Path, trusted_proxies: str | None, secure: bool
) -> None:
    project = make_project(tmp_path / "mylake")
    port = free_port()
    env = clean_environment() | {"EVENTLAKE__CONSOLE__TOKEN": "s3cret-token"}
    env.pop("FORWARDED_ALLOW_IPS", None)
    if trusted_proxies:
        env["FORWARDED_ALLOW_IPS"] = trusted_proxies
    console = subprocess.Popen(
        [str(EVENTLAKE), "--config", str(project.config), "console", "--port", str(port)],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        assert "every page needs the token" in console.stderr.readline()
        plain = httpx.get(base + "/?token=s3cret-token")
        assert plain.status_code == 303 and "secure" not in plain.headers["set-cookie"].lower()
        proxied = httpx.get(base + "/?token=s3cret-token", headers={"X-Forwarded-Proto": "https"})
        cookie = [part.strip().lower() for part in proxied.headers["set-cookie"].split(";")]
        assert proxied.status_code == 303 and ("secure" in cookie) is secure, cookie
        assert {"httponly", "samesite=strict"} <= set(cookie)
    finally:
        console.send_signal(signal.SIGTERM)
        assert console.wait(timeout=30) == 0


def test_off_loopback_without_a_token_it_does_not_start(tmp_path: Path) -> None:
    project = make_project(tmp_path / "mylake")
    result = subprocess.run(
        [str(EVENTLAKE), "--config", str(project.config), "console", "--host", "0.0.0.0", "--port", "1"],
        env=clean_environment(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert re.search(r"0\.0\.0\.0.*without a token.*EVENTLAKE__CONSOLE__TOKEN", result.stderr), result.stderr
