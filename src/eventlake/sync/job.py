"""One sync run of a source: pending archive files -> deduplicated, typed, partitioned Parquet.

Steps: read the archive files not yet in the ledger -> parse, validate, flatten (Python workers)
-> dedupe by messageId within the run and against the dedupe index -> plan each table's schema
(evolve; honour the table limit) -> cast (uncastable values to quarantine) -> write Parquet,
quarantine and dedupe index to ``segment-stage`` -> write the commit manifest -> apply it
(see :mod:`eventlake.sync.commit`).
"""

from __future__ import annotations

import contextlib
import functools
import secrets
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from eventlake import layout
from eventlake.archive import ArchiveFile, list_archive_files
from eventlake.catalog import Catalog, TableSpec
from eventlake.config import Settings, SourceSettings
from eventlake.errors import EventLakeError
from eventlake.schema import Evolution, evolve, table_name
from eventlake.sync.commit import apply_manifest, table_entry
from eventlake.sync.report import (
    SyncResult,
    TableResult,
    report_partition,
    report_path,
    report_rows,
    reports_table,
    write_report_rows,
)
from eventlake.sync.state import SyncState
from eventlake.sync.transform import PARSED_SCHEMA, parse_batches
from eventlake.sync.writer import write_batches
from eventlake.timestamps import now_utc

Say = Callable[[str], None]
WRITTEN_SCHEMA = "segment_type string, values array<string>, rows bigint, path string"
QUARANTINE_TABLE = "_quarantine"
QUARANTINE_COLUMNS = (
    ("kind", "string"),  # message (rejected whole) | value (one column's value)
    ("reason", "string"),
    ("message_id", "string"),
    ("table_name", "string"),
    ("column_name", "string"),
    ("target_type", "string"),
    ("raw_value", "string"),
    ("received_at", "timestamp"),
)


def new_run_id(start: datetime) -> str:
    """Sortable and unique: ``20261122T104700123Z-1a2b``."""
    return start.strftime("%Y%m%dT%H%M%S") + f"{start.microsecond // 1000:03d}Z-" + secrets.token_hex(2)


def database_name(settings: Settings, source: SourceSettings) -> str:
    return settings.catalog.database_prefix + source.database


def source_dir_name(source: SourceSettings) -> str:
    return source.slug if source.partition_by_slug else source.id


@dataclass(frozen=True)
class TablePlan:
    segment_type: str
    name: str
    is_new: bool
    evolution: Evolution
    collisions: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    tables: dict[str, TablePlan]  # by segment_type
    blocked: tuple[str, ...]  # segment types whose new table would pass the table limit
    notices: tuple[str, ...]


class SourceSync:
    """Syncs one source; :meth:`run` returns the frozen :class:`SyncResult`."""

    def __init__(
        self, spark: SparkSession, catalog: Catalog, settings: Settings, source: SourceSettings, say: Say
    ) -> None:
        self.spark, self.catalog, self.settings, self.source, self.say = spark, catalog, settings, source, say
        self.lake = settings.lake.root
        self.state = SyncState(self.lake, source.id)
        self.database = database_name(settings, source)
        self.keys = layout.partition_columns(source.date_partition)

    def run(self) -> SyncResult:
        for manifest in self.state.pending():
            self.say(f"{self.source.slug}: completing interrupted run {manifest['run_id']}")
            apply_manifest(manifest, self.catalog, self.state)
        shutil.rmtree(
            layout.stage_root(self.lake, self.source.id), ignore_errors=True
        )  # crashed runs' output
        synced = self.state.synced_files()
        files = [f for f in list_archive_files(self.lake, self.source.id) if f.key not in synced]
        start = now_utc()
        run_id = new_run_id(start)
        if not files:
            return SyncResult(self.source.slug, self.source.id, run_id, "Nothing to do", start, now_utc())
        size = sum(f.size for f in files)
        self.say(
            f"{self.source.slug}: syncing {len(files)} archive files ({size / 1e6:.1f} MB), run {run_id}"
        )
        try:
            manifest, result = self._stage(files, run_id, start)
        except Exception as exc:  # nothing was published: report the failure and re-raise
            self._report_failure(exc, files, run_id, start)
            raise
        self.state.write_pending(manifest)
        apply_manifest(manifest, self.catalog, self.state)
        return result

    def _report_failure(
        self, exc: Exception, files: Sequence[ArchiveFile], run_id: str, start: datetime
    ) -> None:
        failed = SyncResult(
            self.source.slug, self.source.id, run_id, "Failed", start, now_utc(),
            input_files=len(files), bytes_in=sum(f.size for f in files),
            error=f"{type(exc).__name__}: {exc}"[:2000],
            error_code=exc.code if isinstance(exc, EventLakeError) else "internal_error",
        )  # fmt: skip
        write_report_rows(report_path(failed, self.lake), report_rows(failed, self.lake))
        shutil.rmtree(layout.stage_dir(self.lake, self.source.id, run_id), ignore_errors=True)
        with contextlib.suppress(Exception):  # the catalog may be what failed
            self.catalog.ensure_table(reports_table(self.lake))
            self.catalog.add_partitions(reports_table(self.lake), [report_partition(failed)])

    # -- the Spark work: everything goes to segment-stage/<source>/<run>/ -------------------------

    def _stage(
        self, files: Sequence[ArchiveFile], run_id: str, start: datetime
    ) -> tuple[dict[str, Any], SyncResult]:
        stage = layout.stage_dir(self.lake, self.source.id, run_id)
        # intermediate results go to staging as Parquet, not to Spark's cache: memory stays flat
        lines = self.spark.read.text([str(f.path) for f in files])
        parsed = self._materialize(lines.mapInArrow(parse_batches, PARSED_SCHEMA), stage / "parsed")
        totals = {
            row["ok"]: (row["n"], row["first"])
            for row in parsed.groupBy("ok")
            .agg(F.count("*").alias("n"), F.min("received_at").alias("first"))
            .collect()
        }
        valid, first_received = totals.get(True, (0, None))
        invalid = totals.get(False, (0, None))[0]
        deduped = self._materialize(self._dedupe(parsed, first_received), stage / "deduped")
        kept = deduped.count()
        dropped = valid - kept
        self.say(
            f"{self.source.slug}: {valid + invalid} messages, {dropped} duplicates dropped, {invalid} invalid"
        )
        plan = self._plan(deduped)
        tables, moves, rejected = self._write(parsed, invalid, deduped, plan, stage, run_id)
        rejected_values, blocked_messages = rejected
        result = SyncResult(
            self.source.slug, self.source.id, run_id, "Success", start, now_utc(),
            tables=tuple(t for t, _ in tables), input_files=len(files), bytes_in=sum(f.size for f in files),
            input_messages=valid + invalid, duplicates_dropped=dropped,
            rejected_messages=invalid + blocked_messages, rejected_values=rejected_values,
            notices=plan.notices,
        )  # fmt: skip
        entries = [
            table_entry(self.lake, spec, parts, (table.is_new, table.new_columns))
            for table, (spec, parts) in tables
        ]
        if result.rejected_messages or rejected_values:
            entries.append(table_entry(self.lake, *self._quarantine_table(run_id)))
        entries.append(table_entry(self.lake, reports_table(self.lake), [report_partition(result)]))
        manifest = {
            "run_id": run_id,
            "source_id": self.source.id,
            "files": [f.key for f in files],
            "moves": moves,
            "tables": entries,
            "report_path": str(report_path(result, self.lake)),
            "report": report_rows(result, self.lake, self.spark.sparkContext.applicationId),
            "stage": str(stage),
        }
        return manifest, result

    def _materialize(self, frame: DataFrame, path: Path) -> DataFrame:
        frame.write.mode("overwrite").parquet(str(path))
        return self.spark.read.parquet(str(path))

    def _dedupe(self, parsed: DataFrame, first_received: datetime | None) -> DataFrame:
        """The first copy of each messageId (earliest received), minus ids synced in the window.

        Only message ids are shuffled: repeats are rare (client retries), so the ids seen more than
        once and the ids already synced are found first and broadcast, and only the repeated rows
        are ordered to keep their first copy."""
        valid = parsed.filter(F.col("ok")).drop("ok", "reason", "raw")
        ids = valid.select("message_id")
        repeated = F.broadcast(ids.groupBy("message_id").count().filter("count > 1").select("message_id"))
        first = Window.partitionBy("message_id").orderBy("received_at", "payload")
        deduped = valid.join(repeated, "message_id", "left_anti").unionByName(
            valid.join(repeated, "message_id", "left_semi")
            .withColumn("_n", F.row_number().over(first))
            .filter("_n = 1")
            .drop("_n")
        )
        index = layout.state_dir(self.lake, "dedupe", self.source.id)
        if first_received is not None and any(index.glob("*/*.parquet")):
            since = first_received - timedelta(days=self.source.dedupe_window_days)
            seen = self.spark.read.parquet(str(index)).filter(F.col("received_at") >= F.lit(since))
            synced = ids.join(seen.select("message_id"), "message_id", "left_semi").distinct()
            deduped = deduped.join(F.broadcast(synced), "message_id", "left_anti")
        return deduped

    def _plan(self, deduped: DataFrame) -> Plan:
        """Each table's schema (existing columns kept, new ones appended) and the table limit."""
        observed: dict[str, dict[str, set[str]]] = {}
        for row in (
            deduped.select("segment_type", F.explode("types").alias("column", "type"))
            .groupBy("segment_type", "column")
            .agg(F.collect_set("type").alias("types"))
            .collect()
        ):
            observed.setdefault(row["segment_type"], {})[row["column"]] = set(row["types"])
        collisions: dict[str, list[str]] = {}
        for row in deduped.select("segment_type", F.explode("collisions").alias("c")).distinct().collect():
            collisions.setdefault(row["segment_type"], []).append(row["c"])

        limit = self.settings.sync.max_tables_per_database
        present = set(self.catalog.list_tables(self.database))
        room = limit - len(present)
        tables: dict[str, TablePlan] = {}
        blocked: list[str] = []
        for segment_type, columns in sorted(observed.items()):
            name = table_name(segment_type, self.source.table_prefix)
            existing = self.catalog.table_columns(self.database, name) if name in present else None
            if existing is None:
                if room <= 0:
                    blocked.append(segment_type)
                    continue
                room -= 1
            tables[segment_type] = TablePlan(
                segment_type, name, existing is None, evolve(existing, columns, sorted(columns)),
                tuple(sorted(collisions.get(segment_type, ()))),
            )  # fmt: skip
        notices = ()
        if blocked:
            notices = (
                f"table limit reached: database {self.database} may hold {limit} tables; "
                f"{len(blocked)} new tables not created ({', '.join(blocked[:10])}); their messages are "
                f"in {self.database}.{self.source.table_prefix}{QUARANTINE_TABLE}",
            )
            self.say(f"{self.source.slug}: {notices[0]}")
        return Plan(tables, tuple(blocked), notices)

    def _write(
        self, parsed: DataFrame, invalid: int, deduped: DataFrame, plan: Plan, stage: Path, run_id: str
    ) -> tuple[
        list[tuple[TableResult, tuple[TableSpec, list[tuple[str, ...]]]]], list[list[str]], tuple[int, int]
    ]:
        """One pass writes every table: a shuffle groups the rows by (table, partition), then each
        Python worker casts its rows and writes one Parquet file per group (see sync.writer)."""
        schemas = {segment_type: t.evolution.columns for segment_type, t in plan.tables.items()}
        partition_cols = [
            F.date_format("received_at", pattern).alias(key)
            for key, pattern in layout.partition_patterns(self.source.date_partition)
        ]
        grouped = (
            deduped.filter(F.col("segment_type").isin(list(schemas)))
            .select("segment_type", *partition_cols, "message_id", "received_at", "payload")
            .repartition("segment_type", *self.keys)
            .sortWithinPartitions("segment_type", *self.keys)
        )
        write = functools.partial(
            write_batches, schemas=schemas, keys=self.keys, stage=str(stage), run_id=run_id
        )
        written: dict[str, dict[tuple[str, ...], int]] = {}
        moves: list[list[str]] = []
        rejected_values = 0
        quarantine = layout.quarantine_dir(self.lake, self.source.id) / f"run_id={run_id}"
        for segment_type, values, count, path in grouped.mapInArrow(write, WRITTEN_SCHEMA).collect():
            values = tuple(values)
            if not segment_type:  # a worker's rejected values
                rejected_values += count
                moves.append([path, str(quarantine / Path(path).name)])
                continue
            written.setdefault(segment_type, {})[values] = count
            location = layout.table_dir(self.lake, source_dir_name(self.source), segment_type)
            moves.append([path, str(location / Path(path).relative_to(stage / "tables" / segment_type))])
        dedupe = layout.state_dir(self.lake, "dedupe", self.source.id) / f"run_id={run_id}"
        moves += _moves(stage / "dedupe", dedupe)
        blocked_messages, quarantine_moves = self._write_quarantine(
            parsed if invalid else None, deduped, plan, stage, run_id
        )
        tables = [
            self._table_result(table, written.get(table.segment_type, {})) for table in plan.tables.values()
        ]
        return tables, moves + quarantine_moves, (rejected_values, blocked_messages)

    def _table_result(
        self, table: TablePlan, counts: dict[tuple[str, ...], int]
    ) -> tuple[TableResult, tuple[TableSpec, list[tuple[str, ...]]]]:
        parts = sorted(counts)
        rows = sum(counts.values())
        new = table.evolution.new_columns
        self.say(
            f"{self.source.slug}: {table.name}: {rows} rows"
            + (f", new columns {', '.join(c for c, _ in new)}" if new and not table.is_new else "")
        )
        location = layout.table_dir(self.lake, source_dir_name(self.source), table.segment_type)
        spec = TableSpec(self.database, table.name, table.evolution.columns, self.keys, str(location))
        result = TableResult(
            self.database, table.name, rows, table.is_new, new,
            tuple(dict(zip(self.keys, p, strict=True)) for p in parts), table.collisions,
        )  # fmt: skip
        return result, (spec, parts)

    def _write_quarantine(
        self, parsed: DataFrame | None, deduped: DataFrame, plan: Plan, stage: Path, run_id: str
    ) -> tuple[int, list[list[str]]]:
        """Invalid messages and messages of tables past the limit: the count of the latter, and the
        files to publish. (Values that did not fit their column are written by the workers.)"""
        none = F.lit(None).cast("string")
        parts = []
        if parsed is not None:
            parts.append(parsed.filter(~F.col("ok")).select(
                F.lit("message").alias("kind"), "reason", "message_id", none.alias("table_name"),
                none.alias("column_name"), none.alias("target_type"), F.col("raw").alias("raw_value"),
                "received_at",
            ))  # fmt: skip
        blocked_count = 0
        if plan.blocked:
            blocked = deduped.filter(F.col("segment_type").isin(list(plan.blocked)))
            blocked_count = blocked.count()
            parts.append(blocked.select(
                F.lit("message").alias("kind"), F.lit("table limit reached").alias("reason"), "message_id",
                F.col("segment_type").alias("table_name"), none.alias("column_name"),
                none.alias("target_type"), F.col("payload").alias("raw_value"), "received_at",
            ))  # fmt: skip
        if not parts:
            return 0, []
        out = stage / "quarantine_messages"
        functools.reduce(DataFrame.unionByName, parts).coalesce(1).write.mode("overwrite").parquet(str(out))
        final = layout.quarantine_dir(self.lake, self.source.id) / f"run_id={run_id}"
        return blocked_count, [[src, str(Path(dst).with_name("messages-" + Path(dst).name))]
                               for src, dst in _moves(out, final)]  # fmt: skip

    def _quarantine_table(self, run_id: str) -> tuple[TableSpec, list[tuple[str, ...]]]:
        location = layout.quarantine_dir(self.lake, self.source.id)
        name = self.source.table_prefix + QUARANTINE_TABLE
        return TableSpec(self.database, name, QUARANTINE_COLUMNS, ("run_id",), str(location)), [(run_id,)]


def _moves(stage_dir: Path, final_dir: Path) -> list[list[str]]:
    return [[str(p), str(final_dir / p.relative_to(stage_dir))] for p in sorted(stage_dir.rglob("*.parquet"))]
