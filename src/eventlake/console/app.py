"""The web console: a Starlette app over a :class:`~eventlake.console.lake.LakeWatch`.

Pages: the overview (``/``), the sync history (``/runs``, ``/runs/<run>``), the schemas
(``/schemas``, ``/schemas/<db>/<table>``), the quarantine (``/quarantine``) and a read-only query
box on the DuckDB engine (``/query``, ``/query.csv``, see :mod:`.query_box`), and the sync's
Prometheus metrics (``/metrics``, see :mod:`.metrics`). With a token, every route (assets
included) needs it, and other web sites are kept out (see :mod:`.gates`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from importlib import resources
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from eventlake import layout
from eventlake.catalog import TableSpec
from eventlake.catalog.schema_file import read_schema_files
from eventlake.config import Settings, is_loopback
from eventlake.console import metrics as sync_metrics
from eventlake.console.gates import SameSiteGate, TokenGate
from eventlake.console.html import (
    bar_chart,
    e,
    int_param,
    line_chart,
    link,
    page,
    pager,
    select_options,
    status_badge,
    table,
)
from eventlake.console.lake import LakeWatch, Run
from eventlake.console.query_box import QueryBox
from eventlake.query.duckdb_engine import ident, run_duckdb
from eventlake.query.errors import QueryError
from eventlake.sync.protocol.status import Status
from eventlake.timestamps import now_utc

PAGE_SIZE = 50
SCHEMA_PAGE_SIZE = 100
T = TypeVar("T")
STATUSES = (Status.SUCCESS, Status.PARTIAL, Status.FAILED)


def create_console(settings: Settings, watch: LakeWatch) -> ASGIApp:
    """The console app; ``watch`` is refreshed by the caller (see :mod:`.server`)."""
    views = ConsoleViews(settings, watch)
    box = QueryBox(settings, views._page)
    routes = [
        Route("/", views.overview),
        Route("/runs", views.runs),
        Route("/runs/{run_id}", views.run),
        Route("/schemas", views.schemas),
        Route("/schemas/{database}/{table}", views.schema),
        Route("/quarantine", views.quarantine),
        Route("/query", box.query, methods=["GET", "POST"]),
        Route("/query.csv", box.query_csv, methods=["POST"]),
        Route("/static/console.css", views.css),
        Route("/metrics", views.metrics),
    ]
    gated = TokenGate(Starlette(routes=routes), settings.console.token)
    return SameSiteGate(gated, is_loopback(settings.console.host))


class ConsoleViews:
    """One method per route (Starlette runs these plain functions in its thread pool)."""

    def __init__(self, settings: Settings, watch: LakeWatch) -> None:
        self.watch = watch
        self.css_text = resources.files("eventlake.console").joinpath("static/console.css").read_bytes()
        self._cache: dict[tuple[Any, ...], Any] = {}  # lake queries, until a new run appears
        self._cache_lock = threading.Lock()

    @property
    def settings(self) -> Settings:
        """The settings with the sources as ``eventlake.toml`` has them now (see :meth:`LakeWatch.follow`)."""
        return self.watch.settings

    def _page(self, title: str, active: str, body: str) -> HTMLResponse:
        refreshed = self.watch.refreshed
        when = f"{refreshed:%Y-%m-%d %H:%M:%S} UTC" if refreshed else "not yet: the lake is being read"
        return HTMLResponse(page(title, active, body, when))

    def css(self, request: Request) -> Response:
        return Response(self.css_text, media_type="text/css")

    def metrics(self, request: Request) -> Response:
        """The sync side's Prometheus metrics (see :mod:`.metrics`)."""
        return Response(sync_metrics.render(self.watch), media_type=sync_metrics.CONTENT_TYPE)

    def _cached(self, key: tuple[Any, ...], compute: Callable[[], T]) -> T:
        key = (self.watch.generation, *key)
        with self._cache_lock:
            if key in self._cache:
                return self._cache[key]  # type: ignore[no-any-return]  # (stored by this key's compute)
        value = compute()  # outside the lock: a slow query does not hold other pages
        with self._cache_lock:
            if len(self._cache) > 256:
                self._cache.clear()
            self._cache[key] = value
        return value

    # -- overview --------------------------------------------------------------------------------

    def overview(self, request: Request) -> HTMLResponse:
        now = now_utc()
        interval = self.settings.sync.interval_seconds
        rows, attention = [], []
        if self.watch.collector_error:
            attention.append(f"<li class=warn>{e(self.watch.collector_error)}</li>")
        for health in self.watch.health():
            source = health.source
            last = self.watch.last_run(source.id)
            lag = health.lag_seconds(now)
            rate = "–" if health.accepted_per_minute is None else f"{health.accepted_per_minute:,.0f}"
            rows.append([
                link("/runs", source.slug, source=source.slug), e(rate),
                f"<span class=lag>{lag:,.0f} s</span>", e(health.unsynced_files),
                status_badge(last.status) + " " + link(f"/runs/{last.run_id}", f"{last.start:%Y-%m-%d %H:%M}")
                if last else "no sync yet",
                e(f"{last.rows:,}") if last else "", e(last.rejected) if last else "",
                e(last.error) if last else "",
            ])  # fmt: skip
            attention += self._attention(source.slug, source.id, last, lag, interval)
            attention += [  # until restored and read again (`eventlake sync --rescan`)
                f"<li class=bad>{e(source.slug)}: {e(found.describe())}"
                + (f" {link('/runs/' + found.run_id, 'see the run')}" if found.run_id else "")
                + "</li>"
                for found in health.damaged
            ]
        body = (
            "<section><h2>What needs attention</h2><ul class=attention>"
            + ("".join(attention) or "<li class=ok>nothing: every source synced and queryable</li>")
            + "</ul></section><section><h2>Sources</h2>"
            + table(
                [
                    "source",
                    "accepted / min",
                    "oldest not queryable",
                    "archive files waiting",
                    "last sync",
                    "rows",
                    "rejected",
                    "error",
                ],
                rows,
                "sources",
            )  # fmt: skip
            + "</section><section>"
            + line_chart("Rows synced per day, last 30 days", self.watch.rows_per_day(30), "rows")
            + "</section>"
        )
        return self._page("Overview", "/", body)

    def _attention(
        self, slug: str, source_id: str, last: Run | None, lag: float, interval: float
    ) -> list[str]:
        items = []
        if last is not None and last.status == Status.FAILED:
            items.append(
                f"<li class=bad>{e(slug)}: the last sync failed ({e(last.error_code or 'error')}): "
                f"{e(last.error)} {link('/runs/' + last.run_id, 'see the run')}</li>"
            )
        if last is not None:
            items += [f"<li class=warn>{e(slug)}: {e(notice)}</li>" for notice in last.notices]
        recent = self.watch.quarantined_recently(source_id)
        if recent:
            items.append(
                f"<li class=warn>{e(slug)}: {recent:,} messages or values quarantined in the last 24 h "
                f"{link('/quarantine', 'see why', source=slug)}</li>"
            )
        if lag > 2 * interval + 60:
            items.append(
                f"<li class=warn>{e(slug)}: the oldest message not yet queryable waited {lag:,.0f} s "
                f"(syncs run every {interval:g} s: is `eventlake up` running?)</li>"
            )
        return items

    # -- sync history ----------------------------------------------------------------------------

    def runs(self, request: Request) -> HTMLResponse:
        q = request.query_params
        source, status, day = q.get("source", ""), q.get("status", ""), q.get("day", "")
        offset = int_param(q.get("offset"), 0)
        runs, total = self.watch.runs(source, status, day, offset, PAGE_SIZE)
        slugs = sorted({s.slug for s in self.settings.sources})
        form = (
            "<form method=get class=filters><label>source <select name=source>"
            f"{select_options(slugs, source)}</select></label><label>status <select name=status>"
            f"{select_options(STATUSES, status)}</select></label><label>day <input type=date name=day "
            f'value="{e(day)}"></label><button type=submit>Filter</button> {link("/runs", "clear")}</form>'
        )
        rows = [
            [link(f"/runs/{r.run_id}", f"{r.start:%Y-%m-%d %H:%M:%S}"), e(r.source), status_badge(r.status)
             + (" <span class=tag>replay</span>" if r.replay else ""), f"{r.duration_s:,.1f} s",
             e(f"{r.rows:,}"), e(len(r.tables)), e(r.new_columns), e(r.duplicates_dropped),
             e(r.rejected_messages), e(r.rejected_values), e(r.error_code), e(r.error[:200])]
            for r in runs
        ]  # fmt: skip
        recent, _ = self.watch.runs(source, status, day, 0, 100)
        durations = [
            (f"{r.source} {r.start:%Y-%m-%d %H:%M}", r.duration_s, r.status) for r in reversed(recent)
        ]
        per_day = self.watch.rows_per_day(30)
        if source:
            per_day = {source: per_day.get(source, [])}
        body = (
            form
            + table(
                [
                    "started (UTC)",
                    "source",
                    "status",
                    "duration",
                    "rows",
                    "tables",
                    "new columns",
                    "duplicates dropped",
                    "rejected messages",
                    "rejected values",
                    "error code",
                    "error",
                ],
                rows,
                "runs",
            )  # fmt: skip
            + pager("/runs", offset, PAGE_SIZE, total, source=source, status=status, day=day)
            + line_chart("Rows synced per day, last 30 days", per_day, "rows")
            + bar_chart(f"Sync durations, last {len(durations)} runs", durations, "s")
        )
        return self._page("Sync history", "/runs", body)

    def run(self, request: Request) -> HTMLResponse:
        run = self.watch.run(request.path_params["run_id"])
        if run is None:
            return HTMLResponse(
                page("Run not found", "/runs", f"<p>No run {e(request.path_params['run_id'])}.</p>"), 404
            )
        facts = [
            ("source", e(run.source)), ("status", status_badge(run.status)),
            ("kind", "replay" if run.replay else "sync"), ("started", f"{run.start:%Y-%m-%d %H:%M:%S} UTC"),
            ("duration", f"{run.duration_s:,.1f} s"), ("archive files", e(run.input_files)),
            ("bytes in", e(f"{run.bytes_in:,}")), ("rows", e(f"{run.rows:,}")),
            ("duplicates dropped", e(run.duplicates_dropped)),
            ("rejected messages", e(run.rejected_messages)),
            ("rejected values", e(run.rejected_values)), ("suppressed users' messages", e(run.suppressed)),
            ("error code", e(run.error_code)), ("error", f"<pre>{e(run.error)}</pre>" if run.error else ""),
            ("notices", "<br>".join(e(n) for n in run.notices)),
            ("damaged archive files (quarantined, none of their messages synced)",
             "<br>".join(f"{e(key)}: {e(problem)}" for key, problem in run.damaged)),
        ]  # fmt: skip
        dl = "<dl>" + "".join(f"<dt>{e(k)}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>"
        tables = [
            [link(f"/schemas/{t.database}/{t.table}", f"{t.database}.{t.table}"), e(f"{t.rows:,}"),
             e(t.partitions), "created" if t.is_new else "",
             e(", ".join(f"{n} {k}" for n, k in t.new_columns) if not t.is_new else ""),
             status_badge(Status.FAILED) + " " + e(t.error) if t.failed else status_badge(Status.SUCCESS)]
            for t in run.tables
        ]  # fmt: skip
        body = (
            dl
            + "<h2>Tables</h2>"
            + table(["table", "rows", "partitions", "", "new columns", "status"], tables, "tables")
        )
        return self._page(f"Run {run.run_id}", "/runs", body)

    # -- schemas ---------------------------------------------------------------------------------

    def _specs(self) -> list[TableSpec]:
        storage = self.settings.lake.storage()
        return self._cached(("schemas",), lambda: read_schema_files(storage, self.settings.lake.root))

    def schemas(self, request: Request) -> HTMLResponse:
        q = request.query_params
        wanted, offset = q.get("database", ""), int_param(q.get("offset"), 0)
        specs = sorted(self._specs(), key=lambda s: (s.database, s.name))
        databases: dict[str, int] = {}
        for spec in specs:
            databases[spec.database] = databases.get(spec.database, 0) + 1
        listed = [s for s in specs if not wanted or s.database == wanted]
        rows = [
            [link("/schemas", s.database, database=s.database),
             link(f"/schemas/{s.database}/{s.name}", s.name), e(len(s.columns)),
             e(", ".join(s.partition_keys))]
            for s in listed[offset : offset + SCHEMA_PAGE_SIZE]
        ]  # fmt: skip
        body = (
            "<p>Databases: "
            + ", ".join(f"{link('/schemas', d, database=d)} ({n} tables)" for d, n in databases.items())
            + "</p>"
            + table(["database", "table", "columns", "partition keys"], rows, "schemas")
            + pager("/schemas", offset, SCHEMA_PAGE_SIZE, len(listed), database=wanted)
        )
        return self._page("Schemas" + (f": {wanted}" if wanted else ""), "/schemas", body)

    def schema(self, request: Request) -> HTMLResponse:
        database, name = request.path_params["database"], request.path_params["table"]
        spec = next((s for s in self._specs() if s.database == database and s.name == name), None)
        if spec is None:
            return HTMLResponse(
                page("Table not found", "/schemas", f"<p>No table {e(database)}.{e(name)}.</p>"), 404
            )
        added = self.watch.column_runs(database, name)
        columns = [
            [f"<code>{e(c)}</code>", e(t), link(f"/runs/{added[c]}", added[c]) if c in added else ""]
            for c, t in spec.columns
        ]
        counts = self._cached(("days", database, name), lambda: self._rows_per_day(spec))
        body = (
            f"<p>Location <code>{e(spec.location)}</code>; "
            f"partitioned by {e(', '.join(spec.partition_keys))}</p>"
            + table(["column", "type", "added by run"], columns, "columns")
            + "<h2>Rows per day</h2>"
            + (f"<p class=bad>{e(counts)}</p>" if isinstance(counts, str)
               else table(["day", "rows"], [[e(d), e(f"{n:,}")] for d, n in counts], "days"))
        )  # fmt: skip
        return self._page(f"{database}.{name}", "/schemas", body)

    def _rows_per_day(self, spec: Any) -> list[tuple[str, int]] | str:
        keys = [k for k in spec.partition_keys if k in ("year", "month", "day")]
        if not keys:
            return "this table is not partitioned by day"
        day = " || '-' || ".join(ident(k) for k in keys) if len(keys) > 1 else ident(keys[0])
        sql = (
            f"SELECT {day} AS day, count(*) AS n FROM {ident(spec.database)}.{ident(spec.name)} "
            f"GROUP BY 1 ORDER BY 1 DESC LIMIT 60"
        )
        try:
            result = run_duckdb(self.settings, sql, timeout=self.settings.console.query_timeout_seconds)
        except QueryError as exc:
            return str(exc)
        return [(r["day"], r["n"]) for r in result.rows]

    # -- quarantine ------------------------------------------------------------------------------

    def quarantine(self, request: Request) -> HTMLResponse:
        wanted = request.query_params.get("source", "")
        sections = []
        for source in self.settings.sources:
            if wanted and source.slug != wanted:
                continue
            database = self.settings.database_name(source)
            name = source.table_prefix + layout.QUARANTINE_TABLE
            groups = self._cached(
                ("quarantine", database, name), functools.partial(self._groups, database, name)
            )
            if isinstance(groups, str):
                rows = [[f"<span class=empty>{e(groups)}</span>", "", "", "", "", "", "", ""]]
            else:
                rows = [
                    [e(g["kind"]), e(g["reason"]), e(g["table_name"]), f"<code>{e(g['column_name'])}</code>",
                     e(g["target_type"]), e(g["n"]),
                     "<ul class=raw>" + "".join(f"<li><code>{e(v)}</code></li>" for v in g["raw"]) + "</ul>",
                     f"<code class=fix>{e(self._fix(source.slug, database, g))}</code>"]
                    for g in groups
                ]  # fmt: skip
            sections.append(
                f"<section><h2>{e(source.slug)} <small>{e(database)}.{e(name)}</small></h2>"
                + table(
                    [
                        "kind",
                        "reason",
                        "table",
                        "column",
                        "column type",
                        "rows",
                        "raw values (first 5)",
                        "how to fix",
                    ],
                    rows,
                    "quarantine",
                )  # fmt: skip
                + "</section>"
            )
        slugs = " ".join(link("/quarantine", s.slug, source=s.slug) for s in self.settings.sources)
        return self._page("Quarantine", "/quarantine", f"<p>Sources: {slugs}</p>" + "".join(sections))

    def _groups(self, database: str, name: str) -> list[dict[str, Any]] | str:
        table_name = f"{ident(database)}.{ident(name)}"
        sql = (
            "SELECT kind, reason, table_name, column_name, target_type, count(*) AS n, "
            "list_slice(list(DISTINCT coalesce(raw_value, '')), 1, 5) AS raw, "
            "min(received_at) AS first, max(received_at) AS last "
            f"FROM {table_name} GROUP BY ALL ORDER BY n DESC LIMIT 200"
        )
        if not any(s.database == database and s.name == name for s in self._specs()):
            return "nothing quarantined yet"
        try:
            return list(
                run_duckdb(self.settings, sql, timeout=self.settings.console.query_timeout_seconds).rows
            )
        except QueryError as exc:
            return str(exc)

    @staticmethod
    def _fix(slug: str, database: str, group: dict[str, Any]) -> str:
        """The command that fixes a kind of quarantined row."""
        first = group["first"].strftime("%Y-%m-%d") if group.get("first") else ""
        last = group["last"].strftime("%Y-%m-%d") if group.get("last") else ""
        span = f" --from {first} --to {last}" if first else ""
        if group["kind"] == "value":
            return (
                f"eventlake schema set-type {database}.{group['table_name']} {group['column_name']} string"
                f" && eventlake replay --source {slug}{span} --table {group['table_name']}"
            )
        if group["reason"] == "table limit reached":
            return f"raise sync.max_tables_per_database, then: eventlake replay --source {slug}{span}"
        return "the message itself is invalid: fix the sender (the raw message is kept here)"
