"""The Segment-compatible HTTP Tracking API as a Starlette app.

A request is acknowledged (200 ``{"success": true}``) only after its enriched messages are
fsynced to the spool. Messages that fail :func:`eventlake.spec.validate` are archived anyway: the
sync quarantines them with the reason, so nothing accepted is silently lost. Messages of a
suppressed ``userId`` are not archived; they are counted.

The sources follow ``eventlake.toml`` while the app runs (:class:`eventlake.config.SourcesWatch`,
checked about once a second by a task of the app's lifespan): a source added is accepted, a source
removed is refused (401), without a restart. A disabled source is still collected: disabling only
stops its syncs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from eventlake import spec
from eventlake.archive import Spool, SuppressionCache
from eventlake.collect.enrich import client_ip, enrich_messages
from eventlake.collect.errors import UnknownEndpointError
from eventlake.collect.metrics import CONTENT_TYPE, CollectorMetrics, reason_label
from eventlake.collect.request import basic_auth_user, parse_body, read_body, request_messages, resolve_source
from eventlake.config import Settings, SourcesWatch
from eventlake.errors import EventLakeError
from eventlake.timestamps import day_start_ms, now_utc

log = logging.getLogger("eventlake.collect")

_JSON = "application/json"
_SUCCESS = orjson.dumps({"success": True})
_HEALTHY = orjson.dumps({"status": "ok"})
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}
CLIENT_METRICS_ENDPOINT = "m"  # analytics.js posts its own telemetry to /v1/m


class _Collector:
    def __init__(self, settings: Settings, spool: Spool, suppressions: SuppressionCache) -> None:
        self.settings = settings  # replaced whole when the sources change (requests read it once)
        self.spool = spool
        self.suppressions = suppressions
        self.metrics = CollectorMetrics(source.slug for source in settings.sources)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Follow ``eventlake.toml``'s sources while the app serves."""
        watch = SourcesWatch(self.settings, say=log.warning)
        task = asyncio.create_task(self._follow(watch)) if self.settings.path is not None else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _follow(self, watch: SourcesWatch) -> None:
        while True:
            await asyncio.sleep(watch.interval)
            try:
                settings = await asyncio.to_thread(self._reload, watch)
            except Exception as exc:  # never the end of the collector: the next check tries again
                log.error("re-reading the sources failed: %s: %s", type(exc).__name__, exc)
                continue
            if settings is not None:
                self.settings = settings

    def _reload(self, watch: SourcesWatch) -> Settings | None:
        """The new settings when the sources changed, with the new sources' suppression lists read
        (off the event loop: a request of a new source never waits for the lake's store)."""
        changes = watch.check()
        if changes is None:
            return None
        settings = watch.settings
        for source in settings.sources:
            if source.slug in changes.added or source.slug in changes.changed:
                self.suppressions.user_ids(source.id)
                self.metrics.add_source(source.slug)
        return settings

    async def health(self, request: Request) -> Response:
        return Response(_HEALTHY, media_type=_JSON)

    async def render_metrics(self, request: Request) -> Response:
        return Response(self.metrics.render(self.spool.stats()), media_type=CONTENT_TYPE)

    async def collect(self, request: Request) -> Response:
        started = time.perf_counter()
        try:
            response = await self._collect(request)
        except Exception as exc:
            response = self._error_response(exc)
        self.metrics.observe_request(response.status_code, time.perf_counter() - started)
        return response

    async def _collect(self, request: Request) -> Response:
        received_at = now_utc()
        name = request.path_params["name"]
        if name not in spec.ENDPOINT_TYPES:
            if name == CLIENT_METRICS_ENDPOINT:
                self.metrics.received_bytes += (await read_body(request))[1]
                self.metrics.client_metrics += 1
                return Response(_SUCCESS, media_type=_JSON)
            raise UnknownEndpointError(name, sorted(spec.ENDPOINT_TYPES))
        header_key = basic_auth_user(request.headers.get("authorization"))
        source = None
        if header_key is not None:
            source = resolve_source(self.settings, header_key, "the Authorization header")
        raw, wire_bytes = await read_body(request)
        self.metrics.received_bytes += wire_bytes
        body = parse_body(raw)
        if source is None:
            source = resolve_source(self.settings, body.get("writeKey"), "the body's writeKey")
        messages = request_messages(body, spec.ENDPOINT_TYPES[name])
        enriched = enrich_messages(
            messages,
            received_at=received_at,
            source=source,
            endpoint_type=spec.ENDPOINT_TYPES[name],
            suppressed=self.suppressions.user_ids(source.id),
            ip=client_ip(request),
            from_browser="origin" in request.headers,
        )
        if enriched.lines:
            await asyncio.wrap_future(self.spool.append(source.id, enriched.lines, day_start_ms(received_at)))
        metrics = self.metrics
        metrics.accepted[source.slug] += len(enriched.lines)
        if enriched.suppressed:
            metrics.suppressed[source.slug] += enriched.suppressed
        if enriched.ip_filled:
            metrics.ip_filled[source.slug] += enriched.ip_filled
        for reason in enriched.invalid:
            metrics.invalid[(source.slug, reason_label(reason))] += 1
        return Response(_SUCCESS, media_type=_JSON)

    def _error_response(self, exc: Exception) -> Response:
        """An error's status and code as ``{"code": ..., "message": ...}``, counted."""
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
            log.error("internal error while collecting", exc_info=exc)
            status, code, message = 500, "internal_error", "internal error; see the collector's log"
        self.metrics.reject(status, code)
        body = orjson.dumps({"code": code, "message": message})
        return Response(body, status_code=status, media_type=_JSON, headers=headers)

    async def error(self, request: Request, exc: Exception) -> Response:
        """The handler of errors raised outside :meth:`collect` (routing: 404, 405)."""
        response = self._error_response(exc)
        if request.url.path.startswith("/v1/"):
            self.metrics.observe_request(response.status_code, 0.0)
        return response


def _cors() -> Middleware:
    """Browsers (analytics.js) post from any origin, with an Authorization header; no cookies."""
    return Middleware(
        CORSMiddleware,
        allow_origins=["*"],
        allow_methods=["GET", "POST"],
        allow_headers=["*"],
        max_age=86400,
    )


def create_app(
    settings: Settings, spool: Spool | Any, suppressions: SuppressionCache | None = None
) -> Starlette:
    """The Tracking API (``POST /v1/{track,identify,...,batch,import}``), ``/health``, ``/metrics``.

    The suppression lists of every configured source are read here, before the first request
    (afterwards they are re-read in the background: requests never wait for the lake's store).
    While the app runs (its lifespan), the sources follow ``settings.path``."""
    if suppressions is None:
        suppressions = SuppressionCache(settings.lake.storage(), settings.lake.root)
    for source in settings.sources:
        suppressions.user_ids(source.id)
    collector = _Collector(settings, spool, suppressions)
    app = Starlette(
        lifespan=collector.lifespan,
        routes=[
            Route("/health", collector.health, methods=["GET"]),
            Route("/metrics", collector.render_metrics, methods=["GET"]),
            Route("/v1/{name}", collector.collect, methods=["POST"]),
        ],
        middleware=[_cors()],
        exception_handlers={
            EventLakeError: collector.error,
            HTTPException: collector.error,
            Exception: collector.error,
        },
    )
    app.state.metrics = collector.metrics
    app.state.spool = spool
    return app
