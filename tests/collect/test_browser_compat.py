"""What browsers need: CORS, context.ip filled from the request (per source), analytics.js's /v1/m."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from eventlake.archive import list_archive_files, read_archive_lines
from eventlake.config import load_settings
from eventlake.errors import ConfigError
from eventlake.storage import LocalStorage

from .harness import Collector, add_source_with, make_project, metrics

pytestmark = pytest.mark.integration

ORIGIN = "http://shop.example.test:8000"


def test_cors_preflight_allows_any_origin_with_authorization(served: Collector) -> None:
    response = httpx.options(
        f"{served.url}/v1/t",
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type,x-retry-count",
        },
    )
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] in ("*", ORIGIN)
    allowed = response.headers["access-control-allow-headers"].lower()
    assert all(h in allowed for h in ("authorization", "content-type", "x-retry-count"))
    assert "POST" in response.headers["access-control-allow-methods"]
    assert int(response.headers["access-control-max-age"]) > 0


def test_cross_origin_post_gets_cors_headers(served: Collector) -> None:
    response = httpx.post(
        f"{served.url}/v1/t",
        content=b'{"userId": "u1", "event": "E"}',
        headers={"Origin": ORIGIN, "Content-Type": "text/plain"},
        auth=(served.project.write_key, ""),
    )
    assert response.json() == {"success": True}
    assert response.headers["access-control-allow-origin"] in ("*", ORIGIN)


def test_analytics_js_telemetry_is_answered_and_not_stored(served: Collector) -> None:
    before = metrics(served.url)
    body = b'{"series": [{"type": "Counter", "metric": "analytics_js.invoke", "value": 1, "tags": {}}]}'
    response = httpx.post(f"{served.url}/v1/m", content=body, headers={"Content-Type": "text/plain"})
    assert response.json() == {"success": True}
    after = metrics(served.url)
    assert after[("eventlake_client_metrics_requests_total", ())] == (
        before[("eventlake_client_metrics_requests_total", ())] + 1
    )
    assert after[("eventlake_spool_messages_total", ())] == before[("eventlake_spool_messages_total", ())]


# context.ip ---------------------------------------------------------------------------------------

PYTHON_LIBRARY = {"library": {"name": "analytics-python", "version": "2.4.0"}}
IOS_LIBRARY = {"library": {"name": "analytics-ios", "version": "4.1.8"}}


@pytest.fixture(scope="module")
def ip_collector(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One collector with three sources: fill_ip auto (default), always and never."""
    root = tmp_path_factory.mktemp("fill-ip")
    project = make_project(root / "project", write_key="wk_auto")
    add_source_with(project, "always", "wk_always", fill_ip="always")
    add_source_with(project, "never", "wk_never", fill_ip="never")
    collector = Collector(project, {"seal_max_age_seconds": 0.2}, root / "collector.log").start()
    yield collector
    collector.stop()


CASES = [
    # (write key, message, extra headers, expected context.ip)
    ("wk_auto", {"channel": "browser"}, {}, "127.0.0.1"),
    ("wk_auto", {"channel": "mobile", "context": {"ip": "10.1.2.3"}}, {}, "10.1.2.3"),
    ("wk_auto", {"context": PYTHON_LIBRARY}, {}, None),
    ("wk_auto", {"context": PYTHON_LIBRARY}, {"Origin": ORIGIN}, "127.0.0.1"),
    ("wk_auto", {"channel": "server"}, {"Origin": ORIGIN}, None),
    ("wk_auto", {"context": IOS_LIBRARY}, {}, "127.0.0.1"),
    ("wk_auto", {"channel": "browser", "context": {"ip": None}}, {}, "127.0.0.1"),
    ("wk_auto", {"channel": "browser"}, {"X-Forwarded-For": "203.0.113.9"}, "203.0.113.9"),
    ("wk_always", {"context": PYTHON_LIBRARY}, {}, "127.0.0.1"),
    ("wk_always", {"context": {"ip": "10.9.9.9"}}, {}, "10.9.9.9"),
    ("wk_never", {"channel": "browser"}, {"Origin": ORIGIN}, None),
]
CASE_IDS = [
    "browser-channel",
    "own-ip-kept",
    "server-library",
    "origin-header",
    "explicit-server-channel",
    "mobile-library",
    "null-ip",
    "behind-a-local-proxy",
    "always",
    "always-keeps-own",
    "never",
]


@pytest.mark.parametrize(("write_key", "message", "headers", "expected"), CASES, ids=CASE_IDS)
def test_context_ip_is_filled_per_source_setting(
    ip_collector: Collector,
    write_key: str,
    message: dict[str, Any],
    headers: dict[str, str],
    expected: str | None,
) -> None:
    message_id = f"ip-{uuid.uuid4()}"
    body = {**message, "userId": "u1", "event": "E", "messageId": message_id}
    response = httpx.post(f"{ip_collector.url}/v1/track", json=body, headers=headers, auth=(write_key, ""))
    assert response.json() == {"success": True}
    archived = wait_for_message(ip_collector, message_id)
    context = archived.get("context") or {}
    assert context.get("ip") == expected
    for key, value in (message.get("context") or {}).items():  # the rest of the context is untouched
        if key != "ip":
            assert context[key] == value


def test_batch_level_context_ip_counts_as_the_messages_own(ip_collector: Collector) -> None:
    ids = [f"ip-{uuid.uuid4()}" for _ in range(2)]
    body = {
        "batch": [
            {"type": "track", "userId": "u1", "event": "E", "messageId": ids[0], "channel": "browser"},
            {"type": "track", "userId": "u1", "event": "E", "messageId": ids[1], "channel": "browser"},
        ],
        "context": {"ip": "198.51.100.7"},
    }
    before = metrics(ip_collector.url)
    assert httpx.post(f"{ip_collector.url}/v1/batch", json=body, auth=("wk_auto", "")).is_success
    assert [wait_for_message(ip_collector, i)["context"]["ip"] for i in ids] == ["198.51.100.7"] * 2
    single = {"userId": "u1", "event": "E", "channel": "browser"}
    assert httpx.post(f"{ip_collector.url}/v1/track", json=single, auth=("wk_auto", "")).is_success
    filled = ("eventlake_messages_ip_filled_total", (("source", "web"),))
    assert metrics(ip_collector.url)[filled] == before.get(filled, 0) + 1


def wait_for_message(collector: Collector, message_id: str, timeout: float = 7.0) -> dict[str, Any]:
    """The archived message with ``message_id``, whichever source of the project it went to."""
    settings = load_settings(collector.project.config, environ={})
    deadline = time.monotonic() + timeout
    while True:
        for source in settings.sources:
            for archive_file in list_archive_files(LocalStorage(), collector.project.lake, source.id):
                for line in read_archive_lines(LocalStorage(), archive_file.path):
                    message = orjson.loads(line)
                    if message.get("messageId") == message_id:
                        return message
        assert time.monotonic() < deadline, f"{message_id} not archived after {timeout} s"
        time.sleep(0.05)


def test_fill_ip_is_validated_and_auto_by_default(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    assert load_settings(project.config, environ={}).sources[0].fill_ip == "auto"
    project.config.write_text(project.config.read_text() + 'fill_ip = "sometimes"\n')
    with pytest.raises(ConfigError, match="sources.web.fill_ip") as caught:
        load_settings(project.config, environ={})
    assert "auto, always, never" in str(caught.value)
