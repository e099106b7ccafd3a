"""Incremental sync benchmark: a micro-batch of new messages synced on a warm engine.

Issue 10's goal 2: 2,000 new messages synced in at most 3 s on a warm session. The script builds a
fresh project (`eventlake init`, `sources add`), syncs a base archive (``--base`` messages of
`bench/sync.py`'s generator) once, then adds archive files of ``--batch`` new messages each,
received within one hour (as a collector's micro-batch; each batch in a new hour, or with
``--same-hour`` all in one), and times their syncs:

- **warm**: `eventlake.sync.run_sync` in this process, on one Spark session and one catalog kept
  for the rest of the script (what `eventlake up`'s engine does); its first batch warms the
  session's code paths and is not counted, then ``--runs`` batches are;
- **baseline** (run first: the embedded metastore serves one JVM at a time): ``--runs // 2``
  batches synced by `eventlake sync` as a new process each (JVM start, metastore client and all),
  what every `up` interval cost before the warm engine.

Prints each run, the median of each, the ratio warm / baseline, and the ratio warm / 3 s (the goal:
at most 1.0).

    .venv/bin/python bench/incremental.py
    .venv/bin/python bench/incremental.py --runs 3 --batch 2000 --base 20000
    .venv/bin/python bench/incremental.py --same-hour    # every batch in one hour, as most of up's
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sync import EVENTLAKE, START, generate  # noqa: E402  (bench/sync.py's generator)

GOAL_SECONDS = 3.0
QUIET = lambda line: None  # noqa: E731


def project_with_source(work: Path, env: dict[str, str]) -> tuple[Path, str]:
    project = work / "project"
    shutil.rmtree(project, ignore_errors=True)
    subprocess.run([EVENTLAKE, "init", str(project)], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run([EVENTLAKE, "sources", "add", "bench", "--write-key", "wk_bench"], cwd=project, check=True,
                   env=env, stdout=subprocess.DEVNULL)  # fmt: skip
    config = (project / "eventlake.toml").read_text()
    return project, next(line.split('"')[1] for line in config.splitlines() if line.startswith("id ="))


def synced_project(work: Path, base: int) -> tuple[Path, str, dict[str, str]]:
    """A fresh project with one source and ``base`` messages synced by `eventlake sync`: the
    project, the source's id, and the environment its commands run with."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLAKE")}
    project, source_id = project_with_source(work, env)
    generate(project, source_id, base, files=2)
    subprocess.run([EVENTLAKE, "sync"], cwd=project, env=env, check=True, stderr=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    return project, source_id, env


def warm_engine(project: Path, name: str) -> tuple[Any, Any, Any]:
    """The project's settings, one Spark session and one catalog, as `up`'s engine keeps them (the
    current directory becomes the project's)."""
    from eventlake.catalog import load_catalog
    from eventlake.config import load_settings
    from eventlake.jvm.session import spark_session

    os.chdir(project)
    settings = load_settings(project / "eventlake.toml", environ={})
    spark = spark_session(settings, name, QUIET)
    return settings, spark, load_catalog(settings, spark)


def add_batch(project: Path, source_id: str, work: Path, number: int, messages: int, same_hour: bool) -> None:
    """One archive file of ``messages`` new messages, all received within one hour: a new hour for
    each batch (new partitions in every table, the worst case), or with ``same_hour`` the hour of
    the first batch (partitions already registered: most of `up`'s micro-batches)."""
    scratch = work / f"batch-{number}"
    shutil.rmtree(scratch, ignore_errors=True)
    generate(scratch, source_id, messages, files=1, seed=1000 + number)
    if same_hour:
        received = START + timedelta(days=5, milliseconds=number * messages)
    else:
        received = START + timedelta(days=5, hours=number)
    lines = []
    for path in (scratch / "lake").rglob("*.gz"):
        for i, line in enumerate(gzip.decompress(path.read_bytes()).splitlines()):
            message = orjson.loads(line)
            message["receivedAt"] = (received + timedelta(milliseconds=i)).isoformat(timespec="milliseconds")
            lines.append(orjson.dumps(message))
    day_ms = int(received.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()) * 1000
    target = project / "lake" / "segment-logs" / source_id / str(day_ms) / f"batch-{number:03d}.gz"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(gzip.compress(b"".join(line + b"\n" for line in lines), compresslevel=1))
    shutil.rmtree(scratch)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", type=int, default=20_000, help="messages synced first, to warm up")
    parser.add_argument("--batch", type=int, default=2_000, help="messages per incremental sync")
    parser.add_argument("--runs", type=int, default=5, help="warm runs per parser")
    parser.add_argument(
        "--parsers", default="columnar,per-message",
        help="[sync] parser of the warm runs, in turn (default: columnar,per-message)",
    )  # fmt: skip
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--same-hour", action="store_true",
        help="every batch received in one hour (partitions registered once); default: a new hour each",
    )  # fmt: skip
    args = parser.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="eventlake-incremental-"))
    project, source_id, env = synced_project(work, args.base)

    # The baseline first: the embedded metastore belongs to one JVM at a time, and this script's
    # session keeps its JVM (and the metastore) until the script exits.
    cold: list[float] = []
    for run in range(max(1, args.runs // 2)):
        add_batch(project, source_id, work, run, args.batch, args.same_hour)
        started = time.monotonic()
        subprocess.run([EVENTLAKE, "sync"], cwd=project, env=env, check=True, stderr=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        cold.append(time.monotonic() - started)
        print(f"baseline run {len(cold)}: `eventlake sync` as a new process: {cold[-1]:.2f} s", flush=True)

    from eventlake.sync import run_sync

    started = time.monotonic()
    settings, spark, catalog = warm_engine(project, "eventlake-bench-incremental")
    print(f"warm-up: session and catalog in {time.monotonic() - started:.1f} s", flush=True)

    # the warm runs take the parsers in turn (``--parsers``): a paired comparison on one session
    parsers = [name.strip() for name in args.parsers.split(",") if name.strip()]
    warm: dict[str, list[float]] = {name: [] for name in parsers}
    for run in range(len(cold), len(cold) + args.runs * len(parsers) + 1):
        add_batch(project, source_id, work, run, args.batch, args.same_hour)
        name = parsers[(run - len(cold)) % len(parsers)]
        chosen = dataclasses.replace(settings, sync=dataclasses.replace(settings.sync, parser=name))
        started = time.monotonic()
        [result] = run_sync(chosen, spark=spark, catalog=catalog, say=QUIET)
        elapsed = time.monotonic() - started
        label = "warm-up run (not counted)" if run == len(cold) else f"warm run {len(warm[name]) + 1}"
        if run > len(cold):
            warm[name].append(elapsed)
        print(f"{label} ({name}): {result.input_messages:,} messages, {result.rows:,} rows in "
              f"{len(result.tables)} tables: {elapsed:.2f} s ({result.status})", flush=True)  # fmt: skip
    spark.stop()

    cold_median = statistics.median(cold)
    for name in parsers:
        warm_median = statistics.median(warm[name])
        print(f"median warm ({name}) {warm_median:.2f} s, baseline (new process) {cold_median:.2f} s")
        print(f"ratio warm / baseline: {warm_median / cold_median:.2f}; warm / goal ({GOAL_SECONDS:g} s): "
              f"{warm_median / GOAL_SECONDS:.2f} (at most 1.0 meets it)")  # fmt: skip
    if len(parsers) > 1:
        first = statistics.median(warm[parsers[0]])
        for name in parsers[1:]:
            print(f"ratio warm median {name} / {parsers[0]}: {statistics.median(warm[name]) / first:.2f}")


if __name__ == "__main__":
    main()
