"""Spark SQL through the project's running SQL service (Spark's Thrift server in the engine of
``eventlake up`` or in ``eventlake thrift``), with pyhive: no JVM to start. The rows come back
as the in-process engine returns them (:data:`THRIFT_CONVERTERS`), and errors worded alike."""

from __future__ import annotations

import contextlib
import getpass
import json
import re
from collections.abc import Callable
from datetime import date
from typing import Any

from eventlake.config import Settings
from eventlake.progress import Say
from eventlake.query.errors import QueryError, first_line
from eventlake.query.result import QueryResult


def through_service(settings: Settings, sql: str, say: Say) -> QueryResult | None:
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
