"""The rows of a query, as every engine returns them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from eventlake.query.errors import QueryError


@dataclass(frozen=True)
class QueryResult:
    columns: tuple[str, ...]
    rows: tuple[dict[str, Any], ...]
    truncated: bool = False  # more rows than were asked for (run_duckdb's max_rows)

    @classmethod
    def of(
        cls, columns: Sequence[str], rows: Iterable[Sequence[Any]], truncated: bool = False
    ) -> QueryResult:
        """Rows as objects keyed by column; a name that appears twice would lose a value, so refuse it."""
        seen: set[str] = set()
        for name in columns:
            if name in seen:
                raise QueryError(f"the result has two columns named {name!r}: name them apart with AS")
            seen.add(name)
        names = tuple(columns)
        return cls(names, tuple(dict(zip(names, map(as_utc, row), strict=True)) for row in rows), truncated)


def as_utc(value: Any) -> Any:
    """Timestamps as aware UTC datetimes, whichever engine produced them.

    Spark returns naive datetimes in the session's zone and DuckDB naive ones for ``TIMESTAMP``
    columns; eventlake works in UTC throughout.
    """
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)
    return value
