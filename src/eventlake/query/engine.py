"""Run SQL against the lake on one of the engines: Spark SQL through the catalog (default,
:mod:`eventlake.query.spark_engine`), or DuckDB over the files (:mod:`eventlake.query.duckdb_engine`).
Each engine is imported when it is used."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eventlake import progress
from eventlake.config import Settings
from eventlake.errors import UsageError
from eventlake.progress import Say
from eventlake.query.result import QueryResult


def _spark(settings: Settings, sql: str, spark: Any = None, say: Say = progress.say) -> QueryResult:
    from eventlake.query.spark_engine import run_spark

    return run_spark(settings, sql, spark, say)


def _duckdb(settings: Settings, sql: str) -> QueryResult:
    """DuckDB in-process over the Parquet files and the schema files: no JVM, no metastore."""
    from eventlake.query.duckdb_engine import run_duckdb

    return run_duckdb(settings, sql)


ENGINES: dict[str, Callable[[Settings, str], QueryResult]] = {"spark": _spark, "duckdb": _duckdb}


def run_query(
    settings: Settings, sql: str, engine: str = "spark", spark: Any = None, say: Say = progress.say
) -> QueryResult:
    """The rows of ``sql`` on ``engine`` (see ``ENGINES``); ``spark`` reuses an existing session
    (the spark engine's; the others have none). Without one, the spark engine goes through the
    project's running SQL service when there is one (``say`` tells which)."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}; available: {', '.join(ENGINES)}")
    if engine == "spark":
        return _spark(settings, sql, spark, say)
    return ENGINES[engine](settings, sql)
