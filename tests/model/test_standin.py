"""The model's in-process stand-in for the sync's Spark job (standin.py) writes what the Spark job
writes: the same inputs (duplicates within a run and against the index, an invalid message, a value
that does not fit its column, a new column, a damaged file, several hours and files), synced and
replayed (whole, and one table) by each into a copy of one lake, give the same rows in every
partition, the same quarantine, the same ledger and the same dedupe index."""

from __future__ import annotations

import dataclasses
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from eventlake import layout, state_layout
from eventlake.catalog.hive import HiveCatalog
from eventlake.config import Settings, load_settings
from eventlake.storage import LocalStorage
from eventlake.sync import run_sync
from eventlake.sync.maintenance.replay import ReplayRange, run_replay
from eventlake.sync.protocol.ledger import Ledger
from tests.conftest import Lake

from .standin import InProcessStager

pytestmark = pytest.mark.spark

DAY = datetime(2026, 11, 19, 9, 30, tzinfo=timezone.utc)
RUN_ID = re.compile(r"\d{8}T\d{9}Z-[0-9a-f]{4}")


def quiet(line: str) -> None:
    pass


def track(message_id: str, user: str = "u1", **properties: Any) -> dict:
    return {"type": "track", "event": "Order Completed", "userId": user, "messageId": message_id,
            "properties": properties or {"revenue": 1}}  # fmt: skip


def page(message_id: str, user: str = "u2") -> dict:
    return {"type": "page", "userId": user, "messageId": message_id, "name": "Home"}


def lake_copy(lake: Lake, copy: Path, database_prefix: str, **sync: Any) -> Settings:
    """A copy of ``lake``'s project at ``copy``, its settings sharing the test session's state
    folder (the embedded metastore), its tables in databases named with ``database_prefix``, and
    ``sync``'s ``[sync]`` settings changed."""
    shutil.copytree(lake.root, copy)
    other = load_settings(copy / lake.config.name, environ={})
    return dataclasses.replace(
        other, lake=dataclasses.replace(other.lake, state_dir=lake.settings.lake.state_dir),
        catalog=dataclasses.replace(other.catalog, database_prefix=database_prefix),
        sync=dataclasses.replace(other.sync, **sync),
    )  # fmt: skip


def lake_content(root: Path, source_id: str) -> dict[str, Any]:
    """What a reader can tell of a lake: the rows of each table partition and of the quarantine,
    sorted (file names without their run ids), the ledger and the dedupe index's files."""
    data = layout.source_data_dir(root, source_id)
    rows: dict[str, list[tuple]] = {}
    for path in sorted(data.rglob("*.parquet")):
        folder = RUN_ID.sub("<run>", str(path.parent.relative_to(data)))
        table = pq.read_table(path)
        rows.setdefault(folder, []).extend(tuple(sorted(r.items(), key=str)) for r in table.to_pylist())
    quarantine = [
        tuple(sorted((k, v) for k, v in r.items() if k != "run_id"))
        for path in sorted(layout.quarantine_dir(root, source_id).rglob("*.parquet"))
        for r in pq.read_table(path).to_pylist()
    ]
    keys = state_layout.dedupe_index_dir(root, source_id)
    index = sorted(
        RUN_ID.sub("<run>", str(p.relative_to(keys))) + f" {p.read_bytes().hex()}"
        for p in keys.rglob("*") if p.is_file()
    )  # fmt: skip
    return {
        "partitions": {k: sorted(v, key=repr) for k, v in rows.items()},
        "quarantine": sorted(quarantine, key=repr),
        "ledger": sorted(Ledger(LocalStorage(), root, source_id).synced_keys()),
        "index": index,
    }


def test_the_stand_in_writes_what_the_spark_job_writes(lake: Lake, spark, tmp_path: Path) -> None:
    first = [track("a1"), track("a2", revenue=2.5), page("p1"), track("a1"), {"type": "track"}]
    lake.archive(first, DAY)
    lake.archive(
        [track("a3", revenue="not a number"), page("p2"), track("a2", revenue=2.5)], DAY.replace(hour=11)
    )
    lake.archive([track(f"b{n}", user=f"u{n % 3}") for n in range(30)], DAY.replace(hour=13))
    damaged = lake.archive([track("d1")], DAY.replace(hour=14))  # then truncated: a damaged file
    damaged.write_bytes(damaged.read_bytes()[:20])
    copy = tmp_path / "standin-project"
    other = lake_copy(lake, copy, "standin_")
    catalog = HiveCatalog(spark)

    def both(step) -> None:
        step(lake.settings, {"spark": spark})
        step(other, {"catalog": catalog, "stager": InProcessStager()})

    both(lambda s, how: run_sync(s, spark=spark, say=quiet, **{k: v for k, v in how.items() if k != "spark"}))
    # a second sync: dedupe against the index (a1 and a2 again), new columns
    again = lake.archive([track("a1"), track("c1", revenue=3, coupon="X"), page("p3")], DAY.replace(hour=15))
    markers = state_layout.reopened_days_dir(lake.settings.lake.root, lake.source.id)
    for path in [again, *markers.glob("*.json")]:  # the file and its day's reopen marker
        twin = copy / path.relative_to(lake.root)
        twin.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, twin)
    both(lambda s, how: run_sync(s, spark=spark, say=quiet, **{k: v for k, v in how.items() if k != "spark"}))
    assert_equal_lakes(lake, copy)
    day = DAY.date()
    for tables in ((), ("page",)):
        both(
            lambda s, how, tables=tables: run_replay(
                s, lake.slug, ReplayRange(day, day, tables), spark=spark, say=quiet,
                **{k: v for k, v in how.items() if k != "spark"},
            )
        )  # fmt: skip
        assert_equal_lakes(lake, copy)


def assert_equal_lakes(lake: Lake, copy: Path) -> None:
    spark_side = lake_content(lake.settings.lake.root, lake.source.id)
    standin_side = lake_content(copy / "lake", lake.source.id)
    assert spark_side["partitions"], "the Spark job wrote nothing: the comparison would prove nothing"
    for part in ("partitions", "quarantine", "ledger"):
        assert standin_side[part] == spark_side[part], part
    assert standin_side["index"] == spark_side["index"]
