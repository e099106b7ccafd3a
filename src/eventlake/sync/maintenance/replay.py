"""Replay: rebuild a source's tables for a received-time range from its raw archive.

A replay is a sync run (:class:`~eventlake.sync.pipeline.job.SourceSync`) with its own selection
(:class:`Replay`, see :mod:`.selection`): the archive files the ledger says are in the lake, whose
day folders touch the range (a day either side, for messages sealed across midnight), keeping the
messages received in ``[start, end)``, with three differences:

- **dedupe** within the run and against the dedupe index's ids received before the range (the
  range's own ids are in the index from the syncs that first brought them; the replay adds its
  own folder of the range's ids, as a sync does);
- **commit**: every table partition of the range is *replaced*, not appended to: its new files
  (perhaps none) are staged with a commit marker naming every data file the folder holds now, and
  switched like a compaction (:func:`eventlake.sync.protocol.rewrite.apply_rewrite`: one swap on a local
  disk; on an object store a new version folder, then the catalog's partition location moved to
  it), so a reader sees the partition's old content or its new one, never both and never nothing
  in between; the quarantine's rows received in the
  range are replaced the same way by the replay's own (a replay of some tables: only those
  tables' rows; the other tables' and the invalid messages stay, and it stages none of them);
- **ledger**: nothing is recorded (the files are in it already); archive files in the range not
  synced yet are left for the next sync.

The same archive and settings give the same rows and schemas (the catalog's current types: a
value quarantined before ``schema set-type`` comes back typed). A replay is reported like a sync,
with ``replay``, ``replay_from`` and ``replay_to`` set.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eventlake import layout, partitions, state_layout
from eventlake.archive import ArchiveFile, DamagedArchiveFileError, list_archive_files
from eventlake.archive.days import list_archive_days
from eventlake.catalog import Catalog, TableSpec
from eventlake.catalog.schema_file import is_under, read_schema_files, source_tables
from eventlake.config import Settings, SourceSettings
from eventlake.errors import UsageError
from eventlake.progress import Say, say
from eventlake.schema.table_names import TableNames
from eventlake.storage import FileInfo, Location, Storage, to_location
from eventlake.sync.maintenance.adopt import Progress
from eventlake.sync.pipeline.quarantine import QUARANTINE_TABLE, quarantine_table
from eventlake.sync.pipeline.selection import Commit, Run
from eventlake.sync.protocol.damaged import DamagedFile, read_damaged
from eventlake.sync.protocol.ledger import Ledger
from eventlake.sync.protocol.manifest import PartitionRewrite
from eventlake.sync.protocol.report import SyncResult
from eventlake.sync.protocol.rewrite import RewriteKind, RewriteRun, finish_rewrite, retirement, stage_output
from eventlake.sync.protocol.stage import TABLE, RunStage, StagedFile
from eventlake.sync.protocol.state import SyncState

DAY_MS = layout.DAY_MS


@dataclass(frozen=True)
class ReplayRange:
    """Received days ``first`` to ``last`` (UTC), both included."""

    first: date | None  # None: from the archive's first day
    last: date | None  # None: to its last
    tables: tuple[str, ...] = ()  # only these tables of the source (names as in the catalog); (): all

    def bounds(self, files: Sequence[ArchiveFile]) -> tuple[datetime, datetime]:
        """``[start, end)`` in UTC, open ends closed by the archive's first and last days."""
        days = sorted(f.day_ms for f in files)
        first = self.first or datetime.fromtimestamp(days[0] / 1000, timezone.utc).date()
        last = self.last or datetime.fromtimestamp(days[-1] / 1000, timezone.utc).date()
        start = datetime.combine(first, time(), timezone.utc)
        return start, datetime.combine(last + timedelta(days=1), time(), timezone.utc)

    def segment_types(self, names: TableNames, known: list[str]) -> frozenset[str] | None:
        """The segment types of :attr:`tables` (None: every table). Raises :class:`UsageError`
        naming the source's tables for a name it does not have."""
        if not self.tables:
            return None
        unknown = [t for t in self.tables if t not in known]
        if unknown:
            tables = ", ".join(sorted(known)) or "none"
            raise UsageError(f"no table {', '.join(unknown)} in this source: its tables are {tables}")
        return frozenset(t for t in map(names.segment_type_of_table, self.tables) if t is not None)

    def describe(self) -> str:
        return f"{self.first or 'the first day'} to {self.last or 'the last day'}"


def parse_day(text: str, option: str) -> date:
    """A ``--from`` / ``--to`` value: ``YYYY-MM-DD``.

    >>> parse_day("2026-11-20", "--from")
    datetime.date(2026, 11, 20)
    """
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{option} {text!r} is not a day: use YYYY-MM-DD (e.g. 2026-11-20)") from None


def replay_files(
    storage: Storage, lake: Location, source_id: str, ledger: Ledger, wanted: ReplayRange
) -> tuple[list[ArchiveFile], datetime, datetime]:
    """The synced archive files a replay of ``wanted`` reads, and its ``[start, end)``. Raises
    :class:`UsageError` when the range holds no archive file, or only files no sync has read. A
    range with both ends lists only its days (and one on each side); an open end lists the archive."""
    if wanted.first and wanted.last:
        first_ms = int(datetime.combine(wanted.first, time(), timezone.utc).timestamp() * 1000)
        last_ms = int(datetime.combine(wanted.last, time(), timezone.utc).timestamp() * 1000)
        every = list_archive_days(
            storage, lake, source_id, range(first_ms - DAY_MS, last_ms + 2 * DAY_MS, DAY_MS)
        )
    else:
        every = list_archive_files(storage, lake, source_id)
        if not every:
            raise UsageError("the source has no archive files to replay")
    start, end = wanted.bounds(every)
    start_ms, end_ms = int(start.timestamp() * 1000), int(end.timestamp() * 1000)
    inside = [f for f in every if start_ms <= f.day_ms < end_ms]
    if not inside:
        raise UsageError(f"no archive files received from {wanted.describe()}: nothing to replay")
    near = [f for f in every if start_ms - DAY_MS <= f.day_ms < end_ms + DAY_MS]
    synced = ledger.synced_keys({f.day_ms for f in near})
    if not any(f.key in synced for f in inside):
        raise UsageError(f"no archive file received from {wanted.describe()} is synced yet: run a sync first")
    return [f for f in near if f.key in synced], start, end


class Replay:
    """A replay's selection (see :mod:`.selection`): what :func:`run_replay` runs. Its range and
    tables are known once :meth:`files` has listed the archive."""

    def __init__(self, wanted: ReplayRange) -> None:
        self.wanted = wanted
        self.range: tuple[datetime, datetime] | None = None  # [start, end), set by files()
        self.segment_types: frozenset[str] | None = None  # a replay of some tables: theirs

    def files(self, run: Run) -> list[ArchiveFile]:
        """The synced archive files around the range (:func:`replay_files`). Raises
        :class:`UsageError` for a table the source does not have, or a range holding partitions
        adopted from Segment Data Lakes (:func:`refuse_adopted`)."""
        files, start, end = replay_files(run.storage, run.lake, run.source.id, run.state.ledger, self.wanted)
        self.range = (start, end)
        if self.wanted.tables:  # the source's table names, to refuse one it does not have
            known = [t.name for t in source_tables(
                run.storage, run.lake, run.database, run.source.id, run.source.dir_name
            )]  # fmt: skip
            self.segment_types = self.wanted.segment_types(run.names, known)
        refuse_adopted(run.storage, run.lake, run.source, run.names, start, end, self.segment_types)
        damaged = read_damaged(run.storage, run.lake, run.source.id)  # quarantined: in no partition
        return [f for f in files if f.key not in damaged]

    def _bounds(self) -> tuple[datetime, datetime]:
        if self.range is None:
            raise RuntimeError("the replay's range is known once its files are listed")
        return self.range

    def doing(self) -> str:
        start, end = self._bounds()
        return f"replaying {start:%Y-%m-%d} to {end:%Y-%m-%d} from"

    def rows(self, parsed: DataFrame) -> DataFrame:
        """The range's messages (and every shape row, whose ``ok`` is null)."""
        start, end = self._bounds()
        received = F.col("received_at")
        in_range = (received >= F.lit(start)) & (received < F.lit(end))
        parsed = parsed.filter(F.col("ok").isNull() | in_range)
        if self.segment_types is not None:  # some tables: their messages only (an invalid
            # message has no table: the replay keeps its quarantine row, see replace_partitions)
            parsed = parsed.filter(F.col("ok").isNull() | F.col("segment_type").isin(*self.segment_types))
        return parsed

    def window(self) -> tuple[datetime, datetime] | None:
        return self._bounds()

    def until(self) -> datetime | None:
        return self._bounds()[0]

    def commit(
        self, run: Run, stage: RunStage, staged: list[StagedFile], files: Sequence[ArchiveFile]
    ) -> Commit:
        """The range's partitions are replaced (:func:`replace_partitions`); no file is recorded."""
        rewrites, moves = replace_partitions(
            run.storage, stage, run.lake, run.source, run.names, staged, *self._bounds(),
            self.segment_types, run.database,
        )  # fmt: skip
        return Commit((), tuple(moves), tuple(rewrites))

    def on_damaged(self, run: Run, damaged: Sequence[DamagedFile]) -> None:
        """A replay replaces its range's partitions whole, and these files were synced whole
        before (the quarantined ones are not read): without their messages it would drop them
        from the lake, so it refuses."""
        raise DamagedArchiveFileError(
            ", ".join(d.key for d in damaged),
            "; ".join(sorted({d.problem for d in damaged}))
            + "; a replay would drop their messages from the lake, so it did not run",
            then="run the replay again",
        )


def run_replay(
    settings: Settings, slug: str, wanted: ReplayRange, *, spark: Any = None, catalog: Catalog | None = None,
    wait: bool = True, say: Say = say, stager: Any = None,
) -> SyncResult:  # fmt: skip
    """Replay one source over ``wanted``; see the module's description. ``stager``: who runs the
    parse and write passes (default: Spark; see :class:`~eventlake.sync.pipeline.job.Stager`)."""
    from eventlake.catalog import load_catalog
    from eventlake.jvm.session import owned_session
    from eventlake.sync.pipeline.job import SourceSync
    from eventlake.sync.protocol.runner import Hold, run_source

    source = settings.source(slug)
    if wanted.first and wanted.last and wanted.first > wanted.last:
        raise UsageError(f"--from {wanted.first} is after --to {wanted.last}")
    storage = settings.lake.storage()
    session: Any = (
        owned_session(settings, "eventlake-replay", spark, say, one_run=True)
        if stager is None
        else nullcontext(spark)
    )
    with session as spark:
        lake_catalog = catalog or load_catalog(settings, spark)

        def work(hold: Hold) -> SyncResult:
            return SourceSync(
                spark, lake_catalog, storage, settings, source, say, hold, selection=Replay(wanted),
                stager=stager,
            ).run()  # fmt: skip

        return run_source(settings, storage, source, work, catalog=lambda: lake_catalog, wait=wait, say=say)


def refuse_adopted(
    storage: Storage, lake: Location, source: SourceSettings, names: TableNames, start: datetime,
    end: datetime, segment_types: frozenset[str] | None,
) -> None:  # fmt: skip
    """Raise :class:`UsageError` when ``[start, end)`` holds partitions adopted from Segment Data
    Lakes (of ``segment_types``; None: any), or partitions holding data eventlake did not write
    (SDL's files written after the last adoption, another writer's: :func:`refuse_foreign`): a
    replay rebuilds a partition from eventlake's archive, which does not hold the messages SDL
    synced, so replacing it would lose them."""
    keys = layout.partition_columns(source.date_partition)
    adopted = Progress.read(storage, state_layout.adoption_file(lake, source.id)).registered
    hit = sorted(
        period
        for folder, partitions in adopted.items()
        if segment_types is None or names.segment_type_of_folder(folder) in segment_types
        for period in map(lambda values: layout.partition_period(keys, values), partitions)
        if period is not None and period[0] < end and start < period[1]
    )
    if hit:
        after = hit[-1][1]
        raise UsageError(
            f"the replay of {source.slug} from {start:%Y-%m-%d} to {end - timedelta(days=1):%Y-%m-%d} "
            f"would replace {len(hit)} partitions adopted from Segment Data Lakes (the last ends "
            f"{after:%Y-%m-%d %H:%M} UTC); eventlake's archive does not hold the messages SDL synced, so "
            f"they would be lost. Replay the days after them instead: "
            f"--from {(after + timedelta(days=1) if after.hour else after):%Y-%m-%d}"
        )
    refuse_foreign(
        storage, source, range_partitions(storage, lake, source, names, start, end, segment_types), start, end
    )


def range_partitions(
    storage: Storage, lake: Location, source: SourceSettings, table_names: TableNames, start: datetime,
    end: datetime, segment_types: frozenset[str] | None = None,
) -> dict[Location, dict[str, FileInfo]]:  # fmt: skip
    """The files of each table partition of the source (of ``segment_types``; None: all) inside
    ``[start, end)``, from the lake itself (not the catalog's schema files: after a change of
    database, the new one has none yet): one listing of the source's data."""
    keys = layout.partition_columns(source.date_partition)
    data = layout.source_data_dir(lake, source.dir_name)
    found: dict[Location, dict[str, FileInfo]] = {}
    for folder, infos in partitions.partition_listing(storage, data, 1 + len(keys)).items():
        table = _table_of(folder, keys)
        if segment_types is not None and _segment_type(table_names, table) not in segment_types:
            continue
        values = layout.partition_values(table, folder, keys)
        period = layout.partition_period(keys, values) if values is not None else None
        if period is not None and start <= period[0] and period[1] <= end:
            found[folder] = infos
    return found


def refuse_foreign(
    storage: Storage, source: SourceSettings, listings: dict[Location, dict[str, FileInfo]], start: datetime,
    end: datetime,
) -> None:  # fmt: skip
    """Raise :class:`UsageError` when one of the partitions of ``listings`` holds data eventlake did
    not write (:func:`eventlake.partitions.holds_foreign_data`): replacing it from eventlake's archive
    would lose those rows."""
    foreign = sorted(
        (
            folder
            for folder, names in listings.items()
            if partitions.holds_foreign_data(storage, folder, names)
        ),
        key=str,
    )
    if foreign:
        raise UsageError(
            f"the replay of {source.slug} from {start:%Y-%m-%d} to {end - timedelta(days=1):%Y-%m-%d} "
            f"would replace {len(foreign)} partitions holding data eventlake did not write (Segment "
            f"Data Lakes' or another writer's files), e.g. {foreign[0]}; eventlake's archive does not "
            "hold those rows, so they would be lost. Run eventlake adopt first if SDL wrote them, and "
            "replay the days without such partitions"
        )


def _table_of(folder: Location, keys: tuple[str, ...]) -> Location:
    for _ in keys:
        folder = folder.parent
    return folder


def stale_tables(settings: Settings, source: SourceSettings) -> list[str]:
    """Tables over this source's folders under another database or name than its settings give
    now: what a change of ``database`` or ``table_prefix`` left behind, for the user to drop."""
    lake = settings.lake.root
    data, quarantine = layout.source_data_dir(lake, source.dir_name), layout.quarantine_dir(lake, source.id)
    database = settings.database_name(source)
    names = SyncState(settings.lake.storage(), lake, source.id).table_names(source.table_prefix)
    stale = []
    for spec in read_schema_files(settings.lake.storage(), lake):
        location = to_location(spec.location)
        if is_under(location, quarantine):
            expected = source.table_prefix + QUARANTINE_TABLE
        elif is_under(location, data) and location.name.startswith("segment_type="):
            expected = names.table(names.segment_type_of_folder(location.name.split("=", 1)[1]))
        else:
            continue
        if (spec.database, spec.name) != (database, expected):
            stale.append(spec.qualified)
    return sorted(stale)


# -- the commit: partitions replaced, not appended to -------------------------------------------


def replace_partitions(
    storage: Storage, stage: RunStage, lake: Location, source: SourceSettings, table_names: TableNames,
    staged: list[StagedFile], start: datetime, end: datetime, segment_types: frozenset[str] | None = None,
    database: str = "",
) -> tuple[list[PartitionRewrite], list[StagedFile]]:  # fmt: skip
    """The rewrites that replace the range's table partitions (of ``segment_types``, None: all)
    with the run's staged table files (as the rewrite's outputs: on a local disk moved into each
    folder's staged content, on an object store published from where they are) and the range's
    quarantine rows with the run's; the staged files that are still plain moves."""
    run = RewriteRun.new(RewriteKind.REPLAY)  # (not of the range: two replays of it differ)
    outputs: dict[Location, list[str]] = {}
    sources: dict[Location, list[str]] = {}
    moves = []
    # a local disk swaps the rewrite folder in whole: the files move into it; on an object store
    # they are published from where the workers staged them (one copy fewer each)
    swapped = storage.local_path(stage.root) is not None
    for file in (f for f in staged if f.kind == TABLE):
        folder = to_location(str(stage.final(file))).parent
        names = outputs.setdefault(folder, [])
        name = layout.part_file_name(run.id, len(names))
        if swapped:
            moves.append((stage.staged(file), stage.rewrite_folder(folder) / name))
        else:
            sources.setdefault(folder, []).append(str(stage.staged(file)))
        names.append(name)
    keys = layout.partition_columns(source.date_partition)
    listings = range_partitions(storage, lake, source, table_names, start, end, segment_types)
    refuse_foreign(storage, source, listings, start, end)  # (written while the replay ran)
    storage.publish_many(moves)  # within the stage, before the manifest: a crash drops them all
    rewrites = []
    for folder in sorted(set(outputs) | set(listings), key=str):
        infos = listings.get(folder, {})
        table = _table_of(folder, keys)
        spec = TableSpec(database, table_names.table(_segment_type(table_names, table)), (), keys, str(table))
        data = partitions.partition_files(storage, folder, infos)
        rewrites.append(
            finish_rewrite(
                storage, stage, folder, infos, outputs.get(folder, []),
                retirement(infos, data, data), run, spec if database else None, sources.get(folder, ()),
            )
        )  # fmt: skip
    # a quarantine row names its table by segment type (a sync's) or by table name (set-type's)
    tables = None if segment_types is None else segment_types | {table_names.table(t) for t in segment_types}
    quarantine = quarantine_table(lake, database, source.id, source.table_prefix) if database else None
    rewrites += _quarantine_rewrites(storage, stage, lake, source, start, end, run, tables, quarantine)
    return rewrites, [f for f in staged if f.kind != TABLE]


def _segment_type(names: TableNames, table: Location) -> str:
    return names.segment_type_of_folder(table.name.removeprefix("segment_type="))


def _quarantine_rewrites(
    storage: Storage, stage: RunStage, lake: Location, source: SourceSettings, start: datetime,
    end: datetime, run: RewriteRun, tables: frozenset[str] | None, spec: TableSpec | None = None,
) -> list[PartitionRewrite]:  # fmt: skip
    """Each quarantine file holding rows received in the range, rewritten without them (the replay
    stages its own). A replay of some tables (``tables``: the names their rows carry) takes only
    their rows: the other tables' and the invalid messages (of no table), which such a replay
    does not stage again, stay."""
    location = layout.quarantine_dir(lake, source.id)
    rewrites = []
    for folder, infos in sorted(
        partitions.partition_listing(storage, location, 1).items(), key=lambda i: str(i[0])
    ):
        outputs: list[str] = []
        replaced: list[str] = []
        for name in partitions.partition_files(storage, folder, infos):
            table = pq.read_table(pa.BufferReader(storage.read(infos[name].path)))
            received = table["received_at"]
            floor, ceiling = pa.scalar(start, received.type), pa.scalar(end, received.type)
            inside = pc.fill_null(
                pc.and_(pc.greater_equal(received, floor), pc.less(received, ceiling)), False
            )
            if tables is not None:
                named = pc.is_in(table["table_name"], value_set=pa.array(sorted(tables), pa.string()))
                inside = pc.and_(inside, pc.fill_null(named, False))
            if not pc.any(inside).as_py():
                continue
            replaced.append(name)
            kept = table.filter(pc.invert(inside))
            if kept.num_rows:
                output = layout.part_file_name(run.id, len(outputs), prefix="")
                outputs.append(stage_output(storage, stage, folder, output, kept))
        if replaced:
            rewrites.append(finish_rewrite(storage, stage, folder, infos, outputs, replaced, run, spec))
    return rewrites


__all__ = [
    "QUARANTINE_TABLE",
    "Replay",
    "ReplayRange",
    "parse_day",
    "range_partitions",
    "refuse_adopted",
    "refuse_foreign",
    "replay_files",
    "run_replay",
    "stale_tables",
]
