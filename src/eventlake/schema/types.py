"""Lake column types: inference from JSON values, casts into a column's type, schema evolution.

Exactly five types are inferred: ``bigint``, ``boolean``, ``decimal(38,6)``, ``string``,
``timestamp``. A new column's type is inferred from the non-null values seen in a sync's batch; once
a column exists its type never changes, and later values are cast into it (or quarantined with a
reason). A column may also be ``double`` (:data:`EXISTING_TYPES`): never inferred, but an adopted
Segment Data Lakes table whose type was corrected to it (Segment's support did, on request) keeps
it, and later numbers are cast into it.

>>> infer_type(value_type(v) for v in (1, 2.5))
'decimal(38,6)'
>>> cast_value("12", BIGINT)
(12, None)
>>> cast_value("twelve", BIGINT)
(None, 'not an integer')
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Context, Decimal, InvalidOperation
from types import MappingProxyType

import orjson

from eventlake.schema.naming import is_safe_identifier
from eventlake.timestamps import as_utc, parse_timestamp

__all__ = [
    "BIGINT",
    "BOOLEAN",
    "DECIMAL",
    "DOUBLE",
    "EXISTING_TYPES",
    "RESERVED_TYPES",
    "STRING",
    "TIMESTAMP",
    "TYPES",
    "Evolution",
    "cast_value",
    "evolve",
    "infer_type",
    "json_text",
    "merge_types",
    "value_type",
]

BIGINT = "bigint"
BOOLEAN = "boolean"
DECIMAL = "decimal(38,6)"
STRING = "string"
TIMESTAMP = "timestamp"
TYPES = (BIGINT, BOOLEAN, DECIMAL, STRING, TIMESTAMP)
DOUBLE = "double"
# the types a column may have: the inferred ones, and those a table adopted from Segment Data
# Lakes may hold (a sync casts into them, never infers them)
EXISTING_TYPES = (*TYPES, DOUBLE)

# Top-level columns whose type is fixed, whatever values the first batch holds.
RESERVED_TYPES: Mapping[str, str] = MappingProxyType(
    {
        **dict.fromkeys(("received_at", "timestamp", "original_timestamp", "sent_at"), TIMESTAMP),
        **dict.fromkeys(
            (
                "message_id",
                "user_id",
                "anonymous_id",
                "type",
                "event",
                "project_id",
                "channel",
                "previous_id",
                "group_id",
                "name",
                "category",
                "version",
            ),
            STRING,
        ),
    }
)

_BIGINT_MIN, _BIGINT_MAX = -(2**63), 2**63 - 1
_DECIMAL_SCALE = 6
_DECIMAL_INTEGER_DIGITS = 32  # decimal(38,6): 38 digits, 6 of them after the point
_DECIMAL_LIMIT = 10**_DECIMAL_INTEGER_DIGITS
_QUANTUM = Decimal(1).scaleb(-_DECIMAL_SCALE)
_CONTEXT = Context(prec=80, rounding=ROUND_HALF_EVEN)
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)


def value_type(value: object) -> str | None:
    """The type one non-null JSON value would infer; None for None.

    >>> [value_type(v) for v in (True, 3, 2**70, 2.0, "2026-11-22T10:47:01Z", "hi", None)]
    ['boolean', 'bigint', 'decimal(38,6)', 'decimal(38,6)', 'timestamp', 'string', None]
    >>> value_type(10**40), value_type(float("nan")), value_type([1])
    ('string', 'string', 'string')
    """
    if type(value) is str:  # the common case first (exact types: no isinstance chain)
        if len(value) < 16 or (value[4] != "-" and not value[0].isspace()):
            return STRING  # no date-time is shorter or lacks "YYYY-" (most strings stop here)
        return TIMESTAMP if parse_timestamp(value) is not None else STRING
    if value is None:
        return None
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        if _BIGINT_MIN <= value <= _BIGINT_MAX:
            return BIGINT
        return DECIMAL if abs(value) < _DECIMAL_LIMIT else STRING
    if isinstance(value, float):
        if not math.isfinite(value):
            return STRING
        if abs(value) < 1e31:
            return DECIMAL
        return DECIMAL if _fit_decimal(_float_decimal(value)) is not None else STRING
    if isinstance(value, Decimal):
        return DECIMAL if _fit_decimal(value) is not None else STRING
    if isinstance(value, str):
        if len(value) < 16 or (value[4] != "-" and not value[0].isspace()):
            return STRING  # no date-time is shorter or lacks "YYYY-" (most strings stop here)
        return TIMESTAMP if parse_timestamp(value) is not None else STRING
    return STRING


def merge_types(a: str, b: str) -> str:
    """The narrowest type that holds values of both types.

    >>> merge_types(BIGINT, BIGINT), merge_types(BIGINT, DECIMAL), merge_types(BOOLEAN, BIGINT)
    ('bigint', 'decimal(38,6)', 'string')
    """
    if a == b:
        return a
    if {a, b} == {BIGINT, DECIMAL}:
        return DECIMAL
    return STRING


def infer_type(types: Iterable[str | None]) -> str:
    """The type of a new column from the types of its values (None entries ignored; none: string).

    >>> infer_type([BIGINT, BIGINT]), infer_type([TIMESTAMP, STRING]), infer_type([])
    ('bigint', 'string', 'string')
    """
    result: str | None = None
    for kind in types:
        if kind is None:
            continue
        result = kind if result is None else merge_types(result, kind)
        if result == STRING:
            break
    return STRING if result is None else result


def cast_value(value: object, target: str) -> tuple[object, str | None]:
    """``value`` as the Python value a Spark column of type ``target`` takes.

    Returns ``(value, None)``, or ``(None, reason)`` when the value cannot be cast; ``(None, None)``
    for None. Widening always works (integers into decimal, anything into string).

    >>> cast_value(12.0, BIGINT), cast_value(12.5, BIGINT)
    ((12, None), (None, 'fraction into bigint'))
    >>> cast_value(19.99, DECIMAL)
    (Decimal('19.990000'), None)
    >>> cast_value(1e20, STRING), cast_value(False, STRING)
    (('100000000000000000000', None), ('false', None))
    >>> cast_value("true", BOOLEAN), cast_value(1, BOOLEAN)
    ((True, None), (None, 'not a boolean'))
    >>> cast_value("2026-11-22 12:47:01+02:00", TIMESTAMP)[0].isoformat()
    '2026-11-22T10:47:01+00:00'
    >>> cast_value(3, DOUBLE), cast_value("2.5", DOUBLE), cast_value(True, DOUBLE)
    ((3.0, None), (2.5, None), (None, 'boolean into double'))
    """
    try:
        caster = _CASTS[target]
    except KeyError:
        raise ValueError(f"unknown column type {target!r}") from None
    if value is None:
        return None, None
    return caster(value)


def _cast_bigint(value: object) -> tuple[object, str | None]:
    if isinstance(value, bool):
        return None, "boolean into bigint"
    if isinstance(value, int):
        return (value, None) if _BIGINT_MIN <= value <= _BIGINT_MAX else (None, "out of range for bigint")
    number = _to_decimal(value)
    if number is None or not number.is_finite():
        return None, "not an integer"
    if not number.is_zero() and number.adjusted() > 18:
        return None, "out of range for bigint"
    if number != number.to_integral_value(context=_CONTEXT):
        return None, "fraction into bigint"
    result = int(number)
    return (result, None) if _BIGINT_MIN <= result <= _BIGINT_MAX else (None, "out of range for bigint")


def _cast_decimal(value: object) -> tuple[object, str | None]:
    if isinstance(value, bool):
        return None, "boolean into decimal"
    number = _to_decimal(value)
    if number is None or not number.is_finite():
        return None, "not a number"
    result = _fit_decimal(number)
    return (result, None) if result is not None else (None, f"out of range for {DECIMAL}")


def _cast_boolean(value: object) -> tuple[object, str | None]:
    if isinstance(value, bool):
        return value, None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "false"):
            return text == "true", None
    return None, "not a boolean"


def _cast_string(value: object) -> tuple[object, str | None]:
    if isinstance(value, str):
        return value, None
    if isinstance(value, bool):
        return ("true" if value else "false"), None
    if isinstance(value, int):
        return str(value), None
    if isinstance(value, float):
        if not math.isfinite(value):
            return json.dumps(value), None
        return format(_float_decimal(value), "f"), None
    if isinstance(value, Decimal):
        return format(value, "f"), None
    if isinstance(value, datetime):
        return as_utc(value).isoformat(), None
    if isinstance(value, (list, tuple, dict)):
        return json_text(value), None
    return str(value), None


def _cast_double(value: object) -> tuple[object, str | None]:
    if isinstance(value, bool):
        return None, "boolean into double"
    number = _to_decimal(value)
    if number is None or not number.is_finite():
        return None, "not a number"
    result = float(number)
    return (result, None) if math.isfinite(result) else (None, "out of range for double")


def _cast_timestamp(value: object) -> tuple[object, str | None]:
    if isinstance(value, datetime):
        return as_utc(value), None
    parsed = parse_timestamp(value)
    return (parsed, None) if parsed is not None else (None, "not an ISO-8601 date-time")


_CASTS: dict[str, Callable[[object], tuple[object, str | None]]] = {
    BIGINT: _cast_bigint,
    BOOLEAN: _cast_boolean,
    DECIMAL: _cast_decimal,
    DOUBLE: _cast_double,
    STRING: _cast_string,
    TIMESTAMP: _cast_timestamp,
}


def json_text(value: object) -> str:
    """Compact JSON with sorted keys (how arrays are stored in string columns).

    >>> json_text([{"b": 1, "a": [2.0, None]}, "x"])
    '[{"a":[2.0,null],"b":1},"x"]'
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # integers beyond 64 bits, non-string keys, ...: slower but total
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _float_decimal(value: float) -> Decimal:
    """A finite float as the decimal its shortest JSON text spells (19.99, not 19.98999...)."""
    return Decimal(repr(value))


def _to_decimal(value: object) -> Decimal | None:
    """The exact decimal of a JSON number or of a string holding one; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return _float_decimal(value) if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return value
    if isinstance(value, str) and len(value) <= 400:
        text = value.strip()
        if _NUMBER.fullmatch(text):
            try:
                return Decimal(text)
            except (InvalidOperation, ValueError):
                return None
    return None


def _fit_decimal(number: Decimal) -> Decimal | None:
    """``number`` rounded half-even to 6 places, or None when it does not fit decimal(38,6)."""
    if not number.is_finite():
        return None
    if not number.is_zero() and number.adjusted() >= _DECIMAL_INTEGER_DIGITS:
        return None
    try:
        result = number.quantize(_QUANTUM, context=_CONTEXT)
    except InvalidOperation:
        return None
    if result.is_zero():
        return result.copy_abs()
    return result if result.adjusted() < _DECIMAL_INTEGER_DIGITS else None


@dataclass(frozen=True)
class Evolution:
    """A table's columns after a sync's batch, and which of them the batch created."""

    columns: tuple[tuple[str, str], ...]
    new_columns: tuple[tuple[str, str], ...]


def evolve(
    existing: Sequence[tuple[str, str]] | None,
    observed: Mapping[str, Iterable[str | None]],
    column_order: Sequence[str],
) -> Evolution:
    """The table's columns once the batch's ``observed`` value types are taken in.

    Existing columns keep their order and types, always. Observed columns that do not exist yet
    are appended in ``column_order`` (the batch's first-seen order; observed columns missing from
    it follow, sorted by name), typed by :data:`RESERVED_TYPES` or else :func:`infer_type`. A
    column whose values were all null is not created (as Segment does): it appears once a batch
    holds a value for it.

    >>> result = evolve([("id", "bigint")], {"id": ["string"], "b": ["bigint"], "a": [], "c": ["boolean"]},
    ...                 ["c", "id", "a", "b"])
    >>> result.columns
    (('id', 'bigint'), ('c', 'boolean'), ('b', 'bigint'))
    >>> result.new_columns
    (('c', 'boolean'), ('b', 'bigint'))
    """
    columns = [(name, kind) for name, kind in existing or ()]
    known = {name for name, _ in columns}
    ordered = set(column_order)
    pending = [name for name in column_order if name in observed]
    pending += sorted(name for name in observed if name not in ordered)
    new: list[tuple[str, str]] = []
    for name in pending:
        if name in known:
            continue
        kinds = [kind for kind in observed[name] if kind is not None]
        if not kinds:
            continue
        if not is_safe_identifier(name):
            raise ValueError(f"unsafe column name {name!r}")
        known.add(name)
        new.append((name, RESERVED_TYPES.get(name) or infer_type(kinds)))
    return Evolution(columns=tuple(columns + new), new_columns=tuple(new))
