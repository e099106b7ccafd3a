"""Compaction: a partition's small files rewritten into files of about ``compact.target_file_mb``.

Micro-batch syncs leave a file per run in every partition they touch. Compaction packs a closed
partition's files smaller than the target into as few files of about the target size as it can
(files already at or above it stay; a partition with fewer than two small files is left alone),
with pyarrow through :mod:`eventlake.storage`: no Spark. The rows and their values stay exactly as
they were; each new file has the table's current columns (a column an older file lacks is null,
as readers already show it).

Each source's dedupe index is merged too, a day of runs per file
(:func:`eventlake.sync.index.index_merge.merge_index`): every sync reads it.

It is committed like a sync run, under the same source lock (never beside a sync of the source):
each batch of partitions is staged (per partition, a folder with its new files and a commit
marker), a :class:`~eventlake.sync.protocol.manifest.Manifest` listing them as
:class:`~eventlake.sync.protocol.manifest.PartitionRewrite` s is written, and
:func:`eventlake.sync.protocol.commit.apply` switches each partition to its new files (see
:mod:`eventlake.sync.protocol.rewrite` for what readers see). Killed before the manifest, the next run of
``compact``, ``sync`` or ``schema set-type`` drops the staging (rolled back); after, it completes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from eventlake import layout, partitions, state_layout
from eventlake.catalog import Catalog, TableSpec
from eventlake.catalog.schema_file import source_tables
from eventlake.config import Settings, SourceSettings
from eventlake.errors import EventLakeError, UsageError
from eventlake.progress import Say, prefixed, say
from eventlake.schema.arrow import arrow_schema
from eventlake.storage import FileInfo, Location, Storage, relative_to, to_location
from eventlake.sync.index.index_merge import merge_index
from eventlake.sync.protocol.commit import CatalogOnce
from eventlake.sync.protocol.manifest import Manifest, PartitionRewrite
from eventlake.sync.protocol.rewrite import RewriteKind, RewriteRun, finish_rewrite
from eventlake.sync.protocol.runner import Hold, error_text, publish, run_source
from eventlake.sync.protocol.stage import RunStage
from eventlake.sync.protocol.state import SyncState
from eventlake.sync.protocol.status import Status
from eventlake.timestamps import now_utc

MB = 1024 * 1024
BATCH_BYTES = 1024 * MB  # input bytes staged per manifest (a batch of partitions committed together)
BATCH_PARTITIONS = 500  # partitions per manifest
ROW_GROUP_BYTES = 64 * MB  # rows (in memory) written to a new file per row group


class CompactionSkipError(EventLakeError):
    """A partition compaction leaves as it is (a file with a column the table does not have, a value
    that does not fit the table's type): said in the result, nothing changed."""


@dataclass(frozen=True)
class CompactedTable:
    database: str
    table: str
    partitions: int  # partitions rewritten
    files_in: int
    files_out: int
    bytes_in: int
    bytes_out: int
    notices: tuple[str, ...] = ()  # partitions left alone, and why


@dataclass(frozen=True)
class CompactResult:
    source: str
    source_id: str
    status: str  # a Status: Success | Nothing to do | Failed | Skipped: already running
    tables: tuple[CompactedTable, ...] = ()
    error: str = ""
    index_files: tuple[int, int] = (0, 0)  # the dedupe index's files before and after its merge

    @property
    def partitions(self) -> int:
        return sum(t.partitions for t in self.tables)

    @property
    def index_merged(self) -> bool:
        return self.index_files[0] != self.index_files[1]

    @property
    def files_in(self) -> int:
        return sum(t.files_in for t in self.tables)

    @property
    def files_out(self) -> int:
        return sum(t.files_out for t in self.tables)

    @property
    def compacted_tables(self) -> list[str]:
        """``database.table`` of every table with a rewritten partition (a warm Spark session
        refreshes them: its cached file listings name files that are gone)."""
        return [f"{t.database}.{t.table}" for t in self.tables if t.partitions]


def compact_sources(
    settings: Settings, slugs: Sequence[str] = (), *, older_than_hours: float | None = None,
    catalog: Catalog | None = None, spark: Any = None, wait: bool = True, say: Say = say,
    now: datetime | None = None,
) -> list[CompactResult]:  # fmt: skip
    """Compact the closed partitions of the given sources (default: all) whose hour (or day) ended at
    least ``older_than_hours`` ago (default ``compact.older_than_hours``); a failed source does
    not stop the others.

    Needs no Spark. ``catalog`` (or one loaded from ``spark`` and the settings, only if needed) is
    used to complete an interrupted sync found pending. ``wait``: wait for a running sync of a
    source (else skip it).
    """
    sources = [settings.source(slug) for slug in slugs] if slugs else list(settings.sources)
    if not sources:
        raise UsageError("no sources configured: add one with `eventlake sources add SLUG`")
    hours = settings.compact.older_than_hours if older_than_hours is None else older_than_hours
    if hours < 0:
        raise UsageError(f"--older-than must not be negative, not {hours} hours")
    cutoff = (now or now_utc()) - timedelta(hours=hours)
    storage = settings.lake.storage()
    catalog_once = CatalogOnce(settings, spark, catalog)

    return [_compact_source(settings, storage, source, catalog_once, cutoff, wait, say) for source in sources]


def _compact_source(
    settings: Settings, storage: Storage, source: SourceSettings, catalog: CatalogOnce, cutoff: datetime,
    wait: bool, say: Say,
) -> CompactResult:  # fmt: skip
    """Compact one source under its lock; a busy or failed source is a result, not an error."""
    tell = prefixed(say, source.slug)

    def work(hold: Hold) -> CompactResult:
        return SourceCompaction(settings, source, storage, hold, catalog, tell).run(cutoff)

    def failed(status: Status, exc: BaseException) -> CompactResult:
        return CompactResult(source.slug, source.id, status, error=error_text(status, exc))

    return run_source(
        settings, storage, source, work, failed=failed, what="compaction", catalog=catalog, wait=wait,
        say=say,
    )  # fmt: skip


class SourceCompaction:
    """Compacts one source, holding its lock; :meth:`run` returns the :class:`CompactResult`."""

    def __init__(
        self, settings: Settings, source: SourceSettings, storage: Storage, hold: Hold,
        catalog: CatalogOnce, say: Say,
    ) -> None:  # fmt: skip
        self.settings, self.source, self.storage, self.hold = settings, source, storage, hold
        self.catalog, self.say = catalog, say
        self.lake = settings.lake.root
        self.target = settings.compact.target_file_mb * MB
        self.state = SyncState(storage, self.lake, source.id)

    def run(self, cutoff: datetime) -> CompactResult:
        """The compaction, once the source is held and its interrupted runs completed."""
        tables = tuple(self.table(spec, cutoff) for spec in self.tables())
        index = merge_index(
            self.storage, state_layout.dedupe_index_dir(self.lake, self.source.id), self.hold.check
        )
        merged = index[0] != index[1]
        if merged:
            self.say(f"dedupe index: {index[0]} files -> {index[1]}")
        done = merged or any(t.partitions for t in tables)
        return CompactResult(
            self.source.slug, self.source.id, Status.SUCCESS if done else Status.NOTHING,
            tuple(t for t in tables if t.partitions or t.notices), index_files=index,
        )  # fmt: skip

    def tables(self) -> list[TableSpec]:
        """The source's event tables (from their schema files)."""
        database = self.settings.database_name(self.source)
        return source_tables(self.storage, self.lake, database, self.source.id, self.source.dir_name)

    def table(self, spec: TableSpec, cutoff: datetime) -> CompactedTable:
        """Compact the table's partitions that ended before ``cutoff``, a batch per manifest."""
        location = to_location(spec.location)
        candidates = []
        listing = partitions.partition_listing(self.storage, location, len(spec.partition_keys))
        for folder, infos in sorted(listing.items(), key=lambda item: str(item[0])):
            values = layout.partition_values(location, folder, spec.partition_keys)
            period = layout.partition_period(spec.partition_keys, values) if values is not None else None
            if period is None or period[1] > cutoff:
                continue
            data = partitions.partition_files(self.storage, folder, infos)
            bins = plan_bins([infos[n] for n in data], self.target)
            # data outside its current version (another writer's, later): taken into a new one, so
            # that readers through the catalog see it too; so is a version inside the partition
            # folder (a lake's before the versions tree, on an object store): no location keeps a "_"
            moved_out = layout.version_inside_partition(infos) and self.storage.local_path(folder) is None
            if bins or layout.outside_current_version(infos, data) or moved_out:
                candidates.append((folder, infos, bins))
        counts = dict(partitions=0, files_in=0, files_out=0, bytes_in=0, bytes_out=0)
        notices: list[str] = []
        if candidates:
            self.say(f"{spec.qualified}: {len(candidates)} partitions to compact")
        for batch in _batches(candidates):
            if self._commit_batch(spec, batch, counts, notices):
                self.say(
                    f"{spec.qualified}: {counts['partitions']} partitions compacted, "
                    f"{counts['files_in']} files -> {counts['files_out']}"
                )
        return CompactedTable(spec.database, spec.name, notices=tuple(notices), **counts)

    def _commit_batch(
        self, spec: TableSpec, batch: list[tuple[Location, dict[str, FileInfo], list[list[FileInfo]]]],
        counts: dict[str, int], notices: list[str],
    ) -> int:  # fmt: skip
        run = RewriteRun.new(RewriteKind.COMPACTION)
        stage = RunStage(self.lake, self.source.id, self.source.dir_name, run.id, spec.partition_keys)
        rewrites = []
        for folder, infos, bins in batch:
            try:
                rewrite = stage_rewrite(self.storage, stage, run, spec, folder, infos, bins)
            except CompactionSkipError as skip:
                notices.append(f"{relative_to(folder, to_location(spec.location))}: {skip}")
                self.say(f"{spec.qualified}: left {notices[-1]}")
                continue
            rewrites.append(rewrite)
            counts["partitions"] += 1
            counts["files_in"] += sum(len(b) for b in bins)
            counts["bytes_in"] += sum(f.size for b in bins for f in b)
            counts["files_out"] += len(rewrite.files)
            staged = to_location(rewrite.staged)
            counts["bytes_out"] += sum(
                f.size for f in self.storage.list(staged) if f.path.name in rewrite.files
            )
        if not rewrites:
            self.storage.delete_tree(stage.root)
            return 0
        manifest = Manifest(
            run_id=stage.run_id, source_id=self.source.id, files=(), moves=(), tables=(), report_path="",
            report=(), stage=str(stage.root), rewrites=tuple(rewrites),
        )  # fmt: skip
        publish(manifest, self.hold, self.state, self.storage, self.lake, load_catalog=self.catalog)
        return len(rewrites)


def plan_bins(files: Sequence[FileInfo], target: int) -> list[list[FileInfo]]:
    """The groups of files to rewrite, one new file each: the files smaller than ``target``, in
    order, packed into groups of at most ``target`` bytes; groups of one file are left alone.

    >>> from pathlib import Path
    >>> sizes = [60, 200, 60, 60, 10]
    >>> files = [FileInfo(Path(f"f{i}"), size) for i, size in enumerate(sizes)]
    >>> [[f.path.name for f in group] for group in plan_bins(files, 128)]
    [['f0', 'f2'], ['f3', 'f4']]
    """
    groups: list[list[FileInfo]] = []
    size = 0
    for info in files:
        if info.size >= target:
            continue
        if not groups or size + info.size > target:
            groups.append([])
            size = 0
        groups[-1].append(info)
        size += info.size
    return [group for group in groups if len(group) > 1]


def stage_rewrite(
    storage: Storage, stage: RunStage, run: RewriteRun, spec: TableSpec, folder: Location,
    names: dict[str, FileInfo], bins: list[list[FileInfo]],
) -> PartitionRewrite:  # fmt: skip
    """Stage the new content of one partition folder: a file per group of ``bins`` (none: the
    partition's data is only taken into a new version), then the commit marker. ``names``: every
    file in the folder now. Raises :class:`CompactionSkipError` (and stages
    nothing) when a file does not fit the table's columns."""
    staged = stage.rewrite_folder(folder)
    schema = arrow_schema(spec.columns)
    outputs = []
    try:
        for index, group in enumerate(bins):
            name = layout.part_file_name(run.id, index)
            write_compacted(storage, staged / name, [f.path for f in group], schema)
            outputs.append(name)
    except CompactionSkipError:
        storage.delete_tree(staged)
        raise
    relative = {info.path: name for name, info in names.items()}
    return finish_rewrite(
        storage, stage, folder, names, outputs, [relative[f.path] for g in bins for f in g], run, spec
    )


def write_compacted(storage: Storage, path: Location, inputs: Sequence[Location], schema: pa.Schema) -> int:
    """Write the rows of ``inputs``, in order, as one Parquet file of ``schema`` (as the sync writes
    them: snappy); one input in memory at a time. Returns the rows written."""
    rows = 0
    with storage.open_write(path) as handle, pq.ParquetWriter(handle, schema, compression="snappy") as writer:
        buffered: list[pa.Table] = []
        size = 0
        for location in inputs:
            table = conform(pq.read_table(pa.BufferReader(storage.read(location))), schema, location)
            buffered.append(table)
            size += table.nbytes
            rows += table.num_rows
            if size >= ROW_GROUP_BYTES:
                writer.write_table(pa.concat_tables(buffered))
                buffered, size = [], 0
        if buffered:
            writer.write_table(pa.concat_tables(buffered))
    return rows


def conform(table: pa.Table, schema: pa.Schema, location: Location) -> pa.Table:
    """``table`` with exactly ``schema``'s columns: each cast to its type (values unchanged), a
    column the file lacks as nulls."""
    extra = [name for name in table.column_names if name not in schema.names]
    if extra:
        raise CompactionSkipError(f"{location.name} has columns the table does not: {', '.join(extra)}")
    columns = []
    for field in schema:
        if field.name not in table.column_names:
            columns.append(pa.chunked_array([pa.nulls(table.num_rows, field.type)], field.type))
            continue
        try:
            columns.append(table[field.name].cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise CompactionSkipError(
                f"{location.name}: {field.name} does not fit {field.type}: {exc}"
            ) from None
    return pa.Table.from_arrays(columns, schema=schema)


def _batches(candidates: list[Any]) -> list[list[Any]]:
    """Partitions grouped into manifests of at most :data:`BATCH_PARTITIONS` partitions and about
    :data:`BATCH_BYTES` input bytes."""
    batches: list[list[Any]] = []
    size = 0
    for candidate in candidates:
        incoming = sum(f.size for group in candidate[2] for f in group)
        if not batches or len(batches[-1]) >= BATCH_PARTITIONS or size + incoming > BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(candidate)
        size += incoming
    return batches
