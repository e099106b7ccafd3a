"""analytics.js (@segment/analytics-next, from npm) in headless Chromium, on another origin.

The page and the library's bundle come from a static server on one port, the collector listens on
another (a different origin: CORS preflights with an ``Authorization`` header). The page gives the
library its settings inline (``cdnSettings``) and serves the bundle itself (``window.analytics._cdn``),
so nothing is fetched from Segment's CDN: the test fails if the page requests anything else.
"""

from __future__ import annotations

import functools
import json
import subprocess
import threading
import uuid
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.collect.harness import Collector

from .fields import assert_archived_as_sent
from .tools import HERE, NODE_MODULES, chromium, missing, node

pytestmark = pytest.mark.integration

BUNDLES = NODE_MODULES / "@segment" / "analytics-next" / "dist" / "umd"
TYPES = ["identify", "track", "page", "screen", "group", "alias"]


class _PageHandler(SimpleHTTPRequestHandler):
    """``/`` is the test page (``page.html`` with its config); ``/analytics-next/bundles/*`` the library."""

    def __init__(self, *args: Any, page: bytes, served: list[str], **kwargs: Any) -> None:
        self.page = page
        self.served = served
        super().__init__(*args, directory=str(BUNDLES), **kwargs)

    def do_GET(self) -> None:
        self.served.append(self.path)
        if self.path == "/" or self.path.startswith("/?"):
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(self.page)))
            self.end_headers()
            self.wfile.write(self.page)
        elif self.path.startswith("/analytics-next/bundles/") and "/.." not in self.path:
            self.path = self.path[len("/analytics-next/bundles") :]
            super().do_GET()
        else:
            self.send_error(404)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class PageServer:
    def __init__(self, config: dict[str, Any]) -> None:
        page = (HERE / "page.html").read_text().replace("__CONFIG__", json.dumps(config)).encode()
        self.served: list[str] = []
        handler = functools.partial(_PageHandler, page=page, served=self.served)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> PageServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def run_page(collector: Collector, strategy: str, tmp_path: Path) -> tuple[dict[str, Any], PageServer, str]:
    run = uuid.uuid4().hex[:12]
    collector_host = collector.url.removeprefix("http://")
    config = {"writeKey": collector.project.write_key, "collectorHost": collector_host, "run": run}
    with PageServer({**config, "strategy": strategy}) as pages:
        driver = {
            "url": f"{pages.url}/",
            "chromium": chromium(),
            "userDataDir": str(tmp_path / "chromium-profile"),
            "collector": collector.url,
            "timeoutMs": 40_000,
        }
        result = subprocess.run(
            [node(), str(HERE / "browser_client.mjs"), json.dumps(driver)],
            capture_output=True,
            text=True,
            timeout=90,
            cwd=HERE,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout), pages, run


@pytest.fixture
def browser_ready() -> Iterator[None]:
    chromium()
    node()
    if not (BUNDLES / "index.js").is_file():
        missing("@segment/analytics-next missing: run scripts/ensure-node-deps.sh")
    yield


@pytest.mark.usefixtures("browser_ready")
@pytest.mark.parametrize("strategy", ["standard", "batching"])
def test_every_call_of_analytics_js_is_archived_as_sent(
    collector: Collector, strategy: str, tmp_path: Path
) -> None:
    output, pages, run = run_page(collector, strategy, tmp_path)
    page_result = output["result"]
    assert "error" not in page_result, page_result.get("error")
    assert [r["type"] for r in page_result["results"]] == TYPES
    assert all(r["failed"] is None for r in page_result["results"]), page_result
    assert output["consoleErrors"] == []

    # nothing but the page's own server and the collector was contacted
    elsewhere = [r["url"] for r in output["requests"] if not r["url"].startswith((pages.url, collector.url))]
    assert elsewhere == [], f"the page reached out to {elsewhere}"
    assert "/analytics-next/bundles/index.js" in pages.served

    posts = [r for r in output["requests"] if r["url"].startswith(collector.url) and r["method"] == "POST"]
    assert posts and all(r["status"] == 200 for r in posts), posts
    paths = {r["url"].removeprefix(collector.url) for r in posts}
    if strategy == "batching":
        assert paths == {"/v1/b"}
    else:
        assert paths == {"/v1/i", "/v1/t", "/v1/p", "/v1/s", "/v1/g", "/v1/a"}  # one-letter endpoints

    sent: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for post in posts:
        body = json.loads(post["body"])
        for message in body.get("batch", [body]):
            sent[message["messageId"]] = (message, body)
    wanted = {r["messageId"] for r in page_result["results"]}
    assert wanted <= set(sent)
    archived = {m["messageId"]: m for m in collector.project.wait_for_archive(wanted)}
    for message_id in wanted:
        message, body = sent[message_id]
        stored = archived[message_id]
        assert_archived_as_sent(message, stored, collector.project.source_id)
        assert stored["sentAt"] == message.get("sentAt", body.get("sentAt"))
        assert stored["context"]["library"]["name"] == "analytics.js"
        assert stored["context"]["ip"] == "127.0.0.1"  # filled from the request: a browser
        assert stored["context"]["page"]["url"].startswith(pages.url)
        assert stored["context"]["userAgent"]

    by_type = {archived[r["messageId"]]["type"]: archived[r["messageId"]] for r in page_result["results"]}
    user = f"browser-user-{run}"
    assert by_type["identify"]["userId"] == user and by_type["identify"]["traits"]["logins"] == 3
    track = by_type["track"]
    assert track["event"] == "Order Completed" and track["userId"] == user
    assert track["properties"] == {"revenue": 19.99, "items": 2, "tags": ["a", "b"]}
    assert track["context"]["campaign"] == {"name": "winter", "source": "newsletter"}
    assert by_type["page"]["name"] == "Home" and by_type["page"]["category"] == "Docs"
    assert by_type["screen"]["name"] == "Settings"
    assert by_type["group"]["groupId"] == f"browser-group-{run}"
    assert by_type["alias"]["userId"] == user and by_type["alias"]["previousId"] == f"browser-anon-{run}"
    assert all(m["anonymousId"] for m in by_type.values())
