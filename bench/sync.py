"""Sync benchmark: `eventlake sync` (Spark) against DuckDB on the same raw archive.

Generates a deterministic, realistic raw archive (all six types, ~30 track event names with 5-15
properties including nested objects, ~1% duplicate message ids, spread over 3 days; 1,000,000
messages by default) in the Segment archive layout of a fresh eventlake project, then times, each
as a whole process (start-up included):

- eventlake: `eventlake sync` (read, validate, flatten, dedupe, type, partitioned Parquet, catalog);
- baseline: DuckDB reading the same gzip files, deduplicating by messageId and writing Parquet
  partitioned by type/day/hour;
- Spark's floor: the same job as DuckDB's, in Spark alone (no Python per message): one Spark
  session built from the project's settings as `eventlake sync` builds it, `spark.read.json` with
  its default inference, the first copy of each messageId by receivedAt (a window), Parquet
  partitioned by type/day/hour. What any design running the job through Spark on this machine
  costs at least, before flattening, typing and the catalog.

Prints messages/s, MB/s of raw input, peak memory (RSS of the whole process tree) and the ratios
DuckDB wall time / eventlake wall time (>= 1.0: eventlake is at least as fast) and DuckDB / Spark's
floor.

    .venv/bin/python bench/sync.py                 # 1,000,000 messages
    .venv/bin/python bench/sync.py --messages 200000
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent
EVENTLAKE = str(Path(sys.executable).parent / "eventlake")
EVENTS = [
    "Product Viewed", "Product Added", "Product Removed", "Cart Viewed", "Checkout Started",
    "Checkout Step Viewed", "Checkout Step Completed", "Payment Info Entered", "Order Completed",
    "Order Updated", "Order Refunded", "Order Cancelled", "Coupon Entered", "Coupon Applied",
    "Coupon Denied", "Promotion Viewed", "Promotion Clicked", "Products Searched", "Product List Viewed",
    "Product List Filtered", "Signed Up", "Signed In", "Signed Out", "Video Playback Started",
    "Video Playback Paused", "Video Content Completed", "Email Opened", "Email Link Clicked",
    "Push Notification Received", "Application Opened",
]  # fmt: skip
TYPES = ["track"] * 70 + ["page"] * 12 + ["identify"] * 8 + ["screen"] * 6 + ["group"] * 2 + ["alias"] * 2
START = datetime(2026, 11, 1, tzinfo=timezone.utc)


def _props(rng: random.Random, event: str) -> dict:
    count = 5 + (zlib.crc32(event.encode()) % 11)  # not hash(): salted per process
    props = {}
    for i in range(count):
        kind = i % 5
        key = f"{event.split()[0].lower()}_{['id', 'value', 'label', 'flag', 'meta'][kind]}_{i}"
        if kind == 0:
            props[key] = f"id-{rng.randrange(100000)}"
        elif kind == 1:
            props[key] = round(rng.random() * 500, 2) if i % 2 else rng.randrange(1000)
        elif kind == 2:
            props[key] = rng.choice(["red", "green", "blue", "large", "small"])
        elif kind == 3:
            props[key] = rng.random() < 0.5
        else:
            props[key] = {"source": rng.choice(["web", "ios"]), "position": rng.randrange(20),
                          "tags": ["a", "b"][: rng.randrange(3)]}  # fmt: skip
    return props


def _message(rng: random.Random, n: int, received: datetime, source_id: str) -> dict:
    kind = TYPES[n % len(TYPES)]
    user = f"user-{rng.randrange(50000)}"
    ts = received - timedelta(seconds=rng.randrange(5))
    message = {
        "type": kind, "messageId": str(uuid.UUID(int=rng.getrandbits(128))), "userId": user,
        "anonymousId": f"anon-{rng.randrange(80000)}", "timestamp": ts.isoformat(timespec="milliseconds"),
        "originalTimestamp": ts.isoformat(timespec="milliseconds"),
        "sentAt": ts.isoformat(timespec="milliseconds"),
        "receivedAt": received.isoformat(timespec="milliseconds"),
        "projectId": source_id, "version": 2, "channel": "server",
        "context": {"library": {"name": "analytics-python", "version": "2.4.0"}, "ip": "203.0.113.9",
                    "locale": "en-US", "userAgent": "Mozilla/5.0", "page": {"path": "/p", "url": "https://x/p"}},
        "integrations": {},
    }  # fmt: skip
    if kind == "track":
        event = EVENTS[rng.randrange(len(EVENTS))]
        message["event"] = event
        message["properties"] = _props(rng, event)
    elif kind in ("page", "screen"):
        message["name"] = rng.choice(["Home", "Shop", "Cart", "Blog"])
        message["properties"] = {"path": "/shop", "title": "Shop", "referrer": "https://search.example"}
    elif kind == "identify":
        message["traits"] = {
            "email": f"{user}@example.com",
            "plan": rng.choice(["free", "pro"]),
            "age": rng.randrange(18, 80),
            "address": {"city": "Berlin", "country": "DE"},
        }
    elif kind == "group":
        message["groupId"] = f"team-{rng.randrange(500)}"
        message["traits"] = {"name": "Team", "employees": rng.randrange(2, 900)}
    else:
        message["previousId"] = message["anonymousId"]
    return message


def generate(project: Path, source_id: str, messages: int, files: int = 10, seed: int = 7) -> tuple[int, int]:
    """Write the archive; returns (messages written including duplicates, bytes of raw JSON)."""
    rng = random.Random(seed)
    per_file = messages // files
    raw_bytes = 0
    written = 0
    recent: list[bytes] = []
    for f in range(files):
        received0 = START + timedelta(days=3 * f / files)
        day_ms = (
            int(datetime(received0.year, received0.month, received0.day, tzinfo=timezone.utc).timestamp())
            * 1000
        )
        path = project / "lake" / "segment-logs" / source_id / str(day_ms) / f"bench-{f:03d}.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wb", compresslevel=1) as out:
            for i in range(per_file):
                received = received0 + timedelta(seconds=i * (3 * 86400 / files) / per_file)
                if recent and rng.random() < 0.01:
                    line = recent[rng.randrange(len(recent))]  # a client retry: the same message again
                else:
                    line = orjson.dumps(_message(rng, written, received, source_id))
                    if len(recent) < 5000:
                        recent.append(line)
                    else:
                        recent[rng.randrange(5000)] = line
                out.write(line + b"\n")
                raw_bytes += len(line) + 1
                written += 1
    return written, raw_bytes


class PeakRss:
    """Peak resident memory of a process and all its descendants, sampled every 0.2 s."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _tree(self) -> list[int]:
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                    parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
                except OSError:
                    pass
        tree, frontier = [self.pid], [self.pid]
        while frontier:
            frontier = [pid for pid, parent in parents.items() if parent in frontier]
            tree += frontier
        return tree

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            for pid in self._tree():
                try:
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1]) * 1024
                except OSError:
                    pass
            self.peak = max(self.peak, total)
            self._stop.wait(0.2)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def timed(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, int]:
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=cwd, env=env)
    rss = PeakRss(process.pid)
    code = process.wait()
    peak = rss.stop()
    if code:
        raise SystemExit(f"{command[0]} exited with {code}")
    return time.monotonic() - started, peak


DUCKDB_SCRIPT = textwrap.dedent(
    """
    import sys, duckdb
    archive, out = sys.argv[1], sys.argv[2]
    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute("SET preserve_insertion_order = false")
    con.execute(f'''
        COPY (
            SELECT *, strftime(CAST(receivedAt AS TIMESTAMP), '%Y-%m-%d') AS day,
                   strftime(CAST(receivedAt AS TIMESTAMP), '%H') AS hr
            FROM read_ndjson_auto('{archive}/**/*.gz')
            QUALIFY row_number() OVER (PARTITION BY messageId ORDER BY receivedAt) = 1
        ) TO '{out}' (FORMAT parquet, PARTITION_BY (type, day, hr))
    ''')
    """
)


SPARK_SCRIPT = textwrap.dedent(
    """
    import sys
    from eventlake.config import load_settings
    from eventlake.jvm.session import spark_session
    from pyspark.sql import Window, functions as F
    config, archive, out = sys.argv[1], sys.argv[2], sys.argv[3]
    spark = spark_session(load_settings(config), say=lambda text: None)
    frame = spark.read.json(f"{archive}/*/*/*.gz")
    received = F.col("receivedAt").cast("timestamp")
    first = Window.partitionBy("messageId").orderBy("receivedAt")
    (
        frame.withColumn("day", F.date_format(received, "yyyy-MM-dd"))
        .withColumn("hr", F.date_format(received, "HH"))
        .withColumn("_n", F.row_number().over(first)).filter("_n = 1").drop("_n")
        .write.mode("overwrite").partitionBy("type", "day", "hr").parquet(out)
    )
    spark.stop()
    """
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the generated data here")
    parser.add_argument(
        "--skip-duckdb", action="store_true", help="time eventlake alone (no DuckDB baseline, no Spark floor)"
    )
    parser.add_argument(
        "--skip-spark-floor", action="store_true", help="do not time Spark doing DuckDB's job"
    )
    args = parser.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="eventlake-bench-"))
    project = work / "project"
    shutil.rmtree(project, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLAKE")}
    subprocess.run([EVENTLAKE, "init", str(project)], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run([EVENTLAKE, "sources", "add", "bench", "--write-key", "wk_bench"], cwd=project, check=True,
                   env=env, stdout=subprocess.DEVNULL)  # fmt: skip
    source_id = next(
        line.split('"')[1]
        for line in (project / "eventlake.toml").read_text().splitlines()
        if line.startswith("id =")
    )
    started = time.monotonic()
    count, raw = generate(project, source_id, args.messages, args.files)
    print(f"generated {count:,} messages ({raw / 1e9:.2f} GB of JSON) in {args.files} gzip files "
          f"in {time.monotonic() - started:.0f} s", flush=True)  # fmt: skip

    spark_wall, spark_rss = timed([EVENTLAKE, "sync"], project, env)
    print(f"eventlake sync: {spark_wall:.1f} s wall, {count / spark_wall:,.0f} msg/s, "
          f"{raw / 1e6 / spark_wall:.1f} MB/s, peak RSS {spark_rss / 2**30:.2f} GiB", flush=True)  # fmt: skip
    if args.skip_duckdb:
        return
    out = work / "duckdb-out"
    shutil.rmtree(out, ignore_errors=True)
    script = work / "duckdb_baseline.py"
    script.write_text(DUCKDB_SCRIPT)
    duck_wall, duck_rss = timed(
        [sys.executable, str(script), str(project / "lake" / "segment-logs"), str(out)], work
    )
    print(f"duckdb baseline: {duck_wall:.1f} s wall, {count / duck_wall:,.0f} msg/s, "
          f"{raw / 1e6 / duck_wall:.1f} MB/s, peak RSS {duck_rss / 2**30:.2f} GiB")  # fmt: skip
    print(f"ratio (duckdb wall / eventlake wall): {duck_wall / spark_wall:.2f}")
    if args.skip_spark_floor:
        return
    out = work / "spark-out"
    script = work / "spark_floor.py"
    script.write_text(SPARK_SCRIPT)
    floor_wall, floor_rss = timed(
        [sys.executable, str(script), str(project / "eventlake.toml"), str(project / "lake" / "segment-logs"),
         str(out)], work, env,
    )  # fmt: skip
    print(f"spark floor (DuckDB's job in Spark, no Python per message): {floor_wall:.1f} s wall, "
          f"{count / floor_wall:,.0f} msg/s, peak RSS {floor_rss / 2**30:.2f} GiB")  # fmt: skip
    print(f"ratio (duckdb wall / spark floor wall): {duck_wall / floor_wall:.2f}; "
          f"(spark floor wall / eventlake wall): {floor_wall / spark_wall:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
