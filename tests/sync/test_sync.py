"""The Spark sync against a real local Spark, a real Hive metastore (Derby) and real Parquet."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from eventlake import layout, state_layout
from eventlake.storage import LocalStorage
from eventlake.sync import run_sync
from eventlake.sync.protocol.state import SyncState
from eventlake.timestamps import now_utc, parse_timestamp

pytestmark = pytest.mark.spark


def sync(lake, spark):
    [result] = run_sync(lake.settings, [lake.slug], spark=spark, say=lambda line: None)
    return result


def rows(spark, sql):
    return [r.asDict() for r in spark.sql(sql).collect()]


def lake_files(lake) -> dict[str, float]:
    data = layout.source_data_dir(lake.settings.lake.root, lake.source.id)
    return {str(p): p.stat().st_mtime for p in data.rglob("*") if p.is_file()}


def track(message_id, user="u1", event="Order Completed", **properties):
    return {
        "type": "track",
        "userId": user,
        "event": event,
        "messageId": message_id,
        "properties": properties,
    }


def test_tables_columns_types_and_partitions(lake, spark):
    received = parse_timestamp("2026-11-20T07:30:00Z")
    lake.archive(
        [
            track("m1", revenue=19.99, items=2, coupon="X", paid=True, at="2026-11-19T10:00:00Z"),
            track("m2", revenue=5, items=1, coupon=None),
            {
                "type": "identify",
                "userId": "u1",
                "messageId": "m3",
                "traits": {"email": "a@b.c", "age": 41},
                "context": {"library": {"name": "analytics-python", "version": "2.4.0"}},
            },
            {
                "type": "page",
                "anonymousId": "a1",
                "messageId": "m4",
                "name": "Home",
                "properties": {"path": "/", "tags": ["x", "y"]},
            },
        ],
        received_at=received,
    )
    result = sync(lake, spark)
    assert result.status == "Success"
    assert {t.table: t.rows for t in result.tables} == {"identify": 1, "page": 1, "track_order_completed": 2}

    db = lake.source.database
    types = {r["col_name"]: r["data_type"] for r in rows(spark, f"DESCRIBE {db}.track_order_completed")}
    assert types["properties_revenue"] == "decimal(38,6)"
    assert types["properties_items"] == "bigint"
    assert types["properties_paid"] == "boolean"
    assert types["properties_at"] == "timestamp"
    assert types["properties_coupon"] == "string"
    assert types["received_at"] == "timestamp" and types["message_id"] == "string"
    got = rows(
        spark,
        f"SELECT message_id, properties_revenue, properties_coupon, day, hr "
        f"FROM {db}.track_order_completed ORDER BY message_id",
    )
    assert got == [
        {
            "message_id": "m1",
            "properties_revenue": Decimal("19.990000"),
            "properties_coupon": "X",
            "day": "2026-11-20",
            "hr": "07",
        },
        {
            "message_id": "m2",
            "properties_revenue": Decimal("5.000000"),
            "properties_coupon": None,
            "day": "2026-11-20",
            "hr": "07",
        },
    ]
    assert rows(spark, f"SHOW PARTITIONS {db}.track_order_completed") == [
        {"partition": "day=2026-11-20/hr=07"}
    ]
    identify = rows(spark, f"SELECT traits_email, traits_age, context_library_name FROM {db}.identify")
    assert identify == [
        {"traits_email": "a@b.c", "traits_age": 41, "context_library_name": "analytics-python"}
    ]
    page = rows(spark, f"SELECT anonymous_id, name, properties_tags FROM {db}.page")
    assert page == [{"anonymous_id": "a1", "name": "Home", "properties_tags": '["x","y"]'}]

    table_dir = layout.table_dir(lake.settings.lake.root, lake.source.id, "track_order_completed")
    assert list((table_dir / "day=2026-11-20" / "hr=07").glob("*.parquet"))
    report = layout.report_file(
        lake.settings.lake.root, result.start_time.strftime("%Y-%m-%d"), lake.source.id, result.run_id
    )
    assert report.is_file()


def test_rerun_without_new_data_changes_nothing(lake, spark):
    lake.archive([track("m1"), track("m2")])
    first = sync(lake, spark)
    before = lake_files(lake)
    reports_before = sorted(layout.reports_root(lake.settings.lake.root).rglob("report-*.json"))
    assert reports_before
    again = sync(lake, spark)
    assert first.rows == 2
    assert again.status == "Nothing to do" and again.rows == 0
    assert lake_files(lake) == before
    assert sorted(layout.reports_root(lake.settings.lake.root).rglob("report-*.json")) == reports_before
    count = rows(spark, f"SELECT count(*) AS n FROM {lake.source.database}.track_order_completed")
    assert count == [{"n": 2}]


@pytest.mark.parametrize("lookup_ids", [200_000, 1], ids=["one lookup pass", "a lookup pass per id"])
def test_duplicate_message_ids_within_a_run_and_across_runs(lake, spark, monkeypatch, lookup_ids):
    # a micro-batch, or a big run split
    monkeypatch.setattr("eventlake.sync.pipeline.dedupe.LOOKUP_IDS", lookup_ids)
    lake.archive([track("dup", revenue=1), track("dup", revenue=1), track("m2")])
    first = sync(lake, spark)
    assert first.duplicates_dropped == 1 and first.rows == 2
    lake.archive([track("dup", revenue=1), track("m3")])  # a client retry, archived again later
    second = sync(lake, spark)
    assert second.duplicates_dropped == 1 and second.rows == 1
    got = rows(
        spark,
        f"SELECT message_id, count(*) AS n FROM {lake.source.database}.track_order_completed "
        "GROUP BY message_id ORDER BY message_id",
    )
    assert got == [{"message_id": "dup", "n": 1}, {"message_id": "m2", "n": 1}, {"message_id": "m3", "n": 1}]


def test_dedupe_window_lets_old_ids_through(lake, spark):
    old = now_utc() - timedelta(days=30)
    lake.archive([track("again")], received_at=old)
    sync(lake, spark)
    lake.archive([track("again")])  # 30 days later: outside the 7-day window
    assert sync(lake, spark).rows == 1


def test_new_columns_are_appended_and_types_never_change(lake, spark):
    lake.archive([track("m1", revenue=10)])
    sync(lake, spark)
    lake.archive([track("m2", revenue="a lot", plan="pro")])
    result = sync(lake, spark)
    [table] = result.tables
    assert table.new_columns == (("properties_plan", "string"),)
    db = lake.source.database
    described = [r["col_name"] for r in rows(spark, f"DESCRIBE {db}.track_order_completed")]
    assert described.index("properties_plan") > described.index("properties_revenue")
    types = {r["col_name"]: r["data_type"] for r in rows(spark, f"DESCRIBE {db}.track_order_completed")}
    assert types["properties_revenue"] == "bigint"
    got = rows(
        spark,
        f"SELECT message_id, properties_revenue, properties_plan FROM {db}.track_order_completed "
        "ORDER BY message_id",
    )
    assert got == [
        {"message_id": "m1", "properties_revenue": 10, "properties_plan": None},
        {"message_id": "m2", "properties_revenue": None, "properties_plan": "pro"},
    ]
    quarantined = rows(
        spark, f"SELECT kind, message_id, column_name, target_type, raw_value, reason FROM {db}._quarantine"
    )
    assert quarantined == [
        {
            "kind": "value",
            "message_id": "m2",
            "column_name": "properties_revenue",
            "target_type": "bigint",
            "raw_value": "a lot",
            "reason": quarantined[0]["reason"],
        }
    ]
    assert result.rejected_values == 1


def test_the_stage_is_made_durable_before_the_manifest_names_its_files(lake, spark, monkeypatch):
    """The run's files are staged without a sync each (``RunStage.open_write``): ``publish`` makes
    the stage durable at once before it writes the manifest, and every file the manifest names is
    under that stage by then, the run's scratch already gone (its pages need no writing out)."""
    lake.archive([track("m1", revenue=10)])
    sync(lake, spark)
    lake.archive([track("m2", revenue="a lot"), {"type": "track", "userId": "u", "messageId": "noevent"}])
    steps = []
    made_durable, write_pending = LocalStorage.make_durable, SyncState.write_pending

    def durable(self, folder):
        stage = Path(str(folder))
        steps.append(("durable", stage, {p for p in stage.rglob("*") if p.is_file()}))
        made_durable(self, folder)

    def pending(self, manifest):
        steps.append(("manifest", Path(manifest.stage), {Path(staged) for staged, _ in manifest.moves}))
        write_pending(self, manifest)

    monkeypatch.setattr(LocalStorage, "make_durable", durable)
    monkeypatch.setattr(SyncState, "write_pending", pending)
    assert sync(lake, spark).rows == 1
    assert [step[0] for step in steps] == ["durable", "manifest"]
    [(_, stage, there), (_, named, staged)] = steps
    assert named == stage and staged and staged <= there
    assert {p.relative_to(stage).parts[0] for p in staged} == {"table", "dedupe", "values", "messages"}
    assert not (stage / "scratch").exists() and not any(p.name.startswith(".") for p in there)


def test_invalid_messages_go_to_quarantine_with_their_reason(lake, spark):
    lake.archive(
        [
            track("ok1"),
            {"type": "track", "messageId": "nouser", "event": "X"},
            {"type": "track", "userId": "u", "messageId": "noevent"},
        ]
    )
    lone_surrogate = (  # valid JSON (an imported Segment file may hold it), but no Arrow string
        b'{"type":"track","event":"X","userId":"u","messageId":"sur","receivedAt":"2026-11-22T10:00:00Z",'
        b'"properties":{"a":"\\ud800"}}'
    )
    lake.archive_lines([b"{not json", b'{"type": "track"}', lone_surrogate])
    result = sync(lake, spark)
    assert result.rows == 1 and result.rejected_messages == 5
    got = rows(spark, f"SELECT message_id, reason FROM {lake.source.database}._quarantine ORDER BY reason")
    assert sorted(r["reason"].split(":")[0] for r in got) == [
        "invalid JSON",
        "invalid JSON",
        "neither userId nor anonymousId",
        "neither userId nor anonymousId",  # {"type": "track"}: the first rule it breaks
        "track message without event",
    ]
    assert any("lone UTF-16 surrogate" in r["reason"] for r in got)


def test_messages_of_suppressed_users_in_the_archive_are_dropped_and_counted(lake, spark):
    """Archived before the suppression (or imported): not in a table, not in the quarantine, counted
    in the report's ``suppressed``; the collector blocks the new ones."""
    from eventlake.archive import SuppressionList

    gone = [track("gone-1", user="u-gone"), track("gone-2", user="u-gone")]
    lake.archive(
        [track("keep", user="u-stays"), *gone, {"type": "track", "messageId": "bad", "userId": "u-gone"}]
    )
    SuppressionList(LocalStorage(), lake.settings.lake.root, lake.source.id).add(["u-gone"])
    result = sync(lake, spark)
    assert (result.rows, result.suppressed, result.rejected_messages, result.input_messages) == (1, 2, 1, 4)
    assert rows(spark, f"SELECT message_id FROM {lake.source.database}.track_order_completed") == [
        {"message_id": "keep"}
    ]
    quarantined = rows(spark, f"SELECT message_id FROM {lake.source.database}._quarantine")
    assert quarantined == [{"message_id": "bad"}]  # invalid before it is anyone's
    got = rows(
        spark,
        "SELECT suppressed FROM __segment_datalake.sync_reports "
        f"WHERE source_id = '{lake.source.id}' AND type = 'source'",
    )
    assert got == [{"suppressed": 2}]


class Killed(BaseException):
    """Stands for the process dying at that instant (not an Exception: nothing handles it)."""


def kill_on_call(monkeypatch, module_path: str, attribute: str, number: int) -> None:
    """Make call ``number`` of ``module_path.attribute`` (a module's function or a class's method)
    raise :class:`Killed`; the calls before it run as usual."""
    import importlib

    try:
        target = importlib.import_module(module_path)
    except ImportError:
        module, _, cls = module_path.rpartition(".")
        target = getattr(importlib.import_module(module), cls)
    original = getattr(target, attribute)
    calls = []

    def fail(*args, **kwargs):
        calls.append(1)
        if len(calls) == number:
            raise Killed
        return original(*args, **kwargs)

    monkeypatch.setattr(target, attribute, fail)


CRASH_POINTS = {
    "after staging, before publishing": ("eventlake.sync.protocol.runner", "apply", 1),
    "after moving the first file": ("eventlake.storage.LocalStorage", "publish", 2),
    "before writing the report": ("eventlake.sync.protocol.commit", "write_report_rows", 1),
    "while registering partitions": ("eventlake.catalog.hive.HiveCatalog", "add_partitions", 1),
    "before recording the ledger": ("eventlake.sync.protocol.state.SyncState", "record_synced", 1),
    "before dropping the manifest": ("eventlake.sync.protocol.state.SyncState", "drop_pending", 1),
}


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_a_run_killed_at_any_commit_step_is_completed_exactly_once(lake, spark, monkeypatch, point):
    lake.archive([track("m1"), track("m2", revenue=1)])
    kill_on_call(monkeypatch, *CRASH_POINTS[point])
    with pytest.raises(Killed):
        sync(lake, spark)
    monkeypatch.undo()

    state = SyncState(LocalStorage(), lake.settings.lake.root, lake.source.id)
    [interrupted] = state.pending()
    again = sync(lake, spark)  # completes the interrupted run first; nothing is left to sync after it
    # ... and says what it completed: that run, its rows, not "Nothing to do, 0 rows"
    assert (again.status, again.run_id, again.rows, again.input_files) == (
        "Success",
        interrupted.run_id,
        2,
        1,
    )
    assert [(t.table, t.rows, t.is_new) for t in again.tables] == [("track_order_completed", 2, True)]
    assert sync(lake, spark).status == "Nothing to do"
    assert not state.pending() and len(state.synced_files()) == 1
    db = lake.source.database
    assert rows(spark, f"SELECT message_id FROM {db}.track_order_completed ORDER BY 1") == [
        {"message_id": "m1"},
        {"message_id": "m2"},
    ]
    reports = rows(
        spark,
        "SELECT run_id, row_count FROM __segment_datalake.sync_reports "
        f"WHERE source_id = '{lake.source.id}' AND type = 'source'",
    )
    assert len(reports) == 1 and reports[0]["row_count"] == 2
    assert state_layout.schema_file(lake.settings.lake.root, db, "track_order_completed").is_file()


def test_a_failed_run_commits_nothing_and_the_rerun_syncs_everything(lake, spark, monkeypatch):
    from eventlake.sync.pipeline import job

    lake.archive([track("m1")])

    def boom(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(job, "write_tables", boom)
    failed = sync(lake, spark)
    assert failed.status == "Failed" and "disk on fire" in failed.error
    monkeypatch.undo()
    assert not list(layout.stage_root(lake.settings.lake.root, lake.source.id).glob("*"))
    assert sync(lake, spark).rows == 1


class FullDisk(LocalStorage):
    """A store every write to which fails (a full disk, an unreachable bucket)."""

    @contextlib.contextmanager
    def open_write(self, path, mode=0o644, *, durable=True):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))
        yield


def test_a_store_that_fails_the_run_and_its_report_leaves_the_runs_error(lake, spark):
    from eventlake.catalog import load_catalog
    from eventlake.sync.pipeline.job import SourceSync

    lake.archive([track("m1")])
    said = []
    catalog = load_catalog(lake.settings, spark)
    job = SourceSync(spark, catalog, FullDisk(), lake.settings, lake.source, said.append)
    with pytest.raises(Exception, match="No space left on device") as failed:
        job.run()
    report = re.compile(r"report-[^/]*\.json")  # the run's report file (layout.report_file)
    assert not report.search(str(failed.value))  # the run's error, not the report's
    assert any(report.search(line) and "No space left" in line for line in said), said


def test_hostile_event_names_stay_inside_their_table(lake, spark):
    names = ["../../etc/passwd", "a'b\"c`d", "x=y/z", "日本語 event", "DROP TABLE x; --"]
    lake.archive([track(f"m{i}", event=name) for i, name in enumerate(names)])
    result = sync(lake, spark)
    assert result.rows == len(names)
    data = layout.source_data_dir(lake.settings.lake.root, lake.source.id)
    for path in data.rglob("*.parquet"):
        assert os.path.commonpath([path.resolve(), data.resolve()]) == str(data.resolve())
    tables = {t.table for t in result.tables}
    assert all(Path(t).name == t and t.replace("_", "").isalnum() for t in tables)


@pytest.mark.parametrize(
    ("date_partition", "folder", "keys"),
    [
        ("day-hour", "day=2026-11-20/hr=07", ("day", "hr")),
        ("year-month-day-hour", "year=2026/month=11/day=20/hr=07", ("year", "month", "day", "hr")),
        ("year-month-day", "year=2026/month=11/day=20", ("year", "month", "day")),
        ("day", "day=2026-11-20", ("day",)),
    ],
)
def test_date_partition_layouts_prefix_and_slug_paths(lake, spark, date_partition, folder, keys):
    source = dataclasses.replace(
        lake.source, date_partition=date_partition, table_prefix="seg_", partition_by_slug=True
    )
    lake.settings = dataclasses.replace(lake.settings, sources=(source,))
    lake.archive([track("m1")], received_at=parse_timestamp("2026-11-20T07:30:00Z"))
    [table] = sync(lake, spark).tables
    assert table.table == "seg_track_order_completed"
    assert table.partitions == (dict(zip(keys, folder.replace("/", "=").split("=")[1::2], strict=True)),)
    data = layout.table_dir(lake.settings.lake.root, lake.slug, "track_order_completed") / folder
    assert list(data.glob("*.parquet"))
    got = rows(
        spark, f"SELECT message_id, {', '.join(keys)} FROM {source.database}.seg_track_order_completed"
    )
    assert got == [{"message_id": "m1", **table.partitions[0]}]


def test_table_limit_sends_messages_of_new_tables_to_quarantine(lake, spark):
    settings = lake.settings
    lake.settings = dataclasses.replace(
        settings, sync=dataclasses.replace(settings.sync, max_tables_per_database=2)
    )
    lake.archive([track("m1", event="A"), track("m2", event="B"), track("m3", event="C")])
    result = sync(lake, spark)
    assert [t.table for t in result.tables] == ["track_a", "track_b"]
    assert result.rejected_messages == 1 and "table limit reached" in result.notices[0]
    got = rows(spark, f"SELECT message_id, table_name, reason FROM {lake.source.database}._quarantine")
    assert got == [{"message_id": "m3", "table_name": "track_c", "reason": "table limit reached"}]
    lake.archive([track("m4", event="A")])  # existing tables still receive messages
    assert sync(lake, spark).rows == 1


def test_reports_are_a_catalog_table(lake, spark):
    lake.archive([track("m1"), {"type": "identify", "userId": "u1", "messageId": "i1"}])
    result = sync(lake, spark)
    got = rows(
        spark,
        "SELECT type, table_name, row_count, status, day, run_id FROM __segment_datalake.sync_reports "
        f"WHERE source_id = '{lake.source.id}' ORDER BY type, table_name",
    )
    day = result.start_time.strftime("%Y-%m-%d")
    assert got == [
        {"type": "event", "table_name": "identify", "row_count": 1, "status": "finished", "day": day,
         "run_id": result.run_id},
        {"type": "event", "table_name": "track_order_completed", "row_count": 1, "status": "finished",
         "day": day, "run_id": result.run_id},
        {"type": "source", "table_name": None, "row_count": 2, "status": "finished", "day": day,
         "run_id": result.run_id},
    ]  # fmt: skip


def test_a_second_sync_waits_or_refuses_while_one_runs(lake, spark):
    import fcntl
    import threading

    from eventlake.sync import SKIPPED

    lake.archive([track("m1")])
    lock = state_layout.sync_lock_file(lake.settings.lake.root, lake.source.id)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        [skipped] = run_sync(lake.settings, [lake.slug], wait=False, spark=spark, say=lambda line: None)
        assert skipped.status == SKIPPED and "holds its lock" in skipped.error and skipped.rows == 0
        said = []
        threading.Timer(1.0, lambda: fcntl.flock(held, fcntl.LOCK_UN)).start()
        [result] = run_sync(lake.settings, [lake.slug], spark=spark, say=said.append)
    assert any("waiting" in line for line in said) and result.rows == 1


def test_a_lake_root_with_commas_and_spaces(lake, spark, tmp_path):
    root = tmp_path / "my lake, v2"
    lake.settings = dataclasses.replace(
        lake.settings, lake=dataclasses.replace(lake.settings.lake, root=root)
    )
    lake.archive([track("m1"), track("m2")])
    lake.archive([track("m3")])
    assert sync(lake, spark).rows == 3
