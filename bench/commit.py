"""Commit benchmark: what applying a sync's manifest costs the catalog, on the embedded metastore.

Builds a fresh project (`eventlake init`, `sources add`) with ``--messages`` of `bench/sync.py`'s
generator over 3 days, then, on one Spark session and one catalog (as `eventlake up`'s engine):

- **first sync**: every table created, every partition registered, the warehouse views made;
- **micro-batch, same hour**: ``--batch`` new messages in an hour already registered (nothing new
  for the catalog: most of `up`'s runs);
- **micro-batch, new column**: the same with a property no table had in one event's messages (a
  column appended to one table, the views that read it replaced).

Only ``--events`` of the generator's 30 track event names are kept (see :func:`keep_events`).

For each, the wall time of the commit (:func:`eventlake.sync.protocol.commit.apply`) and what it
asked the catalog: Spark SQL statements by kind and external catalog calls.

    PYTHONPATH=src .venv/bin/python bench/commit.py --messages 10000 --events 8
"""

from __future__ import annotations

import argparse
import collections
import gzip
import os
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sync import EVENTS, START, generate  # noqa: E402  (bench/sync.py's generator)

QUIET = lambda line: None  # noqa: E731


def cli(project: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLAKE")}
    return subprocess.run([sys.executable, "-m", "eventlake", *args], cwd=project, env=env, check=True,
                          capture_output=True, text=True).stdout  # fmt: skip


def keep_events(folder: Path, events: int) -> None:
    """Drop the track messages of all but the first ``events`` event names from the archive files
    under ``folder``: with all 30, the ``tracks`` view's SQL exceeds what the embedded metastore
    (Derby) stores (32,700 characters), and the views are not made at all."""
    kept = {event for event in EVENTS[:events]}
    for path in folder.rglob("*.gz"):
        lines = [
            line
            for line in gzip.decompress(path.read_bytes()).splitlines()
            if orjson.loads(line).get("event", EVENTS[0]) in kept
        ]
        path.write_bytes(gzip.compress(b"".join(line + b"\n" for line in lines), compresslevel=1))


def add_batch(
    project: Path, source_id: str, number: int, messages: int, events: int, extra: dict[str, Any]
) -> None:
    """``messages`` new messages received in the first hour of day 2 (registered by the first sync);
    ``extra`` properties in the messages of the first event (a new column in one table)."""
    scratch = project.parent / f"batch-{number}"
    generate(scratch, source_id, messages, files=1, seed=1000 + number)
    keep_events(scratch, events)
    received = START + timedelta(days=1, minutes=number)
    lines = []
    for path in (scratch / "lake").rglob("*.gz"):
        for i, line in enumerate(gzip.decompress(path.read_bytes()).splitlines()):
            message = orjson.loads(line)
            message["receivedAt"] = (received + timedelta(milliseconds=i)).isoformat(timespec="milliseconds")
            if message.get("event") == EVENTS[0]:
                message["properties"].update(extra)
            lines.append(orjson.dumps(message))
    day_ms = int(received.replace(hour=0, minute=0).timestamp()) * 1000
    target = project / "lake" / "segment-logs" / source_id / str(day_ms) / f"batch-{number:03d}.gz"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(gzip.compress(b"".join(line + b"\n" for line in lines), compresslevel=1))


class Counter:
    """Spark SQL statements (by their first words) and external catalog calls of the commit."""

    def __init__(self, spark: Any) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.active = False
        real_sql = spark.sql

        def sql(query: str, *args: Any, **kwargs: Any) -> Any:
            if self.active:
                words = query.split()
                kind = " ".join(words[:2]) if words[0] != "CREATE" else " ".join(words[:4])
                if "ADD IF NOT EXISTS PARTITION" in query:
                    kind = "ALTER TABLE ADD PARTITION"
                self.counts[f"sql {kind}"] += 1
            return real_sql(query, *args, **kwargs)

        spark.sql = sql


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--events", type=int, default=8, help="track event names kept (of 30)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="eventlake-commit-"))
    project = work / "project"
    subprocess.run([sys.executable, "-m", "eventlake", "init", str(project)], check=True, capture_output=True)
    cli(project, "sources", "add", "bench", "--write-key", "wk_bench")
    config = (project / "eventlake.toml").read_text()
    source_id = next(line.split('"')[1] for line in config.splitlines() if line.startswith("id ="))
    generate(project, source_id, args.messages, files=2)
    keep_events(project / "lake", args.events)

    from eventlake.catalog import load_catalog
    from eventlake.catalog.hive import HiveCatalog
    from eventlake.config import load_settings
    from eventlake.jvm.session import spark_session
    from eventlake.sync import run_sync
    from eventlake.sync.protocol import runner

    os.chdir(project)
    settings = load_settings(project / "eventlake.toml", environ={})
    spark = spark_session(settings, "eventlake-bench-commit", QUIET)
    catalog = load_catalog(settings, spark)
    assert isinstance(catalog, HiveCatalog)
    counter = Counter(spark)
    external = catalog._jvm()["external"]

    class External:  # counts the calls of the session's external catalog made through the catalog
        def __getattr__(self, name: str) -> Any:
            attr = getattr(external, name)
            if counter.active and callable(attr):
                counter.counts[f"api {name}"] += 1
            return attr

    catalog._jvm_refs["external"] = External()
    timings: list[float] = []
    real_apply = runner.apply

    def timed_apply(*a: Any, **k: Any) -> Any:
        counter.active = True
        started = time.monotonic()
        try:
            return real_apply(*a, **k)
        finally:
            timings.append(time.monotonic() - started)
            counter.active = False

    runner.apply = timed_apply
    runs = [("first sync", None, {}), ("micro-batch, same hour", 1, {}), ("micro-batch, same hour", 2, {}),
            ("micro-batch, new column", 3, {"bench_new_field": "x"})]  # fmt: skip
    for label, batch, extra in runs:
        if batch is not None:
            add_batch(project, source_id, batch, args.batch, args.events, extra)
        counter.counts.clear()
        started = time.monotonic()
        [result] = run_sync(
            settings, spark=spark, catalog=catalog, say=lambda line: "views" in line and print(line)
        )
        whole = time.monotonic() - started
        load = os.getloadavg()[0]
        print(f"{label}: {result.input_messages:,} messages, {len(result.tables)} tables: "
              f"sync {whole:.2f} s, commit {timings[-1]:.2f} s (load {load:.2f})")  # fmt: skip
        for kind, count in sorted(counter.counts.items()):
            print(f"    {count:5d}  {kind}")
    spark.stop()


if __name__ == "__main__":
    main()
