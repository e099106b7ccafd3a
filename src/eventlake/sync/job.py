"""One sync run of a source: pending archive files -> deduplicated, typed, partitioned Parquet.

Steps: read the archive files not yet in the ledger -> parse, validate, flatten (Python workers)
-> dedupe by messageId within the run and against the dedupe index -> infer / evolve each table's
schema -> cast (uncastable values to quarantine) -> write Parquet to ``segment-stage`` -> write a
commit manifest -> apply it: move files into the lake, register tables, columns and partitions,
record the ledger, write the report. A manifest left by a killed run is applied again at the next
run (every step is idempotent), so nothing is lost or written twice.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable, Sequence
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
from eventlake.schema import evolve, table_name
from eventlake.schema.spark import struct_type
from eventlake.sync.report import SyncResult, TableResult, report_path, report_rows, write_report_rows
from eventlake.sync.state import SyncState, write_json_atomic
from eventlake.sync.transform import (
    CAST_SCHEMA,
    JSON_TIMESTAMP_FORMAT,
    PARSED_SCHEMA,
    cast_partition,
    parse_partition,
)
from eventlake.timestamps import now_utc

Say = Callable[[str], None]
QUARANTINE_TABLE = "_quarantine"
QUARANTINE_COLUMNS = (
    ("kind", "string"),
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


class SourceSync:
    """Syncs one source; ``run()`` returns the frozen :class:`SyncResult`."""

    def __init__(
        self, spark: SparkSession, catalog: Catalog, settings: Settings, source: SourceSettings, say: Say
    ) -> None:
        self.spark, self.catalog, self.settings, self.source, self.say = spark, catalog, settings, source, say
        self.lake = settings.lake.root
        self.state = SyncState(self.lake, source.id)
        self.database = database_name(settings, source)
        self.keys = layout.partition_columns(source.date_partition)

    # -- entry point ------------------------------------------------------------------------

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
            manifest, result = self._build(files, run_id, start)
        except Exception as exc:  # the run failed before committing anything: report and re-raise
            code = exc.code if isinstance(exc, EventLakeError) else "internal_error"
            failed = SyncResult(
                self.source.slug,
                self.source.id,
                run_id,
                "Failed",
                start,
                now_utc(),
                input_files=len(files),
                bytes_in=size,
                error=f"{type(exc).__name__}: {exc}"[:2000],
                error_code=code,
            )
            write_report_rows(report_path(failed, self.lake), report_rows(failed, self.lake))
            shutil.rmtree(layout.stage_dir(self.lake, self.source.id, run_id), ignore_errors=True)
            raise
        self.state.write_pending(manifest)
        apply_manifest(manifest, self.catalog, self.state)
        return result

    # -- the Spark work -----------------------------------------------------------------------

    def _build(
        self, files: Sequence[ArchiveFile], run_id: str, start: datetime
    ) -> tuple[dict[str, Any], SyncResult]:
        stage = layout.stage_dir(self.lake, self.source.id, run_id)
        parsed = self._parse(files).persist()
        try:
            return self._build_from(parsed, files, run_id, start, stage)
        finally:
            parsed.unpersist()

    def _parse(self, files: Sequence[ArchiveFile]) -> DataFrame:
        text = self.spark.read.text([str(f.path) for f in files])
        return self.spark.createDataFrame(text.rdd.mapPartitions(parse_partition), PARSED_SCHEMA)

    def _build_from(
        self, parsed: DataFrame, files: Sequence[ArchiveFile], run_id: str, start: datetime, stage: Path
    ) -> tuple[dict[str, Any], SyncResult]:
        counts = {
            row["ok"]: row
            for row in parsed.groupBy("ok")
            .agg(F.count("*").alias("n"), F.min("received_at").alias("first"))
            .collect()
        }
        valid = counts[True]["n"] if True in counts else 0
        rejected_messages = counts[False]["n"] if False in counts else 0
        deduped = self._dedupe(parsed, counts[True]["first"] if True in counts else None).persist()
        try:
            kept = deduped.count()
            self.say(
                f"{self.source.slug}: {valid + rejected_messages} messages, {valid - kept} duplicates "
                f"dropped, {rejected_messages} rejected"
            )
            tables, moves, rejected_values = self._write_tables(deduped, run_id, stage)
            moves += self._write_side_outputs(parsed, deduped, run_id, stage, rejected_values)
        finally:
            deduped.unpersist()
        result = SyncResult(
            self.source.slug,
            self.source.id,
            run_id,
            "Success",
            start,
            now_utc(),
            tables=tuple(t for t, _ in tables),
            input_files=len(files),
            bytes_in=sum(f.size for f in files),
            input_messages=valid + rejected_messages,
            duplicates_dropped=valid - kept,
            rejected_messages=rejected_messages,
            rejected_values=rejected_values,
        )
        specs = [spec for _, spec in tables]
        if rejected_messages or rejected_values:
            specs.append(self._quarantine_spec(run_id))
        manifest = {
            "run_id": run_id,
            "source_id": self.source.id,
            "files": [f.key for f in files],
            "moves": moves,
            "tables": [_spec_json(self.lake, spec, parts) for spec, parts in specs],
            "report_path": str(report_path(result, self.lake)),
            "report": report_rows(result, self.lake, self.spark.sparkContext.applicationId),
            "stage": str(stage),
        }
        return manifest, result

    def _dedupe(self, parsed: DataFrame, first_received: datetime | None) -> DataFrame:
        valid = parsed.filter(F.col("ok")).drop("ok", "reason", "raw")
        first = Window.partitionBy("message_id").orderBy("received_at", "payload")
        deduped = valid.withColumn("_n", F.row_number().over(first)).filter("_n = 1").drop("_n")
        index = layout.state_dir(self.lake, "dedupe", self.source.id)
        if first_received is not None and any(index.glob("*/*.parquet")):
            since = first_received - timedelta(days=self.source.dedupe_window_days)
            seen = self.spark.read.parquet(str(index)).filter(F.col("received_at") >= F.lit(since))
            deduped = deduped.join(seen.select("message_id").distinct(), "message_id", "left_anti")
        return deduped

    def _write_tables(
        self, deduped: DataFrame, run_id: str, stage: Path
    ) -> tuple[list[tuple[TableResult, tuple[TableSpec, list[tuple[str, ...]]]]], list[list[str]], int]:
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

        schemas: dict[str, tuple[tuple[str, str], ...]] = {}
        evolutions = {}
        for segment_type, columns in sorted(observed.items()):
            name = table_name(segment_type, self.source.table_prefix)
            existing = self.catalog.table_columns(self.database, name)
            evolution = evolve(existing, columns, sorted(columns))
            schemas[segment_type] = evolution.columns
            evolutions[segment_type] = (name, existing is None, evolution)

        casted = self.spark.createDataFrame(
            deduped.select("message_id", "received_at", "segment_type", "payload").rdd.mapPartitions(
                lambda rows: cast_partition(rows, schemas)
            ),
            CAST_SCHEMA,
        ).persist()
        try:
            partition_cols = [
                F.date_format("received_at", pattern).alias(key)
                for key, pattern in layout.partition_patterns(self.source.date_partition)
            ]
            results, moves = [], []
            for segment_type, columns in schemas.items():
                name, is_new, evolution = evolutions[segment_type]
                out = stage / "tables" / segment_type
                frame = (
                    casted.filter(F.col("segment_type") == segment_type)
                    .select(
                        F.from_json(
                            "row", struct_type(columns), {"timestampFormat": JSON_TIMESTAMP_FORMAT}
                        ).alias("r"),
                        *partition_cols,
                    )
                    .select("r.*", *self.keys)
                )
                frame.repartition(*self.keys).write.mode("overwrite").partitionBy(*self.keys).parquet(
                    str(out)
                )
                location = layout.table_dir(self.lake, source_dir_name(self.source), segment_type)
                parts, rows = self._partitions_written(out)
                moves += _moves(out, location)
                self.say(
                    f"{self.source.slug}: {name}: {rows} rows"
                    + (
                        f", new columns {', '.join(c for c, _ in evolution.new_columns)}"
                        if not is_new and evolution.new_columns
                        else ""
                    )
                )
                spec = TableSpec(self.database, name, columns, self.keys, str(location))
                results.append(
                    (
                        TableResult(
                            self.database,
                            name,
                            rows,
                            is_new,
                            evolution.new_columns,
                            tuple(dict(zip(self.keys, p, strict=True)) for p in parts),
                            tuple(sorted(collisions.get(segment_type, ()))),
                        ),
                        (spec, parts),
                    )
                )
            rejected_values = self._write_rejected_values(casted, stage)
        finally:
            casted.unpersist()
        return results, moves, rejected_values

    def _partitions_written(self, out: Path) -> tuple[list[tuple[str, ...]], int]:
        """The partitions a staged table holds (from its folders) and its row count (Parquet footers)."""
        folders = {p.parent.relative_to(out).parts for p in out.rglob("*.parquet")}
        parts = sorted(tuple(part.split("=", 1)[1] for part in folder) for folder in folders)
        return parts, self.spark.read.parquet(str(out)).count()

    def _write_rejected_values(self, casted: DataFrame, stage: Path) -> int:
        values = casted.select(
            "message_id", "received_at", "segment_type", F.explode("rejected").alias("v")
        ).select(
            F.lit("value").alias("kind"),
            "v.reason",
            "message_id",
            F.col("segment_type").alias("table_name"),
            "v.column_name",
            "v.target_type",
            "v.raw_value",
            "received_at",
        )
        values.coalesce(1).write.mode("overwrite").parquet(str(stage / "quarantine_values"))
        return self.spark.read.parquet(str(stage / "quarantine_values")).count()

    def _write_side_outputs(
        self, parsed: DataFrame, deduped: DataFrame, run_id: str, stage: Path, rejected_values: int
    ) -> list[list[str]]:
        moves: list[list[str]] = []
        quarantine = layout.quarantine_dir(self.lake, self.source.id) / f"run_id={run_id}"
        rejected = parsed.filter(~F.col("ok")).select(
            F.lit("message").alias("kind"),
            "reason",
            "message_id",
            F.lit(None).cast("string").alias("table_name"),
            F.lit(None).cast("string").alias("column_name"),
            F.lit(None).cast("string").alias("target_type"),
            F.col("raw").alias("raw_value"),
            "received_at",
        )
        rejected.coalesce(1).write.mode("overwrite").parquet(str(stage / "quarantine_messages"))
        for part in ("quarantine_messages", "quarantine_values"):
            moves += [
                [str(p), str(quarantine / f"{part}-{p.name}")]
                for p in (stage / part).glob("*.parquet")
                if _has_rows(self.spark, p)
            ]
        index = layout.state_dir(self.lake, "dedupe", self.source.id) / f"run_id={run_id}"
        deduped.select("message_id", "received_at").coalesce(1).write.mode("overwrite").parquet(
            str(stage / "dedupe")
        )
        moves += _moves(stage / "dedupe", index)
        return moves

    def _quarantine_spec(self, run_id: str) -> tuple[TableSpec, list[tuple[str, ...]]]:
        location = layout.quarantine_dir(self.lake, self.source.id)
        spec = TableSpec(
            self.database,
            self.source.table_prefix + QUARANTINE_TABLE,
            QUARANTINE_COLUMNS,
            ("run_id",),
            str(location),
        )
        return spec, [(run_id,)]


def _has_rows(spark: SparkSession, path: Path) -> bool:
    return spark.read.parquet(str(path)).limit(1).count() > 0


def _moves(stage_dir: Path, final_dir: Path) -> list[list[str]]:
    return [[str(p), str(final_dir / p.relative_to(stage_dir))] for p in sorted(stage_dir.rglob("*.parquet"))]


def _spec_json(lake: Path, spec: TableSpec, partitions: list[tuple[str, ...]]) -> dict[str, Any]:
    return {
        "database": spec.database,
        "name": spec.name,
        "columns": [list(c) for c in spec.columns],
        "partition_keys": list(spec.partition_keys),
        "location": spec.location,
        "partitions": [list(p) for p in partitions],
        "schema_file": str(layout.schema_file(lake, spec.database, spec.name)),
    }


def schema_document(spec: TableSpec) -> dict[str, Any]:
    """The table's schema file (``segment-data/_state/schemas/<db>/<table>.json``), for tools without
    a metastore: columns in order with their types, partition keys, location."""
    return {
        "database": spec.database,
        "table": spec.name,
        "columns": [{"name": name, "type": kind} for name, kind in spec.columns],
        "partition_keys": list(spec.partition_keys),
        "location": spec.location,
    }


def apply_manifest(manifest: dict[str, Any], catalog: Catalog, state: SyncState) -> None:
    """Publish a run: move its files, register tables and partitions, record the ledger. Idempotent."""
    for source, target in manifest["moves"]:
        src, dst = Path(source), Path(target)
        if src.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
        elif not dst.exists():
            raise EventLakeError(
                f"run {manifest['run_id']}: staged file {src} vanished before it was published"
            )
    for table in manifest["tables"]:
        spec = TableSpec(
            table["database"],
            table["name"],
            tuple(tuple(c) for c in table["columns"]),
            tuple(table["partition_keys"]),
            table["location"],
        )
        catalog.ensure_table(spec)
        catalog.add_partitions(spec, [tuple(p) for p in table["partitions"]])
        write_json_atomic(Path(table["schema_file"]), schema_document(spec))
    state.record_synced(manifest["run_id"], manifest["files"])
    write_report_rows(Path(manifest["report_path"]), manifest["report"])
    state.drop_pending(manifest["run_id"])
    shutil.rmtree(manifest["stage"], ignore_errors=True)
