"""The Spark engine: Spark SQL through the catalog, in a session (given, or of its own) or through
the project's running SQL service (:mod:`eventlake.query.thrift_client`)."""

from __future__ import annotations

import weakref
from typing import Any

from eventlake import progress
from eventlake.config import CatalogKind, Settings
from eventlake.progress import Say
from eventlake.query.errors import QueryError, first_line
from eventlake.query.result import QueryResult
from eventlake.query.thrift_client import through_service

NATIVE_READER = "Spark's Parquet reader (s3a://, partitions from Glue)"
PYTHON_READER = "eventlake's Python data source (no S3A: see [spark] jars_dir in docs/configuration.md)"
_TOLD: weakref.WeakSet[Any] = weakref.WeakSet()  # the sessions that said which reader they use


def run_spark(settings: Settings, sql: str, spark: Any = None, say: Say = progress.say) -> QueryResult:
    """Spark SQL: in ``spark`` when given; else through the project's running SQL service (the
    engine of ``eventlake up`` or ``eventlake thrift``: no JVM to start); else in a session of its own.

    A Glue catalog always takes a session of its own: Spark here cannot read Glue, so the session
    registers the lake's tables from their schema files (:func:`_register_lake`), and a Thrift
    server gives each connection a new session, which does not see tables registered in another.
    """
    if spark is None and settings.catalog.kind == CatalogKind.HIVE:
        result = through_service(settings, sql, say)
        if result is not None:
            return result
    return _in_session(settings, sql, spark, say)


def _in_session(settings: Settings, sql: str, spark: Any = None, say: Say = progress.say) -> QueryResult:
    from pyspark.errors import PySparkException

    from eventlake.jvm.session import owned_session

    with owned_session(settings, "eventlake-sql", spark) as session:
        try:
            if session.conf.get("spark.sql.catalogImplementation") == "in-memory":
                _register_lake(settings, session, say)
            frame = session.sql(sql)
            return QueryResult.of(tuple(frame.columns), frame.toLocalIterator())
        except PySparkException as exc:
            raise QueryError(f"query failed: {first_line(exc)}") from None


def _register_lake(settings: Settings, session: Any, say: Say = progress.say) -> None:
    """A session without a Hive catalog (``glue``: Spark cannot read Glue here) gets the lake's
    tables from their schema files: with S3A on the class path (``[spark] jars_dir``) and the lake
    on S3, Parquet tables with Glue's partitions, read by Spark itself
    (:mod:`eventlake.query.spark_glue`); otherwise read through eventlake's storage by a Python data
    source (:mod:`eventlake.query.spark_lake`). Says which, once a session."""
    from eventlake.catalog.glue import GlueCatalog
    from eventlake.catalog.schema_file import read_schema_files
    from eventlake.jvm.connectors import S3A_CLASS, has_class
    from eventlake.storage import storage_scheme

    specs = [
        s for s in read_schema_files(settings.lake.storage(), settings.lake.root) if s.format == "parquet"
    ]
    native = storage_scheme(settings.lake.root) in ("s3", "s3a") and has_class(session, S3A_CLASS)
    reader = NATIVE_READER if native else PYTHON_READER
    if session not in _TOLD:
        _TOLD.add(session)
        say(f"reading the lake with {reader}")
    if native:
        from eventlake.query.spark_glue import register_glue_tables

        register_glue_tables(session, specs, GlueCatalog.from_settings(settings.catalog))
        return
    from eventlake.query.spark_lake import register_lake_tables

    register_lake_tables(session, specs, str(settings.lake.root), settings.lake.endpoint_url)
