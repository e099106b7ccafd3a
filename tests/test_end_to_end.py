"""The README's tour, command by command, as separate processes: collector over HTTP -> archive ->
`eventlake sync` -> `eventlake sql` (Hive metastore on embedded Derby) -> `eventlake reports` -> `up`."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from eventlake import layout
from tests.collect.harness import EVENTLAKE, Collector, clean_environment, free_port, make_project
from tests.scheduler.harness import start_up

pytestmark = pytest.mark.integration


def run(project, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EVENTLAKE), "--config", str(project.config), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env or clean_environment(),
    )


def sql_json(project, query: str) -> list[dict]:
    result = run(project, "sql", "--format", "json", query)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # exactly one JSON document on stdout


def send_all_types(url: str, write_key: str) -> None:
    with httpx.Client(base_url=url, auth=(write_key, ""), timeout=10) as http:
        calls = [
            (
                "track",
                {
                    "userId": "u1",
                    "event": "Order Completed",
                    "messageId": "t1",
                    "properties": {"revenue": 19.99, "items": 2},
                    "timestamp": "2026-11-22T10:00:00.000Z",
                    "sentAt": "2026-11-22T10:00:01.000Z",
                },
            ),
            (
                "identify",
                {"userId": "u1", "messageId": "i1", "traits": {"email": "u1@example.com", "age": 30}},
            ),
            ("page", {"anonymousId": "a1", "messageId": "p1", "name": "Home", "properties": {"path": "/"}}),
            ("screen", {"userId": "u1", "messageId": "s1", "name": "Cart"}),
            ("group", {"userId": "u1", "messageId": "g1", "groupId": "acme", "traits": {"employees": 12}}),
            ("alias", {"userId": "u1", "messageId": "a2", "previousId": "a1"}),
            (
                "batch",
                {
                    "batch": [
                        {
                            "type": "track",
                            "userId": "u2",
                            "event": "Order Completed",
                            "messageId": "t2",
                            "properties": {"revenue": 5, "items": 1},
                        },
                        {
                            "type": "track",
                            "userId": "u2",
                            "event": "Order Completed",
                            "messageId": "t2",
                            "properties": {"revenue": 5, "items": 1},
                        },
                    ],
                    "context": {"library": {"name": "curl"}},
                },
            ),
        ]
        for endpoint, body in calls:
            response = http.post(f"/v1/{endpoint}", json=body)
            assert response.status_code == 200 and response.json() == {"success": True}
        assert (
            http.post("/v1/track", content=b"{oops", headers={"Content-Type": "application/json"}).status_code
            == 400
        )


def test_readme_tour(tmp_path: Path) -> None:
    project = make_project(tmp_path / "mylake")
    collector = Collector(project, {"seal_max_age_seconds": 1}, tmp_path / "serve.log").start()
    try:
        send_all_types(collector.url, project.write_key)
        project.wait_for_archive({"t1", "i1", "p1", "s1", "g1", "a2", "t2"})
    finally:
        assert collector.stop() == 0

    synced = run(project, "sync", "--format", "json")
    assert synced.returncode == 0, synced.stderr
    tables = {row["table"]: row["rows"] for row in json.loads(synced.stdout)}
    assert tables == {
        "web.alias": 1,
        "web.group": 1,
        "web.identify": 1,
        "web.page": 1,
        "web.screen": 1,
        "web.track_order_completed": 2,
    }

    rows = sql_json(
        project,
        "SELECT message_id, user_id, properties_revenue, properties_items, timestamp, "
        "original_timestamp, context_library_name, day, hr "
        "FROM web.track_order_completed ORDER BY message_id",
    )
    assert [r["message_id"] for r in rows] == ["t1", "t2"]
    assert rows[0]["properties_revenue"] == 19.99 and rows[0]["properties_items"] == 2
    assert rows[0]["original_timestamp"].startswith("2026-11-22T10:00:00")
    assert rows[1]["context_library_name"] == "curl" and rows[0]["context_library_name"] is None
    assert len(rows[0]["day"]) == 10 and len(rows[0]["hr"]) == 2
    types = {r["col_name"]: r["data_type"] for r in sql_json(project, "DESCRIBE web.track_order_completed")}
    assert types["properties_revenue"] == "decimal(38,6)" and types["properties_items"] == "bigint"
    assert types["timestamp"] == "timestamp" and types["received_at"] == "timestamp"
    partitions = sql_json(project, "SHOW PARTITIONS web.identify")
    assert len(partitions) == 1 and partitions[0]["partition"].startswith("day=")
    assert sql_json(project, "SELECT count(*) AS n FROM web.identify") == [{"n": 1}]

    again = run(project, "sync")
    assert again.returncode == 0 and "Nothing to do" in again.stderr

    history = run(project, "reports", "--format", "json")
    [report] = json.loads(history.stdout)
    assert report["status"] == "Success" and report["rows"] == 7 and report["duplicates_dropped"] == 1

    failed = run(project, "sql", "SELECT * FROM web.no_such_table")
    assert failed.returncode != 0 and failed.stdout == ""
    assert failed.stderr.strip().splitlines()[-1].startswith("error: query failed")


def descendants_of(pid: int) -> list[int]:
    children = children_of(pid)
    return children + [grandchild for child in children for grandchild in descendants_of(child)]


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def test_up_runs_scheduled_syncs_and_stops_cleanly(tmp_path: Path) -> None:
    project = make_project(tmp_path / "mylake")
    port = free_port()
    env = clean_environment(seal_max_age_seconds=0.5)
    env["EVENTLAKE__SYNC__INTERVAL_SECONDS"] = "2"
    up = start_up(project, port, env, tmp_path / "up.log")
    try:
        response = httpx.post(
            f"http://127.0.0.1:{port}/v1/track",
            auth=(project.write_key, ""),
            json={"userId": "u1", "event": "Signed Up", "messageId": "up1"},
        )
        assert response.status_code == 200
        table = layout.table_dir(project.lake, project.source_id, "track_signed_up")
        deadline = time.monotonic() + 120
        while not list(table.rglob("*.parquet")):
            assert up.poll() is None and time.monotonic() < deadline, (tmp_path / "up.log").read_text()
            time.sleep(0.5)
        time.sleep(3)  # let the next scheduled sync start, so that stopping interrupts a running one
        descendants = descendants_of(up.pid)
        assert descendants, "no sync child was running"
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=30) == 0
    finally:
        if up.poll() is None:
            up.kill()
    time.sleep(0.5)
    alive = [
        pid
        for pid in descendants
        if Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    ]
    assert not alive, f"processes left behind: {alive}"
    assert not project.spool_segments()
