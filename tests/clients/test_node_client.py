"""Segment's Node library (@segment/analytics-node, from npm) talks to the collector unchanged."""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import Any

import pytest

from tests.collect.harness import Collector

from .fields import assert_archived_as_sent
from .tools import HERE, node

pytestmark = pytest.mark.integration


def test_every_call_of_analytics_node_is_archived_as_sent(collector: Collector) -> None:
    run = uuid.uuid4().hex[:12]
    config = {"host": collector.url, "writeKey": collector.project.write_key, "run": run}
    result = subprocess.run(
        [node(), str(HERE / "node_client.mjs"), json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=HERE,
    )
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    assert output["errors"] == [] and output["statuses"] and set(output["statuses"]) == {200}
    assert len(output["requests"]) >= 2, "flushAt 4: six calls make at least two batch requests"

    sent: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for body in output["requests"]:
        assert body["writeKey"] == collector.project.write_key
        for message in body["batch"]:
            sent[message["messageId"]] = (message, body)
    assert sorted(m["type"] for m, _ in sent.values()) == sorted(
        ["identify", "track", "page", "screen", "group", "alias"]
    )
    archived = {m["messageId"]: m for m in collector.project.wait_for_archive(set(sent))}
    for message_id, (message, body) in sent.items():
        stored = archived[message_id]
        assert_archived_as_sent(message, stored, collector.project.source_id)
        assert stored["sentAt"] == message.get("sentAt", body["sentAt"])  # the batch's sentAt, merged
        assert stored["context"]["library"]["name"] == "@segment/analytics-node"
        assert "ip" not in stored["context"]  # a server library: context.ip is not filled
    by_type = {m["type"]: archived[i] for i, (m, _) in sent.items()}
    assert by_type["track"]["event"] == "Order Completed"
    assert by_type["track"]["properties"] == {
        "revenue": 19.99,
        "items": 2,
        "coupon": None,
        "tags": ["a", "b"],
    }
    assert by_type["track"]["originalTimestamp"] == "2026-03-04T05:06:07.089Z"
    assert by_type["track"]["integrations"] == {"All": True, "Mixpanel": False}
    assert by_type["identify"]["traits"]["logins"] == 7
    assert by_type["page"]["category"] == "Docs" and by_type["page"]["name"] == "Home"
    assert by_type["screen"]["name"] == "Settings"
    assert by_type["group"]["groupId"] == f"node-group-{run}"
    assert by_type["alias"]["previousId"] == f"node-anon-{run}"
