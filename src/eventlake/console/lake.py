"""What the console shows, read from the lake once and kept up to date by small increments.

A page view never scans the lake: :class:`LakeWatch` holds the sync runs (one summary per report
file, read once, the newest day first: report files never change), the columns' first runs, and
per source the oldest message not yet queryable; :meth:`LakeWatch.refresh` reads what is new (new
report files of the newest days, the ledger's checkpoint and newest entries, the open days of the
archive, the spool) and is called by the console's background thread every few seconds. Messages
accepted per minute come from the collector's ``/metrics``.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import urllib.request
from collections import deque
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from eventlake import layout
from eventlake.config import Settings, SourceSettings
from eventlake.sync.health import read_health
from eventlake.sync.ledger import Ledger
from eventlake.sync.report import read_report_rows, report_files_by_day, report_runs, run_status
from eventlake.sync.status import Status
from eventlake.timestamps import now_utc, parse_timestamp

ACCEPTED_METRIC = "eventlake_messages_accepted"  # the collector's counter, by source (without _total)
RATE_WINDOW_SECONDS = 60.0


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


@dataclass
class SourceHealth:
    """A source's figures for the overview."""

    source: SourceSettings
    accepted_per_minute: float | None = None  # None: the collector did not answer
    oldest_unqueryable: datetime | None = None  # the oldest message not synced yet (None: none)
    unsynced_files: int = 0
    failures_in_a_row: int = 0  # the source's sync health file (eventlake.sync.health)

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
        self._runs: dict[tuple[str, str], Run] = {}  # by source and run id
        self._read: set[str] = set()  # report files read (a run's, or a merged day's: not again)
        self._unreadable: set[str] = set()  # report files that did not parse (not read again)
        self._sorted: list[Run] = []  # newest first
        self._newest_day: str | None = None  # the newest day holding reports (where refreshes start)
        self._health = {s.id: SourceHealth(s) for s in settings.sources}
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
        the day it started)."""
        since = None
        if self._newest_day is not None:
            since = (date.fromisoformat(self._newest_day) - timedelta(days=1)).isoformat()
        published = len(self._runs)
        for day, paths in report_files_by_day(self.storage, self.settings.lake.root, since=since):
            if paths and (self._newest_day is None or day > self._newest_day):
                self._newest_day = day
            fresh: dict[tuple[str, str], Run] = {}
            for path in paths:
                if str(path) in self._read or str(path) in self._unreadable:
                    continue
                try:  # (a day merged since it was read: its runs come again, once each)
                    read = report_runs(read_report_rows(self.storage, path))
                    runs = [run_from_rows(rows, self.slugs) for rows in read]
                except (OSError, ValueError, KeyError, TypeError, AttributeError):
                    self._unreadable.add(str(path))  # damaged: `eventlake reports` names it
                    continue
                self._read.add(str(path))
                fresh.update(((run.source_id, run.run_id), run) for run in runs if run is not None)
            if fresh:
                with self._lock:
                    self._runs.update(fresh)
                if published == 0 or len(self._runs) >= 2 * published:  # (each run sorted twice at most)
                    self._publish()
                    published = len(self._runs)
        if len(self._runs) != published:
            self._publish()

    def _publish(self) -> None:
        with self._lock:
            self._sorted = sorted(self._runs.values(), key=lambda r: (r.start, r.run_id), reverse=True)
            self.generation += 1

    def _read_source(self, source: SourceSettings) -> None:
        ledger = Ledger(self.storage, self.settings.lake.root, source.id)
        unsynced = ledger.pending(int(time.time() * 1000))  # the open days only: cheap at any age
        opened = [_utc(layout.segment_opened_ms(f.path.name) or f.day_ms) for f in unsynced]
        spool = layout.spool_source_dir(layout.spool_dir(self.settings.lake.state_dir), source.id)
        if spool.is_dir():
            for segment in spool.iterdir():
                day = layout.spool_segment_day_ms(segment.name)
                try:
                    if day is not None and segment.stat().st_size > 0:
                        opened.append(_utc(layout.segment_opened_ms(segment.name) or day))
                except FileNotFoundError:
                    continue  # sealed into the archive meanwhile
        try:
            failures = read_health(self.storage, self.settings.lake.root, source.id).failures_in_a_row
        except ValueError:  # damaged: the next sync result writes it anew
            failures = 0
        with self._lock:
            health = self._health[source.id]
            health.failures_in_a_row = failures
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
        """The runs matching the filters, newest first: one page of them and how many match."""
        with self._lock:
            runs = self._sorted
        matching = [
            r for r in runs
            if (not source or r.source == source) and (not status or r.status == status)
            and (not day or r.day == day)
        ]  # fmt: skip
        return matching[offset : offset + limit], len(matching)

    def run(self, run_id: str) -> Run | None:
        with self._lock:
            return next((r for r in self._sorted if r.run_id == run_id), None)

    def last_run(self, source_id: str) -> Run | None:
        with self._lock:
            return next((r for r in self._sorted if r.source_id == source_id), None)

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
        for run in runs:
            if run.replay:
                continue
            total = totals.setdefault(run.source_id, SyncTotals())
            total.runs[run.status] = total.runs.get(run.status, 0) + 1
            total.rows += run.rows
            total.duplicates_dropped += run.duplicates_dropped
            total.rejected_messages += run.rejected_messages
            total.rejected_values += run.rejected_values
            if run.status != Status.FAILED and total.last_success is None:  # newest first
                total.last_success = run.finish
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
            if run.source not in totals:
                totals[run.source] = dict.fromkeys(labels, 0)
            totals[run.source][run.day] += run.rows
        return {slug: list(counts.items()) for slug, counts in totals.items()}

    def column_runs(self, database: str, table: str) -> dict[str, str]:
        """Each column of a table and the run that added it (its first run that names it)."""
        with self._lock:
            runs = self._sorted
        added: dict[str, str] = {}
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


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
