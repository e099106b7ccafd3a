"""Segment Spec messages: what is valid, and what the collector adds on arrival.

Timestamps (Segment's rules): ``receivedAt`` is the server clock on arrival; ``originalTimestamp``
is the client's ``timestamp`` (or its own ``originalTimestamp``); ``timestamp`` is
``receivedAt - (sentAt - originalTimestamp)`` when both are known (clock-skew correction), the
client timestamp when there is no ``sentAt``, and ``receivedAt`` when the client sent none.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import Any, NamedTuple

from eventlake.message_types import MESSAGE_TYPES
from eventlake.timestamps import format_timestamp, parse_timestamp

MAX_MESSAGE_ID = 100

# URL path name -> message type; None for batch endpoints. analytics.js uses the one-letter names.
ENDPOINT_TYPES: dict[str, str | None] = {
    **{t: t for t in MESSAGE_TYPES},
    **{t[0]: t for t in MESSAGE_TYPES},
    "batch": None,
    "import": None,
    "b": None,
}

TIMESTAMP_FIELDS = ("timestamp", "originalTimestamp", "sentAt")
REQUIRED_BY_TYPE = {"track": ("event",), "group": ("groupId",), "alias": ("previousId", "userId")}


class InvalidCode(str, Enum):  # enum.StrEnum once Python 3.10 is dropped
    """Why a message is invalid, as a stable code (the collector's metric labels)."""

    NOT_AN_OBJECT = "not_an_object"
    UNKNOWN_TYPE = "unknown_type"
    MISSING_USER_ID_AND_ANONYMOUS_ID = "missing_user_id_and_anonymous_id"
    MISSING_EVENT = "missing_event"
    MISSING_GROUP_ID = "missing_group_id"
    MISSING_PREVIOUS_ID = "missing_previous_id"
    MISSING_USER_ID = "missing_user_id"
    INVALID_MESSAGE_ID = "invalid_message_id"
    MESSAGE_ID_TOO_LONG = "message_id_too_long"
    INVALID_TIMESTAMP = "invalid_timestamp"
    INVALID_ORIGINAL_TIMESTAMP = "invalid_original_timestamp"
    INVALID_SENT_AT = "invalid_sent_at"
    INVALID_RECEIVED_AT = "invalid_received_at"


class Invalid(NamedTuple):
    """What :func:`validate` found: its ``code`` and the ``text`` people read (the quarantine's reason)."""

    code: InvalidCode
    text: str


_MISSING = {
    "event": InvalidCode.MISSING_EVENT,
    "groupId": InvalidCode.MISSING_GROUP_ID,
    "previousId": InvalidCode.MISSING_PREVIOUS_ID,
    "userId": InvalidCode.MISSING_USER_ID,
}
_BAD_TIMESTAMP = {
    "timestamp": InvalidCode.INVALID_TIMESTAMP,
    "originalTimestamp": InvalidCode.INVALID_ORIGINAL_TIMESTAMP,
    "sentAt": InvalidCode.INVALID_SENT_AT,
}


def merge_batch_fields(message: Mapping[str, Any], batch: Mapping[str, Any]) -> dict[str, Any]:
    """A batch message with the batch-level ``context``, ``integrations`` and ``sentAt`` merged in.

    The message's own keys win.

    >>> merge_batch_fields({"context": {"ip": "1.2.3.4"}}, {"context": {"ip": "9.9.9.9", "locale": "nl"}})
    {'context': {'ip': '1.2.3.4', 'locale': 'nl'}}
    """
    merged = dict(message)
    for key in ("context", "integrations"):
        shared = batch.get(key)
        if isinstance(shared, Mapping) and shared:
            own = merged.get(key)
            merged[key] = {**shared, **own} if isinstance(own, Mapping) else (own if own else dict(shared))
    if merged.get("sentAt") is None and batch.get("sentAt") is not None:
        merged["sentAt"] = batch["sentAt"]
    return merged


def enrich(
    message: Mapping[str, Any], *, received_at: datetime, source_id: str, endpoint_type: str | None = None
) -> dict[str, Any]:
    """The message as the archive keeps it: receivedAt, messageId, timestamps, projectId added.

    ``writeKey`` is removed (it is a secret). Ids sent as numbers become strings. Invalid values
    are kept as sent, for :func:`validate` to report.
    """
    out = {key: value for key, value in message.items() if key != "writeKey"}
    if endpoint_type is not None:
        out["type"] = endpoint_type
    for key in ("userId", "anonymousId", "messageId", "groupId", "previousId"):
        if isinstance(out.get(key), (int, float)) and not isinstance(out.get(key), bool):
            out[key] = str(out[key])
    if not out.get("messageId"):
        out["messageId"] = str(uuid.uuid4())
    received = format_timestamp(received_at)
    out["receivedAt"] = received
    out["projectId"] = source_id

    client_ts = out.get("timestamp")
    if client_ts is None:
        client_ts = out.get("originalTimestamp")
    if client_ts is not None:
        out["originalTimestamp"] = client_ts
    original = parse_timestamp(client_ts)
    sent = parse_timestamp(out.get("sentAt"))
    if original is not None and sent is not None:
        out["timestamp"] = format_timestamp(received_at - (sent - original))
    elif original is not None:
        out["timestamp"] = format_timestamp(original)
    elif client_ts is None:
        out["timestamp"] = received
    return out


def validate(message: Any) -> Invalid | None:
    """Why an (enriched) message cannot go into the lake, or None when it can.

    >>> ok = {"type": "track", "userId": "u1", "event": "Signed Up", "messageId": "m1",
    ...       "receivedAt": "2026-11-22T10:00:00.000Z"}
    >>> validate(ok) is None
    True
    >>> validate({"type": "track", "userId": "u1", "messageId": "m1"}).text
    'track message without event'
    >>> validate({"type": "track", "userId": "u1", "messageId": "m1"}).code.value
    'missing_event'
    """
    if not isinstance(message, Mapping):
        return Invalid(InvalidCode.NOT_AN_OBJECT, "message is not a JSON object")
    kind = message.get("type")
    if kind not in MESSAGE_TYPES:
        return Invalid(
            InvalidCode.UNKNOWN_TYPE, f"unknown type {kind!r} (expected one of {', '.join(MESSAGE_TYPES)})"
        )
    if not _present(message.get("userId")) and not _present(message.get("anonymousId")):
        return Invalid(InvalidCode.MISSING_USER_ID_AND_ANONYMOUS_ID, "neither userId nor anonymousId")
    for key in REQUIRED_BY_TYPE.get(kind, ()):
        if not _present(message.get(key)):
            return Invalid(_MISSING[key], f"{kind} message without {key}")
    message_id = message.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        return Invalid(InvalidCode.INVALID_MESSAGE_ID, "messageId is not a string")
    if len(message_id) > MAX_MESSAGE_ID:
        return Invalid(InvalidCode.MESSAGE_ID_TOO_LONG, f"messageId longer than {MAX_MESSAGE_ID} characters")
    for key in TIMESTAMP_FIELDS:
        value = message.get(key)
        if value is not None and parse_timestamp(value) is None:
            return Invalid(_BAD_TIMESTAMP[key], f"{key} {str(value)[:40]!r} is not an ISO-8601 date-time")
    if parse_timestamp(message.get("receivedAt")) is None:
        return Invalid(InvalidCode.INVALID_RECEIVED_AT, "receivedAt missing or invalid")
    return None


def _present(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != ""
