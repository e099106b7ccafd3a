"""The dedupe's rows to drop, held to the rule written out in Python: of each messageId every copy
but the first (earliest received, then the smaller hash of its archive line, then the earlier
position). The repeated ids are searched by a 64-bit hash of the id; the same test with a hash
that gives many ids one key (their length) drops the same rows."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest
from pyspark.sql import functions as F

from eventlake.storage import to_location
from eventlake.sync.pipeline import dedupe as dedupe_module
from eventlake.sync.pipeline.dedupe import dedupe, dropped_rows
from eventlake.sync.pipeline.transform import PARSED_SCHEMA

pytestmark = pytest.mark.spark

START = datetime(2026, 11, 2, tzinfo=timezone.utc)


def valid_rows(seed: int, messages: int) -> list[tuple]:
    """Valid ``parsed`` rows: ids of every length repeated up to four times, copies received at
    the same moment, with the same line hash, or both."""
    rng = random.Random(seed)
    rows = []
    for position in range(messages):
        message_id = "m" * rng.randrange(1, 4) + str(rng.randrange(messages // 2))
        received = START + timedelta(seconds=rng.randrange(5))
        rows.append((
            True, message_id, received, rng.choice(["pages", "identifies"]), rng.randrange(3), None,
            None, None, None, "0-0", position,
        ))  # fmt: skip
    return rows


def rule(rows: list[tuple]) -> set[int]:
    """The positions to drop: every copy of an id but its first (received, line hash, position)."""
    first: dict[str, tuple] = {}
    for row in rows:
        order = (row[2], row[4], row[10])
        first[row[1]] = min(first.get(row[1], order), order)
    return {row[10] for row in rows if (row[2], row[4], row[10]) != first[row[1]]}


def dropped(spark, rows: list[tuple]) -> set[int]:
    valid = spark.createDataFrame(rows, PARSED_SCHEMA).drop("ok", "reason", "raw", "types")
    drop = dedupe(spark, valid, None, to_location("/nowhere"), 7, None)  # type: ignore[arg-type]
    positions, _ = dropped_rows(drop.toArrow())
    return set(positions.to_pylist())


@pytest.mark.parametrize("seed", range(3))
def test_the_dedupe_drops_every_copy_but_the_first_whatever_ids_share_a_key(
    spark, monkeypatch, seed: int
) -> None:
    rows = valid_rows(seed, messages=300 + 200 * seed)
    expected = rule(rows)
    assert expected  # the input has repeats
    assert dropped(spark, rows) == expected
    monkeypatch.setattr(dedupe_module, "id_key", lambda: F.length("message_id").cast("long"))
    assert dropped(spark, rows) == expected  # a handful of keys for every id
