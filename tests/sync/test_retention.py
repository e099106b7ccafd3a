"""Retention on a real lake: old archive days and table partitions go (catalog, files, both
engines), unsynced archive files stay, a dry run changes nothing, an interrupted run is finished."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest

from eventlake import layout, state_layout
from eventlake.catalog import load_catalog
from eventlake.config import RetentionSettings, load_settings
from eventlake.errors import ConfigError, UsageError
from eventlake.query import run_query
from eventlake.sync import run_sync
from eventlake.sync.maintenance.retention import apply_retention
from eventlake.sync.protocol.manifest import Manifest
from eventlake.sync.protocol.state import SyncState
from eventlake.timestamps import now_utc, parse_timestamp
from tests.conftest import Lake
from tests.sync.test_sync import track

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
    table = Path(layout.table_dir(synced.settings.lake.root, synced.source.id, "track_order_completed"))
    assert sorted(p.relative_to(table).as_posix() for p in table.rglob("*.parquet"))[0].startswith(
        "day=2026-11-19/"
    )
    again = retain(synced, spark)  # nothing left past retention (the unsynced file is still kept)
    assert (again.status, again.expired, again.unsynced_files) == ("Nothing to do", [], 1)
    [late] = run_sync(synced.settings, [synced.slug], spark=spark, say=quiet)
    assert late.status == "Success"
    assert retain(synced, spark).unsynced_files == 0  # synced now: its archive day goes


def test_an_interrupted_run_is_finished_by_the_next(synced: Lake, spark) -> None:
    """Killed after the catalog drop (files left) or with a folder gone and the catalog not yet
    told: the next run deletes what is left either way."""
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
    retain(synced, spark, dry_run=True)
    assert state.pending() == [manifest] and not (folder / "late.parquet").exists()
    retain(synced, spark)
    assert state.pending() == [] and not folder.exists() and not staged.exists()
    assert message_ids(synced, spark, "duckdb") == ["recent-1"]


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
