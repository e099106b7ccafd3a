"""Turn a request's messages into spool lines: enrich, drop suppressed users, fill ``context.ip``.

``context.ip`` is filled from the request when the message has none, per the source's ``fill_ip``:
``always``, ``never``, or ``auto`` (the default): only for messages from browsers and phones, which
Segment's own API fills too. ``auto`` treats a message as client-side when its ``channel`` is
``browser``, ``client`` or ``mobile``; without a ``channel``, when the request came from a browser
(it carries an ``Origin`` header) or ``context.library.name`` is one of Segment's client libraries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from starlette.requests import Request

from eventlake import spec
from eventlake.archive.suppression import is_suppressed
from eventlake.config import SourceSettings

CLIENT_CHANNELS = frozenset({"browser", "client", "mobile"})
CLIENT_LIBRARIES = frozenset(
    {
        "analytics.js",
        "analytics-ios",
        "analytics-android",
        "analytics-swift",
        "analytics-kotlin",
        "analytics-react-native",
        "analytics-flutter",
        "analytics_flutter",
    }
)


@dataclass
class EnrichedMessages:
    lines: list[bytes] = field(default_factory=list)  # what the spool stores, one JSON per message
    invalid: list[spec.Invalid] = field(default_factory=list)  # what spec.validate found, per invalid line
    suppressed: int = 0  # messages of a suppressed userId, dropped
    ip_filled: int = 0  # messages whose context.ip came from the request


def client_ip(request: Request) -> str | None:
    """The client's address (uvicorn takes it from ``X-Forwarded-For`` behind a trusted proxy)."""
    client = request.client
    return client.host if client else None


def enrich_messages(
    messages: Iterable[Mapping[str, Any]],
    *,
    received_at: datetime,
    source: SourceSettings,
    endpoint_type: str | None,
    suppressed: frozenset[str],
    ip: str | None,
    from_browser: bool,
) -> EnrichedMessages:
    """The spool lines of a request's messages, with what was dropped, filled and found invalid."""
    result = EnrichedMessages()
    fill = source.fill_ip if ip else "never"
    for message in messages:
        enriched = spec.enrich(
            message, received_at=received_at, source_id=source.id, endpoint_type=endpoint_type
        )
        if is_suppressed(enriched, suppressed):
            result.suppressed += 1
            continue
        if (
            fill != "never"
            and _lacks_ip(enriched)
            and (fill == "always" or _client_side(enriched, from_browser))
        ):
            enriched["context"] = {**(enriched.get("context") or {}), "ip": ip}
            result.ip_filled += 1
        reason = spec.validate(enriched)
        if reason is not None:
            result.invalid.append(reason)
        result.lines.append(orjson.dumps(enriched))
    return result


def _lacks_ip(message: dict[str, Any]) -> bool:
    """No ``context.ip`` (a context that is not an object is left alone)."""
    context = message.get("context")
    return context is None or (type(context) is dict and context.get("ip") in (None, ""))


def _client_side(message: dict[str, Any], from_browser: bool) -> bool:
    channel = message.get("channel")
    if isinstance(channel, str) and channel:
        return channel.lower() in CLIENT_CHANNELS
    if from_browser:
        return True
    context = message.get("context")
    library = context.get("library") if type(context) is dict else None
    name = library.get("name") if type(library) is dict else None
    return isinstance(name, str) and name in CLIENT_LIBRARIES
