"""Run SQL against the lake: Spark SQL through the catalog (default), or DuckDB over the files."""

from __future__ import annotations

import contextlib
import getpass
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any

from eventlake import progress
from eventlake.config import Settings
from eventlake.errors import EventLakeError, UsageError
from eventlake.progress import Say


class QueryError(EventLakeError):
    exit_code = 1
    code = "query_failed"


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


def _spark(settings: Settings, sql: str, spark: Any = None, say: Say = progress.say) -> QueryResult:
    """Spark SQL: in ``spark`` when given; else through the project's running SQL service (the
    engine of ``eventlake up`` or ``eventlake thrift``: no JVM to start); else in a session of its own.

    A Glue catalog always takes a session of its own: Spark here cannot read Glue, so the session
    registers the lake's tables from their schema files as Python data sources
    (:func:`_register_lake`), and a Thrift server gives each connection a new session, which does
    not see data sources registered in another one.
    """
    if spark is None and settings.catalog.kind == "hive":
        result = _through_service(settings, sql, say)
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


def _through_service(settings: Settings, sql: str, say: Say) -> QueryResult | None:
    """The rows of ``sql`` from the project's live SQL service, or None when there is none (or it
    cannot be reached, or pyhive is missing): the caller then starts a session. Once the query has
    been sent, a failure is the query's: it is never run a second time."""
    from eventlake.jvm.thriftserver import running_sql_service

    service = running_sql_service(settings.lake.state_dir)
    if service is None:
        return None
    try:
        from pyhive import exc, hive
    except ImportError:
        say("pyhive is missing (pip install 'eventlake[spark]'): starting Spark instead of using the engine")
        return None
    where = f"{service['host']}:{service['port']}"
    try:
        connection = hive.Connection(
            host=service["host"], port=int(service["port"]), username=_user(), auth="NONE"
        )
    except Exception as error:  # refused, reset: it stopped after the check
        say(f"the {service['kind']} at {where} did not answer ({first_line(error)}): starting Spark")
        return None
    say(f"through the running {service['kind']} (pid {service['pid']}) at {where}")
    try:
        cursor = connection.cursor(arraysize=10_000)
        cursor.execute(sql)
        if cursor.description is None:  # a statement without rows
            return QueryResult((), ())
        names = [column[0] for column in cursor.description]
        converters = [THRIFT_CONVERTERS.get(column[1], _same) for column in cursor.description]
        rows = (tuple(convert(v) for convert, v in zip(converters, row, strict=True)) for row in cursor)
        return QueryResult.of(names, rows)
    except exc.OperationalError as error:
        raise QueryError(f"query failed: {_thrift_error(error)}") from None
    except QueryError:
        raise
    except Exception as error:  # the connection broke (the engine stopped mid-query)
        raise QueryError(f"query failed: the {service['kind']} at {where}: {first_line(error)}") from None
    finally:
        with contextlib.suppress(Exception):
            connection.close()


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no name for this uid (containers)
        return "eventlake"


def _same(value: Any) -> Any:
    return value


def _date(value: Any) -> Any:
    return date.fromisoformat(value) if isinstance(value, str) else value


def _nested(value: Any) -> Any:
    """Arrays, maps and structs come as Hive's text of them: JSON when it parses as JSON (numbers,
    plain strings), else the text (Hive does not escape quotes inside strings)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


# HiveServer2 column type -> the Python value the in-process engine returns (pyhive already turns
# TIMESTAMP_TYPE into naive datetimes, UTC in eventlake's sessions, and DECIMAL_TYPE into Decimal)
THRIFT_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "DATE_TYPE": _date,
    "ARRAY_TYPE": _nested,
    "MAP_TYPE": _nested,
    "STRUCT_TYPE": _nested,
}

_ERROR_PREFIX = re.compile(r"^(Error running query: )?(\[[A-Z_.]+\] )?([\w.$]+(Exception|Error): )?")


def _thrift_error(error: Exception) -> str:
    """The server's error in one line, as the in-process engine words it: ``Error running query:
    [CLASS] org.apache...AnalysisException: [CLASS] The table ...`` -> ``[CLASS] The table ...``."""
    response = error.args[0] if error.args else None
    status = getattr(response, "status", None)
    message = getattr(status, "errorMessage", None) or str(error)
    return first_line(Exception(_ERROR_PREFIX.sub("", message.strip(), count=1)))


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
