"""Sync results and the run report (Segment's 22 fields plus eventlake's own)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from typing import Any

import orjson

from eventlake import layout, partitions, state_layout
from eventlake.catalog import TableSpec
from eventlake.errors import EventLakeError
from eventlake.storage import Location, Storage, relative_to
from eventlake.sync.protocol.damaged import DamagedFile
from eventlake.sync.protocol.status import Status
from eventlake.timestamps import RunClock, format_timestamp, now_utc, parse_timestamp

REPORTS_DATABASE = "__segment_datalake"
REPORTS_TABLE = "sync_reports"
REPORT_PARTITION_KEYS = ("source_id", "day")  # a partition per source and day (before: and run_id)
# the report fields as catalog columns (partition keys excluded); JSON rows may omit any of them
REPORT_COLUMNS = (
    ("type", "string"),
    ("workspace_id", "string"),
    ("start_time", "timestamp"),
    ("finish_time", "timestamp"),
    ("duration_mins", "decimal(38,6)"),
    ("status", "string"),
    ("error", "string"),
    ("error_code", "string"),
    ("table_name", "string"),
    ("database", "string"),
    ("partitions", "array<map<string,string>>"),
    ("new_columns", "array<struct<name:string,type:string>>"),
    ("row_count", "bigint"),
    ("is_new", "boolean"),
    ("replay", "boolean"),
    ("replay_from", "timestamp"),
    ("replay_to", "timestamp"),
    ("emr_cluster_id", "string"),
    ("s3_bucket", "string"),
    ("duplicates_dropped", "bigint"),
    ("rejected_messages", "bigint"),
    ("rejected_values", "bigint"),
    ("suppressed", "bigint"),
    ("input_files", "bigint"),
    ("bytes_in", "bigint"),
    ("source", "string"),
    ("notices", "array<string>"),
    ("collisions", "array<string>"),
    ("run_id", "string"),  # a field of the rows (a partition key of a lake written before the merge)
    # quarantined by name (sync/protocol/damaged.py)
    ("damaged_files", "array<struct<file:string,problem:string>>"),
)


@dataclass(frozen=True)
class TableResult:
    database: str
    table: str
    rows: int
    is_new: bool
    new_columns: tuple[tuple[str, str], ...]
    partitions: tuple[dict[str, str], ...]
    collisions: tuple[str, ...] = ()


@dataclass(frozen=True)
class BlockedTable:
    """A table the run did not create: its messages went to the quarantine instead."""

    database: str
    table: str
    error: str


@dataclass(frozen=True)
class SyncResult:
    """The outcome of one source's sync run, as reports and the CLI render it."""

    source: str
    source_id: str
    run_id: str
    status: Status
    start_time: datetime
    finish_time: datetime
    tables: tuple[TableResult, ...] = ()
    input_files: int = 0
    bytes_in: int = 0
    input_messages: int = 0
    duplicates_dropped: int = 0
    rejected_messages: int = 0
    rejected_values: int = 0
    suppressed: int = 0  # messages of suppressed userIds found in the archive: dropped
    replay_from: datetime | None = None  # a replay's received-time range (run kind: replay)
    replay_to: datetime | None = None
    error: str = ""
    error_code: str = ""
    notices: tuple[str, ...] = field(default=())
    blocked: tuple[BlockedTable, ...] = ()  # a table row of the report each, status failed
    damaged: tuple[DamagedFile, ...] = ()  # archive files not whole gzip: quarantined, none of it read

    @classmethod
    def failure(
        cls, source: str, source_id: str, exc: BaseException, *, run_id: str = "",
        clock: RunClock | None = None, start: datetime | None = None, status: Status = Status.FAILED,
        input_files: int = 0, bytes_in: int = 0,
    ) -> SyncResult:  # fmt: skip
        """The result of a run that failed (or was skipped) with ``exc``: nothing was published.
        ``clock``: the run's, when it had started (its start and duration; else ``start``, if
        known, to now)."""
        if clock is not None:
            start, finish = clock.started_at, clock.finish()
        else:
            finish = now_utc()
            start = min(start or finish, finish)
        return cls(
            source, source_id, run_id, status, start, finish, input_files=input_files,
            bytes_in=bytes_in, error=f"{type(exc).__name__}: {exc}"[:2000],
            error_code=exc.code if isinstance(exc, EventLakeError) else "internal_error",
        )  # fmt: skip

    @classmethod
    def skipped(cls, source: str, source_id: str, status: Status, why: str) -> SyncResult:
        """A source not synced on purpose (disabled): no run, nothing read."""
        now = now_utc()
        return cls(source, source_id, "", status, now, now, error=why)

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)

    @property
    def duration_seconds(self) -> float:
        """How long the run took: its finish is its start plus the monotonic time elapsed
        (:class:`~eventlake.timestamps.RunClock`), so a step of the wall clock does not count."""
        return (self.finish_time - self.start_time).total_seconds()


def report_rows(result: SyncResult, lake: Location, app_id: str = "") -> list[dict[str, Any]]:
    """One ``source`` row for the run and one ``event`` row per table."""
    day = result.start_time.strftime("%Y-%m-%d")
    failed = result.status == Status.FAILED
    common = {
        "workspace_id": "eventlake",
        "run_id": result.run_id,
        "start_time": format_timestamp(result.start_time),
        "finish_time": format_timestamp(result.finish_time),
        "duration_mins": round(result.duration_seconds / 60, 4),
        "status": "failed" if failed else "finished",
        "error": result.error or None,
        "error_code": result.error_code or None,
        "replay": result.replay_from is not None,
        "replay_from": format_timestamp(result.replay_from) if result.replay_from else None,
        "replay_to": format_timestamp(result.replay_to) if result.replay_to else None,
        "emr_cluster_id": app_id or None,
        "s3_bucket": str(lake),
        "source_id": result.source_id,
        "day": day,
    }
    source_row = {
        "type": "source",
        **common,
        "table_name": None,
        "database": result.tables[0].database if result.tables else None,
        "partitions": [
            dict(p) for p in sorted({tuple(sorted(p.items())) for t in result.tables for p in t.partitions})
        ],
        "new_columns": [],
        "row_count": result.rows,
        "is_new": None,
        "duplicates_dropped": result.duplicates_dropped,
        "rejected_messages": result.rejected_messages,
        "rejected_values": result.rejected_values,
        "suppressed": result.suppressed,
        "input_files": result.input_files,
        "bytes_in": result.bytes_in,
        "source": result.source,
        "notices": list(result.notices),
        "damaged_files": [{"file": d.key, "problem": d.problem} for d in result.damaged],
    }
    rows = [source_row]
    for table in result.tables:
        rows.append(
            {
                "type": "event",
                **common,
                "table_name": table.table,
                "database": table.database,
                "partitions": list(table.partitions),
                "new_columns": [{"name": n, "type": t} for n, t in table.new_columns],
                "row_count": table.rows,
                "is_new": table.is_new,
                "collisions": list(table.collisions),
            }
        )
    for blocked in result.blocked:  # their messages are in the quarantine: the run partly failed
        failed_table = {"status": "failed", "error": blocked.error, "error_code": "table_limit"}
        rows.append(
            {"type": "event", **common, **failed_table, "table_name": blocked.table,
             "database": blocked.database, "partitions": [], "new_columns": [], "row_count": 0,
             "is_new": True, "collisions": []}
        )  # fmt: skip
    return rows


def completed_result(reports: Sequence[Sequence[dict[str, Any]]]) -> SyncResult | None:
    """What a rerun completed: the result of the interrupted runs whose ``reports`` (their report
    rows, from their manifests) it published, as one (None: no such run, e.g. only a set-type's
    manifest), with their own run id and times and the counts their reports hold (not
    ``input_messages``); several runs' tables and counts added up."""
    results = [_result_of_report(rows) for rows in reports if rows]
    if not results:
        return None
    last = results[-1]
    if len(results) == 1:
        return last
    return replace(  # their span (the wall clock may have stepped back between two runs)
        last, start_time=min(r.start_time for r in results),
        finish_time=max(r.finish_time for r in results), tables=tuple(t for r in results for t in r.tables),
        blocked=tuple(b for r in results for b in r.blocked),
        damaged=tuple(d for r in results for d in r.damaged),
        status=Status.PARTIAL if any(r.status == Status.PARTIAL for r in results) else last.status,
        notices=tuple(n for r in results for n in r.notices),
        **{name: sum(getattr(r, name) for r in results) for name in _COUNTS},
    )  # fmt: skip


def _result_of_report(rows: Sequence[dict[str, Any]]) -> SyncResult:
    """A committed run's result from its report rows (:func:`report_rows` read back)."""
    head = next(r for r in rows if r.get("type") == "source")
    tables, blocked = [], []
    for row in rows:
        if row.get("type") != "event":
            continue
        if row.get("status") == "failed":
            blocked.append(BlockedTable(row["database"], row["table_name"], row.get("error") or ""))
            continue
        tables.append(
            TableResult(
                row["database"], row["table_name"], row["row_count"], bool(row["is_new"]),
                tuple((c["name"], c["type"]) for c in row.get("new_columns") or ()),
                tuple(dict(p) for p in row.get("partitions") or ()), tuple(row.get("collisions") or ()),
            )
        )  # fmt: skip
    counts: dict[str, Any] = {name: head.get(name) or 0 for name in _COUNTS}
    damaged = tuple(
        DamagedFile(d["file"], d.get("problem") or "", head["run_id"])
        for d in head.get("damaged_files") or ()
    )
    return SyncResult(
        head["source"], head["source_id"], head["run_id"], Status.PARTIAL if damaged else Status.SUCCESS,
        parse_timestamp(head["start_time"]) or now_utc(), parse_timestamp(head["finish_time"]) or now_utc(),
        tables=tuple(tables), blocked=tuple(blocked), damaged=damaged,
        notices=tuple(head.get("notices") or ()),
        replay_from=parse_timestamp(head.get("replay_from")),
        replay_to=parse_timestamp(head.get("replay_to")), **counts,
    )  # fmt: skip


# the counts of a SyncResult that its report's source row holds (input_messages is not one)
_COUNTS = (
    "input_files",
    "bytes_in",
    "duplicates_dropped",
    "rejected_messages",
    "rejected_values",
    "suppressed",
)


def run_status(rows: list[dict[str, Any]]) -> Status:
    """A report file's run as users see it: ``Failed`` (the run, or every table, failed),
    ``Partial Success`` (some tables failed: the table limit; or archive files were found damaged,
    see :mod:`.damaged`) or ``Success``."""
    tables = [r for r in rows if r.get("type") == "event"]
    failed = [r for r in tables if r.get("status") == "failed"]
    head = next((r for r in rows if r.get("type") == "source"), rows[0] if rows else {})
    if head.get("status") == "failed" or (tables and len(failed) == len(tables)):
        return Status.FAILED
    return Status.PARTIAL if failed or head.get("damaged_files") else Status.SUCCESS


def reports_table(lake: Location) -> TableSpec:
    """The catalog table over every report file: one partition per source and UTC day (see
    :mod:`eventlake.sync.protocol.report_days`)."""
    return TableSpec(
        REPORTS_DATABASE,
        REPORTS_TABLE,
        REPORT_COLUMNS,
        REPORT_PARTITION_KEYS,
        str(layout.reports_root(lake)),
        format="json",
        partition_path=layout.REPORT_PARTITION_PATH,
    )


def report_partition(result: SyncResult) -> tuple[str, str]:
    return (result.source_id, result.start_time.strftime("%Y-%m-%d"))


def report_path(result: SyncResult, lake: Location) -> Location:
    return layout.report_file(lake, result.start_time.strftime("%Y-%m-%d"), result.source_id, result.run_id)


def write_report_rows(storage: Storage, path: Location, rows: list[dict[str, Any]]) -> None:
    """The report file: one JSON object per line (atomic, durable). A report of a day before today
    (a run that started before midnight, an interrupted one completed later) goes to where its day's
    partition is now: a version folder once the day was merged on an object store (see
    :mod:`eventlake.sync.protocol.report_days`); today's never was."""
    day = rows[0].get("day") if rows else None
    if day and day < now_utc().strftime("%Y-%m-%d") and layout.is_run_report_name(path.name):
        path = partitions.current_folder(storage, path.parent) / path.name
    storage.write(path, b"".join(orjson.dumps(row) + b"\n" for row in rows))


def read_report_rows(storage: Storage, path: Location) -> list[dict[str, Any]]:
    """A report file's rows; ``OSError`` or ``orjson.JSONDecodeError`` when it is unreadable."""
    return [orjson.loads(line) for line in storage.read_lines(path)]


def report_runs(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A report file's rows by run, in file order: one run's (a run's file) or a day's (a merged
    file)."""
    runs: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for row in rows:
        runs.setdefault((row.get("source_id"), row.get("run_id")), []).append(row)
    return list(runs.values())


def report_files(storage: Storage, lake: Location) -> list[Location]:
    """Every report file (a run's, or a merged day's), sorted by path (one listing of every report:
    see :func:`report_files_by_day` for the newest first without it)."""
    return partitions.every_report_file(storage, lake)


# -- the newest reports first, without listing every day ever -----------------------------------


def first_report_day(storage: Storage, lake: Location) -> str | None:
    """The oldest UTC day holding reports, from the reports' index; None when the lake has none
    (no report yet, or reports written before the index existed)."""
    try:
        return str(orjson.loads(storage.read(state_layout.reports_index_file(lake)))["first_day"])
    except FileNotFoundError:
        return None
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None  # damaged: readers list every report instead, the next sync writes it again


def note_report_day(storage: Storage, lake: Location, day: str) -> None:
    """Keep the reports' index's oldest day at or before ``day`` (after a report of ``day`` is
    written). Its first write lists every report once (a lake with reports older than the index)."""
    first = first_report_day(storage, lake)
    if first is not None and first <= day:
        return
    if first is None:
        days = [layout.report_day(path, lake) for path in report_files(storage, lake)]
        first = min([*days, day])
    storage.write(state_layout.reports_index_file(lake), orjson.dumps({"first_day": min(first, day)}))


def report_files_by_day(
    storage: Storage, lake: Location, source_id: str | None = None, since: str | None = None,
    until: str | None = None,
) -> Iterator[tuple[str, list[Location]]]:  # fmt: skip
    """Each UTC day's report files (of one source, or every source's; a run's or a merged day's:
    :func:`report_runs` splits them), the newest day first, from
    ``until`` (default: today) back to ``since`` (default: the first day holding reports): one
    listing per day, so a reader that stops after the days it needs lists only those. A lake
    without the reports' index (reports older than it, no sync since) is listed once instead."""
    until = until or now_utc().strftime("%Y-%m-%d")
    first = first_report_day(storage, lake)
    if first is None:  # no index: one listing of every report
        by_day: dict[str, list[Location]] = {}
        for path in report_files(storage, lake):
            by_day.setdefault(layout.report_day(path, lake), []).append(path)
        wanted = source_id and f"source={source_id}"
        root = layout.reports_root(lake)
        for day in sorted(by_day, reverse=True):
            if day <= until and (since is None or day >= since):
                yield day, [p for p in by_day[day] if not wanted or relative_to(p, root).parts[1] == wanted]
        return
    floor = max(first, since) if since else first
    current = date.fromisoformat(until)
    while current.isoformat() >= floor:
        yield current.isoformat(), partitions.report_day_files(storage, lake, current.isoformat(), source_id)
        current -= timedelta(days=1)
