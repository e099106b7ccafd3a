"""Compare what a client library sent with what the archive kept."""

from __future__ import annotations

from typing import Any

from eventlake.timestamps import parse_timestamp


def assert_archived_as_sent(sent: dict[str, Any], archived: dict[str, Any], source_id: str) -> None:
    """Every field the library sent is archived unchanged, with the collector's additions only.

    Exceptions (the collector's documented enrichment): ``writeKey`` is never stored; the client's
    ``timestamp`` is kept as ``originalTimestamp`` and ``timestamp`` becomes the skew-corrected
    time; ``context.ip`` may be filled when the library sent none.
    """
    for key, value in sent.items():
        if key == "writeKey":
            assert "writeKey" not in archived
        elif key == "timestamp":
            assert archived["originalTimestamp"] == value
            assert parse_timestamp(archived["timestamp"]) is not None
        elif key == "context":
            extra = set(archived["context"]) - set(value)
            assert extra <= {"ip"}, f"unexpected context keys {extra}"
            for name, item in value.items():
                assert archived["context"][name] == item, f"context.{name} changed"
        else:
            assert archived.get(key) == value, f"{key}: sent {value!r}, archived {archived.get(key)!r}"
    assert archived["projectId"] == source_id
    assert parse_timestamp(archived["receivedAt"]) is not None
