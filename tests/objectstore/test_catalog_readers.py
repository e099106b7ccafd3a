"""Readers through the catalog see whole partitions: a reader that knows nothing of eventlake and
does only what Athena does (Glue GetPartitions, list each partition's location, read every Parquet
file there) reads, in every partition, the rows before a rewrite or the rows after it, never
another count, while a compaction, a replay, a user deletion and ``schema set-type`` rewrite the
lake on S3 (moto) with its tables in Glue."""

from __future__ import annotations

import dataclasses
import io
import threading
from datetime import datetime, timedelta, timezone

import boto3
import pyarrow.parquet as pq
import pytest

from eventlake import layout
from eventlake.query import run_query
from eventlake.sync import commit, rewrite, run_sync
from eventlake.sync.compact import compact_sources
from eventlake.sync.erase import delete_user
from eventlake.sync.replay import ReplayRange, run_replay
from eventlake.sync.retype import set_column_type

pytestmark = pytest.mark.integration

DAY = datetime(2026, 11, 19, tzinfo=timezone.utc)
TABLES = ("track_order_completed", "page")


def quiet(line: str) -> None:
    pass


def message(kind: str, message_id: str, user: str) -> dict:
    if kind == "track":
        return {"type": "track", "userId": user, "event": "Order Completed", "messageId": message_id,
                "properties": {"revenue": 1.5}}  # fmt: skip
    return {"type": "page", "userId": user, "messageId": message_id, "name": "Home"}


class AthenaLike:
    """What Athena does to read a partitioned table, with boto3 only: the table's partitions from
    Glue, then every object under each partition's location (a path part starting with ``_`` or
    ``.`` is hidden, as for Athena, Trino and Hive), each read as Parquet."""

    def __init__(self, endpoint: str) -> None:
        self.glue = boto3.client("glue", endpoint_url=endpoint, region_name="us-east-1")
        self.s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")

    def counts(self, database: str, table: str) -> dict[tuple[str, ...], int]:
        """Rows per partition."""
        found = {}
        for page in self.glue.get_paginator("get_partitions").paginate(
            DatabaseName=database, TableName=table
        ):
            for partition in page["Partitions"]:
                found[tuple(partition["Values"])] = self.rows(partition["StorageDescriptor"]["Location"])
        return found

    def rows(self, location: str) -> int:
        bucket, _, prefix = location.removeprefix("s3://").partition("/")
        prefix = prefix.rstrip("/") + "/"
        total = 0
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                if any(part.startswith(("_", ".")) for part in item["Key"][len(prefix) :].split("/")):
                    continue
                body = self.s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
                total += pq.ParquetFile(io.BytesIO(body)).metadata.num_rows
        return total

    def lake(self, database: str) -> dict[tuple[str, tuple[str, ...]], int]:
        return {(t, p): n for t in TABLES for p, n in self.counts(database, t).items()}


def duckdb_counts(lake) -> dict[tuple[str, tuple[str, ...]], int]:
    found = {}
    for table in TABLES:
        sql = f"SELECT day, hr, count(*) AS n FROM {lake.source.database}.{table} GROUP BY day, hr"
        for row in run_query(lake.settings, sql, engine="duckdb").rows:
            found[(table, (row["day"], row["hr"]))] = row["n"]
    return found


def test_a_reader_through_glue_sees_each_partition_before_or_after_every_rewrite(
    s3_lake, spark, moto, monkeypatch
):
    lake = s3_lake
    settings = dataclasses.replace(lake.settings, compact=dataclasses.replace(lake.settings.compact,
                                                                            older_than_hours=0))  # fmt: skip
    # two hours of one day, two syncs each (two files per partition): u2's rows in both hours
    for batch in range(2):
        for hour in (7, 8):
            messages = [message(kind, f"{kind}-{hour}-{batch}-{n}", f"u{n % 3}")
                        for kind in ("track", "page") for n in range(6)]  # fmt: skip
            lake.archive(messages, DAY + timedelta(hours=hour, minutes=batch))
        (synced,) = run_sync(settings, spark=spark, say=quiet)
        assert synced.status == "Success", synced
    reader = AthenaLike(moto.endpoint)
    database = lake.source.database
    before = reader.lake(database)
    assert len(before) == 4 and set(before.values()) == {12} and before == duckdb_counts(lake)
    after = {key: 8 for key in before}  # u1 has a third of the rows
    allowed = {key: {before[key], after[key]} for key in before}

    seen: list[dict] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def loop() -> None:
        try:
            while not stop.is_set():
                seen.append(reader.lake(database))
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)

    # besides the loop, a read between every step of the switch (the files and markers of every
    # partition published at once, then each partition's location moved)
    steps: list[dict] = []

    def reading_around(original):
        def call(*args, **kwargs):
            steps.append(reader.lake(database))
            answer = original(*args, **kwargs)
            steps.append(reader.lake(database))
            return answer

        return call

    for module, name in ((rewrite, "publish_versions"), (rewrite, "switch_location"), (commit, "retire")):
        monkeypatch.setattr(module, name, reading_around(getattr(module, name)))
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        [compacted] = compact_sources(settings, [lake.slug], say=quiet)
        assert compacted.partitions == 4, compacted
        replayed = run_replay(
            settings, lake.slug, ReplayRange(DAY.date(), DAY.date()), spark=spark, say=quiet
        )
        assert replayed.status == "Success", replayed
        [erased] = delete_user(settings, "u1", [lake.slug], say=quiet)
        assert erased.rows_deleted == 16, erased  # 4 of each partition's 12
        set_column_type(
            settings, spark, f"{database}.track_order_completed", "properties_revenue", "string", quiet
        )
    finally:
        stop.set()
        thread.join()
    assert not errors, errors
    assert seen and steps
    for counts in [*seen, *steps]:
        assert set(counts) == set(before), counts
        assert all(n in allowed[key] for key, n in counts.items()), counts
    assert reader.lake(database) == after == duckdb_counts(lake)
    # each partition is in a version folder now; the old files stay for the grace period
    partitions = reader.glue.get_partitions(DatabaseName=database, TableName="page")["Partitions"]
    assert all("/_v-" in p["StorageDescriptor"]["Location"] for p in partitions)
    retired = settings.lake.storage().list(layout.retired_dir(settings.lake.root, lake.source.id))
    assert retired
    # a later run past the grace period deletes them; readers see the same rows
    settings = dataclasses.replace(settings, sync=dataclasses.replace(settings.sync, rewrite_grace_minutes=0))
    compact_sources(settings, [lake.slug], say=quiet)
    assert not settings.lake.storage().list(layout.retired_dir(settings.lake.root, lake.source.id))
    assert reader.lake(database) == after == duckdb_counts(lake)
    # a later sync appends into the partition's version folder, where both readers read
    lake.archive(
        [message("track", f"late-{n}", "u5") for n in range(3)], DAY + timedelta(hours=7, minutes=30)
    )
    (synced,) = run_sync(settings, spark=spark, say=quiet)
    assert synced.status == "Success", synced
    appended = {**after, ("track_order_completed", ("2026-11-19", "07")): 11}
    assert reader.lake(database) == appended == duckdb_counts(lake)
