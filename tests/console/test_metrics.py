"""The sync side's ``/metrics`` on the console (a real server on 127.0.0.1, read by Prometheus' own
parser), over files the sync's own writers make; and the shipped Grafana dashboard and Prometheus
rules query only metrics eventlake exposes."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from eventlake import layout
from eventlake.archive import SpoolStats
from eventlake.collect.metrics import CollectorMetrics
from eventlake.config import (
    ConsoleSettings,
    LakeSettings,
    Secret,
    Settings,
    SourceSettings,
    add_source,
    load_settings,
    remove_source,
    write_initial_config,
)
from eventlake.console.lake import LakeWatch
from eventlake.console.metrics import render
from eventlake.console.server import Console
from eventlake.storage import LocalStorage
from eventlake.sync.maintenance.health import record_result
from eventlake.sync.protocol.report import (
    SyncResult,
    TableResult,
    report_path,
    report_rows,
    write_report_rows,
)
from eventlake.timestamps import day_start_ms, now_utc
from tests.collect.harness import free_port

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
METRIC = re.compile(r"\beventlake_[a-z0-9_]+")
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parsed(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _settings(tmp_path: Path, **console: Any) -> Settings:
    sources = (
        SourceSettings("web", "SRC1", Secret("wk1"), "web"),
        SourceSettings("ios", "SRC2", Secret("wk2"), "ios"),
    )
    return Settings(
        path=None, lake=LakeSettings(root=tmp_path / "lake", state_dir=tmp_path / "state"), sources=sources,
        console=ConsoleSettings(port=free_port(), **console),
    )  # fmt: skip


def _write(settings: Settings, result: SyncResult) -> None:
    lake = settings.lake.root
    write_report_rows(LocalStorage(), report_path(result, lake), report_rows(result, lake))
    record_result(LocalStorage(), lake, result)  # as `eventlake sync` and up's engine do


def _lake(settings: Settings) -> dict[str, Any]:
    """Runs of both sources; an archive file of ``web`` no sync has read, opened an hour ago."""
    now = now_utc()
    table = TableResult("web", "pages", 40, True, (), ())
    ok = SyncResult(
        "web", "SRC1", "r1", "Success", now - timedelta(hours=3), now - timedelta(hours=3, seconds=-5),
        (table,), duplicates_dropped=2, rejected_messages=1, rejected_values=7,
    )  # fmt: skip
    second = SyncResult(
        "web", "SRC1", "r2", "Success", now - timedelta(hours=2), now - timedelta(hours=2, seconds=-4),
        (TableResult("web", "pages", 2, False, (), ()),), rejected_values=1,
    )  # fmt: skip
    replay = SyncResult(
        "web", "SRC1", "r3", "Success", now - timedelta(minutes=90), now - timedelta(minutes=89),
        (TableResult("web", "pages", 500, False, (), ()),), replay_from=now - timedelta(days=2),
        replay_to=now - timedelta(days=1),
    )  # fmt: skip
    for result in (ok, second, replay):
        _write(settings, result)
    for n in (1, 2):
        _write(settings, SyncResult.failure("web", "SRC1", RuntimeError("boom"), run_id=f"f{n}", start=now))
    _write(settings, SyncResult.failure("ios", "SRC2", RuntimeError("nope"), run_id="i1", start=now))
    opened = int(now.timestamp() * 1000) - 3_600_000
    name = f"{day_start_ms(now)}-{opened}-1a2b3c4d-000001.gz"
    path = layout.archive_file(settings.lake.root, "SRC1", day_start_ms(now), name.removesuffix(".gz"))
    LocalStorage().write(path, gzip.compress(b"{}\n"))
    return {"last_success": int(second.finish_time.timestamp() * 1000) / 1000}  # reports keep ms


def test_the_sync_metrics_of_each_source(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    expected = _lake(settings)
    watch = LakeWatch(settings, collector_url=None)
    assert parsed(render(watch).decode()) == {("eventlake_console_up", ()): 0}  # not read yet
    watch.refresh()
    samples = parsed(render(watch).decode())
    web, ios = (("source", "web"),), (("source", "ios"),)
    assert samples[("eventlake_console_up", ())] == 1
    assert samples[("eventlake_sync_failures_in_a_row", web)] == 2
    assert samples[("eventlake_sync_failures_in_a_row", ios)] == 1
    assert samples[("eventlake_sync_last_success_timestamp_seconds", web)] == expected["last_success"]
    assert ("eventlake_sync_last_success_timestamp_seconds", ios) not in samples  # never succeeded
    assert samples[("eventlake_sync_rows_total", web)] == 42  # the replay's rows left out
    assert samples[("eventlake_sync_quarantined_values_total", web)] == 8
    assert samples[("eventlake_sync_quarantined_messages_total", web)] == 1
    assert samples[("eventlake_sync_duplicates_dropped_total", web)] == 2
    assert samples[("eventlake_sync_runs_total", (("source", "web"), ("status", "success")))] == 2
    assert samples[("eventlake_sync_runs_total", (("source", "web"), ("status", "failed")))] == 2
    assert samples[("eventlake_sync_runs_total", (("source", "ios"), ("status", "partial_success")))] == 0
    assert samples[("eventlake_sync_unsynced_files", web)] == 1
    assert 3600 <= samples[("eventlake_sync_oldest_unsynced_age_seconds", web)] < 7200
    assert samples[("eventlake_sync_oldest_unsynced_age_seconds", ios)] == 0
    assert samples[("eventlake_console_refresh_timestamp_seconds", ())] == watch.refreshed.timestamp()


def test_the_console_serves_them_and_asks_for_its_token(tmp_path: Path) -> None:
    settings = _settings(tmp_path, token=Secret("t0ken"))
    _lake(settings)
    console = Console(settings, lambda _: None)
    console.start()
    try:
        url = f"http://127.0.0.1:{console.port}/metrics"
        assert httpx.get(url, timeout=5).status_code == 401
        auth = {"Authorization": "Bearer t0ken"}
        samples = _scrape_until_read(url, auth)
        assert samples[("eventlake_sync_failures_in_a_row", (("source", "web"),))] == 2
        response = httpx.get(url, headers=auth, timeout=5)
        assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    finally:
        console.stop()


def _scrape_until_read(url: str, headers: dict[str, str]) -> Samples:
    """Scrape until the console has read the lake once (its refresh thread starts with it)."""
    for _ in range(600):
        samples = parsed(httpx.get(url, headers=headers, timeout=5).text)
        if samples[("eventlake_console_up", ())] == 1:
            return samples
        time.sleep(0.05)
    raise AssertionError("the console never read the lake")


def exposed(tmp_path: Path) -> set[str]:
    """Every sample name eventlake exposes: the collector's and the console's."""
    collector = CollectorMetrics(["web"])
    collector.observe_request(200, 0.01)
    collector.reject(400, "invalid_json")
    collector.invalid[("web", "missing_event")] += 1
    collector.ip_filled["web"] += 1
    settings = _settings(tmp_path)
    _lake(settings)
    _write(settings, SyncResult("ios", "SRC2", "i2", "Success", now_utc(), now_utc()))
    watch = LakeWatch(settings, collector_url=None)
    watch.refresh()
    texts = (collector.render(SpoolStats()).decode(), render(watch).decode())
    return {name for text in texts for name, _ in parsed(text)}


def _queries(node: Any) -> list[str]:
    """Every PromQL text of a Grafana dashboard: panel targets' ``expr``, variables' queries."""
    if isinstance(node, dict):
        found = [v for k, v in node.items() if k in ("expr", "query", "definition") and isinstance(v, str)]
        return found + [q for v in node.values() for q in _queries(v)]
    if isinstance(node, list):
        return [q for v in node for q in _queries(v)]
    return []


def test_the_grafana_dashboard_and_prometheus_rules_query_only_exposed_metrics(tmp_path: Path) -> None:
    names = exposed(tmp_path)
    dashboard = json.loads((EXAMPLES / "grafana" / "eventlake.json").read_text())
    queried = {m for q in _queries(dashboard) for m in METRIC.findall(q)}
    assert queried and not queried - names, f"not exposed: {sorted(queried - names)}"
    sync = {n for n in names if n.startswith("eventlake_sync_")}
    assert not sync - queried, f"sync metrics the dashboard does not show: {sorted(sync - queried)}"
    text = (EXAMPLES / "prometheus" / "eventlake-alerts.yml").read_text()
    exprs = [line.split("expr:", 1)[1] for line in text.splitlines() if "expr:" in line]
    used = {m for e in exprs for m in METRIC.findall(e)}
    assert len(exprs) == 5 and used and not used - names, f"not exposed: {sorted(used - names)}"


def test_sources_added_and_removed_while_the_console_runs(tmp_path: Path) -> None:
    """`eventlake sources add/remove` reach a running console (as they reach the collector and
    `up`'s engine): the new source appears in /metrics and the overview, the removed one leaves."""
    config = write_initial_config(tmp_path / "p")
    add_source(config, "web")
    settings = load_settings(config, environ={})
    settings = dataclasses.replace(settings, console=ConsoleSettings(port=free_port()))
    console = Console(settings, lambda _: None)
    console.start()
    try:
        base = f"http://127.0.0.1:{console.port}"

        def sources_shown() -> set[str]:
            samples = parsed(httpx.get(f"{base}/metrics", timeout=5).text)
            return {
                dict(labels)["source"] for name, labels in samples if name == "eventlake_sync_unsynced_files"
            }

        _scrape_until_read(f"{base}/metrics", {})
        assert sources_shown() == {"web"}
        add_source(config, "ios")
        _wait_for(lambda: sources_shown() == {"web", "ios"})
        assert "ios" in httpx.get(f"{base}/", timeout=5).text
        remove_source(config, "web")
        _wait_for(lambda: sources_shown() == {"ios"})
    finally:
        console.stop()


def _wait_for(condition: Callable[[], bool], seconds: float = 60) -> None:
    """Poll ``condition`` (a console refresh is every few seconds) until it holds, at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the console did not follow eventlake.toml"
        time.sleep(0.1)
