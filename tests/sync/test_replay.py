"""Replay on a real lake: a range rebuilt from the archive with today's schema (a value quarantined
before `schema set-type` comes back typed), deterministic and idempotent, partitions outside the
range untouched, reported as a replay, killed at any commit step and completed exactly once."""

from __future__ import annotations

import dataclasses
from datetime import date
from pathlib import Path

import pytest

from eventlake import layout
from eventlake.errors import UsageError
from eventlake.query import run_query
from eventlake.reports import run_history
from eventlake.sync import run_sync
from eventlake.sync.maintenance.replay import ReplayRange, parse_day, run_replay, stale_tables
from eventlake.sync.maintenance.retype import set_column_type
from eventlake.timestamps import parse_timestamp
from tests.conftest import Lake
from tests.sync.test_sync import Killed, kill_on_call, track

pytestmark = pytest.mark.spark
DAY_1, DAY_2 = parse_timestamp("2026-11-18T10:15:00Z"), parse_timestamp("2026-11-19T23:50:00Z")
RANGE = ReplayRange(date(2026, 11, 19), date(2026, 11, 19))
RANGE_START = parse_timestamp("2026-11-19T00:00:00Z")


def quiet(line: str) -> None:
    pass


@pytest.fixture
def synced(lake: Lake, spark) -> Lake:
    """Day 1: a plan as a number; day 2: a plan as text (quarantined: the column is bigint), a
    duplicate, more rows."""
    lake.archive([track("d1-a", plan=5), track("d1-b", plan=7)], DAY_1)
    run_sync(lake.settings, [lake.slug], spark=spark, say=quiet)
    lake.archive([track("d2-a", plan="pro"), track("d2-b", plan=9), track("d2-b", plan=9)], DAY_2)
    [second] = run_sync(lake.settings, [lake.slug], spark=spark, say=quiet)
    assert second.rejected_values == 1 and second.duplicates_dropped == 1
    return lake


def rows(lake: Lake, spark, engine: str, table: str = "track_order_completed") -> list[tuple]:
    qualified = f"{lake.source.database}.{table}"
    if engine == "spark":
        spark.catalog.refreshTable(qualified)
    column = "properties_plan" if table != "_quarantine" else "raw_value"
    sql = f"SELECT message_id, {column} AS v FROM {qualified} ORDER BY 1"
    found = run_query(lake.settings, sql, engine=engine, spark=spark)
    return [(r["message_id"], r["v"]) for r in found.rows]


def day_1_files(lake: Lake) -> dict[str, float]:
    table = Path(layout.table_dir(lake.settings.lake.root, lake.source.id, "track_order_completed"))
    return {str(p): p.stat().st_mtime_ns for p in (table / "day=2026-11-18").rglob("*")}


def replay(lake: Lake, spark, wanted: ReplayRange = RANGE):
    return run_replay(lake.settings, lake.slug, wanted, spark=spark, say=quiet)


def test_a_replay_after_set_type_brings_quarantined_values_back_typed(synced: Lake, spark) -> None:
    table = f"{synced.source.database}.track_order_completed"
    set_column_type(synced.settings, spark, table, "properties_plan", "string", quiet)
    before = day_1_files(synced)
    result = replay(synced, spark)
    assert (result.status, result.rows, result.rejected_values, result.duplicates_dropped) == (
        "Success",
        2,
        0,
        1,
    )
    assert result.replay_from == parse_timestamp("2026-11-19T00:00:00Z")
    expected = [("d1-a", "5"), ("d1-b", "7"), ("d2-a", "pro"), ("d2-b", "9")]
    for engine in ("duckdb", "spark"):
        assert rows(synced, spark, engine) == expected
        assert rows(synced, spark, engine, "_quarantine") == []  # the range's quarantine is replaced
    assert day_1_files(synced) == before  # outside the range: not touched

    again = replay(synced, spark)  # idempotent: the same rows, no duplicates
    assert again.rows == 2
    assert rows(synced, spark, "duckdb") == expected
    got = spark.sql(
        "SELECT replay, replay_from FROM __segment_datalake.sync_reports "
        f"WHERE source_id = '{synced.source.id}' AND type = 'source' AND replay ORDER BY start_time"
    ).collect()
    assert len(got) == 2 and all(r["replay"] for r in got)
    kinds = [r["kind"] for r in run_history(synced.settings, synced.slug)]  # `eventlake reports`
    assert kinds[:2] == ["replay", "replay"] and set(kinds[2:]) == {"sync"}


def test_the_whole_archive_replayed_gives_the_same_lake(synced: Lake, spark) -> None:
    before = {e: rows(synced, spark, e) for e in ("duckdb", "spark")}
    result = replay(synced, spark, ReplayRange(None, None))
    assert result.rows == 4
    assert {e: rows(synced, spark, e) for e in ("duckdb", "spark")} == before
    assert [m for m, _ in rows(synced, spark, "duckdb", "_quarantine")] == ["d2-a"]  # replaced, not doubled


def test_unsynced_files_are_left_for_the_next_sync(synced: Lake, spark) -> None:
    synced.archive([track("d2-late", plan=3)], DAY_2)  # in the range, not synced yet
    replay(synced, spark)
    assert [m for m, _ in rows(synced, spark, "duckdb")] == ["d1-a", "d1-b", "d2-a", "d2-b"]
    [later] = run_sync(synced.settings, [synced.slug], spark=spark, say=quiet)
    assert later.rows == 1
    assert [m for m, _ in rows(synced, spark, "duckdb")] == ["d1-a", "d1-b", "d2-a", "d2-b", "d2-late"]


def test_two_replays_of_one_from_get_distinct_rewrite_ids(synced: Lake, spark, monkeypatch) -> None:
    """A rewrite's id is not its range's start plus a few random bits: with the random part fixed,
    two replays of one ``--from`` still get two ids, and the second does not take the first one's
    marker for its own (which emptied the partition)."""
    import eventlake.sync.protocol.stage

    monkeypatch.setattr(eventlake.sync.protocol.stage.secrets, "token_hex", lambda n: "0" * (2 * n))
    minted: list[str] = []
    name = layout.compaction_marker_name
    monkeypatch.setattr(layout, "compaction_marker_name", lambda run: minted.append(run) or name(run))
    replay(synced, spark)
    first = set(minted)
    replay(synced, spark)
    assert len(first) == 1 and len(set(minted) - first) == 1, minted
    assert not next(iter(first)).startswith("compact-20261119T000000000Z")  # not the range's start
    assert [m for m, _ in rows(synced, spark, "duckdb")] == ["d1-a", "d1-b", "d2-a", "d2-b"]


CRASH_POINTS = {
    "with the manifest written": ("eventlake.sync.protocol.runner", "apply", 1),
    "between two partitions": ("eventlake.sync.protocol.rewrite", "apply_rewrite", 2),
    "before registering partitions": ("eventlake.catalog.hive.HiveCatalog", "add_partitions", 1),
}


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_a_replay_killed_at_any_commit_step_is_completed_exactly_once(
    synced: Lake, spark, monkeypatch, point
):
    with monkeypatch.context() as patch:
        kill_on_call(patch, *CRASH_POINTS[point])
        with pytest.raises(Killed):
            replay(synced, spark)
    [completed] = run_sync(synced.settings, [synced.slug], spark=spark, say=quiet)  # completes it
    assert (completed.status, completed.rows, completed.replay_from) == ("Success", 2, RANGE_START)
    expected = [("d1-a", 5), ("d1-b", 7), ("d2-a", None), ("d2-b", 9)]
    for engine in ("duckdb", "spark"):
        assert rows(synced, spark, engine) == expected
        assert len(rows(synced, spark, engine, "_quarantine")) == 1


def test_bad_ranges_are_one_line_errors(synced: Lake, spark) -> None:
    with pytest.raises(UsageError, match="no archive files received from 2026-10-01 to 2026-10-02"):
        replay(synced, spark, ReplayRange(date(2026, 10, 1), date(2026, 10, 2)))
    with pytest.raises(UsageError, match="--from 2026-11-19 is after --to 2026-11-18"):
        replay(synced, spark, ReplayRange(date(2026, 11, 19), date(2026, 11, 18)))
    with pytest.raises(UsageError, match="'2026-13-01' is not a day: use YYYY-MM-DD"):
        parse_day("2026-13-01", "--from")


def test_a_new_database_name_is_filled_by_a_replay_and_the_old_tables_are_listed(synced: Lake, spark) -> None:
    moved = dataclasses.replace(synced.source, database=f"{synced.source.database}_v2")
    settings = dataclasses.replace(synced.settings, sources=(moved,))
    lake = dataclasses.replace(synced, settings=settings)
    replay(lake, spark, ReplayRange(None, None))
    assert [m for m, _ in rows(lake, spark, "spark")] == ["d1-a", "d1-b", "d2-a", "d2-b"]
    old = synced.source.database
    assert f"{old}.track_order_completed" in stale_tables(settings, moved)
    assert f"{moved.database}.track_order_completed" not in stale_tables(settings, moved)


def test_a_replay_of_some_tables_leaves_the_others_alone(synced: Lake, spark) -> None:
    synced.archive(
        [{"type": "identify", "userId": "u1", "messageId": "i-1", "traits": {"plan": "pro"}}], DAY_2
    )
    run_sync(synced.settings, [synced.slug], spark=spark, say=quiet)
    identify = Path(layout.table_dir(synced.settings.lake.root, synced.source.id, "identify"))
    before = {str(p): p.stat().st_mtime_ns for p in identify.rglob("*")}
    table = f"{synced.source.database}.track_order_completed"
    set_column_type(synced.settings, spark, table, "properties_plan", "string", quiet)
    result = replay(synced, spark, dataclasses.replace(RANGE, tables=("track_order_completed",)))
    assert [t.table for t in result.tables] == ["track_order_completed"] and result.rows == 2
    assert {str(p): p.stat().st_mtime_ns for p in identify.rglob("*")} == before
    assert rows(synced, spark, "duckdb")[2] == ("d2-a", "pro")
    with pytest.raises(
        UsageError, match="no table nope in this source: its tables are identify, track_order_completed"
    ):
        replay(synced, spark, dataclasses.replace(RANGE, tables=("nope",)))


def quarantined(lake: Lake, spark) -> list[tuple]:
    """The quarantine's rows, by both engines (which must agree); a rejected message's raw line
    as whether it holds its id."""
    sql = (
        "SELECT kind, message_id, table_name, raw_value FROM "
        f"{lake.source.database}._quarantine ORDER BY message_id"
    )
    spark.catalog.refreshTable(f"{lake.source.database}._quarantine")
    found = [
        [tuple(r.values()) for r in run_query(lake.settings, sql, engine=e, spark=spark).rows]
        for e in ("duckdb", "spark")
    ]
    assert found[0] == found[1]
    return [
        (kind, m, table, raw if kind == "value" else f'"messageId":"{m}"' in raw)
        for kind, m, table, raw in found[0]
    ]


def test_a_replay_of_one_table_keeps_the_other_tables_quarantine_and_the_invalid_messages(
    lake: Lake, spark
) -> None:
    """One uncastable value in each of two tables and an invalid message, synced (3 quarantine
    rows): a replay of one table re-stages its own value and leaves the others; a replay of the
    whole source re-stages each exactly once."""
    viewed, added = "Item Viewed", "Cart Added"
    lake.archive([track("v1", event=viewed, n=1), track("c1", event=added, n=2)], DAY_1)
    run_sync(lake.settings, [lake.slug], spark=spark, say=quiet)
    lake.archive(
        [
            track("v2", event=viewed, n="many"),
            track("c2", event=added, n="few"),
            {"type": "track", "userId": "u1", "messageId": "bad"},  # no event: invalid
        ],
        DAY_2,
    )
    [second] = run_sync(lake.settings, [lake.slug], spark=spark, say=quiet)
    assert (second.rejected_values, second.rejected_messages) == (2, 1)
    expected = [
        ("message", "bad", None, True),
        ("value", "c2", "track_cart_added", "few"),
        ("value", "v2", "track_item_viewed", "many"),
    ]
    assert quarantined(lake, spark) == expected

    result = replay(lake, spark, dataclasses.replace(RANGE, tables=("track_item_viewed",)))
    assert (result.rows, result.rejected_values, result.rejected_messages) == (1, 1, 0)
    assert quarantined(lake, spark) == expected  # Cart Added's value and the invalid message kept

    whole = replay(lake, spark, ReplayRange(None, None))
    assert (whole.rows, whole.rejected_values, whole.rejected_messages) == (4, 2, 1)
    assert quarantined(lake, spark) == expected  # each re-staged exactly once
