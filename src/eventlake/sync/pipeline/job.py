"""One sync run of a source: pending archive files -> deduplicated, typed, partitioned Parquet.

The flow goes one way: complete interrupted commits -> list the archive files not in the ledger
-> stage (parse, validate, flatten -> dedupe -> plan -> write tables, dedupe index and quarantine
to the run's stage) -> write the commit manifest -> apply it. Each step is its own module:
:mod:`.transform`, :mod:`.dedupe`, :mod:`.plan`, :mod:`.write`, :mod:`.quarantine`, :mod:`.commit`.
What a run reads and how it commits is its selection (:mod:`.selection`): a sync's by default; a
replay (:mod:`.replay`) passes its own, and this module knows nothing of it. Who does the parse
and write passes is its :class:`Stager`: Spark (:class:`SparkStager`) unless one is passed in (the
model-based tests run the same worker functions in process, see ``tests/model``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eventlake import layout, partitions, state_layout
from eventlake.archive import ArchiveFile, SuppressionList
from eventlake.catalog import Catalog, TableSpec
from eventlake.config import Settings, SourceSettings
from eventlake.progress import Say, prefixed
from eventlake.storage import Location, Storage, to_location
from eventlake.storage.lease import LeaseLostError
from eventlake.sync.pipeline.dedupe import dedupe, dropped_rows
from eventlake.sync.pipeline.plan import Observed, Plan, TablePlan, count_parsed, observe, plan_tables
from eventlake.sync.pipeline.quarantine import QUARANTINE_TABLE, quarantine_table, stage_invalid_messages
from eventlake.sync.pipeline.read import files_frame
from eventlake.sync.pipeline.selection import NewFiles, Selection
from eventlake.sync.pipeline.transform import PARSED_SCHEMA, WRITTEN_SCHEMA, parse_files, parse_files_to
from eventlake.sync.pipeline.write import write_tables
from eventlake.sync.protocol.damaged import DamagedFile
from eventlake.sync.protocol.manifest import ADD_COLUMNS, CHECK, CREATE, NONE, Manifest, TableEntry
from eventlake.sync.protocol.report import (
    BlockedTable,
    SyncResult,
    TableResult,
    completed_result,
    note_report_day,
    report_partition,
    report_path,
    report_rows,
    reports_table,
    write_report_rows,
)
from eventlake.sync.protocol.report_days import checkpoint_reports
from eventlake.sync.protocol.runner import Hold, publish
from eventlake.sync.protocol.stage import MESSAGES, TABLE, VALUES, RunStage, StagedFile, new_run_id
from eventlake.sync.protocol.state import SyncState
from eventlake.sync.protocol.status import Status
from eventlake.timestamps import RunClock

# a run of at least this many messages returns its driver's heap before the write pass (a full
# collection: about 0.1 s; a micro-batch keeps its heap and its time)
RETURN_HEAP_MESSAGES = 100_000


@dataclass(frozen=True)
class ParsedRun:
    """What a run's parse pass found: its messages counted (``valid``, ``invalid``, those of
    suppressed users), the positions of the rows the dedupe drops, the deduplicated messages
    observed for the plan, and the stager's own handle on the parsed rows (for the quarantine)."""

    valid: int
    invalid: int
    suppressed: int
    first_received: datetime | None
    drop: pa.Array  # positions (see .pieces)
    observed: Observed
    rows: Any
    damaged: dict[str, str] = field(default_factory=dict)  # a damaged file's location -> its problem

    @property
    def messages(self) -> int:
        """Every message the run read (valid, invalid and of suppressed users)."""
        return self.valid + self.invalid + self.suppressed

    @property
    def duplicates(self) -> int:
        """The valid messages the dedupe dropped."""
        return self.valid - self.observed.messages


class Stager(Protocol):
    """Who runs a run's parse and write passes (the Spark job by default, :class:`SparkStager`).
    Everything it writes goes to the run's stage, through the worker functions of
    :mod:`.transform`, :mod:`.write` and :mod:`.quarantine`."""

    @property
    def application_id(self) -> str:
        """What the run's report names as the application that ran it."""
        ...

    def parse(
        self, run: SourceSync, files: Sequence[ArchiveFile], stage: RunStage, suppressed: frozenset[str]
    ) -> ParsedRun:
        """Parse ``files`` into the run's pieces, keep the selection's rows, count and dedupe them."""
        ...

    def write_tables(
        self, run: SourceSync, parsed: ParsedRun, plan: Plan, stage: RunStage
    ) -> list[StagedFile]:
        """Stage the planned tables' files (and the blocked types' messages, the dedupe index)."""
        ...

    def write_invalid(self, run: SourceSync, parsed: ParsedRun, stage: RunStage) -> list[StagedFile]:
        """Stage the invalid messages into the quarantine."""
        ...

    def release(self) -> None:
        """Drop what the run kept (called at its end, whatever happened)."""
        ...


class SourceSync:
    """Syncs one source; :meth:`run` returns the frozen :class:`SyncResult`."""

    def __init__(
        self, spark: SparkSession | None, catalog: Catalog, storage: Storage, settings: Settings,
        source: SourceSettings, say: Say, hold: Hold | None = None, selection: Selection | None = None,
        stager: Stager | None = None,
    ) -> None:  # fmt: skip
        self.catalog, self.storage, self.settings = catalog, storage, settings
        self.source = source
        self.say: Say = prefixed(say, source.slug)
        self.lake = settings.lake.root
        self.state = SyncState(storage, self.lake, source.id)
        self.database = settings.database_name(source)
        self.names = self.state.table_names(source.table_prefix)  # adopted SDL names, or eventlake's
        self.hold = hold or Hold()  # the source's lock: its lease checked before anything is published
        self.stager: Stager = stager or SparkStager(spark)  # who parses and writes
        self.selection: Selection = selection or NewFiles()  # what the run reads, how it commits
        self.failed: SyncResult | None = None  # the reported result of a run that raised

    def run(self) -> SyncResult:
        """The run, once :func:`~eventlake.sync.protocol.runner.run_source` holds the source and completed
        the interrupted runs (their reports say what a rerun published)."""
        completed = [manifest.report for manifest in self.hold.completed]
        self._checkpoint_reports()
        files = self.selection.files(self)
        clock = RunClock.start()  # the run's start and, on the monotonic clock, its duration
        run_id = new_run_id(clock.started_at)
        if not files:
            return completed_result(completed) or SyncResult(
                self.source.slug, self.source.id, run_id, Status.NOTHING, clock.started_at, clock.finish()
            )
        megabytes = sum(f.size for f in files) / 1e6
        self.say(f"{self.selection.doing()} {len(files)} archive files ({megabytes:.1f} MB), run {run_id}")
        stage = RunStage(
            self.lake, self.source.id, self.source.dir_name, run_id,
            layout.partition_columns(self.source.date_partition),
            self.names,
        )  # fmt: skip
        try:
            manifest, result = self._stage(files, stage, clock)
        except Exception as exc:  # nothing was published: report the failure and re-raise
            failed = SyncResult.failure(
                self.source.slug, self.source.id, exc, run_id=stage.run_id, clock=clock,
                input_files=len(files), bytes_in=sum(f.size for f in files),
            )  # fmt: skip
            report_failure(failed, stage, self.storage, self.lake, self.catalog, self.say)
            self.failed = failed
            raise
        finally:
            self.stager.release()
        stage.drop_scratch(self.storage)
        publish(manifest, self.hold, self.state, self.storage, self.lake, self.catalog)
        return result

    def _checkpoint_reports(self) -> None:
        """Merge the reports of ended days (:func:`.report_days.checkpoint_reports`). Like the
        ledger's checkpoint: the run goes on without it, and the next one tries again."""
        try:
            checkpoint_reports(
                self.storage, self.lake, self.catalog, self.state, self.source.id, self.say, self.hold
            )
        except LeaseLostError:
            raise
        except Exception as exc:  # a merge killed or failed at any step is finished by a later one
            self.say(f"reports checkpoint failed, retried next sync: {type(exc).__name__}: {exc}")

    # -- the parse and write passes (the stager's): everything goes to the run's stage --------

    def _stage(
        self, files: Sequence[ArchiveFile], stage: RunStage, clock: RunClock
    ) -> tuple[Manifest, SyncResult]:
        """Parse, plan and write to the run's stage: the run's manifest and result."""
        suppressed = SuppressionList(self.storage, self.lake, self.source.id).user_ids()
        parsed = self.stager.parse(self, files, stage, suppressed)
        damaged = self._damaged(files, parsed)
        self.say(
            f"{parsed.messages} messages, {parsed.duplicates} duplicates dropped, {parsed.invalid} invalid"
            + (f", {parsed.suppressed} of suppressed users dropped" if parsed.suppressed else "")
        )
        quarantine = self.source.table_prefix + QUARANTINE_TABLE
        plan = plan_tables(
            parsed.observed, self.catalog, self.database, self.names,
            self.settings.sync.max_tables_per_database, quarantine, self.say,
        )  # fmt: skip
        staged = self.stager.write_tables(self, parsed, plan, stage)
        _check_written(staged, parsed.observed.counts, [*plan.schemas, *plan.blocked])
        if parsed.invalid:
            staged += self.stager.write_invalid(self, parsed, stage)
        tables = [self._table(table, stage, staged) for table in plan.tables.values()]
        result = self._result(files, stage, clock, parsed, plan, staged, [t for t, _ in tables], damaged)
        return self._manifest(result, stage, files, staged, [entry for _, entry in tables]), result

    def _damaged(self, files: Sequence[ArchiveFile], parsed: ParsedRun) -> tuple[DamagedFile, ...]:
        """The run's archive files its workers found damaged, said (a replay refuses them)."""
        damaged = _damaged(files, parsed.damaged)
        if damaged:
            self.selection.on_damaged(self, damaged)
            for found in damaged:
                self.say(found.describe())
        return damaged

    def _table(
        self, table: TablePlan, stage: RunStage, staged: list[StagedFile]
    ) -> tuple[TableResult, TableEntry]:
        """A planned table's result and manifest entry, said."""
        location = layout.table_dir(self.lake, self.source.dir_name, self.names.folder(table.segment_type))
        spec = TableSpec(self.database, table.name, table.evolution.columns, stage.keys, str(location))
        result, entry = table_outcome(table, stage, staged, spec)
        new = result.new_columns
        self.say(
            f"{table.name}: {result.rows} rows"
            + (f", new columns {', '.join(c for c, _ in new)}" if new and not table.is_new else "")
        )
        return result, entry

    def _result(
        self, files: Sequence[ArchiveFile], stage: RunStage, clock: RunClock, parsed: ParsedRun, plan: Plan,
        staged: list[StagedFile], tables: list[TableResult], damaged: tuple[DamagedFile, ...],
    ) -> SyncResult:  # fmt: skip
        window = self.selection.window()
        blocked_messages = sum(parsed.observed.counts.get(segment_type, 0) for segment_type in plan.blocked)
        return SyncResult(
            self.source.slug, self.source.id, stage.run_id, Status.PARTIAL if damaged else Status.SUCCESS,
            clock.started_at, clock.finish(),
            tables=tuple(tables), input_files=len(files), bytes_in=sum(f.size for f in files),
            input_messages=parsed.messages, duplicates_dropped=parsed.duplicates,
            rejected_messages=parsed.invalid + blocked_messages, suppressed=parsed.suppressed,
            rejected_values=sum(f.rows for f in staged if f.kind == VALUES), notices=plan.notices,
            blocked=tuple(BlockedTable(self.database, t, plan.notices[0]) for t in plan.blocked.values()),
            replay_from=window and window[0], replay_to=window and window[1], damaged=damaged,
        )  # fmt: skip

    def _manifest(
        self, result: SyncResult, stage: RunStage, files: Sequence[ArchiveFile], staged: list[StagedFile],
        entries: list[TableEntry],
    ) -> Manifest:  # fmt: skip
        if result.rejected_messages or result.rejected_values:
            spec = quarantine_table(self.lake, self.database, self.source.id, self.source.table_prefix)
            entries.append(TableEntry(spec, ((stage.run_id,),), CHECK))
        entries.append(TableEntry(reports_table(self.lake), (report_partition(result),), CHECK))
        commit = self.selection.commit(self, stage, staged, files)
        return Manifest(
            run_id=stage.run_id,
            source_id=self.source.id,
            files=tuple(f.key for f in commit.files),
            moves=tuple(final_moves(self.storage, stage, list(commit.moves))),
            rewrites=commit.rewrites,
            tables=tuple(entries),
            report_path=str(report_path(result, self.lake)),
            report=tuple(report_rows(result, self.lake, self.stager.application_id)),
            stage=str(stage.root),
            damaged=tuple((d.key, d.problem) for d in result.damaged),
            cleared=commit.cleared,
        )


def report_failure(
    failed: SyncResult, stage: RunStage, storage: Storage, lake: Location, catalog: Catalog, say: Say
) -> None:
    """Report a failed run as far as the store and the catalog let it, and delete its stage:
    either may be what failed, and their error must not replace the run's (the caller re-raises
    that one)."""
    rows = report_rows(failed, lake)
    try:
        write_report_rows(storage, report_path(failed, lake), rows)
        note_report_day(storage, lake, rows[0]["day"])
    except Exception as lost:
        say(f"the failure could not be reported: {type(lost).__name__}: {lost}")
        return  # (the next run deletes the stage)
    with contextlib.suppress(Exception):  # the next run deletes it otherwise
        storage.delete_tree(stage.root)
    with contextlib.suppress(Exception):  # the catalog may be what failed
        catalog.ensure_table(reports_table(lake))
        catalog.add_partitions(reports_table(lake), [report_partition(failed)])


def final_moves(storage: Storage, stage: RunStage, staged: list[StagedFile]) -> list[tuple[str, str]]:
    """``(staged, final)`` pairs: on an object store a table file goes to its partition's
    current folder (a version folder once the partition was rewritten: see
    :mod:`eventlake.layout`), one listing per partition written, or per parent folder of the
    partitions written (a day's hours) when there are two partition keys or more."""
    pairs = stage.moves(staged)
    if storage.local_path(stage.lake) is not None:
        return pairs
    written = [
        to_location(final).parent
        for file, (_, final) in zip(staged, pairs, strict=True)
        if file.kind == TABLE
    ]
    current = partitions.current_folders(storage, written, by_parent=len(stage.keys) > 1)
    moves = []
    for file, (source, final) in zip(staged, pairs, strict=True):
        if file.kind == TABLE:
            path = to_location(final)
            final = str(current[path.parent] / path.name)
        moves.append((source, final))
    return moves


def table_outcome(
    table: TablePlan, stage: RunStage, staged: list[StagedFile], spec: TableSpec
) -> tuple[TableResult, TableEntry]:
    """A planned table's result and manifest entry (``spec``: the table as the catalog has it),
    from the files the workers staged for it."""
    counts: dict[tuple[str, ...], int] = {}
    for f in staged:
        if f.kind == TABLE and f.segment_type == table.segment_type:
            counts[f.partition] = counts.get(f.partition, 0) + f.rows
    parts = sorted(counts)
    new = table.evolution.new_columns
    result = TableResult(
        spec.database, table.name, sum(counts.values()), table.is_new, new,
        tuple(dict(zip(stage.keys, p, strict=True)) for p in parts), table.collisions,
    )  # fmt: skip
    change = CREATE if table.is_new else ADD_COLUMNS if new else NONE
    return result, TableEntry(spec, tuple(parts), change)


class SparkStager:
    """The parse and write passes as a Spark job (the default :class:`Stager`): the parse workers
    (:func:`.transform.parse_files`) in ``mapInArrow``, count and dedupe in Spark, the write
    workers (:func:`.write.write_segment_types`) in Spark tasks."""

    def __init__(self, spark: SparkSession | None) -> None:
        if spark is None:
            raise ValueError("a sync without a stager needs a SparkSession: pass spark=")
        self.spark = spark
        self.kept: list[DataFrame] = []  # frames persisted for the run, dropped at its end

    @property
    def application_id(self) -> str:
        return str(self.spark.sparkContext.applicationId)

    def parse(
        self, run: SourceSync, files: Sequence[ArchiveFile], stage: RunStage, suppressed: frozenset[str]
    ) -> ParsedRun:
        # the workers read the archive through storage: the lake's store needs no Hadoop connector
        pieces = stage.scratch("pieces")  # the valid messages' values, for the write pass
        options = dict(
            storage=run.storage, pieces=pieces, suppressed=suppressed,
            columnar=run.settings.sync.parser == "columnar",
        )  # fmt: skip
        lines = files_frame(self.spark, [f.path for f in files], sizes=[f.size for f in files])
        parsed = self._parsed(lines, options, stage.scratch("parsed"), run.storage)
        parsed = run.selection.rows(parsed)
        counted = count_parsed(parsed)
        totals, shapes = counted.totals, counted.shapes
        valid, first_received = totals.get((True, False), (0, None))
        invalid = totals.get((False, False), (0, None))[0]
        blocked_users = totals.get((False, True), (0, None))[0]
        valid_rows = parsed.filter(F.col("ok")).drop("ok", "reason", "raw", "types")
        positions, dropped = dropped_rows(
            dedupe(
                self.spark, valid_rows, first_received,
                state_layout.dedupe_index_dir(run.lake, run.source.id), run.source.dedupe_window_days,
                run.storage, until=run.selection.until(), messages=valid,
                filters=state_layout.dedupe_filter_dir(run.settings.lake.state_dir, run.source.id),
            ).toArrow()
        )  # fmt: skip
        observed = observe(counted.kinds, dropped, shapes)  # no pass over the messages again
        return ParsedRun(
            valid, invalid, blocked_users, first_received, positions, observed, parsed, counted.damaged
        )

    def write_tables(
        self, run: SourceSync, parsed: ParsedRun, plan: Plan, stage: RunStage
    ) -> list[StagedFile]:
        if parsed.valid >= RETURN_HEAP_MESSAGES:  # the driver idles through the write pass
            from eventlake.jvm.session import return_driver_heap

            return_driver_heap(self.spark)
        return write_tables(
            self.spark, stage.scratch("pieces"), plan.schemas, plan.blocked, parsed.drop,
            run.selection.window(), stage, run.source.date_partition, run.storage,
        )  # fmt: skip

    def write_invalid(self, run: SourceSync, parsed: ParsedRun, stage: RunStage) -> list[StagedFile]:
        return stage_invalid_messages(parsed.rows, stage, run.storage)

    def release(self) -> None:
        for frame in self.kept:
            frame.unpersist()
        self.kept = []

    def _parsed(
        self, lines: DataFrame, options: dict[str, Any], folder: Location, storage: Storage
    ) -> DataFrame:
        """The parse pass's rows (:func:`.transform.parse_files` over the archive files in
        ``lines``), computed once for the rest of the run, with flat memory: when the run's stage
        is on a disk Spark reads (a local lake), each task's worker writes its rows as Parquet
        there (:func:`.transform.parse_files_to`); else they are kept on the executors' own disks
        (a lake in a bucket: Spark has no connector to read there). Parquet is the cheaper copy:
        Spark's disk cache builds its blocks on the heap (a 1M message sync ran out of a 2g heap
        with it)."""
        if storage.local_path(folder) is not None:
            parse = functools.partial(parse_files_to, parsed=folder, **options)
            written = [row[0] for row in lines.mapInArrow(parse, WRITTEN_SCHEMA).collect()]
            paths = [str(storage.local_path(to_location(file))) for file in written]
            # the schema given: no footer read first
            return self.spark.read.schema(PARSED_SCHEMA).parquet(*paths)
        kept = lines.mapInArrow(functools.partial(parse_files, **options), PARSED_SCHEMA)
        kept = kept.persist(StorageLevel.DISK_ONLY)
        kept.count()
        self.kept.append(kept)
        return kept


def _damaged(files: Sequence[ArchiveFile], found: dict[str, str]) -> tuple[DamagedFile, ...]:
    """The run's archive files its workers found damaged (``found``: location -> problem)."""
    return tuple(DamagedFile(f.key, found[str(f.path)]) for f in files if str(f.path) in found)


def _check_written(
    staged: Sequence[StagedFile], counts: dict[str, int], segment_types: Sequence[str]
) -> None:
    """Fail the run (nothing is published) unless the write pass wrote each segment type's
    messages, as many as the plan counted: a lost piece must not pass for a synced file."""
    written: dict[str, int] = {}
    for f in staged:
        if f.kind == TABLE or f.kind == MESSAGES:
            written[f.segment_type] = written.get(f.segment_type, 0) + f.rows
    for segment_type in segment_types:
        if written.get(segment_type, 0) != counts.get(segment_type, 0):
            raise RuntimeError(
                f"the write pass staged {written.get(segment_type, 0)} messages of {segment_type!r}, "
                f"expected {counts.get(segment_type, 0)}: a piece of the run is missing "
                "(nothing was published)"
            )
