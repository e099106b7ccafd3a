"""What the console shows, read from the lake once and kept up to date by small increments.

A page view never scans the lake: :class:`LakeWatch` holds the sync runs of the last
:data:`RECENT_DAYS` days (one summary per report file, read once, the newest day first: report files
never change), a :class:`DaySummary` per source and older day (what the overview, ``/metrics`` and
the history's counts need: a year of ``up`` is about a million runs, which a console must neither
read at each start nor hold), and per source the oldest message not yet queryable;
:meth:`LakeWatch.refresh` reads what is new (new report files of the newest days, the ledger's
checkpoint and newest entries, the open days of the archive that may have changed
(:mod:`eventlake.console.pending`), the spool) and is called by the
console's background thread every few seconds. Messages accepted per minute come from the
collector's ``/metrics``.

An older day's summary is kept in the project's state folder
(:func:`eventlake.state_layout.console_day_summary`) with the names of the report files it was made from:
a day's files change only by a merge or a late report, and both change the names, so a restarted
console reads again only the days whose files changed (the first start after an upgrade reads them
all, once). The runs of an older day are read when a page asks for them (the history's later pages,
a run's page), a few days kept.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import urllib.request
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
from prometheus_client.parser import text_string_to_metric_families

from eventlake import layout, state_layout
from eventlake.config import Settings, SourceSettings
from eventlake.console.pending import PendingFiles
from eventlake.partitions import report_day_files
from eventlake.storage import Location, relative_to
from eventlake.storage.local import write_atomic
from eventlake.sync.maintenance.health import read_health
from eventlake.sync.protocol.damaged import DamagedFile, read_damaged
from eventlake.sync.protocol.report import read_report_rows, report_files_by_day, report_runs, run_status
from eventlake.sync.protocol.stage import run_started
from eventlake.sync.protocol.status import Status
from eventlake.timestamps import now_utc, parse_timestamp

ACCEPTED_METRIC = "eventlake_messages_accepted"  # the collector's counter, by source (without _total)
RATE_WINDOW_SECONDS = 60.0
RECENT_DAYS = 2  # today and yesterday (UTC): their runs are held; an older day is a DaySummary
OLD_DAYS_HELD = 8  # older days whose runs a page asked for, kept (the least recently asked go)
SUMMARY_VERSION = 1


@dataclass(frozen=True)
class TableRun:
    """One table of a run (a report's ``event`` row)."""

    database: str
    table: str
    rows: int
    is_new: bool
    new_columns: tuple[tuple[str, str], ...]
    failed: bool
    error: str
    partitions: int


@dataclass(frozen=True)
class Run:
    """One sync run (a report file), as the console shows it."""

    source_id: str
    source: str  # the slug (the id of a source no longer configured)
    run_id: str
    start: datetime
    finish: datetime
    status: str  # Success | Partial Success | Failed
    rows: int
    duplicates_dropped: int
    rejected_messages: int
    rejected_values: int
    suppressed: int
    input_files: int
    bytes_in: int
    error: str
    error_code: str
    notices: tuple[str, ...]
    replay: bool
    tables: tuple[TableRun, ...]
    day: str  # the UTC day it started (the report's partition)
    damaged: tuple[tuple[str, str], ...] = ()  # archive files found damaged (key, problem): quarantined

    @property
    def duration_s(self) -> float:
        return (self.finish - self.start).total_seconds()

    @property
    def new_columns(self) -> int:
        return sum(len(t.new_columns) for t in self.tables if not t.is_new)

    @property
    def rejected(self) -> int:
        return self.rejected_messages + self.rejected_values


def run_from_rows(rows: list[dict[str, Any]], slugs: dict[str, str]) -> Run | None:
    """A report file's rows as a :class:`Run` (None without a ``source`` row)."""
    head = next((r for r in rows if r.get("type") == "source"), None)
    if head is None:
        return None
    tables = tuple(
        TableRun(
            r.get("database") or "",
            r.get("table_name") or "",
            r.get("row_count") or 0,
            bool(r.get("is_new")),
            tuple((c["name"], c["type"]) for c in r.get("new_columns") or ()),
            r.get("status") == "failed",
            r.get("error") or "",
            len(r.get("partitions") or ()),
        )  # fmt: skip
        for r in rows
        if r.get("type") == "event"
    )
    status = run_status(rows)
    start = parse_timestamp(head["start_time"]) or now_utc()
    return Run(
        head["source_id"], slugs.get(head["source_id"], head["source_id"]), head["run_id"], start,
        parse_timestamp(head.get("finish_time")) or start, status, head.get("row_count") or 0,
        head.get("duplicates_dropped") or 0, head.get("rejected_messages") or 0,
        head.get("rejected_values") or 0, head.get("suppressed") or 0, head.get("input_files") or 0,
        head.get("bytes_in") or 0, head.get("error") or "", head.get("error_code") or "",
        tuple(head.get("notices") or ()), bool(head.get("replay")), tables, start.strftime("%Y-%m-%d"),
        tuple((d["file"], d.get("problem") or "") for d in head.get("damaged_files") or ()),
    )  # fmt: skip


@dataclass
class SyncTotals:
    """A source's sync runs (its reports) summed up, for ``/metrics``; replays are left out."""

    runs: dict[str, int] = field(default_factory=dict)  # by status (Success, Partial Success, Failed)
    rows: int = 0
    duplicates_dropped: int = 0
    rejected_messages: int = 0
    rejected_values: int = 0
    last_success: datetime | None = None  # the newest Success or Partial Success run's finish

    def add(self, other: SyncTotals) -> None:
        """Add an older ``other`` (its last success counts only when this has none)."""
        for status, count in other.runs.items():
            self.runs[status] = self.runs.get(status, 0) + count
        self.rows += other.rows
        self.duplicates_dropped += other.duplicates_dropped
        self.rejected_messages += other.rejected_messages
        self.rejected_values += other.rejected_values
        if self.last_success is None:
            self.last_success = other.last_success

    def count(self, run: Run) -> None:
        """Add a run older than those counted so far (replays are not counted)."""
        if run.replay:
            return
        self.runs[str(run.status)] = self.runs.get(str(run.status), 0) + 1
        self.rows += run.rows
        self.duplicates_dropped += run.duplicates_dropped
        self.rejected_messages += run.rejected_messages
        self.rejected_values += run.rejected_values
        if run.status != Status.FAILED and self.last_success is None:
            self.last_success = run.finish


@dataclass
class DaySummary:
    """One source's runs of one day older than :data:`RECENT_DAYS`, summed up, and the report files
    they were read from (see the module docstring)."""

    source_id: str
    day: str
    files: tuple[str, ...]  # the report files read, sorted
    statuses: dict[str, int]  # runs by status, replays included (the history's counts)
    rows: int  # rows of every run, replays included (rows per day)
    totals: SyncTotals  # replays left out (/metrics)
    columns: dict[str, dict[str, dict[str, str]]]  # database -> table -> column -> the run adding it

    @property
    def runs(self) -> int:
        return sum(self.statuses.values())

    def matching(self, status: str) -> int:
        return self.statuses.get(status, 0) if status else self.runs

    def to_json(self) -> bytes:
        totals = dataclasses.asdict(self.totals)
        totals["last_success"] = self.totals.last_success.isoformat() if self.totals.last_success else None
        return orjson.dumps({"version": SUMMARY_VERSION, **dataclasses.asdict(self), "totals": totals})

    @classmethod
    def from_json(cls, data: bytes) -> DaySummary:
        """``ValueError`` (or ``KeyError``, ``TypeError``) for a file that is not a summary of this
        version."""
        fields = orjson.loads(data)
        if fields.pop("version", None) != SUMMARY_VERSION:
            raise ValueError("another version")
        totals = fields.pop("totals")
        last = totals.pop("last_success")
        return cls(
            **{**fields, "files": tuple(fields["files"])},
            totals=SyncTotals(**totals, last_success=parse_timestamp(last) if last else None),
        )


def summarize(source_id: str, day: str, files: Iterable[str], runs: Iterable[Run]) -> DaySummary:
    """The :class:`DaySummary` of one source's ``runs`` of ``day`` (any order).

    >>> start = datetime(2026, 11, 20, 8, tzinfo=timezone.utc)
    >>> table = TableRun("web", "page", 5, True, (("url", "string"),), False, "", 1)
    >>> run = Run("S1", "web", "r1", start, start, "Success", 5, 0, 0, 2, 0, 1, 10, "", "", (),
    ...           False, (table,), "2026-11-20")
    >>> day = summarize("S1", "2026-11-20", ["b", "a"], [run])
    >>> day.files, day.statuses, day.totals.rejected_values, day.columns
    (('a', 'b'), {'Success': 1}, 2, {'web': {'page': {'url': 'r1'}}})
    """
    totals, statuses, rows = SyncTotals(), dict[str, int](), 0
    columns: dict[str, dict[str, dict[str, str]]] = {}
    for run in sorted(runs, key=lambda r: (r.start, r.run_id), reverse=True):  # newest first
        totals.count(run)
        statuses[str(run.status)] = statuses.get(str(run.status), 0) + 1
        rows += run.rows
        for table in run.tables:  # the oldest run naming a column, as the last one seen
            added = columns.setdefault(table.database, {}).setdefault(table.table, {})
            added.update((name, run.run_id) for name, _ in table.new_columns)
    return DaySummary(source_id, day, tuple(sorted(files)), statuses, rows, totals, columns)


@dataclass
class SourceHealth:
    """A source's figures for the overview."""

    source: SourceSettings
    accepted_per_minute: float | None = None  # None: the collector did not answer
    oldest_unqueryable: datetime | None = None  # the oldest message not synced yet (None: none)
    unsynced_files: int = 0
    failures_in_a_row: int = 0  # the source's sync health file (eventlake.sync.maintenance.health)
    # its archive files quarantined as damaged (eventlake.sync.protocol.damaged)
    damaged: tuple[DamagedFile, ...] = ()

    def lag_seconds(self, now: datetime) -> float:
        """How long the oldest message not yet queryable has waited (0: everything is queryable)."""
        if self.oldest_unqueryable is None:
            return 0.0
        return max(0.0, (now - self.oldest_unqueryable).total_seconds())


class LakeWatch:
    """The console's view of the lake; thread-safe. See the module docstring."""

    def __init__(self, settings: Settings, collector_url: str | None) -> None:
        self.settings = settings
        self.storage = settings.lake.storage()
        self.collector_url = collector_url
        self.slugs = {s.id: s.slug for s in settings.sources}
        self._lock = threading.Lock()
        self._runs: dict[tuple[str, str], Run] = {}  # the recent days' runs, by source and run id
        self._read: dict[str, tuple[str, str]] = {}  # recent report files read: their day and source
        self._unreadable: set[str] = set()  # report files that did not parse (not read again)
        self._sorted: list[Run] = []  # the recent days' runs, newest first
        self._days: dict[tuple[str, str], DaySummary] = {}  # older days, by source and day
        self._old: OrderedDict[str, list[Run]] = OrderedDict()  # older days' runs pages asked for
        self._newest_day: str | None = None  # the newest day holding reports (where refreshes start)
        self._health = {s.id: SourceHealth(s) for s in settings.sources}
        self._pending: dict[str, PendingFiles] = {}  # each source's unsynced archive files, kept
        self._samples: deque[tuple[float, dict[str, float]]] = deque(maxlen=64)
        self.collector_error = ""
        self.refreshed: datetime | None = None
        self.generation = 0  # grows when new runs are read: what pages cache is stale
        self._totals: tuple[int, dict[str, SyncTotals]] | None = None  # (generation, totals)

    # -- reading the lake (the background thread) ----------------------------------------------

    def refresh(self) -> None:
        """Read what is new: report files, ledger files, the archive and spool, the collector."""
        self._read_reports()
        for source in self.settings.sources:
            self._read_source(source)
        self._sample_collector()
        self.refreshed = now_utc()

    def _read_reports(self) -> None:
        """The report files not read yet, the newest day first: the first read publishes the
        newest day's runs as soon as they are read (pages show them while older days are read);
        later reads list only the newest day seen and the days after it (a run's report lands in
        the day it started). A day older than :data:`RECENT_DAYS` becomes a summary."""
        recent = _recent_floor()
        self._age_out(recent)
        since = None
        if self._newest_day is not None:
            since = (date.fromisoformat(self._newest_day) - timedelta(days=1)).isoformat()
        published = len(self._runs)
        for day, paths in report_files_by_day(self.storage, self.settings.lake.root, since=since):
            if paths and (self._newest_day is None or day > self._newest_day):
                self._newest_day = day
            if day < recent:
                self._summarize_day(day, paths)
                continue
            fresh: dict[tuple[str, str], Run] = {}
            for path in paths:
                if str(path) in self._read or str(path) in self._unreadable:
                    continue
                runs = self._runs_of(path)
                if runs is None:
                    continue
                self._read[str(path)] = (day, self._source_of(path))
                fresh.update(((run.source_id, run.run_id), run) for run in runs)
            if fresh:
                with self._lock:
                    self._runs.update(fresh)
                if published == 0 or len(self._runs) >= 2 * published:  # (each run sorted twice at most)
                    self._publish()
                    published = len(self._runs)
        if len(self._runs) != published:
            self._publish()

    def _runs_of(self, path: Location) -> list[Run] | None:
        """A report file's runs; None when it does not parse (said by ``eventlake reports``)."""
        try:  # (a day merged since it was read: its runs come again, once each)
            read = report_runs(read_report_rows(self.storage, path))
            return [run for rows in read if (run := run_from_rows(rows, self.slugs)) is not None]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self._unreadable.add(str(path))
            return None

    def _source_of(self, path: Location) -> str:
        """The source id of a report file (its ``source=`` folder)."""
        return relative_to(path, layout.reports_root(self.settings.lake.root)).parts[1].split("=", 1)[1]

    def _summarize_day(self, day: str, paths: list[Location]) -> None:
        """Each source's summary of an older day: kept if its files are the same, else read from the
        state folder if made from the same files, else made from the files (and kept there)."""
        by_source: dict[str, list[Location]] = {}
        for path in paths:
            by_source.setdefault(self._source_of(path), []).append(path)
        for source_id, files in by_source.items():
            names = tuple(sorted(str(p) for p in files))
            known = self._days.get((source_id, day))
            if known is not None and known.files == names:
                continue
            state = state_layout.console_day_summary(self.settings.lake.state_dir, source_id, day)
            summary = _stored_summary(state, names)
            if summary is None:
                runs = [run for path in files for run in self._runs_of(path) or ()]
                summary = summarize(source_id, day, names, runs)
                _store_summary(state, summary)
            with self._lock:
                self._days[(source_id, day)] = summary
                self._totals = None
                self.generation += 1

    def _age_out(self, recent: str) -> None:
        """The held runs of days now older than ``recent`` become those days' summaries."""
        with self._lock:
            old = [run for run in self._runs.values() if run.day < recent]
            if not old:
                return
            files: dict[tuple[str, str], list[str]] = {}
            for path, (day, source_id) in list(self._read.items()):
                if day < recent:
                    files.setdefault((source_id, day), []).append(path)
                    del self._read[path]
            runs: dict[tuple[str, str], list[Run]] = {}
            for run in old:
                runs.setdefault((run.source_id, run.day), []).append(run)
                del self._runs[(run.source_id, run.run_id)]
            summaries = [
                summarize(source_id, day, files.get((source_id, day), ()), day_runs)
                for (source_id, day), day_runs in runs.items()
            ]
            self._days.update(((s.source_id, s.day), s) for s in summaries)
        for summary in summaries:
            state = state_layout.console_day_summary(
                self.settings.lake.state_dir, summary.source_id, summary.day
            )
            _store_summary(state, summary)
        self._publish()

    def _publish(self) -> None:
        with self._lock:
            self._sorted = sorted(self._runs.values(), key=lambda r: (r.start, r.run_id), reverse=True)
            self._totals = None
            self.generation += 1

    def _old_day_runs(self, day: str) -> list[Run]:
        """Every source's runs of an older day, newest first (read once, a few days kept)."""
        with self._lock:
            if day in self._old:
                self._old.move_to_end(day)
                return self._old[day]
        paths = report_day_files(self.storage, self.settings.lake.root, day)
        runs = {(r.source_id, r.run_id): r for path in paths for r in self._runs_of(path) or ()}
        ordered = sorted(runs.values(), key=lambda r: (r.start, r.run_id), reverse=True)
        with self._lock:
            self._old[day] = ordered
            while len(self._old) > OLD_DAYS_HELD:
                self._old.popitem(last=False)
        return ordered

    def _older_days(self) -> list[tuple[str, list[DaySummary]]]:
        """The older days' summaries by day, the newest day first."""
        with self._lock:
            summaries = list(self._days.values())
        days: dict[str, list[DaySummary]] = {}
        for summary in summaries:
            days.setdefault(summary.day, []).append(summary)
        return sorted(days.items(), reverse=True)

    def _read_source(self, source: SourceSettings) -> None:
        pending = self._pending.get(source.id)
        if pending is None:
            pending = PendingFiles(self.storage, self.settings.lake.root, source.id)
            self._pending[source.id] = pending
        unsynced = pending.refresh(int(time.time() * 1000))  # a few listings, at any age or gap
        opened = [_utc(state_layout.segment_opened_ms(name) or day) for day, name in unsynced]
        spool = state_layout.spool_source_dir(state_layout.spool_dir(self.settings.lake.state_dir), source.id)
        if spool.is_dir():
            for segment in spool.iterdir():
                day = state_layout.spool_segment_day_ms(segment.name)
                try:
                    if day is not None and segment.stat().st_size > 0:
                        opened.append(_utc(state_layout.segment_opened_ms(segment.name) or day))
                except FileNotFoundError:
                    continue  # sealed into the archive meanwhile
        try:
            failures = read_health(self.storage, self.settings.lake.root, source.id).failures_in_a_row
        except ValueError:  # damaged: the next sync result writes it anew
            failures = 0
        try:
            damaged = tuple(read_damaged(self.storage, self.settings.lake.root, source.id).values())
        except ValueError:  # of a newer format: said by the sync
            damaged = ()
        with self._lock:
            health = self._health[source.id]
            health.failures_in_a_row = failures
            health.damaged = damaged
            health.unsynced_files = len(unsynced)
            health.oldest_unqueryable = min(opened) if opened else None

    def _sample_collector(self) -> None:
        if self.collector_url is None:
            return
        try:
            with urllib.request.urlopen(self.collector_url + "/metrics", timeout=2) as response:
                text = response.read().decode()
        except OSError as exc:
            self.collector_error = f"the collector at {self.collector_url} does not answer ({exc})"
            with self._lock:
                for health in self._health.values():
                    health.accepted_per_minute = None
            return
        self.collector_error = ""
        counts: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            if family.name == ACCEPTED_METRIC:
                for sample in family.samples:
                    if sample.name.endswith("_total"):
                        counts[sample.labels.get("source", "")] = sample.value
        now = time.monotonic()
        with self._lock:
            self._samples.append((now, counts))
            then, before = next(
                ((t, c) for t, c in self._samples if now - t <= RATE_WINDOW_SECONDS + 1), (now, counts)
            )
            for health in self._health.values():
                slug = health.source.slug
                if now - then < 1:  # one sample so far: no rate yet
                    health.accepted_per_minute = None if slug not in counts else 0.0
                else:
                    delta = counts.get(slug, 0.0) - before.get(slug, 0.0)
                    health.accepted_per_minute = max(0.0, delta) * 60.0 / (now - then)

    # -- what the pages ask (never touches the lake) -------------------------------------------

    def runs(
        self, source: str = "", status: str = "", day: str = "", offset: int = 0, limit: int = 50
    ) -> tuple[list[Run], int]:
        """The runs matching the filters, newest first: one page of them and how many match (an
        older day's runs are read only when the page reaches them)."""

        def matches(r: Run) -> bool:
            return (not source or r.source == source) and (not status or r.status == status)

        with self._lock:
            runs = self._sorted
        matching = [r for r in runs if matches(r) and (not day or r.day == day)]
        page, total = matching[offset : offset + limit], len(matching)
        for older, summaries in self._older_days():
            if day and older != day:
                continue
            count = sum(
                s.matching(status) for s in summaries
                if not source or self.slugs.get(s.source_id, s.source_id) == source
            )  # fmt: skip
            if count and len(page) < limit and offset < total + count:
                held = [r for r in self._old_day_runs(older) if matches(r)]
                page += held[max(0, offset - total) : offset + limit - total]
            total += count
        return page[:limit], total

    def run(self, run_id: str) -> Run | None:
        with self._lock:
            found = next((r for r in self._sorted if r.run_id == run_id), None)
        if found is not None:
            return found
        started = run_started(run_id)
        days = [day for day, _ in self._older_days()]
        if started is not None:  # a run's report is in the day it started
            day = f"{started:%Y-%m-%d}"
            days = [day] if day in days else []
        return next((r for day in days for r in self._old_day_runs(day) if r.run_id == run_id), None)

    def last_run(self, source_id: str) -> Run | None:
        with self._lock:
            found = next((r for r in self._sorted if r.source_id == source_id), None)
        if found is not None:
            return found
        for day, summaries in self._older_days():
            if any(s.source_id == source_id and s.runs for s in summaries):
                return next((r for r in self._old_day_runs(day) if r.source_id == source_id), None)
        return None

    def follow(self, settings: Settings) -> None:
        """Take the sources of a reloaded ``eventlake.toml`` (``sources add/remove/disable/enable``
        while the console runs): a new source gets its figures from the next refresh, a removed one
        leaves the overview (its runs stay in the history)."""
        with self._lock:
            self.settings = settings
            self.slugs |= {s.id: s.slug for s in settings.sources}
            known = self._health
            self._health = {
                s.id: dataclasses.replace(known[s.id], source=s) if s.id in known else SourceHealth(s)
                for s in settings.sources
            }
            self._totals = None
            self.generation += 1

    def health(self) -> list[SourceHealth]:
        with self._lock:
            return [SourceHealth(**vars(h)) for h in self._health.values()]

    def totals(self) -> dict[str, SyncTotals]:
        """Each source's :class:`SyncTotals` by source id (configured sources always appear)."""
        with self._lock:
            runs, generation = self._sorted, self.generation
            if self._totals is not None and self._totals[0] == generation:
                return self._totals[1]
        totals = {s.id: SyncTotals() for s in self.settings.sources}
        for run in runs:  # newest first
            totals.setdefault(run.source_id, SyncTotals()).count(run)
        for _, summaries in self._older_days():
            for summary in summaries:
                totals.setdefault(summary.source_id, SyncTotals()).add(summary.totals)
        with self._lock:
            self._totals = (generation, totals)
        return totals

    def rows_per_day(self, days: int = 30) -> dict[str, list[tuple[str, int]]]:
        """Rows synced per day (by run start) for the last ``days`` days, per source slug."""
        today = now_utc().date()
        labels = [(today - timedelta(days=n)).isoformat() for n in range(days - 1, -1, -1)]
        with self._lock:
            runs = self._sorted
        totals: dict[str, dict[str, int]] = {s.slug: dict.fromkeys(labels, 0) for s in self.settings.sources}
        for run in runs:
            if run.day < labels[0]:
                break  # newest first
            totals.setdefault(run.source, dict.fromkeys(labels, 0))[run.day] += run.rows
        for day, summaries in self._older_days():
            if day < labels[0]:
                break
            for summary in summaries:
                slug = self.slugs.get(summary.source_id, summary.source_id)
                totals.setdefault(slug, dict.fromkeys(labels, 0))[day] += summary.rows
        return {slug: list(counts.items()) for slug, counts in totals.items()}

    def column_runs(self, database: str, table: str) -> dict[str, str]:
        """Each column of a table and the run that added it (its first run that names it)."""
        added: dict[str, str] = {}
        for _, summaries in reversed(self._older_days()):  # oldest first
            for summary in sorted(summaries, key=lambda s: s.source_id):
                for name, run_id in summary.columns.get(database, {}).get(table, {}).items():
                    added.setdefault(name, run_id)
        with self._lock:
            runs = self._sorted
        for run in reversed(runs):  # oldest first: the first run naming a column added it
            for t in run.tables:
                if t.database == database and t.table == table:
                    for name, _ in t.new_columns:
                        added.setdefault(name, run.run_id)
        return added

    def quarantined_recently(self, source_id: str, hours: float = 24) -> int:
        since = now_utc() - timedelta(hours=hours)
        with self._lock:
            runs = self._sorted
        total = 0
        for run in runs:
            if run.start < since:
                break
            if run.source_id == source_id:
                total += run.rejected
        return total


def _recent_floor() -> str:
    """The oldest day whose runs the console holds (:data:`RECENT_DAYS`)."""
    return (now_utc().date() - timedelta(days=RECENT_DAYS - 1)).isoformat()


def _stored_summary(path: Path, files: tuple[str, ...]) -> DaySummary | None:
    """The summary kept at ``path`` if it was made from ``files`` (None: none, another, damaged)."""
    try:
        summary = DaySummary.from_json(path.read_bytes())
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return summary if summary.files == files else None


def _store_summary(path: Path, summary: DaySummary) -> None:
    """Keep a summary for the next start (best effort: a console that cannot write reads again)."""
    try:
        write_atomic(path, summary.to_json())
    except OSError:
        pass


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
