"""Run SQL against the lake: Spark SQL through the catalog (default), or DuckDB over the files."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
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

    @classmethod
    def of(cls, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> QueryResult:
        """Rows as objects keyed by column; a name that appears twice would lose a value, so refuse it."""
        seen: set[str] = set()
        for name in columns:
            if name in seen:
                raise QueryError(f"the result has two columns named {name!r}: name them apart with AS")
            seen.add(name)
        names = tuple(columns)
        return cls(names, tuple(dict(zip(names, map(as_utc, row), strict=True)) for row in rows))


def first_line(exc: BaseException) -> str:
    """An engine error in one line, for the CLI."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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


def _spark(settings: Settings, sql: str, spark: Any = None) -> QueryResult:
    from pyspark.errors import PySparkException

    from eventlake.jvm.session import owned_session

    with owned_session(settings, "eventlake-sql", spark) as session:
        try:
            if session.conf.get("spark.sql.catalogImplementation") == "in-memory":
                _register_lake(settings, session)
            frame = session.sql(sql)
            return QueryResult.of(tuple(frame.columns), frame.toLocalIterator())
        except PySparkException as exc:
            raise QueryError(f"query failed: {first_line(exc)}") from None


def _register_lake(settings: Settings, session: Any) -> None:
    """A session without a Hive catalog (``glue``: Spark cannot read Glue here) gets the lake's
    tables from their schema files, read through eventlake's storage."""
    from eventlake.catalog.schema_file import read_schema_files
    from eventlake.query.spark_lake import register_lake_tables

    specs = [
        s for s in read_schema_files(settings.lake.storage(), settings.lake.root) if s.format == "parquet"
    ]
    register_lake_tables(session, specs, str(settings.lake.root), settings.lake.endpoint_url)


def _duckdb(settings: Settings, sql: str) -> QueryResult:
    """DuckDB in-process over the Parquet files and the schema files: no JVM, no metastore."""
    from eventlake.query.duckdb_engine import run_duckdb

    return run_duckdb(settings, sql)


ENGINES: dict[str, Callable[[Settings, str], QueryResult]] = {"spark": _spark, "duckdb": _duckdb}


def run_query(settings: Settings, sql: str, engine: str = "spark", spark: Any = None) -> QueryResult:
    """The rows of ``sql`` on ``engine`` (see ``ENGINES``); ``spark`` reuses an existing session
    (the spark engine's; the others have none)."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}; available: {', '.join(ENGINES)}")
    if engine == "spark":
        return _spark(settings, sql, spark)
    return ENGINES[engine](settings, sql)
