"""A loopback HTTP proxy in front of a collector that fails the first attempt of every request.

The first attempt is forwarded (so the collector stores it) and then answered 503, as when a
response is lost or a load balancer times out after the backend committed: the client retries, and
the archive holds those messages twice. Attempts are told apart by the messageIds in the body, so a
retry with a new ``sentAt`` or header is still recognised.
"""

from __future__ import annotations

import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

_HOP_BY_HOP = {"host", "content-length", "connection", "keep-alive", "transfer-encoding"}


class FailFirstProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.seen: set[frozenset[str]] = set()
        self.failed = 0  # first attempts answered 503 (after forwarding them)
        self.forwarded = 0  # every request forwarded to the collector
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                status, answer, answer_headers = proxy.handle(self.path, headers, body)
                self.send_response(status)
                for key, value in answer_headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def handle(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes, dict[str, str]]:
        key = _message_ids(body, headers)
        response = httpx.post(f"{self.upstream}{path}", content=body, headers=headers, timeout=10)
        with self.lock:
            self.forwarded += 1
            first = key not in self.seen
            self.seen.add(key)
            if first:
                self.failed += 1
        if first:
            return (
                503,
                b'{"code": "proxy_failure", "message": "first attempt"}',
                {"Content-Type": "application/json"},
            )
        return response.status_code, response.content, {"Content-Type": response.headers["content-type"]}

    def __enter__(self) -> FailFirstProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _message_ids(body: bytes, headers: dict[str, str]) -> frozenset[str]:
    if any(k.lower() == "content-encoding" and v.lower() == "gzip" for k, v in headers.items()):
        body = gzip.decompress(body)
    document = json.loads(body)
    messages = document.get("batch", [document])
    return frozenset(str(m.get("messageId")) for m in messages)
