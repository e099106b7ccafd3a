from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from eventlake import spec
from eventlake.schema.flatten import flatten
from eventlake.schema.naming import column_name
from eventlake.schema.types import (
    BIGINT,
    BOOLEAN,
    DECIMAL,
    RESERVED_TYPES,
    STRING,
    TIMESTAMP,
    TYPES,
    Evolution,
    cast_value,
    evolve,
    infer_type,
    merge_types,
    value_type,
)

UTC = timezone.utc


def test_type_names() -> None:
    assert TYPES == ("bigint", "boolean", "decimal(38,6)", "string", "timestamp")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (True, BOOLEAN),
        (False, BOOLEAN),
        (0, BIGINT),
        (-(2**63), BIGINT),
        (2**63 - 1, BIGINT),
        (2**63, DECIMAL),
        (10**32 - 1, DECIMAL),
        (10**32, STRING),
        (2.0, DECIMAL),
        (19.99, DECIMAL),
        (-1e-9, DECIMAL),
        (1e31, DECIMAL),
        (1e40, STRING),
        (float("nan"), STRING),
        (float("inf"), STRING),
        (Decimal("1.5"), DECIMAL),
        ("2026-11-22T10:47:01.123Z", TIMESTAMP),
        ("2026-11-22 10:47:01+02:00", TIMESTAMP),
        ("2026-11-22", STRING),
        ("12", STRING),
        ("hello", STRING),
        ("", STRING),
        ([1, 2], STRING),
        ({"a": 1}, STRING),
    ],
)
def test_value_type(value: object, expected: str | None) -> None:
    assert value_type(value) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (BIGINT, BIGINT, BIGINT),
        (BIGINT, DECIMAL, DECIMAL),
        (DECIMAL, BIGINT, DECIMAL),
        (BOOLEAN, BIGINT, STRING),
        (TIMESTAMP, STRING, STRING),
        (TIMESTAMP, TIMESTAMP, TIMESTAMP),
        (BOOLEAN, DECIMAL, STRING),
        (TIMESTAMP, BIGINT, STRING),
    ],
)
def test_merge_types(a: str, b: str, expected: str) -> None:
    assert merge_types(a, b) == expected


def test_infer_type() -> None:
    assert infer_type([]) == STRING
    assert infer_type([BIGINT, BIGINT, DECIMAL, BIGINT]) == DECIMAL
    assert infer_type([BOOLEAN]) == BOOLEAN
    assert infer_type([TIMESTAMP, TIMESTAMP]) == TIMESTAMP
    assert infer_type([BIGINT, DECIMAL, BOOLEAN]) == STRING
    assert infer_type(iter([None, BIGINT, None])) == BIGINT


def test_infer_type_from_values() -> None:
    def infer(*values: object) -> str:
        return infer_type(value_type(v) for v in values)

    assert infer(1, 2, 3) == BIGINT
    assert infer(1, 2.5) == DECIMAL
    assert infer(True, False) == BOOLEAN
    assert infer("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z") == TIMESTAMP
    assert infer("2026-01-01T00:00:00Z", "soon") == STRING
    assert infer(1, "1") == STRING
    assert infer(True, 1) == STRING


SAMPLES = [
    True,
    0,
    -5,
    2**63 - 1,
    2**63,
    10**31,
    2.0,
    19.99,
    1e-7,
    1e31,
    1e40,
    123456789.123456789,
    Decimal("0.0000005"),
    "2026-11-22T10:47:01Z",
    "text",
    "",
    "12",
    [1, {"b": 2, "a": 1}],
]


@pytest.mark.parametrize("value", SAMPLES)
def test_every_value_casts_into_its_own_inferred_type(value: object) -> None:
    cast, reason = cast_value(value, value_type(value))
    assert reason is None
    assert cast is not None


@pytest.mark.parametrize("value", SAMPLES)
def test_anything_casts_into_string(value: object) -> None:
    cast, reason = cast_value(value, STRING)
    assert reason is None
    assert isinstance(cast, str)


@pytest.mark.parametrize("target", TYPES)
def test_none_casts_to_none(target: str) -> None:
    assert cast_value(None, target) == (None, None)


def test_unknown_target() -> None:
    with pytest.raises(ValueError, match="unknown column type"):
        cast_value(1, "int")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (12, 12),
        (-(2**63), -(2**63)),
        (12.0, 12),
        ("12", 12),
        (" -12 ", -12),
        ("12.0", 12),
        ("1e3", 1000),
        (Decimal("7.000"), 7),
    ],
)
def test_cast_bigint(value: object, expected: int) -> None:
    cast, reason = cast_value(value, BIGINT)
    assert (cast, reason) == (expected, None)
    assert type(cast) is int


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (12.5, "fraction into bigint"),
        ("12.5", "fraction into bigint"),
        (Decimal("0.1"), "fraction into bigint"),
        ("twelve", "not an integer"),
        ("", "not an integer"),
        ("0x10", "not an integer"),
        ("١٢", "not an integer"),
        ("NaN", "not an integer"),
        (float("inf"), "not an integer"),
        ([1], "not an integer"),
        ({"a": 1}, "not an integer"),
        (True, "boolean into bigint"),
        (2**63, "out of range for bigint"),
        (1e20, "out of range for bigint"),
        ("99999999999999999999", "out of range for bigint"),
        ("2026-11-22T10:47:01Z", "not an integer"),
    ],
)
def test_cast_bigint_rejections(value: object, reason: str) -> None:
    assert cast_value(value, BIGINT) == (None, reason)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (12, "12.000000"),
        (2**63, "9223372036854775808.000000"),
        (19.99, "19.990000"),
        ("19.99", "19.990000"),
        ("  -0.5 ", "-0.500000"),
        (-0.0, "0.000000"),
        (1.23456749, "1.234567"),
        (1.2345675, "1.234568"),
        ("0.0000025", "0.000002"),
        ("0.0000035", "0.000004"),
        (1e-9, "0.000000"),
        ("99999999999999999999999999999999.999999", "99999999999999999999999999999999.999999"),
    ],
)
def test_cast_decimal(value: object, expected: str) -> None:
    cast, reason = cast_value(value, DECIMAL)
    assert reason is None
    assert isinstance(cast, Decimal)
    assert str(cast) == expected


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (True, "boolean into decimal"),
        ("abc", "not a number"),
        ("1,5", "not a number"),
        ("Infinity", "not a number"),
        (float("nan"), "not a number"),
        ([1.5], "not a number"),
        (10**32, "out of range for decimal(38,6)"),
        (1e40, "out of range for decimal(38,6)"),
        ("99999999999999999999999999999999.9999995", "out of range for decimal(38,6)"),
    ],
)
def test_cast_decimal_rejections(value: object, reason: str) -> None:
    assert cast_value(value, DECIMAL) == (None, reason)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), ("true", True), ("false", False), ("TRUE", True), (" False ", False)],
)
def test_cast_boolean(value: object, expected: bool) -> None:
    assert cast_value(value, BOOLEAN) == (expected, None)


@pytest.mark.parametrize("value", [1, 0, 1.0, "yes", "1", "", [True], "truth"])
def test_cast_boolean_rejections(value: object) -> None:
    assert cast_value(value, BOOLEAN) == (None, "not a boolean")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("as is", "as is"),
        ("2026-11-22T10:47:01.123456789Z", "2026-11-22T10:47:01.123456789Z"),
        (True, "true"),
        (False, "false"),
        (12, "12"),
        (-(2**70), str(-(2**70))),
        (19.99, "19.99"),
        (2.0, "2.0"),
        (1e20, "100000000000000000000"),
        (1e-7, "0.0000001"),
        (Decimal("1.50"), "1.50"),
        ([1, "a", None], '[1,"a",null]'),
        ({"b": 1, "a": 2}, '{"a":2,"b":1}'),
        ([2**70], f"[{2**70}]"),
    ],
)
def test_cast_string(value: object, expected: str) -> None:
    assert cast_value(value, STRING) == (expected, None)


def test_cast_timestamp() -> None:
    cast, reason = cast_value("2026-11-22T12:47:01.5+02:00", TIMESTAMP)
    assert reason is None
    assert cast == datetime(2026, 11, 22, 10, 47, 1, 500000, tzinfo=UTC)
    assert cast.utcoffset() == timedelta(0)


def test_cast_timestamp_from_datetime() -> None:
    aware = datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=1)))
    assert cast_value(aware, TIMESTAMP) == (datetime(2026, 1, 1, tzinfo=UTC), None)
    assert cast_value(datetime(2026, 1, 1), TIMESTAMP) == (datetime(2026, 1, 1, tzinfo=UTC), None)


@pytest.mark.parametrize(
    "value", ["2026-11-22", "yesterday", "2026-13-01T00:00:00Z", 1700000000, True, 1.5, ""]
)
def test_cast_timestamp_rejections(value: object) -> None:
    assert cast_value(value, TIMESTAMP) == (None, "not an ISO-8601 date-time")


def test_reserved_types() -> None:
    """Segment's top-level fields, as the collector archives them, get fixed column types whatever
    the values would infer: the four timestamps ``timestamp``, every other field ``string``."""
    sent = {  # every top-level field of the Segment Spec, each with a value of the wrong kind
        "type": "page",
        "messageId": 3,
        "userId": 42,
        "anonymousId": 7,
        "groupId": 5,
        "previousId": 6,
        "event": 1,
        "name": 2026,
        "category": True,
        "version": 2,
        "channel": 1,
        "timestamp": 5,
        "sentAt": 6,
        "properties": {"price": 1},
    }
    message = spec.enrich(sent, received_at=datetime(2026, 11, 22, tzinfo=UTC), source_id="src1")
    timestamps = {"receivedAt", "timestamp", "originalTimestamp", "sentAt"}
    expected = {
        column_name([key]): TIMESTAMP if key in timestamps else STRING
        for key, value in message.items()
        if not isinstance(value, dict)
    }
    assert len(expected) == 16  # enrich added receivedAt, originalTimestamp and projectId

    flat = flatten(message).values
    columns = evolve([], {column: [value_type(value)] for column, value in flat.items()}, list(flat)).columns

    assert dict(RESERVED_TYPES) == expected
    assert dict(columns) == {**expected, "properties_price": BIGINT}
    with pytest.raises(TypeError):
        RESERVED_TYPES["x"] = STRING  # type: ignore[index]


def test_evolve_new_table() -> None:
    observed = {
        "user_id": [BIGINT],
        "timestamp": [STRING],
        "properties_price": [BIGINT, DECIMAL],
        "properties_ok": [BOOLEAN],
    }
    result = evolve(None, observed, ["timestamp", "user_id", "properties_ok", "properties_price"])
    expected = (
        ("timestamp", TIMESTAMP),
        ("user_id", STRING),
        ("properties_ok", BOOLEAN),
        ("properties_price", DECIMAL),
    )
    assert result == Evolution(columns=expected, new_columns=expected)


def test_evolve_never_changes_existing_types_or_order() -> None:
    existing = [("b", BIGINT), ("a", TIMESTAMP), ("custom", "int")]
    observed = {"a": [STRING], "b": [DECIMAL, STRING], "custom": [STRING]}
    result = evolve(existing, observed, ["a", "b", "custom"])
    assert result.columns == tuple(existing)
    assert result.new_columns == ()


def test_evolve_appends_in_first_seen_order() -> None:
    existing = [("id", STRING)]
    observed = {"z": [BIGINT], "id": [BIGINT], "m": [BOOLEAN], "a": [STRING]}
    result = evolve(existing, observed, ["z", "id", "m", "a", "z"])
    assert result.columns == (("id", STRING), ("z", BIGINT), ("m", BOOLEAN), ("a", STRING))
    assert result.new_columns == (("z", BIGINT), ("m", BOOLEAN), ("a", STRING))


def test_evolve_unordered_columns_follow_sorted() -> None:
    result = evolve([], {"c": [BIGINT], "b": [BIGINT], "a": [BIGINT]}, ["c"])
    assert [name for name, _ in result.new_columns] == ["c", "a", "b"]


def test_evolve_skips_null_only_columns() -> None:
    result = evolve(
        [("id", STRING)],
        {"only_null": [], "also_null": [None, None], "x": [None, BIGINT]},
        ["only_null", "also_null", "x"],
    )
    assert result.new_columns == (("x", BIGINT),)


def test_evolve_accepts_iterables() -> None:
    result = evolve((), {"a": iter([BIGINT]), "b": {STRING}}, ("a", "b"))
    assert result.new_columns == (("a", BIGINT), ("b", STRING))


def test_evolve_rejects_unsafe_new_column_names() -> None:
    with pytest.raises(ValueError, match="unsafe column name"):
        evolve([], {"a b": [STRING]}, ["a b"])
