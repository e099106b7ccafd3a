"""The daily checkpoint of the run reports on a real lake and metastore: a finished day merged into
one file and one partition, read the same by Spark, `eventlake reports` and the console; killed at
every step; a lake with a partition per run upgraded in place."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from eventlake import layout
from eventlake.catalog import TableSpec, load_catalog
from eventlake.config import add_source, load_settings, write_initial_config
from eventlake.console.lake import LakeWatch
from eventlake.reports import daily_health, run_history
from eventlake.storage import LocalStorage
from eventlake.sync.protocol import rewrite
from eventlake.sync.protocol.commit import apply
from eventlake.sync.protocol.report import (
    REPORT_COLUMNS,
    REPORTS_DATABASE,
    REPORTS_TABLE,
    SyncResult,
    TableResult,
    note_report_day,
    report_partition,
    report_path,
    report_rows,
    reports_table,
    write_report_rows,
)
from eventlake.sync.protocol.report_days import checkpoint_reports, merged_through
from eventlake.sync.protocol.state import SyncState
from eventlake.timestamps import now_utc
from tests.sync.test_sync import Killed, kill_on_call

pytestmark = pytest.mark.spark

NOW = now_utc().replace(hour=12, minute=0, second=0, microsecond=0)  # (a test across midnight: today's noon)
YESTERDAY = NOW - timedelta(days=1)


def register_report(storage, lake, catalog, result: SyncResult) -> None:
    """As a sync's commit: the run's report, the reports' day index, the table and its partition."""
    rows = report_rows(result, lake)
    write_report_rows(storage, report_path(result, lake), rows)
    note_report_day(storage, lake, rows[0]["day"])
    catalog.ensure_table(reports_table(lake))
    catalog.add_partitions(reports_table(lake), [report_partition(result)])


@dataclasses.dataclass
class Project:
    settings: object
    catalog: object
    storage: LocalStorage
    source_id: str

    @property
    def lake(self) -> Path:
        return self.settings.lake.root

    def result(self, start: datetime, n: int) -> SyncResult:
        table = TableResult("web", "pages", n, False, (), ({"day": f"{start:%Y-%m-%d}"},))
        return SyncResult(
            "web", self.source_id, f"{start:%Y%m%dT%H%M%S}000Z-{n:04x}", "Success", start,
            start + timedelta(seconds=5), tables=(table,), input_files=1,
        )  # fmt: skip

    def write_run(self, start: datetime, n: int) -> None:
        register_report(self.storage, self.lake, self.catalog, self.result(start, n))

    def sync_start(self, now: datetime = NOW) -> int:
        """What a sync does first: complete interrupted commits, drop crashed stages, checkpoint."""
        state = SyncState(self.storage, self.lake, self.source_id)
        for manifest in state.pending():
            apply(manifest, self.catalog, state, self.storage, self.lake)
        self.storage.delete_tree(layout.stage_root(self.lake, self.source_id))
        say = lambda line: None  # noqa: E731
        return checkpoint_reports(self.storage, self.lake, self.catalog, state, self.source_id, say, now=now)

    def spark_runs(self, spark) -> list[tuple[str, str]]:
        spark.catalog.refreshTable(f"{REPORTS_DATABASE}.{REPORTS_TABLE}")
        rows = spark.sql(
            f"SELECT day, run_id FROM {REPORTS_DATABASE}.{REPORTS_TABLE} WHERE type = 'source'"
        ).collect()
        return sorted((r.day, r.run_id) for r in rows)

    def readers(self) -> tuple:
        """What `eventlake reports` (history, health) and the console show."""
        watch = LakeWatch(self.settings, None)
        watch.refresh()
        console = [(r.run_id, r.status, r.rows) for r in watch.runs(limit=10_000)[0]]
        return run_history(self.settings, limit=10_000), daily_health(self.settings), console

    def folder(self, day: datetime) -> list[str]:
        folder = layout.report_folder(self.lake, f"{day:%Y-%m-%d}", self.source_id)
        return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


@pytest.fixture
def project(tmp_path: Path, spark_state: Path, spark) -> Project:
    config = write_initial_config(tmp_path / "project")
    add_source(config, "web", write_key="wk_web")
    settings = load_settings(config, environ={})
    settings = dataclasses.replace(settings, lake=dataclasses.replace(settings.lake, state_dir=spark_state))
    catalog = load_catalog(settings, spark)
    catalog.drop_table(REPORTS_DATABASE, REPORTS_TABLE)  # (the session's metastore: another test's lake)
    return Project(settings, catalog, LocalStorage(), settings.source("web").id)


def lay_new(project: Project) -> list[tuple[str, str]]:
    """Yesterday's 6 runs and today's 2, written by this version (merged through the day before)."""
    assert project.sync_start(YESTERDAY - timedelta(days=1)) == 0
    for n in range(6):
        project.write_run(YESTERDAY.replace(hour=2 * n), n)
    for n in range(2):
        project.write_run(NOW.replace(hour=n), 10 + n)
    laid = [
        *((YESTERDAY.replace(hour=2 * n), n) for n in range(6)),
        *((NOW.replace(hour=n), 10 + n) for n in range(2)),
    ]
    return sorted((f"{d:%Y-%m-%d}", project.result(d, n).run_id) for d, n in laid)


def test_a_finished_day_is_one_file_and_one_partition_and_reads_the_same(project: Project, spark) -> None:
    runs = lay_new(project)
    before = project.readers()
    assert project.spark_runs(spark) == runs
    assert len(project.catalog.partitions(REPORTS_DATABASE, REPORTS_TABLE)) == 2  # a partition per day

    assert project.sync_start() == 1
    [marker, merged] = [n for n in project.folder(YESTERDAY) if not n.startswith("report-")] or [None, None]
    assert project.folder(YESTERDAY) == sorted([marker, merged])  # the per-run files are gone
    assert layout.marker_run_id(marker) and merged.startswith("reports-compact-")
    assert len(project.folder(NOW)) == 2  # today is still being written: not merged
    assert project.spark_runs(spark) == runs
    assert project.readers() == before
    assert merged_through(project.storage, project.lake, project.source_id) == f"{YESTERDAY:%Y-%m-%d}"
    assert not SyncState(project.storage, project.lake, project.source_id).pending()

    assert project.sync_start() == 0  # a rerun the same day: one read of the progress file
    late = project.result(YESTERDAY.replace(hour=23, minute=59), 99)  # started before midnight
    write_report_rows(project.storage, report_path(late, project.lake), report_rows(late, project.lake))
    assert project.spark_runs(spark) == sorted([*runs, (f"{YESTERDAY:%Y-%m-%d}", late.run_id)])
    assert len(run_history(project.settings, limit=10_000)) == len(runs) + 1


MERGE_POINTS = {
    "after staging, before the manifest": ("eventlake.sync.protocol.state.SyncState", "write_pending", 1),
    "after the manifest, before applying it": ("eventlake.sync.protocol.runner", "apply", 1),
    "before exchanging the folders": ("eventlake.sync.protocol.rewrite", "exchange_folders", 1),
    "before dropping the manifest": ("eventlake.sync.protocol.state.SyncState", "drop_pending", 1),
    "before deleting the staging": ("eventlake.storage.LocalStorage", "delete_tree", 1),
    "before the progress file": ("eventlake.state_layout", "report_days_file", 2),  # (1: read at the start)
}  # fmt: skip
PUBLISH_POINTS = {
    "before publishing the merged file": ("eventlake.storage.LocalStorage", "publish", 1),
    "after the merged file, before the marker": ("eventlake.storage.LocalStorage", "publish", 2),
    "after the marker, before the first delete": ("eventlake.storage.LocalStorage", "delete", 1),
}
CASES = [("swap", p) for p in MERGE_POINTS] + [
    ("publish", p) for p in [*MERGE_POINTS, *PUBLISH_POINTS] if p != "before exchanging the folders"
]
# a disk that cannot exchange folders publishes the merged file into the folder, then its marker: a
# reader listing the folder (Spark) sees both until the per-run files are deleted (as a compaction)
BOTH_SEEN = ("after the merged file, before the marker", "after the marker, before the first delete")


def cannot_exchange(monkeypatch) -> None:
    monkeypatch.setattr(rewrite, "exchange_folders", lambda first, second: False)


@pytest.mark.parametrize(("mode", "point"), CASES, ids=[f"{m}: {p}" for m, p in CASES])
def test_a_merge_killed_at_any_step_is_completed_exactly_once(
    project: Project, spark, monkeypatch, mode: str, point: str
) -> None:
    runs = lay_new(project)
    before = project.readers()
    if mode == "publish":  # the object store's order of steps (without the version folder)
        cannot_exchange(monkeypatch)
    kill_on_call(monkeypatch, *MERGE_POINTS.get(point) or PUBLISH_POINTS[point])
    with pytest.raises(Killed):
        project.sync_start()
    monkeypatch.undo()
    assert project.readers() == before  # eventlake's readers: every run once at every step
    if point not in BOTH_SEEN:
        assert project.spark_runs(spark) == runs  # the catalog's too
    if mode == "publish":
        cannot_exchange(monkeypatch)
    project.sync_start()
    assert project.readers() == before and project.spark_runs(spark) == runs
    assert [n for n in project.folder(YESTERDAY) if n.startswith("report-")] == []
    assert len(project.folder(YESTERDAY)) == 2
    assert not SyncState(project.storage, project.lake, project.source_id).pending()
    assert merged_through(project.storage, project.lake, project.source_id) == f"{YESTERDAY:%Y-%m-%d}"


# -- a lake with a partition per run (written before the merge) --------------------------------

LEGACY_TABLE_COLUMNS = tuple(c for c in REPORT_COLUMNS if c[0] != "run_id")


def lay_legacy(project: Project) -> list[tuple[str, str]]:
    """Three days of reports as the version before wrote them, today's included: a folder and a
    partition per run."""
    spec = TableSpec(
        REPORTS_DATABASE, REPORTS_TABLE, LEGACY_TABLE_COLUMNS, ("source_id", "day", "run_id"),
        str(layout.reports_root(project.lake)), format="json",
        partition_path="day={day}/source={source_id}/run_id={run_id}",
    )  # fmt: skip
    project.catalog.ensure_database(REPORTS_DATABASE)
    project.catalog.create_table(spec)
    runs = []
    for back in (2, 1, 0):
        for n in range(3):
            result = project.result((NOW - timedelta(days=back)).replace(hour=n), back * 10 + n)
            day = f"{result.start_time:%Y-%m-%d}"
            path = layout.legacy_report_file(project.lake, day, project.source_id, result.run_id)
            write_report_rows(project.storage, path, report_rows(result, project.lake))
            note_report_day(project.storage, project.lake, day)
            project.catalog.add_partitions(spec, [(project.source_id, day, result.run_id)])
            runs.append((day, result.run_id))
    return sorted(runs)


def test_a_lake_with_a_partition_per_run_is_upgraded_in_place(project: Project, spark) -> None:
    runs = lay_legacy(project)
    assert project.spark_runs(spark) == runs
    before = project.readers()
    assert [r["run_id"] for r in before[0]] == [r for _, r in sorted(runs, reverse=True)]

    assert project.sync_start() == 3  # today's too: the new runs land beside its merged file
    assert project.spark_runs(spark) == runs
    assert len(project.catalog.partitions(REPORTS_DATABASE, REPORTS_TABLE)) == 3
    assert project.readers() == before
    for back in (2, 1, 0):
        assert len(project.folder(NOW - timedelta(days=back))) == 2  # the merged file, its marker
    project.write_run(NOW.replace(hour=5), 77)
    assert len(project.spark_runs(spark)) == len(runs) + 1
    assert len(run_history(project.settings, limit=10_000)) == len(runs) + 1


UPGRADE_POINTS = {
    "after staging, before dropping the old table": ("eventlake.catalog.hive.HiveCatalog", "drop_table", 1),
    "after dropping the old table, before the manifest": ("eventlake.sync.protocol.state.SyncState", "write_pending", 1),  # noqa: E501
    "after a day's merged file, before its marker": ("eventlake.storage.LocalStorage", "publish", 2),
    "after the first day, before deleting its run reports": ("eventlake.storage.LocalStorage", "delete", 1),
    "before registering the day partitions": ("eventlake.catalog.hive.HiveCatalog", "add_partitions", 1),
    "before the progress file": ("eventlake.state_layout", "report_days_file", 2),
}  # fmt: skip


@pytest.mark.parametrize("point", list(UPGRADE_POINTS))
def test_a_killed_upgrade_is_finished_by_the_next_sync(
    project: Project, spark, monkeypatch, point: str
) -> None:
    runs = lay_legacy(project)
    before = project.readers()
    kill_on_call(monkeypatch, *UPGRADE_POINTS[point])
    with pytest.raises(Killed):
        project.sync_start()
    monkeypatch.undo()
    assert project.readers() == before
    project.sync_start()
    assert project.spark_runs(spark) == runs and project.readers() == before
    assert len(project.catalog.partitions(REPORTS_DATABASE, REPORTS_TABLE)) == 3
    assert not list(layout.reports_root(project.lake).rglob("run_id=*"))
