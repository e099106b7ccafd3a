"""Sync benchmark: a lake on S3 (a moto server) against the same archive synced to a local lake.

Generates the raw archive of bench/sync.py (its basic input: all six types, 30 track event names with 5-15
properties including nested objects, ~1% duplicate message ids, over 3 days; 1,000,000 messages by
default) once, then times `eventlake sync` as a whole process (start-up included) twice:

- local: ``lake.root`` a local directory;
- s3: ``lake.root = "s3://eventlake-bench/lake"`` on a moto server on 127.0.0.1, the same archive
  files uploaded to it first (not timed); every byte the sync reads or writes goes through
  ``eventlake.storage.S3Storage`` (boto3), in Spark's Python workers and at commit.

Both runs use the same catalog, so that the lake's store is the only difference: Glue on a fresh
moto server of their own (``--local-catalog hive``: the local run keeps the default embedded Hive
metastore instead). Each run gets a fresh moto server, so neither sees the other's tables.

Prints, for each run: messages, wall seconds, messages/s, peak RSS and CPU seconds of the sync's
process tree, CPU seconds of the moto server, the phases (from the sync's progress lines) and the
requests moto served in each phase (from its request log); then the ratio S3 wall / local wall
(the issue's aim: at most 1.5).

    .venv/bin/python bench/s3_sync.py                     # 1,000,000 messages
    .venv/bin/python bench/s3_sync.py --messages 200000 --workdir /tmp/bench-s3
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sync import EVENTLAKE, PROGRESS, TreeSampler, cpu_seconds, generate  # noqa: E402 - bench/sync.py

BUCKET = "eventlake-bench"
PREFIX = "lake"
AWS_ENV = {  # moto's fake credentials: in the environment before the Spark session starts
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
REQUEST = re.compile(r'(\d\d/\w{3}/\d{4} \d\d:\d\d:\d\d)\] "(?:\x1b\[[0-9;]*m)*(\w+) (\S+) HTTP')


# -- moto ---------------------------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Moto:
    """``python -m moto.server`` on a free port of 127.0.0.1, its request log in a file."""

    log: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Moto:
        import socket

        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"moto did not start: {self.log.read_text()[-2000:]}") from None
                time.sleep(0.2)

    def cpu_seconds(self) -> float:
        assert self.process is not None
        return cpu_seconds(self.process.pid)

    def requests(self) -> list[tuple[float, str, str]]:
        """``(epoch seconds, method, path)`` of every request served so far (1 s resolution)."""
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            match = REQUEST.search(line)
            if match:
                stamp = datetime.strptime(match.group(1), "%d/%b/%Y %H:%M:%S").timestamp()
                found.append((stamp, match.group(2), match.group(3)))
        return found

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(20)


def request_kind(method: str, path: str) -> str:
    """What a request to moto was, from its method and path (the key says which part of the lake)."""
    if method == "POST" and path == "/":
        return "Glue"
    if "list-type=2" in path:
        return "S3 LIST"
    if method == "POST" and "?delete" in path:
        return "S3 DeleteObjects"
    key = "/" + path.split("?", 1)[0].lstrip("/").partition("/")[2]
    areas = (
        ("/segment-logs/", "archive"),
        ("/segment-stage/", "stage"),
        ("/segment-data/data/", "tables"),
        ("/segment-data/_state/dedupe/", "dedupe index"),
        ("/segment-data/_state/", "_state"),
        ("/segment-data/quarantine/", "quarantine"),
        ("/segment-data/reports/", "reports"),
    )
    area = next((name for marker, name in areas if marker in key), "other")
    verb = method
    if verb == "PUT" and area in ("tables", "dedupe index", "quarantine"):
        verb = "PUT/COPY"  # a publish's CopyObject (moto's log does not tell a copy from a put)
    return f"S3 {verb} {area}"


# -- one run --------------------------------------------------------------------------------------


@dataclass
class Run:
    name: str
    wall: float = 0.0
    peak_rss: int = 0
    cpu: float = 0.0
    moto_cpu: float = 0.0
    load: float = 0.0
    started_epoch: float = 0.0
    progress: list[tuple[float, str]] = field(default_factory=list)  # (seconds since start, line)
    tables: dict[str, int] = field(default_factory=dict)
    requests: list[tuple[float, str, str]] = field(default_factory=list)

    def phases(self) -> list[tuple[str, float, float]]:
        """``(phase, start, end)`` in seconds since the process started, from its progress lines:
        start-up (JVM, Spark, catalog, lease, listing), parse + dedupe (archive read, validate,
        flatten, dedupe), plan + write (schemas, staged Parquet), commit (publish, report,
        catalog, ledger, stage cleanup, and the JVM's exit)."""
        marks = {"syncing": None, "messages": None, "last_table": None}
        for at, line in self.progress:
            if marks["syncing"] is None and " syncing " in line and "archive files" in line:
                marks["syncing"] = at
            elif marks["messages"] is None and "duplicates dropped" in line:
                marks["messages"] = at
            elif marks["messages"] is not None and re.search(r": \d+ rows", line):
                marks["last_table"] = at
        if None in marks.values():
            return [("total", 0.0, self.wall)]
        edges = [0.0, marks["syncing"], marks["messages"], marks["last_table"], self.wall]
        names = ["start-up + listing", "parse + dedupe", "plan + write (staged)", "commit + exit"]
        return [(n, edges[i], edges[i + 1]) for i, n in enumerate(names)]


def run_sync(name: str, project: Path, env: dict[str, str], moto: Moto) -> Run:
    """``eventlake sync --format json`` in ``project``; its progress lines echoed with the time."""
    run = Run(name)
    cpu_before, served_before = moto.cpu_seconds(), len(moto.requests())
    run.started_epoch = time.time()
    started = time.monotonic()
    process = subprocess.Popen(
        [EVENTLAKE, "sync", "--format", "json"], cwd=project, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    sampler = TreeSampler(process.pid)

    noise: list[str] = []

    def read_progress() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            at = time.monotonic() - started
            match = PROGRESS.match(line.rstrip("\n"))
            if match:
                print(f"  {name} [{at:6.1f}s] {match.group(2)}", flush=True)
                run.progress.append((at, match.group(2)))
            else:
                noise.append(line.rstrip("\n"))
            log.write(line)

    log = open(project.parent / f"{name}-sync.log", "w")  # noqa: SIM115 - closed below
    reader = threading.Thread(target=read_progress, daemon=True)
    reader.start()
    stdout = process.stdout.read() if process.stdout else ""
    code = process.wait()
    run.wall = time.monotonic() - started
    reader.join()
    log.close()
    run.peak_rss, run.cpu, run.load = sampler.stop()
    run.moto_cpu = moto.cpu_seconds() - cpu_before
    if code:
        tail = "\n".join(noise[-30:])
        raise SystemExit(f"{name}: eventlake sync exited with {code} (log: {log.name})\n{stdout}\n{tail}")
    run.tables = {row["table"]: int(row["rows"]) for row in json.loads(stdout or "[]")}
    run.requests = moto.requests()[served_before:]
    return run


def report(run: Run, messages: int) -> None:
    print(f"\n{run.name}: {messages:,} messages in {run.wall:.1f} s = {messages / run.wall:,.0f} msg/s; "
          f"{sum(run.tables.values()):,} rows in {len(run.tables)} tables; "
          f"peak RSS {run.peak_rss / 2**30:.2f} GiB; "
          f"CPU {run.cpu:.0f} s (sync tree) + {run.moto_cpu:.0f} s (moto); "
          f"load average {run.load:.1f} on {os.cpu_count()} cores")  # fmt: skip
    phases = run.phases()
    by_phase: dict[str, collections.Counter[str]] = {name: collections.Counter() for name, _, _ in phases}
    for stamp, method, path in run.requests:
        at = max(0.0, stamp - run.started_epoch + 0.5)  # moto logs whole seconds
        phase = next((n for n, s, e in phases if s <= at < e), phases[-1][0])
        by_phase[phase][request_kind(method, path)] += 1
    for name, start, end in phases:
        counts = by_phase[name]
        listed = ", ".join(f"{kind} {n:,}" for kind, n in counts.most_common()) or "no requests"
        print(f"  {name:<22} {end - start:6.1f} s   moto: {listed}")


def create_project(directory: Path, env: dict[str, str], config_text: str | None = None) -> Path:
    shutil.rmtree(directory, ignore_errors=True)
    if config_text is None:
        subprocess.run([EVENTLAKE, "init", str(directory)], check=True, env=env, stdout=subprocess.DEVNULL)
        subprocess.run([EVENTLAKE, "sources", "add", "bench", "--write-key", "wk_bench"], cwd=directory,
                       check=True, env=env, stdout=subprocess.DEVNULL)  # fmt: skip
    else:
        directory.mkdir(parents=True)
        (directory / "eventlake.toml").write_text(config_text)
    return directory / "eventlake.toml"


def with_settings(text: str, *, root: str | None = None, endpoint: str = "", glue: bool = False) -> str:
    if root is not None:
        text = text.replace('root = "lake"', f'root = "{root}"\nendpoint_url = "{endpoint}"', 1)
    if glue:
        glue_block = f'kind = "glue"\nregion = "us-east-1"\nendpoint_url = "{endpoint}"'
        text = re.sub(r'^kind = "hive".*$', glue_block, text, count=1, flags=re.M)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the generated data here")
    parser.add_argument("--driver-memory", default="",
                        help="[spark] driver_memory of both projects (default 2g)")  # fmt: skip
    parser.add_argument("--local-catalog", choices=("glue", "hive"), default="glue",
                        help="the local run's catalog (default glue on moto, like the S3 run)")  # fmt: skip
    args = parser.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="eventlake-bench-s3-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLAKE") and not k.startswith("AWS_")}
    env.update(AWS_ENV)
    os.environ.update(AWS_ENV)  # this script's own boto3 client (the upload)

    local_project = work / "local"
    local_config = create_project(local_project, env)
    base_text = local_config.read_text()  # with the [[sources]] block: both projects share the source id
    if args.driver_memory:
        base_text = re.sub(r'^driver_memory = "[^"]*"', f'driver_memory = "{args.driver_memory}"', base_text,
                           count=1, flags=re.M)  # fmt: skip
        local_config.write_text(base_text)
    source_id = re.search(r'^id = "([^"]+)"', base_text, re.M).group(1)
    started = time.monotonic()
    count, raw = generate(local_project, source_id, args.messages, args.files)
    archive = local_project / "lake" / "segment-logs"
    files = sorted(p for p in archive.rglob("*.gz"))
    gz = sum(p.stat().st_size for p in files)
    print(f"generated {count:,} messages ({raw / 1e9:.2f} GB of JSON, {gz / 1e6:.0f} MB gzip) in "
          f"{len(files)} files in {time.monotonic() - started:.0f} s", flush=True)  # fmt: skip

    runs: dict[str, Run] = {}
    # local: a moto of its own serves the Glue catalog (or none with --local-catalog hive)
    moto = Moto(work / "moto-local.log").start()
    try:
        if args.local_catalog == "glue":
            local_config.write_text(with_settings(base_text, endpoint=moto.endpoint, glue=True))
        print(f"\nlocal lake ({args.local_catalog} catalog): eventlake sync", flush=True)
        runs["local"] = run_sync("local", local_project, env, moto)
    finally:
        moto.stop()

    moto = Moto(work / "moto-s3.log").start()
    try:
        import boto3

        s3 = boto3.client("s3", endpoint_url=moto.endpoint)
        s3.create_bucket(Bucket=BUCKET)
        s3_project = work / "s3"
        create_project(
            s3_project, env,
            with_settings(base_text, root=f"s3://{BUCKET}/{PREFIX}", endpoint=moto.endpoint, glue=True),
        )  # fmt: skip
        started = time.monotonic()
        for path in files:
            key = f"{PREFIX}/segment-logs/{path.relative_to(archive).as_posix()}"
            with open(path, "rb") as body:
                s3.put_object(Bucket=BUCKET, Key=key, Body=body)
        print(f"\nuploaded {len(files)} archive files ({gz / 1e6:.0f} MB) to "
              f"s3://{BUCKET}/{PREFIX}/segment-logs "
              f"in {time.monotonic() - started:.1f} s (not timed)", flush=True)  # fmt: skip
        print("S3 lake (glue catalog): eventlake sync", flush=True)
        runs["s3"] = run_sync("s3", s3_project, env, moto)
        objects = sum(
            page.get("KeyCount", 0)
            for page in s3.get_paginator("list_objects_v2").paginate(
                Bucket=BUCKET, Prefix=f"{PREFIX}/segment-data/data/"
            )
        )
    finally:
        moto.stop()

    for run in runs.values():
        report(run, count)
    local, remote = runs["local"], runs["s3"]
    same = local.tables == remote.tables
    print(f"\nsame tables and rows in both lakes: {same}; {objects:,} table files on S3")
    print(f"ratio (S3 wall / local wall): {remote.wall / local.wall:.2f}  (aim: <= 1.5)")
    print(f"ratio (S3 CPU incl. moto / local CPU incl. moto): "
          f"{(remote.cpu + remote.moto_cpu) / (local.cpu + local.moto_cpu):.2f}")  # fmt: skip
    if not same:
        raise SystemExit("the two lakes differ")


if __name__ == "__main__":
    main()
