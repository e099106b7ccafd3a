"""The Spark engine: Spark SQL through the catalog, in a session (given, or of its own) or through
the project's running SQL service (:mod:`eventlake.query.thrift_client`)."""

from __future__ import annotations

from typing import Any

from eventlake import progress
from eventlake.config import CatalogKind, Settings
from eventlake.progress import Say
from eventlake.query.errors import QueryError, first_line
from eventlake.query.result import QueryResult
from eventlake.query.thrift_client import through_service


def run_spark(settings: Settings, sql: str, spark: Any = None, say: Say = progress.say) -> QueryResult:
    """Spark SQL: in ``spark`` when given; else through the project's running SQL service (the
    engine of ``eventlake up`` or ``eventlake thrift``: no JVM to start); else in a session of its own.

    A Glue catalog always takes a session of its own: Spark here cannot read Glue, so the session
    registers the lake's tables from their schema files as Python data sources
    (:func:`_register_lake`), and a Thrift server gives each connection a new session, which does
    not see data sources registered in another one.
    """
    if spark is None and settings.catalog.kind == CatalogKind.HIVE:
        result = through_service(settings, sql, say)
        if result is not None:
            return result
    return _in_session(settings, sql, spark)


def _in_session(settings: Settings, sql: str, spark: Any = None) -> QueryResult:
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
