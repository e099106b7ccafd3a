"""Retention on a real lake: old archive days and table partitions go (catalog, files, both
engines), unsynced archive files stay, a dry run changes nothing, an interrupted run is finished.
An expired partition stops being served at once, but its files stay for the grace period (a query
planned before the drop still reads them), and a kill at any step neither loses them nor brings
the partition back."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from eventlake import layout, state_layout
from eventlake.catalog import load_catalog
from eventlake.catalog.repair import repair_catalog
from eventlake.config import RetentionSettings, load_settings
from eventlake.errors import ConfigError, UsageError
from eventlake.query import run_query
from eventlake.sync import run_sync
from eventlake.sync.maintenance.retention import apply_retention
from eventlake.sync.protocol.manifest import Manifest
from eventlake.sync.protocol.state import SyncState
from eventlake.timestamps import now_utc, parse_timestamp
from tests.catalog.test_contract import partition_location
from tests.conftest import Lake
from tests.sync.test_sync import Killed, kill_on_call, track

pytestmark = pytest.mark.spark
NOW = parse_timestamp("2026-11-20T12:00:00Z")
OLD, OLDER, RECENT = (
    parse_timestamp(t) for t in ("2026-11-10T07:30:00Z", "2026-11-01T23:10:00Z", "2026-11-19T08:00:00Z")
)


def quiet(line: str) -> None:
    pass


def keeping(lake: Lake, archive_days: int = 7, table_days: int = 7) -> Lake:
    settings = dataclasses.replace(lake.settings, retention=RetentionSettings(archive_days, table_days))
    return dataclasses.replace(lake, settings=settings)


def no_grace(lake: Lake) -> Lake:
    """The lake with ``sync.rewrite_grace_minutes = 0``: old and dropped files go at the next job."""
    sync = dataclasses.replace(lake.settings.sync, rewrite_grace_minutes=0)
    return dataclasses.replace(lake, settings=dataclasses.replace(lake.settings, sync=sync))


def retain(lake: Lake, spark, **options):
    [result] = apply_retention(lake.settings, [lake.slug], spark=spark, now=NOW, say=quiet, **options)
    return result


def message_ids(lake: Lake, spark, engine: str) -> list[str]:
    table = f"{lake.source.database}.track_order_completed"
    if engine == "spark":
        spark.catalog.refreshTable(table)
    rows = run_query(
        lake.settings, f"SELECT message_id FROM {table} ORDER BY 1", engine=engine, spark=spark
    ).rows
    return [row["message_id"] for row in rows]


def archive_files(lake: Lake) -> list[Path]:
    return sorted(Path(layout.archive_source_dir(lake.settings.lake.root, lake.source.id)).rglob("*.gz"))


@pytest.fixture
def synced(lake: Lake, spark) -> Lake:
    """Three received days synced: 2026-11-01 and 2026-11-10 past a 7-day retention, 2026-11-19 not."""
    lake = keeping(lake)
    lake.archive([track("older-1"), track("older-2")], OLDER)
    lake.archive([track("old-1")], OLD)
    lake.archive([track("recent-1")], RECENT)
    [result] = run_sync(lake.settings, [lake.slug], spark=spark, say=quiet)
    assert result.status == "Success"
    return lake


def test_a_dry_run_lists_what_would_go_and_deletes_nothing(synced: Lake, spark) -> None:
    files = archive_files(synced)
    result = retain(synced, spark, dry_run=True)
    assert [(e.kind, e.what, e.files) for e in result.expired] == [
        ("archive", "2026-11-01", 1),
        ("archive", "2026-11-10", 1),
        ("table", f"{synced.source.database}.track_order_completed day=2026-11-01/hr=23", 1),
        ("table", f"{synced.source.database}.track_order_completed day=2026-11-10/hr=07", 1),
    ]
    assert archive_files(synced) == files
    assert message_ids(synced, spark, "duckdb") == ["old-1", "older-1", "older-2", "recent-1"]


def test_old_archive_days_and_partitions_go_from_files_catalog_and_both_engines(synced: Lake, spark) -> None:
    unsynced = synced.archive([track("late")], OLDER)  # an old day, but no sync has read it
    result = retain(synced, spark)
    assert result.status == "Success"
    assert result.unsynced_files == 1
    assert [e.what for e in result.expired if e.kind == "archive"] == ["2026-11-01", "2026-11-10"]
    remaining = archive_files(synced)
    assert unsynced in remaining and len(remaining) == 2  # and the recent day's file
    for engine in ("duckdb", "spark"):
        assert message_ids(synced, spark, engine) == ["recent-1"]
    catalog = load_catalog(synced.settings, spark)
    assert catalog.partitions(synced.source.database, "track_order_completed") == [("2026-11-19", "08")]
    assert expired_files(synced), "their files stay for the grace period"
    again = retain(synced, spark)  # nothing left past retention (the unsynced file is still kept)
    assert (again.status, again.expired, again.unsynced_files) == ("Nothing to do", [], 1)
    [late] = run_sync(synced.settings, [synced.slug], spark=spark, say=quiet)
    assert late.status == "Success"
    assert retain(synced, spark).unsynced_files == 0  # synced now: its archive day goes


def test_an_interrupted_run_is_finished_by_the_next(synced: Lake, spark) -> None:
    """Left by a version before the grace period (dropped from the catalog, files left; or a folder
    gone and the catalog not yet told): the next run deletes what is left either way."""
    synced = no_grace(synced)
    catalog = load_catalog(synced.settings, spark)
    database, table = synced.source.database, "track_order_completed"
    spec = next(s for s in _specs(synced) if s.name == table)
    catalog.drop_partitions(spec, [("2026-11-01", "23")])  # its folder stays
    folder = Path(spec.partition_location(("2026-11-10", "07")))
    for path in folder.iterdir():  # its catalog entry stays
        path.unlink()
    folder.rmdir()
    result = retain(synced, spark)
    assert sorted(e.what.split(" ")[1] for e in result.expired if e.kind == "table") == [
        "day=2026-11-01/hr=23",
        "day=2026-11-10/hr=07",
    ]
    assert catalog.partitions(database, table) == [("2026-11-19", "08")]
    assert not Path(spec.partition_location(("2026-11-01", "23"))).exists()
    assert message_ids(synced, spark, "duckdb") == ["recent-1"]


def test_an_interrupted_sync_is_completed_before_its_expired_partitions_go(synced: Lake, spark) -> None:
    """A sync killed after its manifest, moving a file into a partition past retention: retention
    completes it first, then deletes the partition with that file (else the next sync's roll-forward
    would bring the expired partition back); a dry run completes nothing."""
    root, source_id = synced.settings.lake.root, synced.source.id
    spec = next(s for s in _specs(synced) if s.name == "track_order_completed")
    folder = Path(spec.partition_location(("2026-11-01", "23")))
    run_id = "20261121T104700123Z-1a2b"
    staged = Path(layout.stage_dir(root, source_id, run_id)) / "table" / "late.parquet"
    staged.parent.mkdir(parents=True)
    staged.write_bytes((folder / next(p.name for p in folder.iterdir())).read_bytes())
    manifest = Manifest(
        run_id=run_id, source_id=source_id, files=(), moves=((str(staged), str(folder / "late.parquet")),),
        tables=(), report_path="", report=(), stage=str(staged.parents[1]),
    )  # fmt: skip
    state = SyncState(synced.settings.lake.storage(), root, source_id)
    state.write_pending(manifest)
    synced = no_grace(synced)
    retain(synced, spark, dry_run=True)
    assert state.pending() == [manifest] and not (folder / "late.parquet").exists()
    retain(synced, spark)
    assert state.pending() == [] and not folder.exists() and not staged.exists()
    assert message_ids(synced, spark, "duckdb") == ["recent-1"]


EXPIRED = (("2026-11-01", "23"), ("2026-11-10", "07"))
TABLE = "track_order_completed"


def expired_files(lake: Lake) -> list[Path]:
    """Every file left of the expired partitions, in the table's folder and its versions tree."""
    table = layout.table_dir(lake.settings.lake.root, lake.source.id, TABLE)
    versions = layout.versions_dir(table)
    assert versions is not None
    return sorted(
        path
        for root in (Path(table), Path(versions))
        for path in root.rglob("*")
        if path.is_file() and any(f"day={day}/hr={hr}" in path.as_posix() for day, hr in EXPIRED)
    )


def retired_records(lake: Lake) -> list[Path]:
    return sorted(Path(state_layout.retired_dir(lake.settings.lake.root, lake.source.id)).glob("*.json"))


def test_a_query_planned_before_the_drop_reads_the_files_for_the_grace_period(synced: Lake, spark) -> None:
    """Trino or Athena plan a query with the partitions' locations in the catalog, then open their
    files: one planned just before retention's drop still reads them (no HIVE_CANNOT_OPEN_SPLIT),
    while no new query, of either engine or through the catalog, sees the partitions any more; the
    files go at the first job past ``sync.rewrite_grace_minutes``."""
    catalog = load_catalog(synced.settings, spark)
    spec = next(s for s in _specs(synced) if s.name == TABLE)
    planned = [
        p for v in EXPIRED for p in sorted(Path(partition_location(catalog, spec, v)).glob("*.parquet"))
    ]
    assert len(planned) == 2, planned
    result = retain(synced, spark)
    assert result.status == "Success", result.error
    assert [e.what.split(" ")[1] for e in result.expired if e.kind == "table"] == [
        "day=2026-11-01/hr=23",
        "day=2026-11-10/hr=07",
    ]
    read = sorted(m for path in planned for m in pq.read_table(path).column("message_id").to_pylist())
    assert read == ["old-1", "older-1", "older-2"]  # the query planned before the drop finishes
    for engine in ("duckdb", "spark"):  # a query that starts now does not see them
        assert message_ids(synced, spark, engine) == ["recent-1"]
    assert catalog.partitions(synced.source.database, TABLE) == [("2026-11-19", "08")]
    # within the grace period: a rerun drops nothing more, catalog repair registers nothing again
    again = retain(synced, spark)
    assert [e for e in again.expired if e.kind == "table"] == [], again.expired
    repair_catalog(synced.settings, [synced.slug], spark=spark, say=quiet)
    assert catalog.partitions(synced.source.database, TABLE) == [("2026-11-19", "08")]
    assert message_ids(synced, spark, "duckdb") == ["recent-1"]
    assert all(path.exists() for path in planned) and retired_records(synced)
    # the first job past the grace period (here a sync with nothing to read) deletes them
    [synced_again] = run_sync(no_grace(synced).settings, [synced.slug], spark=spark, say=quiet)
    assert synced_again.status in ("Success", "Nothing to do"), synced_again
    assert expired_files(synced) == [] and retired_records(synced) == []
    assert message_ids(synced, spark, "duckdb") == ["recent-1"]


def _kill_in_deletes(monkeypatch, number: int) -> None:
    """Kill at the ``number``-th delete of an expired partition's file (after the grace period)."""
    from eventlake.storage.local import LocalStorage

    original, calls = LocalStorage.delete, []

    def delete(self, path):
        if any(f"day={day}/hr={hr}" in str(path) for day, hr in EXPIRED):
            calls.append(path)
            if len(calls) == number:
                raise Killed
        return original(self, path)

    monkeypatch.setattr(LocalStorage, "delete", delete)


KILL_POINTS = {
    "before the retired record": ("eventlake.state_layout", "retired_file", 1),
    "before the empty versions": ("eventlake.partitions", "marker_document", 1),
    "between the empty versions": ("eventlake.partitions", "marker_document", 2),
    "before the catalog drop": ("eventlake.catalog.hive.HiveCatalog", "drop_partitions", 1),
    "deleting the files after the grace": None,
}


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_retention_killed_at_any_step_loses_nothing_and_brings_nothing_back(
    synced: Lake, spark, monkeypatch, point
) -> None:
    """Killed at each step: the record, once written, is never lost, and the next job past the
    grace period drops the partitions from the catalog (if the kill came first) and deletes their
    files, even if retention does not run again; once the empty versions are there, no reader
    sees the partitions' rows again."""
    lake = no_grace(synced) if point == "deleting the files after the grace" else synced
    with monkeypatch.context() as patch:
        if KILL_POINTS[point] is None:
            _kill_in_deletes(patch, 2)
        else:
            kill_on_call(patch, *KILL_POINTS[point])
        with pytest.raises(Killed):
            retain(lake, spark)
    catalog = load_catalog(synced.settings, spark)
    recorded = point != "before the retired record"
    assert bool(retired_records(synced)) == recorded
    hidden = point in ("before the catalog drop", "deleting the files after the grace")
    if hidden:  # the empty versions are there: no reader of eventlake's sees the rows again
        assert message_ids(synced, spark, "duckdb") == ["recent-1"]
    # the next job past the grace period (not retention): what the record names goes
    [after] = run_sync(no_grace(synced).settings, [synced.slug], spark=spark, say=quiet)
    assert after.status in ("Success", "Nothing to do"), after
    if recorded:
        assert expired_files(synced) == [] and retired_records(synced) == []
        assert catalog.partitions(synced.source.database, TABLE) == [("2026-11-19", "08")]
        assert message_ids(synced, spark, "duckdb") == ["recent-1"]
    # and retention's next run finishes whatever is left
    again = retain(no_grace(synced), spark)
    assert again.status in ("Success", "Nothing to do"), again.error
    assert expired_files(synced) == [] and retired_records(synced) == []
    assert catalog.partitions(synced.source.database, TABLE) == [("2026-11-19", "08")]
    for engine in ("duckdb", "spark"):
        assert message_ids(synced, spark, engine) == ["recent-1"]


def test_only_archive_retention_keeps_the_tables(synced: Lake, spark) -> None:
    lake = keeping(synced, archive_days=7, table_days=0)
    result = retain(lake, spark)
    assert {e.kind for e in result.expired} == {"archive"}
    assert message_ids(lake, spark, "duckdb") == ["old-1", "older-1", "older-2", "recent-1"]


def test_retention_off_and_bad_settings_are_clear_errors(lake: Lake, spark) -> None:
    with pytest.raises(UsageError, match=r"retention is off: set \[retention\] archive_days"):
        apply_retention(lake.settings, [lake.slug], spark=spark, say=quiet)
    lake.config.write_text(lake.config.read_text() + "\n[retention]\ntable_days = -3\n")
    with pytest.raises(ConfigError, match="retention.table_days"):
        load_settings(lake.config, environ={})


def _specs(lake: Lake):
    from eventlake.catalog.schema_file import read_schema_files

    return read_schema_files(lake.settings.lake.storage(), lake.settings.lake.root, [lake.source.database])


def test_the_dedupe_index_goes_a_window_and_a_day_after_the_archive(synced: Lake, spark) -> None:
    index = Path(state_layout.dedupe_index_dir(synced.settings.lake.root, synced.source.id))
    files = sorted(index.glob("*/*.keys"))
    assert files  # the sync's ids, in a folder named after the run (started now)
    day = files[0].parent.name[len("run_id=") :][:8]
    day = f"{day[:4]}-{day[4:6]}-{day[6:]}"

    def retain_at(days_later: int, **options):
        later = now_utc() + timedelta(days=days_later)
        [result] = apply_retention(
            synced.settings, [synced.slug], spark=spark, now=later, say=quiet, **options
        )
        return [(e.what, e.files) for e in result.expired if e.kind == "dedupe"]

    # archive cutoff 7 days back, the source's 7-day window and a day: the run's ids stay for 15 days
    assert retain_at(14) == []
    assert sorted(index.glob("*/*.keys")) == files
    assert retain_at(16, dry_run=True) == [(day, len(files))]
    assert sorted(index.glob("*/*.keys")) == files
    assert retain_at(16) == [(day, len(files))]
    assert not list(index.glob("*/*.keys")) and not list(index.iterdir())
