"""``GET /metrics``: Prometheus text that Prometheus' own parser reads, counting what happened."""

from __future__ import annotations

import gzip
import time
import uuid

import httpx
import orjson
import pytest

from eventlake.collect.metrics import LATENCY_BUCKETS

from .harness import Collector, metrics

pytestmark = pytest.mark.integration


def delta(before: dict, after: dict, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_metrics_count_messages_requests_and_bytes(client: httpx.Client, served: Collector) -> None:
    before = metrics(served.url)
    ids = [f"metrics-{uuid.uuid4()}" for _ in range(4)]
    batch = [
        {"type": "track", "userId": "u1", "event": "E", "messageId": ids[0]},
        {"type": "track", "userId": "u1", "messageId": ids[1]},  # no event
        {"type": "identify", "messageId": ids[2]},  # no userId nor anonymousId
        {"type": "group", "userId": "u1", "messageId": ids[3], "sentAt": "yesterday"},  # no groupId
    ]
    body = orjson.dumps({"batch": batch})
    assert client.post("/v1/batch", content=body).status_code == 200
    zipped = gzip.compress(orjson.dumps({"userId": "u1", "event": "Z"}))
    assert client.post("/v1/t", content=zipped, headers={"Content-Encoding": "gzip"}).status_code == 200
    assert httpx.post(f"{served.url}/v1/track", json={"userId": "u1"}).status_code == 401
    assert client.post("/v1/track", content=b"{oops").status_code == 400
    assert client.post("/v1/batch", json={"batch": [{}] * 2501}).status_code == 400
    assert client.post("/v1/nope", json={}).status_code == 404
    after = metrics(served.url)

    assert delta(before, after, "eventlake_messages_accepted_total", source="web") == 5
    invalid = {
        labels: after[(name, labels)] - before.get((name, labels), 0)
        for name, labels in after
        if name == "eventlake_messages_invalid_total"
    }
    assert {dict(k)["reason"]: v for k, v in invalid.items() if v} == {
        "missing_event": 1,
        "missing_user_id_and_anonymous_id": 1,
        "missing_group_id": 1,
    }
    assert delta(before, after, "eventlake_requests_total", status="200") == 2
    assert delta(before, after, "eventlake_requests_total", status="400") == 2
    for status, code in [("401", "unauthorized"), ("400", "invalid_json"), ("400", "batch_too_large")]:
        assert delta(before, after, "eventlake_requests_rejected_total", status=status, code=code) == 1
    assert delta(before, after, "eventlake_requests_rejected_total", status="404", code="not_found") == 1
    assert delta(before, after, "eventlake_received_bytes_total") >= len(body) + len(zipped)
    assert delta(before, after, "eventlake_spool_messages_total") == 5
    assert delta(before, after, "eventlake_spool_bytes_total") > len(body)
    assert delta(before, after, "eventlake_messages_suppressed_total", source="web") == 0
    assert ("eventlake_spool_size_bytes", ()) in after and ("eventlake_spool_pending_bytes", ()) in after
    assert ("eventlake_sealed_files_total", ()) in after


def test_latency_histogram_is_cumulative_and_counts_every_request(
    client: httpx.Client, served: Collector
) -> None:
    before = metrics(served.url)
    for _ in range(3):
        client.post("/v1/identify", json={"userId": "u1"})
    client.post("/v1/identify", content=b"")
    after = metrics(served.url)
    name = "eventlake_request_duration_seconds"
    assert delta(before, after, f"{name}_count") == 4
    assert delta(before, after, f"{name}_sum") > 0
    buckets = [after[(f"{name}_bucket", (("le", str(bound)),))] for bound in LATENCY_BUCKETS]
    assert buckets == sorted(buckets)
    assert after[(f"{name}_bucket", (("le", "+Inf"),))] == after[(f"{name}_count", ())]
    assert after[(f"{name}_count", ())] == sum(
        value for (sample, _), value in after.items() if sample == "eventlake_requests_total"
    )


def test_sealed_files_and_spool_size(client: httpx.Client, served: Collector) -> None:
    message_id = f"metrics-{uuid.uuid4()}"
    before = metrics(served.url)
    assert client.post("/v1/track", json={"userId": "u1", "event": "E", "messageId": message_id}).is_success
    served.project.wait_for_archive({message_id})
    deadline = time.monotonic() + 5  # the sealer counts the file right after renaming it
    while delta(before, after := metrics(served.url), "eventlake_sealed_files_total") < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert after[("eventlake_spool_size_bytes", ())] >= 0


@pytest.mark.parametrize(
    ("message", "label"),
    [
        ("not an object", "not_an_object"),
        ({"type": "launch", "userId": "u1"}, "unknown_type"),
        ({"type": "track", "event": "E"}, "missing_user_id_and_anonymous_id"),
        ({"type": "track", "userId": "u1"}, "missing_event"),
        ({"type": "group", "userId": "u1"}, "missing_group_id"),
        ({"type": "alias", "userId": "u1"}, "missing_previous_id"),
        ({"type": "identify", "userId": "u1", "messageId": 5}, "invalid_message_id"),
        ({"type": "identify", "userId": "u1", "messageId": "m" * 101}, "message_id_too_long"),
        ({"type": "identify", "userId": "u1", "timestamp": "soon"}, "invalid_timestamp"),
        (
            {"type": "identify", "userId": "u1", "originalTimestamp": "2026-13-01T00:00:00Z"},
            "invalid_original_timestamp",
        ),
        ({"type": "identify", "userId": "u1", "sentAt": "yesterday"}, "invalid_sent_at"),
        ({"type": "identify", "userId": "u1", "receivedAt": None}, "invalid_received_at"),
    ],
)
def test_every_validation_reason_has_a_bounded_label(message: object, label: str) -> None:
    """The labels are spec.validate's codes: a renamed code fails here, not in production."""
    from eventlake import spec
    from eventlake.collect.metrics import reason_label

    if isinstance(message, dict):
        message = {"messageId": "m1", "receivedAt": "2026-11-22T10:00:00.000Z", **message}
    reason = spec.validate(message)
    assert reason is not None
    assert reason_label(reason) == label
