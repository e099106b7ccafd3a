"""The Segment-compatible HTTP Tracking API as a Starlette app.

A request is acknowledged (200 ``{"success": true}``) only after its enriched messages are
fsynced to the spool. Messages that fail :func:`eventlake.spec.validate` are archived anyway: the
sync quarantines them with the reason, so nothing accepted is silently lost.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from eventlake import spec
from eventlake.archive import Spool
from eventlake.collect.errors import UnknownEndpointError
from eventlake.collect.request import basic_auth_user, parse_body, read_body, request_messages, resolve_source
from eventlake.config import Settings
from eventlake.errors import EventLakeError
from eventlake.timestamps import day_start_ms, now_utc

_JSON = "application/json"
_SUCCESS = orjson.dumps({"success": True})
_HEALTHY = orjson.dumps({"status": "ok"})
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


@dataclass
class CollectorCounters:
    """Counters since the app started (for metrics)."""

    requests: int = 0  # requests acknowledged
    messages: int = 0  # messages acknowledged (stored in the spool)
    invalid_messages: int = 0  # acknowledged messages that fail spec.validate (the sync quarantines them)
    rejected_requests: int = 0  # requests answered with an error


class _Collector:
    def __init__(self, settings: Settings, spool: Spool) -> None:
        self.settings = settings
        self.spool = spool
        self.counters = CollectorCounters()

    async def health(self, request: Request) -> Response:
        return Response(_HEALTHY, media_type=_JSON)

    async def collect(self, request: Request) -> Response:
        received_at = now_utc()
        name = request.path_params["name"]
        if name not in spec.ENDPOINT_TYPES:
            raise UnknownEndpointError(name, sorted(spec.ENDPOINT_TYPES))
        header_key = basic_auth_user(request.headers.get("authorization"))
        source = None
        if header_key is not None:
            source = resolve_source(self.settings, header_key, "the Authorization header")
        body = parse_body(await read_body(request))
        if source is None:
            source = resolve_source(self.settings, body.get("writeKey"), "the body's writeKey")
        endpoint_type = spec.ENDPOINT_TYPES[name]
        enriched = [
            spec.enrich(message, received_at=received_at, source_id=source.id, endpoint_type=endpoint_type)
            for message in request_messages(body, endpoint_type)
        ]
        lines = [orjson.dumps(message) for message in enriched]
        await asyncio.wrap_future(self.spool.append(source.id, lines, day_start_ms(received_at)))
        self.counters.requests += 1
        self.counters.messages += len(enriched)
        self.counters.invalid_messages += sum(spec.validate(message) is not None for message in enriched)
        return Response(_SUCCESS, media_type=_JSON)

    async def error(self, request: Request, exc: Exception) -> Response:
        """The one error handler: an error's status and code as ``{"code": ..., "message": ...}``."""
        self.counters.rejected_requests += 1
        headers: dict[str, str] = {}
        if isinstance(exc, EventLakeError):
            status, code, message = exc.http_status, exc.code, str(exc)
            retry_after = getattr(exc, "retry_after_seconds", None)
            if retry_after is not None:
                headers["Retry-After"] = str(retry_after)
        elif isinstance(exc, HTTPException):
            status, message = exc.status_code, exc.detail
            code = _HTTP_CODES.get(status, "http_error")
            headers.update(exc.headers or {})
        else:
            status, code, message = 500, "internal_error", "internal error; see the collector's log"
        body = orjson.dumps({"code": code, "message": message})
        return Response(body, status_code=status, media_type=_JSON, headers=headers)


def _cors() -> Middleware:
    """Browsers (analytics.js) post from any origin; no credentials are involved."""
    return Middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["GET", "POST"], allow_headers=["*"])


def create_app(settings: Settings, spool: Spool) -> Starlette:
    """The Tracking API (``POST /v1/{track,identify,...,batch,import}``) and ``GET /health``."""
    collector = _Collector(settings, spool)
    app = Starlette(
        routes=[
            Route("/health", collector.health, methods=["GET"]),
            Route("/v1/{name}", collector.collect, methods=["POST"]),
        ],
        middleware=[_cors()],
        exception_handlers={
            EventLakeError: collector.error,
            HTTPException: collector.error,
            Exception: collector.error,
        },
    )
    app.state.counters = collector.counters
    app.state.spool = spool
    return app
