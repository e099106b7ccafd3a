"""Trino reads each partition before or after every rewrite: while compaction, a replay, a user
deletion, ``schema set-type`` and retention rewrite (or drop) the partitions of a lake on S3 (moto)
with its tables in Glue, Trino queries looping over the touched partitions, through a catalog with
default settings and one with ``hive.recursive-directories=true`` (it also reads the files of
subfolders: a version folder under a partition's old location), see in each partition the rows
before or the rows after, never another count; also once the grace period has passed and the old
files are deleted. (tests/objectstore/test_catalog_readers.py does the same with an Athena-like
reader written with boto3.)"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from datetime import timedelta

import pytest

from eventlake.config import RetentionSettings, load_settings
from eventlake.query import run_query
from eventlake.sync import run_sync
from eventlake.sync.maintenance import retention
from eventlake.sync.maintenance.compact import compact_sources
from eventlake.sync.maintenance.erase import delete_user
from eventlake.sync.maintenance.replay import ReplayRange, run_replay
from eventlake.sync.maintenance.retention import apply_retention
from eventlake.sync.maintenance.retype import set_column_type
from eventlake.sync.protocol import commit, rewrite
from tests.conftest import Lake
from tests.objectstore.conftest import s3_project
from tests.objectstore.test_catalog_readers import message, quiet
from tests.trino.lake import DAY
from tests.trino.server import ATHENA_CATALOG, Trino, glue_catalog

pytestmark = pytest.mark.integration

TABLES = ("track_order_completed", "page")
OLD = DAY - timedelta(days=3)  # a partition retention drops
Counts = dict[tuple[str, str, str], int]  # (table, day, hr) -> rows


def _dropped_during_query(error: Exception, partition: str) -> bool:
    """Trino's HIVE_PARTITION_DROPPED_DURING_QUERY naming a partition that begins with ``partition``."""
    text = str(error)
    return "HIVE_PARTITION_DROPPED_DURING_QUERY" in text and f"Partition {partition}" in text


def trino_counts(trino: Trino, catalog: str, database: str) -> Counts:
    """Rows per partition, a query per table (each reads every partition of its table)."""
    found: Counts = {}
    for table in TABLES:
        for day, hr, n in trino.rows(
            f"SELECT day, hr, count(*) FROM {database}.{table} GROUP BY day, hr", catalog
        ):
            found[(table, day, hr)] = n
    return found


def duckdb_counts(lake: Lake) -> Counts:
    found: Counts = {}
    for table in TABLES:
        sql = f"SELECT day, hr, count(*) AS n FROM {lake.source.database}.{table} GROUP BY day, hr"
        for row in run_query(lake.settings, sql, engine="duckdb").rows:
            found[(table, row["day"], row["hr"])] = row["n"]
    return found


def test_trino_sees_each_partition_before_or_after_every_rewrite(
    trino: Trino, moto, spark, spark_state, tmp_path, monkeypatch
):
    slug = f"trino{uuid.uuid4().hex[:6]}"
    config = s3_project(tmp_path / "project", moto, f"t-{uuid.uuid4().hex[:12]}", slug)
    settings = load_settings(config, environ={})
    settings = dataclasses.replace(
        settings,
        lake=dataclasses.replace(settings.lake, state_dir=spark_state),
        compact=dataclasses.replace(settings.compact, older_than_hours=0),
        retention=RetentionSettings(table_days=2),
    )
    lake = Lake(tmp_path / "project", config, settings, slug)
    database = lake.source.database
    # two hours of one day, two syncs each (two files per partition), and an hour three days before:
    # u1's rows in each
    for batch in range(2):
        for at in [DAY + timedelta(hours=7), DAY + timedelta(hours=8)] + (
            [OLD + timedelta(hours=7)] * (1 - batch)
        ):
            messages = [message(kind, f"{kind}-{at:%d%H}-{batch}-{n}", f"u{n % 3}")
                        for kind in ("track", "page") for n in range(6)]  # fmt: skip
            lake.archive(messages, at + timedelta(minutes=batch))
        (synced,) = run_sync(settings, spark=spark, say=quiet)
        assert synced.status == "Success", synced

    trino.ensure_catalog(ATHENA_CATALOG, glue_catalog(moto.endpoint))
    recursive = "glue_recursive"
    trino.ensure_catalog(recursive, glue_catalog(moto.endpoint, **{"hive.recursive-directories": "true"}))
    catalogs = (ATHENA_CATALOG, recursive)
    before = duckdb_counts(lake)
    old = {key for key in before if key[1] == f"{OLD:%Y-%m-%d}"}
    assert len(before) == 6 and len(old) == 2, before
    assert {trino_counts(trino, catalog, database) == before for catalog in catalogs} == {True}
    erased = {key: n * 2 // 3 for key, n in before.items()}  # u1 has a third of the rows
    after = {key: n for key, n in erased.items() if key not in old}  # retention drops the old hour
    allowed = {key: {before[key], erased[key]} for key in before}

    seen: list[tuple[str, Counts]] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    raced: list[str] = []  # queries that met retention's drop between their planning steps

    def read_all() -> None:
        for catalog in catalogs:
            for attempt in range(3):
                try:
                    seen.append((catalog, trino_counts(trino, catalog, database)))
                    break
                except Exception as exc:
                    # Trino lists a table's partitions, then fetches them: one dropped in between fails
                    # the query with this clean error (the client retries), never with wrong rows. Only
                    # retention drops partitions here, and only the old day's
                    if not _dropped_during_query(exc, f"day={OLD:%Y-%m-%d}/") or attempt == 2:
                        raise
                    raced.append(str(exc))

    def loop() -> None:
        try:
            while not stop.is_set():
                read_all()
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)

    # besides the loop, a read between the steps of every switch (the files and markers of the
    # partitions published, then each partition's location moved in the catalog, then the old files
    # retired) and around retention's drop
    def reading_around(original):
        def call(*args, **kwargs):
            read_all()
            answer = original(*args, **kwargs)
            read_all()
            return answer

        return call

    steps = ((rewrite, "publish_versions"), (rewrite, "switch_location"), (commit, "retire"),
             (retention, "retire_partitions"))  # fmt: skip
    for module, name in steps:
        monkeypatch.setattr(module, name, reading_around(getattr(module, name)))
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        [compacted] = compact_sources(settings, [lake.slug], say=quiet)
        assert compacted.partitions == 4, compacted  # the two-file partitions
        replayed = run_replay(
            settings, lake.slug, ReplayRange(DAY.date(), DAY.date()), spark=spark, say=quiet
        )
        assert replayed.status == "Success", replayed
        [deleted] = delete_user(settings, "u1", [lake.slug], say=quiet)
        assert deleted.rows_deleted == sum(before.values()) - sum(erased.values()), deleted
        set_column_type(
            settings, spark, f"{database}.track_order_completed", "properties_revenue", "string", quiet
        )
        # retention drops the expired hour: its files stay for the grace period, so a query planned
        # before the drop still reads them (it failed with HIVE_CANNOT_OPEN_SPLIT when retention
        # deleted them at the drop)
        [expired] = apply_retention(
            settings, [lake.slug], spark=spark, say=quiet, now=DAY + timedelta(days=1)
        )
    finally:
        stop.set()
        thread.join()
    assert not errors, errors
    assert {e.kind for e in expired.expired} == {"table"} and len(expired.expired) == 2, expired
    reads = {catalog: sum(1 for c, _ in seen if c == catalog) for catalog in catalogs}
    assert min(reads.values()) >= 10, reads
    for catalog, counts in seen:
        # every partition there (retention's may be gone), each with the rows before or after
        assert set(before) - old <= set(counts) <= set(before), (catalog, counts)
        wrong = {key: n for key, n in counts.items() if n not in allowed[key]}
        assert not wrong, (catalog, wrong, allowed)
    for catalog in catalogs:
        assert trino_counts(trino, catalog, database) == after == duckdb_counts(lake)
    retired = settings.lake.storage().list(rewrite_retired(settings, lake))
    assert retired, "the old files stay for the grace period"
    # a later run past the grace period deletes them; Trino reads the same rows
    settings = dataclasses.replace(settings, sync=dataclasses.replace(settings.sync, rewrite_grace_minutes=0))
    compact_sources(settings, [lake.slug], say=quiet)
    assert not settings.lake.storage().list(rewrite_retired(settings, lake))
    for catalog in catalogs:
        assert trino_counts(trino, catalog, database) == after == duckdb_counts(lake)
    print(f"\nTrino reads during the rewrites: {reads}")


def rewrite_retired(settings, lake: Lake):
    from eventlake import state_layout

    return state_layout.retired_dir(settings.lake.root, lake.source.id)
