"""Segment's own Python library (segment-analytics-python) talks to the collector unchanged."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
import segment.analytics as analytics

from eventlake.timestamps import parse_timestamp

from .harness import Collector

pytestmark = pytest.mark.integration

SENT_AT = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone.utc)


@pytest.fixture(params=[True, False], ids=["sync-mode", "queued-batches"])
def segment_client(served: Collector, request: pytest.FixtureRequest) -> Iterator[Any]:
    """The library's module-level client, pointed at the collector, restored afterwards.

    In sync mode every call is one gzipped request; otherwise a consumer thread batches them.
    """
    errors: list[object] = []
    saved = (analytics.write_key, analytics.host, analytics.sync_mode, analytics.on_error, analytics.gzip)
    analytics.write_key = served.project.write_key
    analytics.host = served.url
    analytics.sync_mode = request.param
    analytics.gzip = request.param
    analytics.on_error = lambda error, items: errors.append(error)
    analytics.default_client = None
    yield analytics
    if not request.param:  # the library's join() fails in sync mode (it has no consumers)
        analytics.shutdown()
    analytics.default_client = None
    analytics.write_key, analytics.host, analytics.sync_mode, analytics.on_error, analytics.gzip = saved
    assert errors == []


KINDS = ("track", "identify", "page", "screen", "group", "alias")


def test_every_call_of_the_official_library_is_archived(segment_client: Any, served: Collector) -> None:
    ids = {kind: f"lib-{kind}-{uuid.uuid4()}" for kind in KINDS}

    def sent(kind: str) -> dict[str, Any]:
        return {"timestamp": SENT_AT, "message_id": ids[kind]}

    segment_client.track("u1", "Order Completed", {"revenue": 12.5}, **sent("track"))
    segment_client.identify("u1", {"email": "ann@example.com"}, **sent("identify"))
    segment_client.page("u1", "Docs", "Home", {"path": "/"}, **sent("page"))
    segment_client.screen("u1", "App", "Settings", **sent("screen"))
    segment_client.group("u1", "g1", {"plan": "pro"}, **sent("group"))
    segment_client.alias("a1", "u1", **sent("alias"))
    segment_client.flush()

    archived = {m["messageId"]: m for m in served.project.wait_for_archive(set(ids.values()))}
    for kind, message_id in ids.items():
        message = archived[message_id]
        assert message["type"] == kind
        assert message["projectId"] == served.project.source_id
        assert parse_timestamp(message["receivedAt"]) is not None
        assert parse_timestamp(message["originalTimestamp"]) == SENT_AT
        assert message["context"]["library"]["name"] == "analytics-python"
        assert message["context"]["library"]["version"]
        assert "writeKey" not in message
    assert archived[ids["track"]]["event"] == "Order Completed"
    assert archived[ids["track"]]["properties"] == {"revenue": 12.5}
    assert archived[ids["identify"]]["traits"] == {"email": "ann@example.com"}
    assert archived[ids["page"]]["name"] == "Home" and archived[ids["page"]]["category"] == "Docs"
    assert archived[ids["group"]]["groupId"] == "g1"
    assert archived[ids["alias"]]["previousId"] == "a1" and archived[ids["alias"]]["userId"] == "u1"
