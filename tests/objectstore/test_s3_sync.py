"""The sync with the lake on S3 (a moto server) and the tables in Glue: the same rows as on a
local lake, every file in the bucket (nothing on local disk), Glue tables Athena can read, and a
run killed at any commit step completed exactly once."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

import boto3
import pytest
from botocore.client import BaseClient

from eventlake import layout, state_layout
from eventlake.catalog import load_catalog
from eventlake.config import CatalogSettings
from eventlake.errors import ConfigError
from eventlake.query import run_query
from eventlake.sync import run_sync
from eventlake.sync.maintenance.replay import ReplayRange, run_replay
from eventlake.timestamps import now_utc
from tests.objectstore.conftest import spark_sql_rows
from tests.sync.test_sync import CRASH_POINTS as LOCAL_CRASH_POINTS
from tests.sync.test_sync import Killed, kill_on_call

pytestmark = pytest.mark.integration


def track(message_id: str, **properties) -> dict:
    return {"type": "track", "userId": "u1", "event": "Order Completed", "messageId": message_id,
            "properties": properties}  # fmt: skip


MESSAGES = [
    track("m1", revenue=9.5),
    track("m2", revenue=12),
    track("m1", revenue=9.5),  # a retry: dropped
    {"type": "identify", "userId": "u1", "messageId": "i1", "traits": {"plan": "pro"}},
    {"type": "page", "userId": "u1", "messageId": "p1", "name": "Home"},
]


def sync(lake, spark):
    (result,) = run_sync(lake.settings, spark=spark, say=lambda line: None)
    return result


def table_rows(lake, table: str) -> list[dict]:
    db = lake.source.database
    sql = f"SELECT * FROM {db}.{table} ORDER BY message_id"
    rows = run_query(lake.settings, sql, engine="duckdb").rows
    return [
        {k: v for k, v in r.items() if k not in ("project_id", "run_id")} for r in rows
    ]  # ids of the source, run


def test_a_lake_on_s3_holds_the_same_rows_as_a_local_lake(s3_lake, lake, spark, moto):
    received = now_utc()
    for each in (lake, s3_lake):
        each.archive(MESSAGES[:3], received)
        each.archive(MESSAGES[3:], received)
        each.archive_lines([b"not JSON"], received)  # an invalid message: quarantined
    local, remote = sync(lake, spark), sync(s3_lake, spark)
    assert remote.status == local.status == "Success", remote.error
    assert remote.rows == local.rows == 4 and remote.duplicates_dropped == 1
    assert remote.rejected_messages == local.rejected_messages == 1
    tables = sorted(t.table for t in local.tables)
    assert tables == sorted(t.table for t in remote.tables) and len(tables) == 3
    for table in [*tables, "_quarantine"]:
        assert table_rows(s3_lake, table) == table_rows(lake, table), table

    # Spark SQL reads the lake in the bucket too (its own session: Glue -> tables from schema files)
    db = s3_lake.source.database
    query = f"SELECT message_id, properties_revenue, day FROM {db}.track_order_completed ORDER BY 1"
    duck = run_query(s3_lake.settings, query, engine="duckdb").rows
    assert [
        (r["message_id"], float(r["properties_revenue"]), r["day"]) for r in spark_sql_rows(s3_lake, query)
    ] == [(r["message_id"], float(r["properties_revenue"]), r["day"]) for r in duck]

    # every byte is in the bucket: nothing under a local folder named after the URI
    assert not (s3_lake.root / "s3:").exists()
    s3 = boto3.client("s3", endpoint_url=moto.endpoint)
    prefix = s3_lake.settings.lake.root.key
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="eventlake-lake", Prefix=prefix)["Contents"]]
    assert any("/segment-data/data/" in k and k.endswith(".parquet") for k in keys)
    assert any("/segment-data/_state/ledger/" in k for k in keys)
    assert not any("/segment-stage/" in k for k in keys)  # the run's staging is gone

    # Glue: s3:// locations with Parquet objects under them, as Athena reads them
    glue = boto3.client("glue", endpoint_url=moto.endpoint)
    table = glue.get_table(DatabaseName=db, Name="track_order_completed")["Table"]
    descriptor = table["StorageDescriptor"]
    assert descriptor["Location"].startswith(f"s3://eventlake-lake/{prefix}/segment-data/data/")
    assert descriptor["InputFormat"] == "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
    assert table["TableType"] == "EXTERNAL_TABLE"
    (partition,) = glue.get_partitions(DatabaseName=db, TableName="track_order_completed")["Partitions"]
    location = partition["StorageDescriptor"]["Location"]
    assert location.startswith("s3://") and any(
        f"s3://eventlake-lake/{k}".startswith(location.rstrip("/") + "/")
        for k in keys
        if k.endswith(".parquet")
    )

    # a resent message is dropped by the dedupe index, whose filters the lookup fetched once into
    # the local state (one copy per key file of the first run) instead of a ranged GET per id
    s3_lake.archive([track("m2", revenue=12), track("m3", revenue=1)], now_utc())
    again = sync(s3_lake, spark)
    assert (again.status, again.rows, again.duplicates_dropped) == ("Success", 1, 1), again.error
    filters = state_layout.dedupe_filter_dir(s3_lake.settings.lake.state_dir, s3_lake.source.id)
    first_run = [k for k in keys if "/_state/dedupe/" in k and k.endswith(".keys")]
    assert len(list(filters.iterdir())) == len(first_run) > 0


def test_a_lake_on_azure_holds_the_same_rows_as_a_local_lake(azure_lake, lake, spark):
    received = now_utc()
    for each in (lake, azure_lake):
        each.archive(MESSAGES, received)
    local, remote = sync(lake, spark), sync(azure_lake, spark)
    assert remote.status == local.status == "Success", remote.error
    assert remote.rows == local.rows == 4
    for table in sorted(t.table for t in local.tables):
        assert table_rows(azure_lake, table) == table_rows(lake, table), table
    storage, root = azure_lake.settings.lake.storage(), azure_lake.settings.lake.root
    assert str(root).startswith("abfss://") and storage.list(
        layout.source_data_dir(root, azure_lake.source.id), "**/*.parquet"
    )
    assert not storage.list(layout.stage_root(root, azure_lake.source.id), "**/*")


def test_a_hive_metastore_without_the_s3_connector_is_refused_clearly(s3_lake, spark):
    settings = dataclasses.replace(s3_lake.settings, catalog=CatalogSettings())  # kind = "hive"
    with pytest.raises(ConfigError, match=r"hadoop-aws.*spark\.jars.*kind = \"glue\""):
        load_catalog(settings, spark)


# the local lake's crash points, on S3's store and Glue (S3 publishes a run's files in a batch:
# copies side by side, then DeleteObjects of the staged copies)
CRASH_POINTS = {
    **LOCAL_CRASH_POINTS,
    "after moving the first file": ("eventlake.storage.s3.S3Storage", "_copy_staged", 2),
    "after the copies, before deleting the staged files": (
        "eventlake.storage.s3.S3Storage",
        "delete_many",
        1,
    ),
    "while registering partitions": ("eventlake.catalog.glue.GlueCatalog", "add_partitions", 1),
}


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_a_sync_on_s3_killed_at_any_commit_step_is_completed_exactly_once(s3_lake, spark, monkeypatch, point):
    s3_lake.archive([track("m1"), track("m2", revenue=1)])
    kill_on_call(monkeypatch, *CRASH_POINTS[point])
    with pytest.raises(Killed):
        sync(s3_lake, spark)
    monkeypatch.undo()

    again = sync(s3_lake, spark)  # completes the interrupted run (its lease holder is this live process)
    assert (again.status, again.rows) == ("Success", 2), again.error  # what it completed
    assert [r["message_id"] for r in table_rows(s3_lake, "track_order_completed")] == ["m1", "m2"]
    storage, root = s3_lake.settings.lake.storage(), s3_lake.settings.lake.root
    assert not storage.list(state_layout.state_dir(root, "pending", s3_lake.source.id), "*")
    assert len(storage.list(state_layout.state_dir(root, "ledger", s3_lake.source.id), "*.json")) == 1
    reports = [f for f in storage.list(layout.reports_root(root), "**/report-*.json")]
    assert len(reports) == 1


def s3_calls(monkeypatch) -> list[tuple[str, str]]:
    """``(operation, key or prefix)`` of every S3 call this process makes from now on (Spark's
    Python workers, which stage the files, are other processes)."""
    calls: list[tuple[str, str]] = []
    original = BaseClient._make_api_call

    def counted(self, operation, params):
        if self.meta.service_model.service_name == "s3":
            calls.append((operation, params.get("Key") or params.get("Prefix") or ""))
        return original(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", counted)
    return calls


DAY = datetime(2026, 11, 18, tzinfo=timezone.utc)


def test_a_sync_on_s3_publishes_its_files_in_a_batch(s3_lake, spark, monkeypatch):
    for hour in range(4):
        s3_lake.archive([track(f"m{hour}", revenue=hour)], DAY + timedelta(hours=hour, minutes=5))
    calls = s3_calls(monkeypatch)
    result = sync(s3_lake, spark)
    assert (result.status, result.rows) == ("Success", 4), result.error
    tables = [key for op, key in calls if op == "CopyObject" and "/segment-data/data/" in key]
    assert len({key.rsplit("/", 2)[-2] for key in tables}) == 4  # hr=0 .. hr=3
    # the staged copies go in DeleteObjects requests, not one DeleteObject each
    assert not [key for op, key in calls if op == "DeleteObject" and "/segment-stage/" in key]
    assert ("DeleteObjects", "") in calls
    # the current folder of the 4 hours: one listing of their day, not one of each
    listed = [key for op, key in calls if op == "ListObjectsV2" and "/segment-data/data/" in key]
    assert len(listed) == 1 and listed[0].endswith("/day=2026-11-18/"), listed
    assert [r["message_id"] for r in table_rows(s3_lake, "track_order_completed")] == ["m0", "m1", "m2", "m3"]


REPLAY_CRASH_POINTS = {  # publish_many calls of a replay: in its stage (1), the moves (2), the version
    "before the version folders' files": ("eventlake.storage.s3.S3Storage", "publish_many", 3),
    "between the files and the markers": ("eventlake.storage.s3.S3Storage", "publish_many", 4),
    "before deleting the staged markers": ("eventlake.storage.s3.S3Storage", "delete_many", 4),
}  # folders' files (3), their markers (4); delete_many: one in each


@pytest.mark.parametrize("point", list(REPLAY_CRASH_POINTS))
def test_a_replay_on_s3_killed_while_switching_partitions_is_completed_exactly_once(
    s3_lake, spark, monkeypatch, point
):
    for hour in range(3):
        s3_lake.archive([track(f"m{hour}", revenue=hour)], DAY + timedelta(hours=hour, minutes=5))
    assert sync(s3_lake, spark).rows == 3
    calls = s3_calls(monkeypatch)
    with monkeypatch.context() as patch:
        kill_on_call(patch, *REPLAY_CRASH_POINTS[point])
        with pytest.raises(Killed):
            run_replay(
                s3_lake.settings, s3_lake.slug, ReplayRange(DAY.date(), DAY.date()), spark=spark,
                say=lambda line: None,
            )  # fmt: skip
    markers = lambda: [  # noqa: E731
        key for op, key in calls if op == "HeadObject" and "/v-" in key and key.endswith(".json")
    ]
    assert not markers()  # the first application: no version folder can hold its marker yet
    calls.clear()
    again = sync(s3_lake, spark)  # completes the replay first, looking for the markers
    assert (again.status, again.rows, again.replay_from) == ("Success", 3, DAY), again
    assert len(markers()) == 3
    assert [r["message_id"] for r in table_rows(s3_lake, "track_order_completed")] == ["m0", "m1", "m2"]
    glue = boto3.client("glue", endpoint_url=s3_lake.settings.catalog.endpoint_url)
    found = glue.get_partitions(DatabaseName=s3_lake.source.database, TableName="track_order_completed")
    locations = [p["StorageDescriptor"]["Location"] for p in found["Partitions"]]
    assert len(locations) == 3 and all("/segment-data/versions/" in loc for loc in locations), locations
