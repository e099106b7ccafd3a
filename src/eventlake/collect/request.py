"""Read a Tracking API request: body (gzip or not, within the limits), write key, messages."""

from __future__ import annotations

import base64
import zlib
from typing import Any

import orjson
from starlette.requests import Request

from eventlake import spec
from eventlake.collect.errors import InvalidJsonError, LimitExceededError, RequestError, UnauthorizedError
from eventlake.config import Settings, SourceSettings

MAX_MESSAGE_BYTES = 32 * 1024
MAX_REQUEST_BYTES = 500 * 1024
MAX_BATCH_MESSAGES = 2500
_MAX_COMPRESSED_BYTES = MAX_REQUEST_BYTES + 64 * 1024  # gzip of incompressible data grows a little
_MAX_DRAINED_BYTES = 16 * 1024 * 1024  # an oversized body is read to its end up to this, then cut off
_GZIP = ("gzip", "x-gzip")


async def read_body(request: Request) -> tuple[bytes, int]:
    """The request body, gunzipped when ``Content-Encoding: gzip``, at most ``MAX_REQUEST_BYTES``;
    and its size as sent."""
    encoding = request.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity", *_GZIP):
        raise RequestError(f"unsupported Content-Encoding {encoding!r} (send gzip or no encoding)")
    limit = _MAX_COMPRESSED_BYTES if encoding in _GZIP else MAX_REQUEST_BYTES
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > _MAX_DRAINED_BYTES:
        raise _request_too_large(int(declared))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > _MAX_DRAINED_BYTES:
            raise _request_too_large(size)
        if size <= limit:
            chunks.append(chunk)
    if size > limit:  # read to the end first, so the client gets the answer rather than a reset
        raise _request_too_large(size)
    body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    return (gunzip(body) if encoding in _GZIP else body), size


def gunzip(data: bytes) -> bytes:
    """Decompress a (possibly multi-member) gzip body, refusing more than ``MAX_REQUEST_BYTES``."""
    out = bytearray()
    rest = data
    while rest:
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out += decompressor.decompress(rest, MAX_REQUEST_BYTES - len(out) + 1)
        except zlib.error as exc:
            raise RequestError(f"Content-Encoding is gzip but the body is not valid gzip ({exc})") from None
        if len(out) > MAX_REQUEST_BYTES or decompressor.unconsumed_tail:
            raise _request_too_large(len(out) + len(decompressor.unconsumed_tail))
        if not decompressor.eof:
            raise RequestError("the gzip body is truncated")
        rest = decompressor.unused_data
    return bytes(out)


def parse_body(body: bytes) -> dict[str, Any]:
    """The body as a JSON object."""
    if not body.strip():
        raise InvalidJsonError("the body is empty; send a JSON object")
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidJsonError(f"the body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise RequestError(f"the body must be a JSON object, not {_json_type(value)}")
    return value


def basic_auth_user(header: str | None) -> str | None:
    """The user name of an HTTP Basic ``Authorization`` header (the write key); None if not Basic.

    >>> basic_auth_user("Basic d2tfd2ViOg==")  # base64("wk_web:")
    'wk_web'
    >>> basic_auth_user("Basic d2tfd2Vi")  # base64("wk_web"), no colon
    'wk_web'
    """
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        raise UnauthorizedError(
            "the Authorization header is not valid HTTP Basic (expected base64 of '<writeKey>:')"
        ) from None
    return decoded.partition(":")[0]


def resolve_source(settings: Settings, write_key: object, where: str) -> SourceSettings:
    """The source a write key belongs to; 401 when the key is missing or unknown."""
    if not isinstance(write_key, str) or not write_key:
        raise UnauthorizedError(
            "no write key: send it as the HTTP Basic user name (empty password) or as writeKey in the body"
        )
    source = settings.source_by_write_key(write_key)
    if source is None:
        raise UnauthorizedError(f"unknown write key (sent in {where}); use a configured source's write_key")
    return source


def request_messages(body: dict[str, Any], endpoint_type: str | None) -> list[dict[str, Any]]:
    """The messages of a request: the body itself for a single call, or the batch (merged)."""
    if endpoint_type is not None:
        check_message_size(body, "the message")
        return [body]
    batch = body.get("batch")
    if not isinstance(batch, list):
        got = "it is missing" if "batch" not in body else f"got {_json_type(batch)}"
        raise RequestError(f"batch must be a JSON array of messages ({got})")
    if len(batch) > MAX_BATCH_MESSAGES:
        raise LimitExceededError(
            "batch_too_large",
            f"the batch has {len(batch)} messages; the limit is {MAX_BATCH_MESSAGES} messages per batch",
            MAX_BATCH_MESSAGES,
            len(batch),
        )
    messages: list[dict[str, Any]] = []
    for index, item in enumerate(batch):
        if not isinstance(item, dict):
            raise RequestError(f"batch[{index}] must be a JSON object, not {_json_type(item)}")
        check_message_size(item, f"batch[{index}]")
        messages.append(spec.merge_batch_fields(item, body))
    return messages


def check_message_size(message: dict[str, Any], where: str) -> None:
    size = len(orjson.dumps(message))
    if size > MAX_MESSAGE_BYTES:
        raise LimitExceededError(
            "message_too_large",
            f"{where} is {size} bytes; the limit is 32 KB ({MAX_MESSAGE_BYTES} bytes) per message",
            MAX_MESSAGE_BYTES,
            size,
        )


def _request_too_large(size: int) -> LimitExceededError:
    return LimitExceededError(
        "request_too_large",
        f"the request body is {size} bytes or more; the limit is 500 KB ({MAX_REQUEST_BYTES} bytes) "
        "per request, after decompression",
        MAX_REQUEST_BYTES,
        size,
    )


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
