"""The run's observation (counts, value types, name collisions of the deduplicated messages) from
the parse pass's one aggregation less the dedupe's rows, held equal to the earlier path: a second
Spark pass over the messages without the dropped positions (a broadcast anti-join, grouped by
segment type and shape)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from eventlake.sync.pipeline.dedupe import DROPPED, dropped_rows
from eventlake.sync.pipeline.plan import Observed, count_parsed, observe, parsed_groups
from eventlake.sync.pipeline.transform import PARSED_SCHEMA, SUPPRESSED

pytestmark = pytest.mark.spark

SHAPES = {
    "0-0": {"revenue": "double", "coupon": "string"},
    "0-1": {"revenue": "bigint"},
    "1-0": {"name": "string", "url": "string"},
    "1-1": {"name": "string", "context_ip": "string", "revenue": "string"},
    "2-0": {},
    "2-1": {"traits_email": "string", "_shadowed_day": "string"},
    "3-0": {'say_"hi"\\': "string", "prénom_名": "bigint", "a\u2028b": "timestamp"},  # escaped in JSON
}
SEGMENT_TYPES = ["track_order_completed", "track_signed_up", "pages", "identifies"]
COLLISIONS = [None, [], ["revenue: Revenue won over revenue"], ["a_b: a.b won over a_b", "c: C won over c"]]
START = datetime(2026, 11, 2, tzinfo=timezone.utc)


def parsed_rows(seed: int, messages: int) -> list[tuple]:
    """A run's ``parsed`` rows (:data:`PARSED_SCHEMA`): valid messages of every kind, invalid ones,
    a suppressed user's, each shape's row and a damaged file's row."""
    rng = random.Random(seed)
    rows: list[tuple] = []
    for position in range(messages):
        received = START + timedelta(seconds=rng.randrange(3 * 86400))
        roll = rng.random()
        if roll < 0.1:  # invalid
            rows.append((False, f"m{position}", received if rng.random() < 0.5 else None, None, None, None,
                         None, "missing messageId", "{}", None, position))  # fmt: skip
        elif roll < 0.15:  # a suppressed user's
            rows.append(
                (False, f"m{position}", received, None, None, None, None, SUPPRESSED, None, None, position)
            )
        else:
            rows.append((
                True, f"m{rng.randrange(messages)}", received, rng.choice(SEGMENT_TYPES), rng.getrandbits(62),
                None, rng.choice(COLLISIONS), None, None, rng.choice(list(SHAPES)), position,
            ))  # fmt: skip
    for name, types in SHAPES.items():
        rows.append((None, None, None, SEGMENT_TYPES[0], None, types, None, None, None, name, None))
    rows.append((None, None, None, None, None, None, None, "not gzip", "/archive/bad.gz", None, None))
    return rows


def earlier_observe(spark, valid, drop: pa.Array, shapes: dict[str, dict[str, str]]) -> Observed:
    """The earlier path: the deduplicated messages read again (a broadcast anti-join on the
    dropped positions), grouped by segment type and shape."""
    deduped = (
        valid.join(F.broadcast(spark.createDataFrame(pa.table({"position": drop}))), "position", "left_anti")
        if len(drop)
        else valid
    )
    groups = deduped.groupBy("segment_type", "shape").agg(
        F.count("*").alias("n"), F.array_distinct(F.flatten(F.collect_set("collisions"))).alias("collisions")
    )
    counts: dict[str, int] = {}
    types: dict[str, dict[str, set[str]]] = {}
    collisions: dict[str, list[str]] = {}
    for row in groups.collect():
        counts[row["segment_type"]] = counts.get(row["segment_type"], 0) + row["n"]
        columns = types.setdefault(row["segment_type"], {})
        for column, kind in shapes[row["shape"]].items():
            columns.setdefault(column, set()).add(kind)
        if row["collisions"]:
            seen = collisions.setdefault(row["segment_type"], [])
            seen.extend(c for c in row["collisions"] if c not in seen)
    return Observed(counts, types, collisions)


def earlier_totals(parsed) -> dict:
    """The earlier aggregation's totals: (ok, dropped) -> (messages, earliest received time)."""
    dropped = F.coalesce(F.col("reason") == F.lit(SUPPRESSED), F.lit(False)).alias("dropped")
    grouped = parsed.filter(F.col("ok").isNotNull()).groupBy("ok", dropped)
    return {
        (r["ok"], r["dropped"]): (r["n"], r["first"])
        for r in grouped.agg(F.count("*").alias("n"), F.min("received_at").alias("first")).collect()
    }


@pytest.mark.parametrize("seed", range(4))
def test_observed_from_the_counts_less_the_dropped_rows_equals_a_second_pass(spark, seed: int) -> None:
    rng = random.Random(seed)
    parsed = spark.createDataFrame(parsed_rows(seed, messages=400 + 100 * seed), PARSED_SCHEMA)
    valid = parsed.filter(F.col("ok")).drop("ok", "reason", "raw", "types")
    counted = count_parsed(parsed)
    assert counted.totals == earlier_totals(parsed)
    assert counted.damaged == {"/archive/bad.gz": "not gzip"}
    assert counted.shapes == SHAPES
    every = valid.select(*DROPPED).toArrow()
    # the rows a dedupe drops: none, some, every row of some kinds; some named twice (a repeat of
    # an id the index holds); the last seed drops every valid row
    picks = [
        [],
        rng.sample(range(every.num_rows), every.num_rows // 10),
        [i for i in range(every.num_rows) if every.column("shape")[i].as_py() in ("0-0", "2-1")],
        list(range(every.num_rows)),
    ][seed]
    picks = picks + rng.sample(picks, len(picks) // 3) if picks else picks
    rng.shuffle(picks)
    drop = every.take(pa.array(picks, pa.int64()))
    positions, kinds = dropped_rows(drop)
    assert sorted(positions.to_pylist()) == sorted(set(drop.column("position").to_pylist()))
    new = observe(counted.kinds, kinds, counted.shapes)
    old = earlier_observe(spark, valid, positions, counted.shapes)
    assert new.counts == old.counts
    assert new.types == old.types
    assert {k: sorted(v) for k, v in new.collisions.items()} == {
        k: sorted(v) for k, v in old.collisions.items()
    }
    assert new.messages == counted.totals[(True, False)][0] - len(positions)


def test_a_dedupe_dropping_more_than_was_read_fails_the_run() -> None:
    with pytest.raises(RuntimeError, match="dropped more 'pages' messages of shape '1-0'"):
        observe({("pages", "1-0", ()): 1}, [("pages", "1-0", ()), ("pages", "1-0", ())], SHAPES)


def test_the_counts_stay_a_hash_aggregate_whatever_the_number_of_kinds(spark) -> None:
    """An object aggregate (what ``collect_list`` needs) sorts a task's rows past 128 groups: a
    1,000,000-message run of the bench has some 800 kinds and shapes."""
    parsed = spark.createDataFrame(parsed_rows(0, messages=50), PARSED_SCHEMA)
    plan = parsed_groups(parsed)._jdf.queryExecution().executedPlan().toString()
    assert plan.replace("ObjectHashAggregate", "").count("HashAggregate") >= 1
    assert "ObjectHashAggregate" not in plan and "SortAggregate" not in plan
