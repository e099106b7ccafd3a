"""Retention: delete archive files and table partitions older than ``[retention]`` allows.

- **Archive** (``retention.archive_days``): a file of ``segment-logs/<source-id>/<day-ms>/`` goes
  once its received day ended more than ``archive_days`` ago **and** the ledger says it is in the
  lake; an older file that is not synced yet stays (and is counted) until a sync has read it, and
  so does a file quarantined as damaged (:mod:`eventlake.sync.protocol.damaged`: none of its messages is in
  a table) until it is restored and read again.
  The newest day deleted is recorded first (:func:`eventlake.archive.days.expire_days_through`):
  ``eventlake import`` of the same archive again skips the days up to it.
- **Tables** (``retention.table_days``): a partition of a source's event tables goes once the hour
  (or day) it holds ended more than ``table_days`` ago, as a rewrite's old files go
  (:func:`eventlake.sync.protocol.rewrite.retire_partitions`): recorded as retired, then an empty
  version of it (eventlake's readers, DuckDB's included, see no data in it from here), then out of
  the catalog (a query through it that starts now does not see it); its files are deleted once
  ``sync.rewrite_grace_minutes`` passed (:func:`~eventlake.sync.protocol.rewrite.drop_retired`, at
  the start of the next sync, compaction or retention, or at the end of this run with no grace), so
  that a query planned before the drop finishes on them. Killed at any step, the record is there
  (files and catalog entry go after the grace) or nothing was changed (a rerun does it all); a
  partition the catalog still lists without a folder is dropped too. The quarantine and the sync
  reports are kept.
- **Dedupe index** (with ``retention.archive_days``): the ids of the runs that started more than
  ``dedupe_window_days`` (and a day's margin for clocks) before the archive's cutoff go: no sync of
  new messages and no replay of the archive kept can look them up.

Each source is handled under its sync lock, so a sync never writes into a partition being deleted
(on an object store the lock is a lease, checked before each deletion: a holder that lost it
deletes nothing more).
A dry run lists what would go and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from eventlake import layout, partitions, state_layout
from eventlake.archive import ArchiveFile, list_archive_files
from eventlake.archive.days import expire_days_through
from eventlake.catalog import Catalog, TableSpec
from eventlake.catalog.schema_file import source_tables
from eventlake.config import Settings, SourceSettings
from eventlake.errors import UsageError
from eventlake.progress import Say, prefixed, say
from eventlake.storage import Storage, to_location
from eventlake.sync.index.dedupe_index import index_days_before
from eventlake.sync.protocol.commit import CatalogOnce
from eventlake.sync.protocol.cutoffs import (
    archive_day_ended_before,
    ended_before,
    index_expired_before,
    retention_cutoff,
)
from eventlake.sync.protocol.damaged import read_damaged
from eventlake.sync.protocol.ledger import Ledger
from eventlake.sync.protocol.rewrite import (
    DroppedPartition,
    RewriteKind,
    RewriteRun,
    drop_retired,
    is_dropped,
    retire_partitions,
)
from eventlake.sync.protocol.runner import Hold, error_text, run_source
from eventlake.sync.protocol.status import Status
from eventlake.timestamps import now_utc


@dataclass(frozen=True)
class Expired:
    """One thing retention deletes: an archive day's files, a table partition or a day of the
    dedupe index."""

    source: str  # the source's slug
    kind: str  # "archive" | "table" | "dedupe"
    what: str  # "2026-10-01" (an archive day, a day of dedupe index) | "web.page day=2026-10-01/hr=07"
    files: int
    bytes: int


@dataclass
class RetentionResult:
    source: str
    status: str = Status.SUCCESS  # Success | Nothing to do | Skipped (a sync holds the source) | Failed
    expired: list[Expired] = field(default_factory=list)
    unsynced_files: int = 0  # old archive files kept because no sync has read them yet
    damaged_files: int = 0  # old archive files kept because they are quarantined as damaged
    error: str = ""


def apply_retention(
    settings: Settings, slugs: Sequence[str] = (), *, dry_run: bool = False,
    catalog: Catalog | None = None, spark: Any = None, wait: bool = True, say: Say = say,
    now: datetime | None = None,
) -> list[RetentionResult]:  # fmt: skip
    """Apply ``[retention]`` to the given sources (default: all); a failed source does not stop
    the others. ``catalog`` (or one loaded from ``spark`` and the settings, only when a partition
    is to be dropped) unregisters table partitions."""
    retention = settings.retention
    if not retention.archive_days and not retention.table_days:
        raise UsageError("retention is off: set [retention] archive_days and/or table_days (days to keep)")
    sources = [settings.source(slug) for slug in slugs] if slugs else list(settings.sources)
    if not sources:
        raise UsageError("no sources configured: add one with `eventlake sources add SLUG`")
    now = now or now_utc()
    storage = settings.lake.storage()
    catalog_once = CatalogOnce(settings, spark, catalog)

    results = []
    for source in sources:
        tell = prefixed(say, source.slug)
        job = SourceRetention(settings, source, storage, catalog_once, dry_run, tell, now)
        # interrupted runs are completed first (a pending move into an expired partition must not
        # bring it back after the folder went); a dry run changes nothing, so it completes none
        result = run_source(
            settings, storage, source, job.run, failed=job.failed, what="retention",
            catalog=None if dry_run else catalog_once, wait=wait, say=say,
        )  # fmt: skip
        results.append(result)
    return results


class SourceRetention:
    """Applies ``[retention]`` to one source; :meth:`run` holds it (see :func:`run_source`)."""

    def __init__(
        self, settings: Settings, source: SourceSettings, storage: Storage,
        catalog: Callable[[], Catalog], dry_run: bool, say: Say, now: datetime,
    ) -> None:  # fmt: skip
        self.settings, self.source, self.storage = settings, source, storage
        self.catalog, self.dry_run, self.say = catalog, dry_run, say
        self.lake, self.now = settings.lake.root, now
        self.result = RetentionResult(source.slug)
        # on an object store: before each deletion, a holder that lost the source's lease stops
        self.check: Callable[[], None] = Hold().check

    def run(self, hold: Hold) -> RetentionResult:
        self.check = hold.check
        retention, result, now = self.settings.retention, self.result, self.now
        if retention.archive_days:
            self.archive(retention_cutoff(now, retention.archive_days), result)
            self.dedupe_index(retention_cutoff(now, retention.archive_days), result)
        if retention.table_days:
            self.tables(retention_cutoff(now, retention.table_days), result)
            if not self.dry_run:  # with no grace period, the partitions' files go now
                grace = timedelta(minutes=self.settings.sync.rewrite_grace_minutes)
                drop_retired(self.storage, self.lake, self.source.id, grace, catalog=self.catalog)
        if not result.expired:
            result.status = Status.NOTHING
        return result

    def failed(self, status: Status, exc: BaseException) -> RetentionResult:
        """The result of a busy or failed source: what was deleted before the failure stays listed."""
        self.result.status, self.result.error = status, error_text(status, exc)
        return self.result

    def archive(self, cutoff: datetime, result: RetentionResult) -> None:
        """Delete the synced archive files of the received days that ended before ``cutoff``."""
        old = [
            f
            for f in list_archive_files(self.storage, self.lake, self.source.id)
            if archive_day_ended_before(f.day_ms, cutoff)
        ]
        if not old:
            return
        synced = Ledger(self.storage, self.lake, self.source.id).synced_keys({f.day_ms for f in old})
        # a damaged file is "handled" for the ledger (its day closes) but its messages are in no
        # table: it is kept until it is restored and read (sync --rescan), never expired unread
        damaged = read_damaged(self.storage, self.lake, self.source.id)
        days: dict[int, list[ArchiveFile]] = {}
        for f in old:
            if f.key in damaged:
                result.damaged_files += 1
            elif f.key in synced:
                days.setdefault(f.day_ms, []).append(f)
            else:
                result.unsynced_files += 1
        if result.unsynced_files:
            self.say(
                f"{result.unsynced_files} archive files past retention are kept: no sync has read them yet"
            )
        if result.damaged_files:
            self.say(
                f"{result.damaged_files} damaged archive files past retention are kept: their messages are "
                "in no table; restore them and run `eventlake sync --rescan`, or delete them by hand"
            )
        for day_ms, files in sorted(days.items()):
            day = datetime.fromtimestamp(day_ms / 1000, timezone.utc).date().isoformat()
            result.expired.append(
                Expired(self.source.slug, "archive", day, len(files), sum(f.size for f in files))
            )
            if self.dry_run:
                continue
            self.check()
            # recorded first: an import of the day again skips it (its messages are not brought back)
            expire_days_through(self.storage, self.lake, self.source.id, day_ms)
            for f in files:
                self.storage.delete(f.path)
            if len(files) == sum(1 for f in old if f.day_ms == day_ms):  # the whole day went
                self.storage.delete(state_layout.closed_day_file(self.lake, self.source.id, day_ms))
            self.say(f"archive {day}: {len(files)} files deleted")

    def dedupe_index(self, cutoff: datetime, result: RetentionResult) -> None:
        """Delete the dedupe index's files that no sync or replay of the archive kept after
        ``cutoff`` can need (see the module's docstring), a UTC day of runs at a time."""
        before = index_expired_before(cutoff, self.source.dedupe_window_days)
        index = state_layout.dedupe_index_dir(self.lake, self.source.id)
        for day, infos in sorted(index_days_before(self.storage, index, before).items()):
            result.expired.append(
                Expired(self.source.slug, "dedupe", day, len(infos), sum(i.size for i in infos))
            )
            if self.dry_run:
                continue
            self.check()
            for folder in sorted({info.path.parent for info in infos}, key=str):
                self.storage.delete_tree(folder)  # a run's folder: its files are all of that day
            self.say(f"dedupe index {day}: {len(infos)} files deleted")

    def tables(self, cutoff: datetime, result: RetentionResult) -> None:
        """Drop the partitions of the source's event tables that ended before ``cutoff``."""
        for spec in self._event_tables():
            self._table(spec, cutoff, result)

    def _event_tables(self) -> list[TableSpec]:
        database = self.settings.database_name(self.source)
        tables = source_tables(self.storage, self.lake, database, self.source.id, self.source.dir_name)
        return [spec for spec in tables if spec.partition_keys]

    def _table(self, spec: TableSpec, cutoff: datetime, result: RetentionResult) -> None:
        location = to_location(spec.location)
        keys = spec.partition_keys
        folders: dict[tuple[str, ...], DroppedPartition] = {}
        sizes: dict[tuple[str, ...], list[int]] = {}
        for folder, infos in partitions.partition_listing(self.storage, location, len(keys)).items():
            values = layout.partition_values(location, folder, keys)
            if values is None or not _ended_before(keys, values, cutoff):
                continue
            if is_dropped(self.storage, folder, infos):  # dropped before: its files wait for the grace
                continue
            folders[values] = DroppedPartition(values, folder, tuple(sorted(infos)))
            sizes[values] = [info.size for info in infos.values()]
        registered = [
            v for v in self.catalog().partitions(spec.database, spec.name) if _ended_before(keys, v, cutoff)
        ]
        expired = sorted(set(folders) | set(registered))
        if not expired:
            return
        for values in expired:
            what = f"{spec.qualified} {layout.partition_subdir(keys, values)}"
            found = sizes.get(values, [])
            result.expired.append(Expired(self.source.slug, "table", what, len(found), sum(found)))
        if self.dry_run:
            return
        run = RewriteRun.new(RewriteKind.RETENTION)
        retire_partitions(
            self.storage, self.lake, self.source.id, run, spec, [folders[v] for v in sorted(folders)],
            registered, self.catalog, self.check,
        )  # fmt: skip
        self.say(
            f"{spec.qualified}: {len(expired)} partitions dropped (their files go after the grace period)"
        )


def _ended_before(keys: tuple[str, ...], values: tuple[str, ...], cutoff: datetime) -> bool:
    period = layout.partition_period(keys, values)
    return period is not None and ended_before(period[1], cutoff)
