"""Real servers on 127.0.0.1 that alerts are sent to: an SMTP server (aiosmtpd) and an HTTP server
that records the JSON posted to it."""

from __future__ import annotations

import email
import email.policy
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.collect.harness import free_port


@dataclass
class Mailbox:
    """What the SMTP server received: each message with its envelope, and who logged in."""

    messages: list[tuple[str, list[str], EmailMessage]] = field(default_factory=list)
    logins: list[str] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's)
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), message))
        return "250 OK"

    @property
    def subjects(self) -> list[str]:
        return [str(m["Subject"]) for _, _, m in self.messages]


@contextmanager
def smtp_server(user: str = "", password: str = "") -> Iterator[tuple[int, Mailbox]]:
    """An SMTP server on 127.0.0.1 (with AUTH when ``user`` is given, allowed without TLS on this
    loopback test server); its port and mailbox."""
    mailbox = Mailbox()

    def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        ok = isinstance(data, LoginPassword) and (data.login.decode(), data.password.decode()) == (
            user,
            password,
        )
        if ok:
            mailbox.logins.append(data.login.decode())
        return AuthResult(success=ok, handled=False)  # aiosmtpd answers 235 or 535

    options: dict[str, Any] = {}
    if user:
        # PLAIN only: smtplib's AUTH LOGIN with an initial response stalls aiosmtpd 1.4
        options = {
            "authenticator": authenticate, "auth_require_tls": False, "auth_required": True,
            "auth_exclude_mechanism": ["LOGIN"],
        }  # fmt: skip
    port = free_port()
    controller = Controller(mailbox, hostname="127.0.0.1", port=port, **options)
    controller.start()
    try:
        yield port, mailbox
    finally:
        controller.stop()


@dataclass
class Hook:
    """What the HTTP server received: each POST's path, headers and JSON body."""

    status: int = 200  # what it answers
    posts: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)

    @property
    def bodies(self) -> list[Any]:
        return [body for _, _, body in self.posts]


@contextmanager
def webhook_receiver(status: int = 200) -> Iterator[tuple[str, Hook]]:
    """An HTTP server on 127.0.0.1 that records the JSON POSTed to it and answers ``status``; its
    URL (with a path, like a Slack webhook's) and what it received."""
    hook = Hook(status)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            hook.posts.append((self.path, dict(self.headers.items()), orjson.loads(body)))
            answer = b"ok" if hook.status < 300 else b"invalid_token"
            self.send_response(hook.status)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/services/T000/B000/secretpart", hook
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
