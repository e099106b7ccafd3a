"""Readers through the catalog see whole partitions: a reader that knows nothing of eventlake and
does only what Athena does (Glue GetPartitions, list each partition's location, read every Parquet
file there) reads, in every partition, the rows before a rewrite or the rows after it, never
another count, while a compaction, a replay, a user deletion and ``schema set-type`` rewrite the
lake on S3 (moto) with its tables in Glue, after the grace period deletes the old files, and while
retention drops partitions (a read planned before the drop reads their files: they stay for the
grace period too). So does a reader that lists each location recursively and hides
nothing (no ``_`` or ``.`` rule): no version of a partition lies inside a location a reader may use
(they are in ``segment-data/versions/``), and no location has a part starting with ``_`` or ``.``."""

from __future__ import annotations

import dataclasses
import io
import threading
from datetime import datetime, timedelta, timezone

import boto3
import pyarrow.parquet as pq
import pytest

from eventlake import layout, state_layout
from eventlake.query import run_query
from eventlake.sync import run_sync
from eventlake.sync.maintenance.compact import compact_sources
from eventlake.sync.maintenance.erase import delete_user
from eventlake.sync.maintenance.replay import ReplayRange, run_replay
from eventlake.sync.maintenance.retention import apply_retention
from eventlake.sync.maintenance.retype import set_column_type
from eventlake.sync.protocol import commit, rewrite, runner

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
    Glue, then every object under each partition's location (S3 lists a prefix recursively), each
    ``*.parquet`` one read as Parquet. ``hide``: a path part starting with ``_`` or ``.`` is hidden,
    as for Athena, Trino and Hive; without it, nothing is (the most literal reader of "all files in
    the location")."""

    def __init__(self, endpoint: str, hide: bool = True) -> None:
        self.hide = hide
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
                inside = item["Key"][len(prefix) :].split("/")
                if not inside[-1].endswith(".parquet") or (
                    self.hide and any(part.startswith(("_", ".")) for part in inside)
                ):
                    continue
                body = self.s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
                total += pq.ParquetFile(io.BytesIO(body)).metadata.num_rows
        return total

    def lake(self, database: str) -> dict[tuple[str, tuple[str, ...]], int]:
        return {(t, p): n for t in TABLES for p, n in self.counts(database, t).items()}

    def locations(self, database: str, tables: tuple[str, ...] = TABLES) -> list[str]:
        return [
            partition["StorageDescriptor"]["Location"]
            for table in tables
            for partition in self.glue.get_partitions(DatabaseName=database, TableName=table)["Partitions"]
        ]


class Watch:
    """Both readers (Athena's hiding rule, and a recursive one hiding nothing) reading the lake in a
    loop while something runs, and once before and after each step of a rewrite's switch and of
    the grace period's deletes; every read is kept, with its reader."""

    def __init__(self, endpoint: str, database: str, monkeypatch) -> None:
        self.readers = (AthenaLike(endpoint), AthenaLike(endpoint, hide=False))
        self.database = database
        self.seen: list[tuple[bool, dict]] = []
        steps = ((rewrite, "publish_versions"), (rewrite, "switch_location"), (commit, "retire"),
                 (runner, "drop_retired"))  # fmt: skip
        for module, name in steps:
            monkeypatch.setattr(module, name, self._around(getattr(module, name)))

    def read(self) -> None:
        for reader in self.readers:
            self.seen.append((reader.hide, reader.lake(self.database)))

    def _around(self, original):
        def call(*args, **kwargs):
            self.read()
            answer = original(*args, **kwargs)
            self.read()
            return answer

        return call

    def during(self, action) -> list[tuple[bool, dict]]:
        """The reads while ``action()`` runs (looped and around its steps)."""
        self.seen = []
        stop = threading.Event()
        errors: list[BaseException] = []

        def loop() -> None:
            try:
                while not stop.is_set():
                    self.read()
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        try:
            action()
        finally:
            stop.set()
            thread.join()
        assert not errors, errors
        assert {hide for hide, _ in self.seen} == {True, False}, "each reader read"
        return self.seen


def no_hidden_part(location: str) -> bool:
    return not any(part.startswith(("_", ".")) for part in location.removeprefix("s3://").split("/"))


def duckdb_counts(lake, tables: tuple[str, ...] = TABLES) -> dict[tuple[str, tuple[str, ...]], int]:
    found = {}
    for table in tables:
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
    assert AthenaLike(moto.endpoint, hide=False).lake(database) == before
    after = {key: 8 for key in before}  # u1 has a third of the rows
    watch = Watch(moto.endpoint, database, monkeypatch)

    def rewrites() -> None:
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

    for hide, counts in watch.during(rewrites):
        assert set(counts) == set(before), (hide, counts)
        assert all(n in (before[key], after[key]) for key, n in counts.items()), (hide, counts)
    assert reader.lake(database) == after == duckdb_counts(lake)
    # each partition is in a version folder now, outside the table's folder, in no location's
    # folder and with no hidden part; the old files stay for the grace period
    locations = reader.locations(database)
    assert len(locations) == 4 and all("/segment-data/versions/data/" in loc for loc in locations), locations
    assert all(no_hidden_part(loc) for loc in locations), locations
    retired = settings.lake.storage().list(state_layout.retired_dir(settings.lake.root, lake.source.id))
    assert retired
    # a later run past the grace period deletes them; readers see the same rows
    settings = dataclasses.replace(settings, sync=dataclasses.replace(settings.sync, rewrite_grace_minutes=0))
    for hide, counts in watch.during(lambda: compact_sources(settings, [lake.slug], say=quiet)):
        assert counts == after, (hide, counts)
    assert not settings.lake.storage().list(state_layout.retired_dir(settings.lake.root, lake.source.id))
    assert reader.lake(database) == after == duckdb_counts(lake)
    assert AthenaLike(moto.endpoint, hide=False).lake(database) == after
    # a later sync appends into the partition's version folder, where both readers read
    lake.archive(
        [message("track", f"late-{n}", "u5") for n in range(3)], DAY + timedelta(hours=7, minutes=30)
    )
    (synced,) = run_sync(settings, spark=spark, say=quiet)
    assert synced.status == "Success", synced
    appended = {**after, ("track_order_completed", ("2026-11-19", "07")): 11}
    assert reader.lake(database) == appended == duckdb_counts(lake)
    assert AthenaLike(moto.endpoint, hide=False).lake(database) == appended
    # retention drops hour 07 (recorded, an empty version for eventlake's readers, then out of
    # Glue): a reader sees it whole, or not at all; one that took the partition from Glue before the
    # drop still reads its files, which stay for the grace period
    kept, no_grace = settings.retention, settings.sync
    settings = dataclasses.replace(
        settings,
        retention=dataclasses.replace(kept, table_days=1),
        sync=dataclasses.replace(no_grace, rewrite_grace_minutes=60),
    )
    now = DAY + timedelta(days=1, hours=8, minutes=30)  # hour 07 ended more than a day before

    def retention() -> None:
        [result] = apply_retention(settings, [lake.slug], catalog=None, spark=spark, say=quiet, now=now)
        assert result.status == "Success", result

    gone = {key for key in appended if key[1][1] == "07"}
    planned = {
        (table, tuple(p["Values"])): p["StorageDescriptor"]["Location"]
        for table in TABLES
        for p in reader.glue.get_partitions(DatabaseName=database, TableName=table)["Partitions"]
    }
    for hide, counts in watch.during(retention):
        assert set(counts) - set(appended) == set() and set(appended) - set(counts) <= gone, (hide, counts)
        assert all(n == appended[key] for key, n in counts.items()), (hide, counts)
    remaining = {key: n for key, n in appended.items() if key not in gone}
    assert reader.lake(database) == remaining == duckdb_counts(lake)
    # a query that planned hour 07 before the drop reads it whole within the grace period
    assert {key: reader.rows(planned[key]) for key in gone} == {key: appended[key] for key in gone}
    storage, data = settings.lake.storage(), layout.source_data_dir(settings.lake.root, lake.source.dir_name)

    def left() -> list[str]:
        return [
            str(info.path)
            for folder in (data, layout.versions_dir(data))
            for info in storage.list(folder, "**/*")
        ]

    assert any("/hr=07/" in path for path in left())
    # past the grace period the next job deletes them: nothing of hour 07 is left, in the table's
    # folders or in the versions tree
    settings = dataclasses.replace(settings, sync=no_grace)
    for hide, counts in watch.during(lambda: compact_sources(settings, [lake.slug], say=quiet)):
        assert counts == remaining, (hide, counts)
    assert any("/hr=08/" in path for path in left()) and not any("/hr=07/" in path for path in left()), left()


def test_partitions_rewritten_into_their_folder_by_an_earlier_version_move_out_at_their_next_rewrite(
    s3_lake, spark, moto, monkeypatch
):
    """A lake whose rewrites put version folders inside the partition folder (``_v-``, before the
    versions tree) is read as it was; a partition's next rewrite moves it into the tree, and so does
    the next compaction of one nothing else rewrites; the grace period then deletes the old ones."""
    lake = s3_lake
    settings = dataclasses.replace(lake.settings, compact=dataclasses.replace(lake.settings.compact,
                                                                            older_than_hours=0))  # fmt: skip
    for batch in range(2):
        for hour in (7, 8):  # u1 in hour 07 only
            messages = [message("page", f"p-{hour}-{batch}-{n}", f"u{n + 3 * (hour - 7)}") for n in range(3)]
            lake.archive(messages, DAY + timedelta(hours=hour))
        (synced,) = run_sync(settings, spark=spark, say=quiet)
        assert synced.status == "Success", synced
    reader, everything = AthenaLike(moto.endpoint), AthenaLike(moto.endpoint, hide=False)
    database, seven, eight = lake.source.database, ("2026-11-19", "07"), ("2026-11-19", "08")
    counts = lambda: (reader.counts(database, "page"), everything.counts(database, "page"))  # noqa: E731
    with monkeypatch.context() as earlier:  # the previous version's name: a folder inside the partition
        earlier.setattr(layout, "version_folder_name", lambda number, run: f"_v-{number:06d}-{run}")
        [compacted] = compact_sources(settings, [lake.slug], say=quiet)
    assert compacted.partitions == 2, compacted
    locations = reader.locations(database, ("page",))
    assert all("/_v-000001-compact-" in loc for loc in locations), locations  # the old layout, exactly
    assert counts() == ({seven: 6, eight: 6},) * 2
    assert duckdb_counts(lake, ("page",)) == {("page", seven): 6, ("page", eight): 6}

    [erased] = delete_user(settings, "u1", [lake.slug], say=quiet)  # hour 07's next rewrite
    assert erased.rows_deleted == 2, erased
    by_hour = {loc.split("/hr=")[1][:2]: loc for loc in reader.locations(database, ("page",))}
    assert "/segment-data/versions/data/" in by_hour["07"] and "/hr=07/v-000002-compact-" in by_hour["07"]
    assert "/_v-000001-compact-" in by_hour["08"]
    assert counts() == ({seven: 4, eight: 6},) * 2
    # past the grace period: the next compaction moves hour 08 out (nothing else to compact there)
    settings = dataclasses.replace(settings, sync=dataclasses.replace(settings.sync, rewrite_grace_minutes=0))
    [moved] = compact_sources(settings, [lake.slug], say=quiet)
    assert moved.partitions == 1 and moved.files_out == 0, moved
    locations = reader.locations(database, ("page",))
    assert all("/segment-data/versions/data/" in loc and no_hidden_part(loc) for loc in locations), locations
    assert counts() == ({seven: 4, eight: 6},) * 2
    [again] = compact_sources(settings, [lake.slug], say=quiet)  # nothing left to move; the old files go
    assert again.partitions == 0, again
    storage = settings.lake.storage()
    assert not storage.list(layout.table_dir(settings.lake.root, lake.source.dir_name, "page"), "**/*")
    assert counts() == ({seven: 4, eight: 6},) * 2
    assert duckdb_counts(lake, ("page",)) == {("page", seven): 4, ("page", eight): 6}
