"""Partition registration benchmark: the Hive catalog on the embedded metastore (Derby).

Registers the partitions a 1,000,000-message sync registers (by default 2,520: 35 tables of 40
columns, 3 days of 24 hourly partitions each, one small file in every partition folder) in a
fresh temporary project with a real Spark session, four ways, each on its own tables:

- per partition: one ``ALTER TABLE ... ADD IF NOT EXISTS PARTITION (...)`` per partition;
- 100 per statement: the statements before this benchmark (``HiveCatalog.add_partitions`` until
  issue 10): 100 partitions per ``ALTER TABLE ... ADD IF NOT EXISTS``, no look-up first;
- catalog: ``HiveCatalog.add_partitions`` as it is now (one listing of the table's partition
  names, then only the missing ones: up to 20 through the external catalog, no statement; more in
  one ``add_partitions`` request of the metastore client per 500, built from Thrift bytes);

then registers every table's partitions a second time (a rerun after a crash: all exist) with the
100-per-statement way and with the catalog. Last, a commit's way: every table's partitions in one
``HiveCatalog.add_partitions_of`` call (``CATALOG_THREADS`` tables at a time, each thread with
its own metastore client) against the catalog's ``add_partitions`` table after table, each on
fresh tables, twice in turn. The first ways take turns table by table, the commit's way and its
baseline round by round, so load from other processes on the machine falls on all of them
alike. Prints each way's wall time, ms per partition and the ratios.

    .venv/bin/python bench/partitions.py                       # 35 tables x 72 partitions
    .venv/bin/python bench/partitions.py --tables 10 --days 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from eventlake.catalog import TableSpec
from eventlake.catalog.hive import CATALOG_THREADS, HiveCatalog
from eventlake.config import load_settings, write_initial_config
from eventlake.jvm.session import spark_session
from eventlake.storage import hadoop_uri

COLUMNS = tuple((f"properties_field_{i}", "string" if i % 3 else "bigint") for i in range(40))
OLD_BATCH = 100

Partitions = Sequence[tuple[str, ...]]


def quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def add_statement(spec: TableSpec, partitions: Partitions) -> str:
    """``ALTER TABLE ... ADD IF NOT EXISTS PARTITION (...) LOCATION ... ...`` as eventlake wrote it."""
    clauses = []
    for values in partitions:
        keys = ", ".join(
            f"{quoted(k)}={literal(v)}" for k, v in zip(spec.partition_keys, values, strict=True)
        )
        clauses.append(f"PARTITION ({keys}) LOCATION {literal(hadoop_uri(spec.partition_location(values)))}")
    return f"ALTER TABLE {quoted(spec.database)}.{quoted(spec.name)} ADD IF NOT EXISTS " + " ".join(clauses)


def per_partition(spark, spec: TableSpec, partitions: Partitions) -> None:
    for values in partitions:
        spark.sql(add_statement(spec, [values]))


def hundred_per_statement(spark, spec: TableSpec, partitions: Partitions) -> None:
    unique = sorted(set(partitions))
    for start in range(0, len(unique), OLD_BATCH):
        spark.sql(add_statement(spec, unique[start : start + OLD_BATCH]))


def make_table(
    catalog: HiveCatalog, lake: Path, database: str, name: str, partitions: Partitions
) -> TableSpec:
    """The table and its partition folders with one small file each, as a sync leaves them."""
    spec = TableSpec(database, name, COLUMNS, ("day", "hr"), str(lake / database / name))
    for values in partitions:
        folder = Path(spec.partition_location(values))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "part-00000.parquet").write_bytes(b"PAR1" + bytes(2000) + b"PAR1")
    catalog.ensure_table(spec)
    return spec


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, default=35)
    parser.add_argument("--days", type=int, default=3, help="24 hourly partitions each (default 3)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the project here")
    args = parser.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="eventlake-bench-partitions-"))
    try:
        run(work, args.tables, args.days)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def run(work: Path, tables: int, days: int) -> None:
    config = write_initial_config(work / "project")
    settings = load_settings(config, environ={})
    partitions = [(f"2026-11-{day:02d}", f"{hour:02d}") for day in range(1, days + 1) for hour in range(24)]
    total = tables * len(partitions)
    print(
        f"{tables} tables x {len(partitions)} partitions = {total:,} per way; load average {load_average()}"
    )

    spark = spark_session(settings, "eventlake-bench-partitions", say=lambda _: None)
    catalog = HiveCatalog(spark)
    lake = settings.lake.root / "segment-data" / "data"
    ways: dict[str, Callable[[TableSpec, Partitions], None]] = {
        "per partition": lambda spec, parts: per_partition(spark, spec, parts),
        "100 per statement": lambda spec, parts: hundred_per_statement(spark, spec, parts),
        "catalog": catalog.add_partitions,
    }
    warm = make_table(catalog, lake, "warm_up", "page", partitions)
    for name, way in ways.items():  # JIT, metastore caches, Spark's parser: not timed
        make = make_table(catalog, lake, "warm_up", name.replace(" ", "_"), partitions[:2])
        way(make, partitions[:2])
    catalog.add_partitions(warm, partitions)

    specs = {
        name: [
            make_table(catalog, lake, f"bench_{index}", f"t{number:02d}", partitions)
            for number in range(tables)
        ]
        for index, name in enumerate(ways)
    }
    seconds = dict.fromkeys(ways, 0.0)
    again = {"100 per statement": 0.0, "catalog": 0.0}
    started = time.monotonic()
    for number in range(tables):  # the ways take turns, table by table
        for name, way in ways.items():
            t0 = time.perf_counter()
            way(specs[name][number], partitions)
            seconds[name] += time.perf_counter() - t0
        for name in again:  # the same partitions again: all exist
            t0 = time.perf_counter()
            ways[name](specs[name][number], partitions)
            again[name] += time.perf_counter() - t0
        print(
            f"  table {number + 1}/{tables} ({time.monotonic() - started:.0f} s, load {load_average()})",
            flush=True,
        )
    for name in ways:
        for spec in specs[name][:3] + specs[name][-1:]:
            assert catalog.partitions(spec.database, spec.name) == partitions, (name, spec.qualified)

    commit = {"one table after another": 0.0, f"{CATALOG_THREADS} tables at a time": 0.0}
    for turn in range(2):
        for index, name in enumerate(commit):
            fresh = [
                make_table(catalog, lake, f"commit_{turn}_{index}", f"t{number:02d}", partitions)
                for number in range(tables)
            ]
            t0 = time.perf_counter()
            if index == 0:
                for spec in fresh:
                    catalog.add_partitions(spec, partitions)
            else:
                catalog.add_partitions_of([(spec, partitions) for spec in fresh])
            commit[name] += time.perf_counter() - t0
            for spec in fresh[:2] + fresh[-2:]:
                assert catalog.partitions(spec.database, spec.name) == partitions, (name, spec.qualified)
        print(f"  commit's way, turn {turn + 1}/2 (load {load_average()})", flush=True)
    spark.stop()

    print(f"\nregistering {total:,} partitions ({tables} tables), load average {load_average()} at the end")
    rows = [(f"new: {name}", s) for name, s in seconds.items()] + [
        (f"all exist: {name}", s) for name, s in again.items()
    ]
    for label, s in rows:
        print(f"  {label:30s} {s:8.1f} s  {s / total * 1000:6.2f} ms/partition")
    new, old, hundred = seconds["catalog"], seconds["per partition"], seconds["100 per statement"]
    print(f"  per partition / catalog:        {old / new:6.1f}x")
    print(f"  100 per statement / catalog:    {hundred / new:6.2f}x")
    print(f"  all exist, 100 per statement / catalog: {again['100 per statement'] / again['catalog']:6.1f}x")
    print(f"\na commit's partitions, {total:,} new twice over ({tables} tables each time):")
    for label, s in commit.items():
        print(f"  {label:30s} {s:8.1f} s  {s / (2 * total) * 1000:6.2f} ms/partition")
    serial, threaded = commit.values()
    print(f"  one after another / {CATALOG_THREADS} at a time: {serial / threaded:6.2f}x")


if __name__ == "__main__":
    main()
