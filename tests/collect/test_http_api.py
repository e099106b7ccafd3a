"""The HTTP Tracking API against a real collector: endpoints, auth, bodies, limits, archive layout."""

from __future__ import annotations

import base64
import gzip
import uuid
from typing import Any

import httpx
import orjson
import pytest

from eventlake import layout, spec
from eventlake.archive import list_archive_files
from eventlake.storage import LocalStorage
from eventlake.timestamps import day_start_ms, parse_timestamp

from .harness import Collector

pytestmark = pytest.mark.integration

SINGLE_CALLS: dict[str, dict[str, Any]] = {
    "track": {"userId": "u1", "event": "Order Completed", "properties": {"revenue": 9.5}},
    "identify": {"userId": "u1", "traits": {"email": "a@example.com"}},
    "page": {"anonymousId": "a1", "name": "Home", "properties": {"path": "/"}},
    "screen": {"userId": "u1", "name": "Settings"},
    "group": {"userId": "u1", "groupId": "g1", "traits": {"plan": "pro"}},
    "alias": {"userId": "u1", "previousId": "a1"},
}


TIMESTAMP = "2026-01-02T03:04:05Z"


def new_id() -> str:
    return f"test-{uuid.uuid4()}"


def error_of(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["code"] == code
    return body["message"]


def test_health(client: httpx.Client) -> None:
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_every_single_call_endpoint_is_archived(client: httpx.Client, served: Collector) -> None:
    sent: dict[str, str] = {}
    for name, expected_type in spec.ENDPOINT_TYPES.items():
        if expected_type is None:
            continue
        message_id = new_id()
        message = {**SINGLE_CALLS[expected_type], "messageId": message_id, "timestamp": TIMESTAMP}
        response = client.post(f"/v1/{name}", json=message)
        assert response.status_code == 200, response.text
        assert response.json() == {"success": True}
        sent[message_id] = expected_type
    archived = {m["messageId"]: m for m in served.project.wait_for_archive(set(sent))}
    for message_id, expected_type in sent.items():
        message = archived[message_id]
        assert message["type"] == expected_type
        assert message["projectId"] == served.project.source_id
        assert message["originalTimestamp"] == TIMESTAMP
        assert parse_timestamp(message["receivedAt"]) is not None
        assert "writeKey" not in message


@pytest.mark.parametrize("name", ["batch", "import", "b"])
def test_batch_merges_batch_fields(client: httpx.Client, served: Collector, name: str) -> None:
    ids = [new_id() for _ in range(3)]
    own = {"ip": "1.1.1.1"}
    body = {
        "batch": [
            {"type": "track", "userId": "u1", "event": "E", "messageId": ids[0], "context": own},
            {"type": "identify", "userId": "u1", "messageId": ids[1], "traits": {"name": "Ann"}},
            {"type": "page", "anonymousId": "a1", "messageId": ids[2], "timestamp": "2026-01-01T00:00:00Z"},
        ],
        "context": {"ip": "9.9.9.9", "library": {"name": "test-lib"}},
        "integrations": {"All": True},
        "sentAt": "2026-01-01T00:00:10Z",
    }
    assert client.post(f"/v1/{name}", json=body).json() == {"success": True}
    archived = {m["messageId"]: m for m in served.project.wait_for_archive(set(ids))}
    assert [archived[i]["type"] for i in ids] == ["track", "identify", "page"]
    assert archived[ids[0]]["context"] == {"ip": "1.1.1.1", "library": {"name": "test-lib"}}
    assert archived[ids[1]]["context"]["ip"] == "9.9.9.9"
    assert archived[ids[1]]["integrations"] == {"All": True}
    page = archived[ids[2]]
    skew_corrected = parse_timestamp(page["receivedAt"]) - parse_timestamp(page["timestamp"])
    assert skew_corrected.total_seconds() == 10  # receivedAt - (sentAt - timestamp)
    assert len({archived[i]["receivedAt"] for i in ids}) == 1  # one arrival time per request


def test_archive_layout_is_segments(client: httpx.Client, served: Collector) -> None:
    message_id = new_id()
    response = client.post("/v1/track", json={"userId": "u1", "event": "Layout", "messageId": message_id})
    assert response.is_success
    project = served.project
    message = next(m for m in project.wait_for_archive({message_id}) if m["messageId"] == message_id)
    files = list_archive_files(LocalStorage(), project.lake, project.source_id)
    day_ms = day_start_ms(parse_timestamp(message["receivedAt"]))
    assert any(f.day_ms == day_ms for f in files)
    for archive_file in files:
        parts = archive_file.key.split("/")
        assert parts[:2] == ["segment-logs", project.source_id]
        assert parts[2] == str(archive_file.day_ms) and int(parts[2]) % 86_400_000 == 0
        assert parts[3].endswith(".gz") and len(parts) == 4
        assert archive_file.path == layout.archive_file(
            project.lake, project.source_id, archive_file.day_ms, parts[3][: -len(".gz")]
        )
        with gzip.open(archive_file.path) as lines:
            assert all(orjson.loads(line)["projectId"] == project.source_id for line in lines)


def test_gzip_body(client: httpx.Client, served: Collector) -> None:
    message_id = new_id()
    body = gzip.compress(orjson.dumps({"userId": "u1", "event": "Zipped", "messageId": message_id}))
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    assert client.post("/v1/track", content=body, headers=headers).json() == {"success": True}
    served.project.wait_for_archive({message_id})


def test_text_plain_body_with_write_key_in_body(served: Collector) -> None:
    """analytics.js sends text/plain (no CORS preflight) with the write key in the body."""
    message_id = new_id()
    body = orjson.dumps(
        {"userId": "u1", "event": "Plain", "messageId": message_id, "writeKey": served.project.write_key}
    )
    response = httpx.post(f"{served.url}/v1/t", content=body, headers={"Content-Type": "text/plain"})
    assert response.json() == {"success": True}
    message = next(m for m in served.project.wait_for_archive({message_id}) if m["messageId"] == message_id)
    assert "writeKey" not in message


def test_basic_auth_without_trailing_colon(served: Collector) -> None:
    token = base64.b64encode(served.project.write_key.encode()).decode()
    response = httpx.post(
        f"{served.url}/v1/identify", json={"userId": "u9"}, headers={"Authorization": f"Basic {token}"}
    )
    assert response.json() == {"success": True}


@pytest.mark.parametrize(
    ("auth", "body"),
    [
        (None, {"userId": "u1", "event": "E"}),
        (("wk_wrong", ""), {"userId": "u1", "event": "E"}),
        (None, {"userId": "u1", "event": "E", "writeKey": "wk_wrong"}),
        (None, {"userId": "u1", "event": "E", "writeKey": 42}),
    ],
    ids=["no-key", "wrong-basic-key", "wrong-body-key", "non-string-body-key"],
)
def test_unauthorized(served: Collector, auth: tuple[str, str] | None, body: dict[str, Any]) -> None:
    response = httpx.post(f"{served.url}/v1/track", json=body, auth=auth)
    assert "write key" in error_of(response, 401, "unauthorized")


def test_malformed_basic_auth(served: Collector) -> None:
    response = httpx.post(f"{served.url}/v1/track", content=b"{}", headers={"Authorization": "Basic %%%"})
    assert "Basic" in error_of(response, 401, "unauthorized")


@pytest.mark.parametrize(
    ("path", "body", "code", "names"),
    [
        ("/v1/track", b'{"userId": "u1",', "invalid_json", "not valid JSON"),
        ("/v1/track", b"", "invalid_json", "empty"),
        ("/v1/track", b"\xff\xfe", "invalid_json", "not valid JSON"),
        ("/v1/track", b"[1, 2]", "invalid_request", "must be a JSON object, not an array"),
        ("/v1/batch", b'{"batch": {"type": "track"}}', "invalid_request", "batch must be a JSON array"),
        ("/v1/batch", b'{"context": {}}', "invalid_request", "missing"),
        ("/v1/batch", b'{"batch": [{"type": "track"}, 7]}', "invalid_request", "batch[1] must be a JSON"),
    ],
    ids=["truncated", "empty", "not-utf8", "array-body", "batch-object", "batch-missing", "batch-element"],
)
def test_bad_bodies(client: httpx.Client, path: str, body: bytes, code: str, names: str) -> None:
    response = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert names in error_of(response, 400, code)


def test_bad_gzip_and_unknown_encoding(client: httpx.Client) -> None:
    response = client.post("/v1/track", content=b"not gzip", headers={"Content-Encoding": "gzip"})
    assert "gzip" in error_of(response, 400, "invalid_request")
    response = client.post("/v1/track", content=b"{}", headers={"Content-Encoding": "br"})
    assert "'br'" in error_of(response, 400, "invalid_request")


def test_message_over_32kb(client: httpx.Client) -> None:
    big = {"userId": "u1", "event": "Big", "properties": {"blob": "x" * 33_000}}
    assert "32 KB" in error_of(client.post("/v1/track", json=big), 400, "message_too_large")
    batch = {"batch": [{"type": "track", "userId": "u1", "event": "ok"}, {**big, "type": "track"}]}
    message = error_of(client.post("/v1/batch", json=batch), 400, "message_too_large")
    assert "batch[1]" in message and "32 KB" in message


def test_request_over_500kb(client: httpx.Client) -> None:
    message = {"type": "track", "userId": "u1", "event": "E", "properties": {"blob": "y" * 30_000}}
    body = orjson.dumps({"batch": [message] * 18})  # each message fits, the request does not
    assert "500 KB" in error_of(client.post("/v1/batch", content=body), 400, "request_too_large")
    # the limit applies after decompression: 540 KB that gzip to a few KB
    headers = {"Content-Encoding": "gzip"}
    response = client.post("/v1/batch", content=gzip.compress(body), headers=headers)
    assert "after decompression" in error_of(response, 400, "request_too_large")


def test_batch_over_2500_messages(client: httpx.Client) -> None:
    body = {"batch": [{"type": "track", "userId": "u", "event": "e"}] * 2501}
    assert "2500" in error_of(client.post("/v1/batch", json=body), 400, "batch_too_large")
    assert client.post("/v1/batch", json={"batch": body["batch"][:2500]}).json() == {"success": True}


def test_invalid_messages_are_archived_not_dropped(client: httpx.Client, served: Collector) -> None:
    ids = [new_id() for _ in range(3)]
    batch = [
        {"type": "track", "userId": "u1", "messageId": ids[0]},  # no event
        {"type": "identify", "messageId": ids[1]},  # no userId nor anonymousId
        {"type": "launch", "userId": "u1", "messageId": ids[2]},  # unknown type
    ]
    assert client.post("/v1/batch", json={"batch": batch}).json() == {"success": True}
    archived = {m["messageId"]: m for m in served.project.wait_for_archive(set(ids))}
    assert all(spec.validate(archived[i]) is not None for i in ids)


def test_unknown_endpoint_and_method(client: httpx.Client) -> None:
    assert "valid: " in error_of(client.post("/v1/launch", json={}), 404, "not_found")
    error_of(client.get("/v1/track"), 405, "method_not_allowed")
