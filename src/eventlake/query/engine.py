"""Run SQL against the lake through the catalog."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from eventlake.config import Settings
from eventlake.errors import EventLakeError, UsageError


class QueryError(EventLakeError):
    exit_code = 1
    code = "query_failed"


@dataclass(frozen=True)
class QueryResult:
    columns: tuple[str, ...]
    rows: tuple[dict[str, Any], ...]


def _spark(settings: Settings, sql: str, spark: Any = None) -> QueryResult:
    from pyspark.errors import PySparkException

    from eventlake.catalog.session import spark_session

    own = spark is None
    spark = spark or spark_session(settings, "eventlake-sql")
    try:
        frame = spark.sql(sql)
        columns = tuple(frame.columns)
        rows = tuple(dict(zip(columns, map(_utc, row), strict=True)) for row in frame.toLocalIterator())
        return QueryResult(columns, rows)
    except PySparkException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise QueryError(f"query failed: {first}") from None
    finally:
        if own:
            spark.stop()


def _utc(value: Any) -> Any:
    """Spark returns naive datetimes in the session's zone, which eventlake sets to UTC."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value


ENGINES: dict[str, Callable[..., QueryResult]] = {"spark": _spark}


def run_query(settings: Settings, sql: str, engine: str = "spark", spark: Any = None) -> QueryResult:
    """The rows of ``sql``; ``spark`` reuses an existing session."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}; available: {', '.join(ENGINES)}")
    return ENGINES[engine](settings, sql, spark)
