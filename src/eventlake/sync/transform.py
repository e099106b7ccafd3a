"""Per-message work done in Spark's Python workers: parse, validate, flatten, cast.

Both passes are plain functions over an iterator of rows, so they are testable without Spark and
the rules stay in :mod:`eventlake.spec` and :mod:`eventlake.schema`.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import orjson
from pyspark.sql import types as T

from eventlake.schema import cast_value, flatten, segment_type, value_type
from eventlake.spec import validate
from eventlake.timestamps import parse_timestamp

# top-level columns that would shadow a partition key get this prefix
SHADOWED_PREFIX = "_"
PARTITION_NAMES = frozenset({"year", "month", "day", "hr", "segment_type", "run_id"})

PARSED_SCHEMA = T.StructType(
    [
        T.StructField("ok", T.BooleanType(), False),
        T.StructField("message_id", T.StringType()),
        T.StructField("received_at", T.TimestampType()),
        T.StructField("segment_type", T.StringType()),
        T.StructField("payload", T.StringType()),
        T.StructField("types", T.MapType(T.StringType(), T.StringType())),
        T.StructField("collisions", T.ArrayType(T.StringType())),
        T.StructField("reason", T.StringType()),
        T.StructField("raw", T.StringType()),
    ]
)

REJECTED_VALUE = T.StructType(
    [
        T.StructField("column_name", T.StringType()),
        T.StructField("target_type", T.StringType()),
        T.StructField("raw_value", T.StringType()),
        T.StructField("reason", T.StringType()),
    ]
)

CAST_SCHEMA = T.StructType(
    [
        T.StructField("message_id", T.StringType()),
        T.StructField("received_at", T.TimestampType()),
        T.StructField("segment_type", T.StringType()),
        T.StructField("row", T.StringType()),
        T.StructField("rejected", T.ArrayType(REJECTED_VALUE)),
    ]
)

# how cast values are written for Spark's from_json (see row_json)
JSON_TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSX"


def loads(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)  # integers beyond 64 bits; still raises on invalid JSON


def dumps(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, separators=(",", ":"), default=str)


def parse_line(line: str) -> tuple[Any, ...]:
    """One archive line as a :data:`PARSED_SCHEMA` row: a valid message or a rejected one."""
    try:
        message = loads(line)
    except ValueError as exc:
        return (False, None, None, None, None, None, None, f"invalid JSON: {exc}"[:200], line)
    reason = validate(message)
    if reason is not None:
        message_id = message.get("messageId") if isinstance(message, Mapping) else None
        received = parse_timestamp(message.get("receivedAt")) if isinstance(message, Mapping) else None
        return (False, _str_or_none(message_id), received, None, None, None, None, reason, line)
    flat = flatten(message)
    values = dict(flat.values)
    for name in PARTITION_NAMES.intersection(values):
        values[SHADOWED_PREFIX + name] = values.pop(name)
    types = {column: kind for column, value in values.items() if (kind := value_type(value)) is not None}
    collisions = [f"{c[0]}: {c[1]} won over {c[2]}" for c in flat.collisions]
    kind = segment_type(message["type"], message.get("event"))
    received = parse_timestamp(message["receivedAt"])
    return (True, message["messageId"], received, kind, dumps(values), types, collisions, None, None)


def parse_partition(rows: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
    for row in rows:
        line = row[0]
        if line and line.strip():
            yield parse_line(line)


def cast_row(payload: str, columns: Sequence[tuple[str, str]]) -> tuple[str, list[tuple[str, str, str, str]]]:
    """The row's values cast to the table's columns (as JSON for from_json) and the rejected values."""
    values = loads(payload)
    out: dict[str, Any] = {}
    rejected: list[tuple[str, str, str, str]] = []
    for name, kind in columns:
        value = values.get(name)
        if value is None:
            continue
        cast, reason = cast_value(value, kind)
        if reason is not None:
            raw = value if isinstance(value, str) else dumps(value)
            rejected.append((name, kind, raw, reason))
        elif cast is not None:
            out[name] = _jsonable(cast)
    return dumps(out), rejected


def cast_partition(
    rows: Iterable[Any], schemas: Mapping[str, Sequence[tuple[str, str]]]
) -> Iterator[tuple[Any, ...]]:
    for message_id, received_at, kind, payload in rows:
        row, rejected = cast_row(payload, schemas[kind])
        yield (message_id, received_at, kind, row, rejected)


def _jsonable(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return value


def _str_or_none(value: Any) -> str | None:
    return value[:200] if isinstance(value, str) else None
