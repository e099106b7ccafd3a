"""The console's query box: one read-only SELECT at a time on the DuckDB engine (``/query``), its
rows as a page or as CSV (``/query.csv``)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from eventlake.config import Settings
from eventlake.console.html import e, int_param, table
from eventlake.query.duckdb_engine import run_duckdb
from eventlake.query.errors import QueryError
from eventlake.query.result import QueryResult
from eventlake.sync.protocol.report import REPORTS_DATABASE, REPORTS_TABLE

EXAMPLE_QUERY = f"SELECT status, count(*) AS runs\nFROM {REPORTS_DATABASE}.{REPORTS_TABLE}\nGROUP BY status"
FORMULA_START = ("=", "+", "-", "@")  # a CSV cell starting so is a formula to a spreadsheet


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


async def _form(request: Request) -> dict[str, str]:
    """A posted form (``application/x-www-form-urlencoded``, what the pages send)."""
    return dict(parse_qsl((await request.body()).decode("utf-8", "replace"), keep_blank_values=True))


class QueryBox:
    """The two routes of the query box; ``page`` frames a page's body as the console's other pages."""

    def __init__(self, settings: Settings, page: Callable[[str, str, str], HTMLResponse]) -> None:
        self.settings, self.page = settings, page

    async def query(self, request: Request) -> HTMLResponse:
        console = self.settings.console
        form = await _form(request) if request.method == "POST" else {}
        sql = form.get("sql", "")
        limit = int_param(form.get("limit"), min(100, console.query_max_rows), 1, console.query_max_rows)
        result_html = ""
        if sql.strip():
            try:
                result = await run_in_threadpool(self._run_query, sql, limit)
                result_html = self._result_table(result, limit)
            except QueryError as exc:
                result_html = f"<p class='bad error'>{e(exc)}</p>"
        body = (
            "<form method=post action=/query class=query>"
            f'<textarea name=sql rows=8 spellcheck=false placeholder="{e(EXAMPLE_QUERY)}">{e(sql)}</textarea>'
            f"<label>row limit <input type=number name=limit min=1 max={console.query_max_rows} "
            f"value={limit}></label> <button type=submit>Run</button> "
            "<button type=submit formaction=/query.csv>Download CSV</button>"
            f"<p class=hint>DuckDB over the lake, read-only: one SELECT at a time, stopped after "
            f"{console.query_timeout_seconds:g} s, at most {console.query_max_rows:,} rows. Tables are "
            "<code>database.table</code> (Spark's names), the sync reports are "
            f"<code>{REPORTS_DATABASE}.{REPORTS_TABLE}</code>.</p></form>" + result_html
        )
        return self.page("Query", "/query", body)

    async def query_csv(self, request: Request) -> Response:
        form = await _form(request)
        console = self.settings.console
        limit = int_param(form.get("limit"), console.query_max_rows, 1, console.query_max_rows)
        try:
            result = await run_in_threadpool(self._run_query, form.get("sql", ""), limit)
        except QueryError as exc:
            return PlainTextResponse(f"{exc}\n", status_code=400)
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(result.columns)
        for row in result.rows:
            writer.writerow([_csv_cell(row[c]) for c in result.columns])
        return Response(
            out.getvalue(), media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": 'attachment; filename="eventlake-query.csv"'},
        )  # fmt: skip

    def _run_query(self, sql: str, limit: int) -> QueryResult:
        if not sql.strip():
            raise QueryError("no query: type a SELECT")
        return run_duckdb(
            self.settings,
            sql,
            read_only=True,
            max_rows=limit,
            timeout=self.settings.console.query_timeout_seconds,
        )

    @staticmethod
    def _result_table(result: QueryResult, limit: int) -> str:
        rows = [[e(row[c]) for c in result.columns] for row in result.rows]
        note = f"{len(rows):,} rows" + (
            f" (the first {limit:,}: raise the row limit for more)" if result.truncated else ""
        )
        return f"<p class=count>{e(note)}</p>" + table(result.columns, rows, "result")
