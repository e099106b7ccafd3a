"""The query engines' error, and an engine's error in one line."""

from __future__ import annotations

from eventlake.errors import EventLakeError


class QueryError(EventLakeError):
    exit_code = 1
    code = "query_failed"


def first_line(exc: BaseException) -> str:
    """An engine error in one line, for the CLI."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
