"""One message as one flat row: nested keys joined into column names, arrays as JSON text.

Runs once per message in a Spark Python worker, so it stays small: names are built
incrementally from cached :func:`~eventlake.schema.naming.snake_case` results.

>>> flat = flatten({"messageId": "m1", "properties": {"revenue": 19.99, "tags": ["a", "b"]}})
>>> flat.values
{'message_id': 'm1', 'properties_revenue': 19.99, 'properties_tags': '["a","b"]'}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from eventlake.schema.naming import MAX_COLUMN_NAME_LENGTH, column_name, snake_case
from eventlake.schema.types import json_text

__all__ = ["Collision", "Flattened", "flatten"]

DROPPED_KEYS = frozenset({"writeKey"})
INTERNAL_PREFIX = "_eventlake"


class Collision(NamedTuple):
    """Two key paths that normalise to one column; dotted original paths, winner first."""

    column: str
    winner_path: str
    loser_path: str


@dataclass(frozen=True)
class Flattened:
    """A message's column values (None kept, so the column is seen) and its key collisions."""

    values: dict[str, Any]
    collisions: tuple[Collision, ...]


def flatten(message: Mapping[str, Any]) -> Flattened:
    """``message`` flattened into ``{column: value}``.

    Nested objects are walked (an empty object gives nothing), lists become compact JSON with
    sorted keys, scalars and None are kept as they are. ``writeKey`` and top-level keys starting
    with ``_eventlake`` are dropped. When two key paths give the same column, a non-null value
    beats a null one, then the path whose dotted form sorts last wins, whatever the key order;
    every losing path is reported as a :class:`Collision`.

    >>> flatten({"context": {"library": {"name": "analytics-python"}}, "integrations": {"All": True}}).values
    {'context_library_name': 'analytics-python', 'integrations_all': True}
    >>> flat = flatten({"properties": {"itemCount": 2, "item_count": 3}})
    >>> flat.values
    {'properties_item_count': 3}
    >>> [tuple(collision) for collision in flat.collisions]
    [('properties_item_count', 'properties.item_count', 'properties.itemCount')]
    """
    if not isinstance(message, Mapping):
        raise TypeError(f"a message must be a JSON object, not {type(message).__name__}")
    values: dict[str, Any] = {}
    try:  # most messages: plain dicts, no collision, short names (the walk below, without its records)
        _walk(message, "", values, 0)
        return Flattened(values=values, collisions=())
    except _Slow:
        return _flatten_slow(message)


class _Slow(Exception):  # noqa: N818 (a signal, not an error)
    """The fast walk met what only the full walk settles: a collision, a name to shorten or
    hash, a container other than dict and list, a key that is not text, deep nesting."""


_MAX_FAST_DEPTH = 64


def _walk(node: Mapping[str, Any], parent_column: str, values: dict[str, Any], depth: int) -> None:
    """The fast walk of :func:`flatten`: depth first, in key order, as :func:`_flatten_slow`; one
    call per object, not per key (it runs for every key of every message)."""
    columns = _CHILD_COLUMNS
    for key, value in node.items():
        if type(key) is not str:  # the full walk names it by str(key) (an enum's key is not its value)
            raise _Slow
        column = columns.get((parent_column, key))
        if column is None:
            column = _child_column(parent_column, key)
        if not depth and (key in DROPPED_KEYS or key.startswith(INTERNAL_PREFIX)):
            continue
        kind = type(value)
        if kind is dict:
            if depth >= _MAX_FAST_DEPTH:
                raise _Slow
            _walk(value, column, values, depth + 1)
            continue
        if kind is list:
            value = json_text(value)
        elif kind not in _SCALARS:
            raise _Slow
        if not column or len(column) > MAX_COLUMN_NAME_LENGTH or column in values:
            raise _Slow
        values[column] = value


def _flatten_slow(message: Mapping[str, Any]) -> Flattened:
    values: dict[str, Any] = {}
    paths: dict[str, tuple[str, ...]] = {}
    contested: dict[str, list[tuple[tuple[str, ...], Any]]] = {}

    stack: list[tuple[tuple[str, ...], str, Any]] = [
        ((key,), "", value) for key, value in reversed(_top_level_items(message))
    ]  # depth-first in key order, without recursion (messages may nest deeply)
    while stack:
        path, parent_column, value = stack.pop()
        column = _child_column(parent_column, path[-1])
        kind = type(value)
        if kind is dict or (kind not in _SCALARS and isinstance(value, Mapping)):
            stack.extend((path + (str(key),), column, child) for key, child in reversed(value.items()))
            continue
        if kind is list or kind is tuple:
            value = json_text(value)
        if not column or len(column) > MAX_COLUMN_NAME_LENGTH:
            column = column_name(path)
        if column not in values:
            values[column] = value
            paths[column] = path
            continue
        candidates = contested.setdefault(column, [(paths[column], values[column])])
        candidates.append((path, value))

    return Flattened(values=values, collisions=_settle(values, contested))


_SCALARS = frozenset({str, int, float, bool, type(None)})
_CHILD_COLUMNS: dict[tuple[str, str], str] = {}  # (parent column, key) -> column: most keys repeat
_CHILD_COLUMNS_LIMIT = 65536  # a hostile input's distinct keys cannot grow it without bound


def _child_column(parent_column: str, key: str) -> str:
    """The column of ``key`` under ``parent_column`` ("" at the top), before the length rule."""
    column = _CHILD_COLUMNS.get((parent_column, key))
    if column is None:
        snake = snake_case(key)
        column = f"{parent_column}_{snake}" if parent_column and snake else (parent_column or snake)
        if len(_CHILD_COLUMNS) >= _CHILD_COLUMNS_LIMIT:
            _CHILD_COLUMNS.clear()
        _CHILD_COLUMNS[(parent_column, key)] = column
    return column


def _top_level_items(message: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [
        (str(key), value)
        for key, value in message.items()
        if key not in DROPPED_KEYS and not str(key).startswith(INTERNAL_PREFIX)
    ]


def _settle(
    values: dict[str, Any], contested: dict[str, list[tuple[tuple[str, ...], Any]]]
) -> tuple[Collision, ...]:
    """Give each contested column its winning value; the collisions, in a stable order."""
    collisions: list[Collision] = []
    for column in sorted(contested):
        ranked = sorted(contested[column], key=_rank, reverse=True)
        winner_path, winner_value = ranked[0]
        values[column] = winner_value
        winner = ".".join(winner_path)
        collisions.extend(Collision(column, winner, ".".join(path)) for path, _ in ranked[1:])
    return tuple(collisions)


def _rank(candidate: tuple[tuple[str, ...], Any]) -> tuple[bool, str, tuple[str, ...]]:
    """Non-null first, then the dotted path sorting last (the key tuple breaks exact ties)."""
    path, value = candidate
    return value is not None, ".".join(path), path
