"""`eventlake adopt` on a local lake with the Hive metastore: an SDL lake (tables not in the
catalog) adopted in place, queried, synced into, adopted again, and adopted after a crash."""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from eventlake import layout, partitions, state_layout
from eventlake.errors import UsageError
from eventlake.query import run_query
from eventlake.sync import run_sync
from eventlake.sync.maintenance import adopt as adopt_module
from eventlake.sync.maintenance.adopt import adopt_source
from eventlake.sync.maintenance.replay import ReplayRange, run_replay
from eventlake.sync.protocol import rewrite
from eventlake.sync.protocol.stage import RunStage
from eventlake.timestamps import now_utc
from tests.sync.sdl import TRACK_COLUMNS, sdl_lake, track_row, write_partition
from tests.sync.test_sync import Killed, kill_on_call

pytestmark = pytest.mark.spark


def count(lake, table: str) -> int:
    sql = f"SELECT count(*) AS n FROM {lake.source.database}.{table}"
    return run_query(lake.settings, sql, engine="duckdb").rows[0]["n"]


def adopt(lake, spark, **options):
    return adopt_source(lake.settings, lake.slug, spark=spark, **options)


def folders(lake) -> list[str]:
    data = layout.source_data_dir(lake.settings.lake.root, lake.source.id)
    return sorted(p.name for p in data.iterdir())


@pytest.mark.parametrize("style", ["track_", "tracks_"])
def test_an_sdl_lake_is_adopted_in_place_and_synced_into(lake, spark, style):
    now, storage, root = now_utc(), lake.settings.lake.storage(), lake.settings.lake.root
    ids = sdl_lake(storage, root, lake.source.id, now)
    track_table = f"{style}page_viewed"

    planned = adopt(lake, spark, dry_run=True, track_tables=style)
    assert {t.folder: t.table for t in planned.tables} == {"identify": "identify", "page_viewed": track_table}
    assert {t.table: (len(t.new_partitions), len(t.seed)) for t in planned.tables} == {
        "identify": (2, 1),
        track_table: (2, 1),
    }
    assert not storage.exists(state_layout.table_names_file(root, lake.source.id))  # a dry run writes nothing
    assert not (root / "segment-data" / "_state").exists()

    adopted = adopt(lake, spark, track_tables=style)
    assert adopted.seeded_ids == 4  # the recent hour's 3 track ids and 1 identify id
    assert count(lake, track_table) == 5 and count(lake, "identify") == 2
    db = lake.source.database
    assert spark.sql(f"SELECT count(*) AS n FROM {db}.{track_table}").collect()[0]["n"] == 5  # registered
    described = [tuple(r) for r in spark.sql(f"DESCRIBE {db}.{track_table}").collect()][:14]
    assert [(c, t) for c, t, _ in described][5:9] == [
        ("properties_revenue", "decimal(38,6)"), ("properties_quantity", "bigint"),
        ("properties_paid", "boolean"), ("properties_discount", "double"),
    ]  # fmt: skip

    # a new sync: a message SDL had (a client's resend) is dropped; the rest go into SDL's tables
    lake.archive([
        {"type": "track", "userId": "u1", "event": "Page Viewed", "messageId": "t-new-2",
         "properties": {"revenue": 9.99}},
        {"type": "track", "userId": "u2", "event": "Page Viewed", "messageId": "t-later",
         "properties": {"revenue": 1.5, "discount": 1, "coupon": "X"}},
        {"type": "identify", "userId": "u2", "messageId": "i-later", "traits": {"email": "x@y.z"}},
    ], now)  # fmt: skip
    [result] = run_sync(lake.settings, [lake.slug], spark=spark, say=lambda line: None)
    assert result.status == "Success", result.error
    assert result.duplicates_dropped == 1
    assert {t.table: t.rows for t in result.tables} == {track_table: 1, "identify": 1}
    assert folders(lake) == ["segment_type=identify", "segment_type=page_viewed"]  # no folder of its own
    assert count(lake, track_table) == 6 and count(lake, "identify") == 3
    later = (
        f"SELECT properties_discount, properties_coupon FROM {db}.{track_table} WHERE message_id = 't-later'"
    )
    assert list(run_query(lake.settings, later, engine="duckdb").rows) == [
        {"properties_discount": 1.0, "properties_coupon": "X"}
    ]
    columns = [r[0] for r in spark.sql(f"DESCRIBE {db}.{track_table}").collect()]
    sdl_columns = [name for name, _, _ in TRACK_COLUMNS]
    assert columns[: len(sdl_columns)] == sdl_columns  # SDL's columns first, in SDL's order
    assert columns.index("properties_coupon") >= len(sdl_columns)  # new ones appended after them

    # a rerun adopts nothing twice (the sync's new partition is eventlake's, not SDL's)
    again = adopt(lake, spark)
    assert not again.work and again.seeded_ids == 0
    assert count(lake, track_table) == 6
    assert ids  # the fixture's ids, for the reader


CRASHES = {
    "while registering partitions": ("eventlake.catalog.hive.HiveCatalog", "add_partitions", 2),
    "while seeding the dedupe index": ("eventlake.sync.maintenance.adopt", "_seed", 2),
    "before writing the progress": ("eventlake.sync.maintenance.adopt.Progress", "to_json", 3),
}


@pytest.mark.parametrize("point", list(CRASHES))
def test_an_adoption_killed_at_any_step_is_finished_by_a_rerun(lake, spark, monkeypatch, point):
    now, storage, root = now_utc(), lake.settings.lake.storage(), lake.settings.lake.root
    sdl_lake(storage, root, lake.source.id, now)
    kill_on_call(monkeypatch, *CRASHES[point])
    with pytest.raises(Killed):
        adopt(lake, spark)
    monkeypatch.undo()

    adopt(lake, spark)
    assert not adopt(lake, spark, dry_run=True).work
    assert count(lake, "track_page_viewed") == 5 and count(lake, "identify") == 2
    lake.archive([
        {"type": "track", "userId": "u1", "event": "Page Viewed", "messageId": "t-new-3"},
        {"type": "identify", "userId": "u1", "messageId": "i-new-1"},
    ], now)  # fmt: skip
    [result] = run_sync(lake.settings, [lake.slug], spark=spark, say=lambda line: None)
    assert result.status == "Success" and result.duplicates_dropped == 2 and result.rows == 0


def test_a_layout_the_date_partition_does_not_describe_is_refused(lake, spark):
    import dataclasses

    from eventlake.errors import EventLakeError

    storage, root = lake.settings.lake.storage(), lake.settings.lake.root
    sdl_lake(storage, root, lake.source.id, now_utc())
    source = dataclasses.replace(lake.source, date_partition="year-month-day-hour")
    settings = dataclasses.replace(lake.settings, sources=(source,))
    with pytest.raises(EventLakeError, match='set date_partition = "day-hour" for source'):
        adopt_source(settings, lake.slug, spark=spark, dry_run=True)


def test_a_replay_leaves_adopted_partitions_alone_and_writes_into_sdls_tables(lake, spark):
    """A replay rebuilds partitions from eventlake's archive, which does not hold what SDL synced: a
    range holding adopted partitions is refused (naming a --from that is safe); a replay of the days
    after them finds SDL's folders and tables (``--table`` by SDL's table name)."""
    now, storage, root = now_utc(), lake.settings.lake.storage(), lake.settings.lake.root
    sdl_lake(storage, root, lake.source.id, now - timedelta(days=3))  # SDL's last hour: 3 days ago
    adopt(lake, spark, track_tables="tracks_")
    lake.archive([
        {"type": "track", "userId": "u1", "event": "Page Viewed", "messageId": "t-today-1"},
        {"type": "track", "userId": "u1", "event": "Signed Up", "messageId": "s-today-1"},
    ], now)  # fmt: skip
    [synced] = run_sync(lake.settings, [lake.slug], spark=spark, say=lambda line: None)
    assert {t.table: t.rows for t in synced.tables} == {"tracks_page_viewed": 1, "tracks_signed_up": 1}
    assert count(lake, "tracks_page_viewed") == 6 and count(lake, "identify") == 2

    sdl_end = (now - timedelta(days=3) - timedelta(hours=2)).date()
    with pytest.raises(UsageError) as refused:
        replay(lake, spark, ReplayRange(sdl_end - timedelta(days=30), now.date()))
    assert "would replace 4 partitions adopted from Segment Data Lakes" in str(refused.value)
    assert f"--from {sdl_end + timedelta(days=1):%Y-%m-%d}" in str(refused.value)
    with pytest.raises(UsageError, match="would replace 2 partitions adopted"):  # identify's two hours
        replay(lake, spark, ReplayRange(sdl_end - timedelta(days=30), now.date(), ("identify",)))
    assert count(lake, "tracks_page_viewed") == 6 and count(lake, "identify") == 2  # nothing changed

    replayed = replay(lake, spark, ReplayRange(now.date(), now.date(), ("tracks_page_viewed",)))
    assert replayed.status == "Success" and {t.table: t.rows for t in replayed.tables} == {
        "tracks_page_viewed": 1
    }
    assert count(lake, "tracks_page_viewed") == 6 and count(lake, "tracks_signed_up") == 1
    assert folders(lake) == ["segment_type=identify", "segment_type=page_viewed", "segment_type=signed_up"]


def test_a_replay_refuses_a_partition_sdl_wrote_after_the_last_adoption(lake, spark):
    """SDL still writing during the overlap: a partition holding SDL's file written after the last
    ``eventlake adopt`` (not in its progress file) is not replaced by a replay, which would lose it."""
    now, storage, root = now_utc(), lake.settings.lake.storage(), lake.settings.lake.root
    sdl_lake(storage, root, lake.source.id, now - timedelta(days=3))
    adopt(lake, spark, track_tables="tracks_")
    lake.archive([{"type": "track", "userId": "u1", "event": "Page Viewed", "messageId": "t-today-1"}], now)
    [synced] = run_sync(lake.settings, [lake.slug], spark=spark, say=lambda line: None)
    assert synced.status == "Success"
    later = now - timedelta(hours=1) if now.hour else now  # an hour of today: in the replay's range
    write_partition(
        storage, root, lake.source.id, "page_viewed", TRACK_COLUMNS, [track_row("t-sdl-late", later)]
    )
    assert count(lake, "tracks_page_viewed") == 7
    with pytest.raises(UsageError, match="1 partitions holding data eventlake did not write"):
        replay(lake, spark, ReplayRange(now.date(), now.date(), ("tracks_page_viewed",)))
    assert count(lake, "tracks_page_viewed") == 7


def replay(lake, spark, wanted):
    return run_replay(lake.settings, lake.slug, wanted, spark=spark, say=lambda line: None)


def delete_rows_in_place(storage, folder, keep: list[str]) -> None:
    """What ``users delete`` does to a partition of a local lake: its data rewritten in place (the
    real rewrite: staged, committed by its marker) to the rows whose message id is in ``keep``."""
    names = partitions.folder_names(storage, folder)
    data = partitions.partition_files(storage, folder, names)
    rows = pa.concat_tables(pq.read_table(str(storage.local_path(names[n].path))) for n in data)
    rows = rows.filter(pc.is_in(rows["message_id"], pa.array(keep, pa.string())))
    run = rewrite.RewriteRun.new(rewrite.RewriteKind.USER_DELETION)
    stage = RunStage(folder, "s", "s", run.id, ("day", "hr"))
    outputs = (
        [rewrite.stage_output(storage, stage, folder, layout.part_file_name(run.id, 0), rows)] if keep else []
    )
    rewrite.apply_rewrite(storage, rewrite.finish_rewrite(storage, stage, folder, names, outputs, data, run))


def test_users_delete_in_place_keeps_sdls_partitions_adoptable(lake):
    """Spark-free: on a local lake ``users delete`` rewrites a partition in place, its SDL rows into
    a file of eventlake's name; the partition still holds SDL's data (its marker says so: a later
    adoption registers it, a replay leaves it alone), and once the deletion emptied every partition
    an adoption's rerun finds nothing new rather than failing."""
    now, storage, root = now_utc(), lake.settings.lake.storage(), lake.settings.lake.root
    ids = sdl_lake(storage, root, lake.source.id, now)["page_viewed"]
    table = layout.table_dir(root, lake.source.dir_name, "page_viewed")
    old = table / f"day={now - timedelta(days=30):%Y-%m-%d}" / f"hr={now - timedelta(days=30):%H}"
    delete_rows_in_place(storage, old, keep=[ids[0]])

    names = partitions.folder_names(storage, old)
    [kept] = partitions.partition_files(storage, old, names)
    assert layout.is_eventlake_file_name(kept)  # SDL's rows, in a file of eventlake's name
    assert partitions.holds_foreign_data(storage, old, names)
    found = adopt_module._folders(storage, root, lake.source, {})  # a first adoption, after the deletion
    assert len(found["page_viewed"]) == 2 and len(found["identify"]) == 2

    adopted = {folder: set(parts) for folder, parts in found.items()}
    for folder, parts in found.items():
        for values in parts:
            path = layout.table_dir(root, lake.source.dir_name, folder) / layout.partition_subdir(
                layout.partition_columns(lake.source.date_partition), values
            )
            delete_rows_in_place(storage, path, keep=[])
    assert adopt_module._folders(storage, root, lake.source, adopted) == {}  # a rerun: nothing new
    with pytest.raises(adopt_module.AdoptError, match="no SDL data under"):
        adopt_module._folders(storage, root, lake.source, {})  # a first adoption of no data is refused
