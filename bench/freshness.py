"""Freshness: from the collector's 200 to the row being visible to ``eventlake sql``, on both engines.

Creates a fresh project (``eventlake init``, ``eventlake sources add``: default settings, one
source), starts ``eventlake up`` as a subprocess in its own process group and, from a separate load
process, sends a steady ``--rate`` messages/s (default 2,000) for ``--duration`` seconds (default
600) as ``POST /v1/batch`` requests of ``--batch`` realistic messages (bench/collector.py's
generator: track/page/identify as analytics.js sends them, every messageId unique), spread over a
few keep-alive connections on a fixed schedule (request i is due at start + i * batch / rate).
Once a second (``--probe-every``) the last message of a request is a *probe*: a track event
"Freshness Probe" with its own messageId, so all probes land in one small table
(``freshness.track_freshness_probe``); the load process records the monotonic time at which each
probe's request got its 200.

Two pollers (threads, one per engine) run ``eventlake sql --engine duckdb|spark --format json
"SELECT message_id FROM freshness.track_freshness_probe"`` every ``--poll-interval`` seconds
(start to start; back to back when a query takes longer) and record for each probe the first query
that returned it. After the load stops they go on for at most ``--drain`` seconds (default 300)
until every acknowledged probe has been seen; probes never seen are reported as missing.

**Freshness** of a probe on an engine = the end of the first query that returned it minus the
probe's 200. It includes that query's own time and up to one poll interval of waiting, so it is
what a user polling that often would see (an upper bound of the lake's own delay; the same figures
measured to the query's start are printed too, as the lower end).

**Baseline.** Benchmarks here print a ratio against a baseline measured in the same run; for
freshness the reference is the goal of issue 10 itself: p50 <= 60 s and p99 <= 120 s with ``up``
on default settings under 2,000 messages/s for 10 minutes. The script prints p50 / 60 s and
p99 / 120 s per engine: at most 1.0 meets the goal.

**CPU share** (cores: CPU seconds / wall seconds, averaged over the load window) from
``/proc/<pid>/stat`` utime + stime, sampled every 0.5 s (a process that ends between two samples
loses at most its last half second):

- *collector*: the ``up`` process itself, every thread (the HTTP server, the spool; the scheduler
  thread too; of which the event-loop thread, which holds the GIL, separately);
- *sync*: everything ``up`` started, their descendants included (the metastore service, sync
  processes and their JVMs), followed even after they are re-parented;
- *queries*: the pollers' ``eventlake sql`` processes and their descendants, per engine (a query
  that ``up``'s running engine answers is counted in its process, i.e. under sync);
- the load generator and this script.

Environment variables ``EVENTLAKE__SECTION__KEY`` are passed to ``up`` and ``sql`` (and printed): a
run with any of them is not on default settings, so it does not measure the goal (use them for dry
runs, e.g. ``EVENTLAKE__SYNC__INTERVAL_SECONDS=20``).

**An aged lake** (issue 25, item 7). ``--age-days D`` lays, after the project is created and before
``up`` starts, the durable state ``up`` leaves after D days at the soak's own ``--rate``, with
bench/aging.py's laying code (``History``, through ``aging.lay_aged``; no Spark session in this
process). aging.py samples the tables' files and a report from a synced project, so first one
archive file of ``--batch`` messages of the soak's kinds (no probe) is synced by ``eventlake sync``
(its own process and JVM). Then, on the local lake, at full density:

- the raw archive: 17,280 tiny files per closed day and today's folder from midnight up to now (at
  least half an hour; so today's part depends on the time of day the soak runs);
- the ledger: the checkpoint closed through the last closable day, a day file per closed day, the
  open days' names and 12 run entries since the last fold (every laid file is synced: ``up`` finds
  only the soak's own files new);
- reports: 2,880 per closed day and 120 an hour today, copies of the base sync's report as a later run
  writes it (no new table, no new column), one file
  per run; the base sync already marked the daily report merge through yesterday, so ``up`` does
  not merge the laid closed days (a micro-batch reads no closed day's reports);
- table files: one compacted file (a copy of the base's) and its marker per table and hour of each
  closed day, for the tables the base batch created. The probe table is not among them (the base has
  no probe): the pollers' full scan of it stays as small as on a fresh lake, so the figures measure
  ``up``, not a query over 30 days of probes;
- the dedupe index after the hourly merge (a merged key file a day, today's 60 run folders since
  the last merge) **scaled down** by ``--index-scale`` (default 1/32, aging.py's local default):
  at 2,000 msg/s the 7-day window holds 1.2 billion ids (about 28 GB of key files) in full, 40 to
  50 million at 1/32. Days outside the window hold a few ids (a sync never reads them).

- the web console's summaries of the closed days (``eventlake.console.lake.DaySummary``), made by the
  console's own code from the laid reports, as a console running through those days leaves them in
  the state folder (a console reads a day's reports once, when the day is no longer recent).

Not laid: the metastore's partitions of the laid days (as in aging.py). Before ``up`` starts, every
soak writes back the page cache's dirty pages (``sync``, :func:`settle`): the laying's writes are
not left to be written back while ``up`` starts.
``--compare-age D`` runs the soak twice in one script, each on a new project: fresh (the base sync
only, so both soaks start with the same tables), then aged D days; it prints p50/p99 per engine of
both and aged / fresh against issue 25's goal (within 10%: at most 1.10). ``--age-days 0`` without
``--compare-age`` is the plain soak (no base sync).

    .venv/bin/python bench/freshness.py                               # 2,000 msg/s for 10 minutes
    .venv/bin/python bench/freshness.py --compare-age 30              # fresh, then 30 days aged
    EVENTLAKE__SYNC__INTERVAL_SECONDS=20 .venv/bin/python bench/freshness.py --rate 200 --duration 60
    .venv/bin/python bench/freshness.py --workdir /tmp/fresh          # keep the project there
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gzip
import math
import multiprocessing
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from queue import Empty

import orjson

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collector import (  # noqa: E402 - bench/collector.py: the same realistic messages
    EVENTLAKE,
    MARKER,
    TIME_MARKER,
    WRITE_KEY,
    cpu_seconds,
    free_port,
    realistic_message,
)

SOURCE = "freshness"
PROBE_EVENT = "Freshness Probe"
PROBE_TABLE = f"{SOURCE}.track_freshness_probe"
PROBE_PREFIX = "probe-"
PROBE_MARKER = b"%%%%%%%%"  # replaced by the probe's number, same width: Content-Length holds
GOAL_P50, GOAL_P99 = 60.0, 120.0
SENT_AT = "2026-11-22T10:47:02.000Z"  # every batch's sentAt
AGE_GOAL = 1.1  # issue 25 item 7: an aged lake's p50 and p99 within 10% of a fresh lake's
INDEX_SCALE = 1 / 32  # share of the dedupe index's ids laid (bench/aging.py's local default)
ENGINES = ("duckdb", "spark")
TICKS = os.sysconf("SC_CLK_TCK")
START_TIMEOUT = 180.0  # for `up` to answer /health
QUERY_TIMEOUT = 180.0  # one `eventlake sql`
STOP_TIMEOUT = 90.0  # for `up` to stop after SIGTERM, before SIGKILL
LEFTOVER_GRACE = 10.0  # for what `up` started to exit after `up` itself


# load (a separate process) --------------------------------------------------------------------


def probe_message() -> dict[str, object]:
    return {
        "type": "track",
        "event": PROBE_EVENT,
        "messageId": PROBE_PREFIX + PROBE_MARKER.decode(),
        "userId": "freshness-bench",
        "timestamp": f"2026-11-22T10:47:01.{TIME_MARKER.decode()}Z",
        "properties": {"bench": "freshness"},
    }


def request_template(port: int, batch: int, seed: int, probe: bool) -> bytes:
    """A ``POST /v1/batch`` request of ``batch`` realistic messages, the last one a probe if asked."""
    rng = random.Random(seed)
    messages = [realistic_message(i, rng) for i in range(batch)]
    if probe:
        messages[-1] = probe_message()
    body = orjson.dumps(
        {
            "batch": messages,
            "sentAt": SENT_AT,
            "context": {"library": {"name": "analytics.js", "version": "next-1.84.3"}},
        }
    )
    token = base64.b64encode(f"{WRITE_KEY}:".encode()).decode()
    head = (
        f"POST /v1/batch HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Basic {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


@dataclass
class Schedule:
    port: int
    batch: int
    period: float  # seconds between two requests (batch / rate)
    requests: int
    probe_every: int  # every n-th request carries a probe
    connections: int
    start_at: float  # time.monotonic() of the first request (CLOCK_MONOTONIC: system-wide)


@dataclass
class LoadResult:
    requests: int = 0
    sent_messages: int = 0
    acknowledged: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    probes: dict[str, float] = field(default_factory=dict)  # probe id -> monotonic time of its 200
    probes_failed: int = 0  # probes whose request was not answered 200
    latencies: list[float] = field(default_factory=list)
    max_lag: float = 0.0  # how late a request left after its due time
    late: int = 0  # requests sent more than one period late
    cpu_seconds: float = 0.0
    elapsed: float = 0.0


async def _read_status(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    await reader.readexactly(length)
    return int(head[9:12])


async def _connection(
    k: int, plan: Schedule, plain: list[bytes], probes: list[bytes], out: LoadResult
) -> None:
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    for i in range(k, plan.requests, plan.connections):
        due = plan.start_at + i * plan.period
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        probe = i % plan.probe_every == 0
        request = (probes if probe else plain)[(i // plan.connections) % len(plain)]
        request = request.replace(MARKER, b"%012d" % i).replace(TIME_MARKER, b"%03d" % (i * 7 % 1000))
        probe_id = ""
        if probe:
            number = b"%08d" % (i // plan.probe_every)
            request = request.replace(PROBE_MARKER, number)
            probe_id = PROBE_PREFIX + number.decode()
        sent = time.monotonic()
        out.max_lag = max(out.max_lag, sent - due)
        out.late += sent - due > plan.period
        out.requests += 1
        out.sent_messages += plan.batch
        try:
            if writer is None:
                reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", plan.port), 10)
            assert reader is not None
            writer.write(request)
            status = await asyncio.wait_for(_read_status(reader), 30)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
            name = type(exc).__name__
            out.errors[name] = out.errors.get(name, 0) + 1
            out.probes_failed += probe
            if writer is not None:
                writer.close()
            reader = writer = None
            continue
        answered = time.monotonic()
        if status == 200:
            out.acknowledged += plan.batch
            out.latencies.append(answered - sent)
            if probe:
                out.probes[probe_id] = answered
        else:
            out.errors[str(status)] = out.errors.get(str(status), 0) + 1
            out.probes_failed += probe
    if writer is not None:
        writer.close()


def load_process(plan: Schedule, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    """Sends the schedule, then puts a :class:`LoadResult` on ``queue`` (runs in its own process)."""
    plain = [request_template(plan.port, plan.batch, seed, probe=False) for seed in range(8)]
    probes = [request_template(plan.port, plan.batch, seed, probe=True) for seed in range(8)]
    out = LoadResult()

    async def run() -> None:
        await asyncio.gather(*(_connection(k, plan, plain, probes, out) for k in range(plan.connections)))

    began, cpu = time.monotonic(), time.process_time()
    asyncio.run(run())
    out.elapsed = time.monotonic() - max(began, plan.start_at)
    out.cpu_seconds = time.process_time() - cpu
    queue.put(out)


# CPU of process trees ---------------------------------------------------------------------------


def _stat(pid: int) -> tuple[int, int, float] | None:
    """(parent pid, start time in ticks, utime + stime in seconds) from /proc/<pid>/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[19]), (int(fields[11]) + int(fields[12])) / TICKS


class CpuSampler:
    """CPU seconds of labelled process trees, every 0.5 s.

    A root is registered with a label for itself and one for its descendants; every process is
    labelled once (by its nearest labelled ancestor) and keeps its label and its last CPU figure
    after it is re-parented or ends, so the totals never go down. Processes are keyed by (pid,
    start time): a reused pid is a new process. A process whose parent ends before the first sample
    that would have seen it cannot be attributed (it is re-parented first) and is not counted.
    """

    def __init__(self, period: float = 0.5) -> None:
        self.period = period
        self._lock = threading.Lock()
        self._roots: dict[int, tuple[int, str]] = {}  # pid -> (start time, label of its descendants)
        self._procs: dict[tuple[int, int], tuple[str, float]] = {}  # (pid, start) -> (label, cpu)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add_root(self, pid: int, label: str, descendants: str | None = None) -> None:
        stat = _stat(pid)
        if stat is None:
            return
        with self._lock:
            self._roots[pid] = (stat[1], descendants or label)
            self._procs[(pid, stat[1])] = (label, stat[2])

    def finish(self, pid: int) -> None:
        """Record a root's final CPU: call while it is a zombie (exited, not yet reaped)."""
        stat = _stat(pid)
        with self._lock:
            if stat is not None and (pid, stat[1]) in self._procs:
                self._procs[(pid, stat[1])] = (self._procs[(pid, stat[1])][0], stat[2])

    def sample(self) -> None:
        stats = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (stat := _stat(int(entry))) is not None:
                stats[int(entry)] = stat
        with self._lock:
            labels: dict[int, str | None] = {}

            def label_of(pid: int, depth: int = 0) -> str | None:
                if pid in labels:
                    return labels[pid]
                parent, start, _ = stats[pid]
                known = self._procs.get((pid, start))
                label = known[0] if known else None
                if label is None and depth < 64 and parent in stats:
                    root = self._roots.get(parent)
                    if root is not None and root[0] == stats[parent][1]:
                        label = root[1]
                    elif label_of(parent, depth + 1) is not None:
                        label = labels[parent]
                labels[pid] = label
                return label

            for pid, (_, start, cpu) in stats.items():
                label = label_of(pid)
                if label is not None:  # never lower (a concurrent, older scan)
                    previous = self._procs.get((pid, start), (label, 0.0))[1]
                    self._procs[(pid, start)] = (label, max(cpu, previous))

    def live(self, label: str) -> list[int]:
        """Pids of live processes with ``label`` (for a last clean-up)."""
        with self._lock:
            keys = [key for key, (name, _) in self._procs.items() if name == label]
        return [pid for pid, start in keys if (stat := _stat(pid)) is not None and stat[1] == start]

    def totals(self) -> dict[str, float]:
        self.sample()
        totals: dict[str, float] = {}
        with self._lock:
            for label, cpu in self._procs.values():
                totals[label] = totals.get(label, 0.0) + cpu
        return totals

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


# pollers ------------------------------------------------------------------------------------


class Poller(threading.Thread):
    """Runs the probe query on one engine every ``interval`` s; first query that saw each probe."""

    def __init__(
        self, engine: str, config: Path, env: dict[str, str], interval: float, sampler: CpuSampler
    ) -> None:
        super().__init__(name=f"poll-{engine}", daemon=True)
        self.engine, self.interval, self.sampler = engine, interval, sampler
        self.command = [
            str(EVENTLAKE),
            "--config",
            str(config),
            "sql",
            "--engine",
            engine,
            "--format",
            "json",
            f"SELECT message_id FROM {PROBE_TABLE}",
        ]
        self.env, self.cwd = env, config.parent
        self.seen: dict[str, tuple[float, float]] = {}  # probe id -> (start, end) of the first query
        self.latencies: list[float] = []  # successful queries
        self.failed_before_table = 0  # failures before any query succeeded (no table yet)
        self.failed = 0  # failures after one had succeeded
        self.last_error = ""
        self.expected: set[str] | None = None
        self.deadline = math.inf
        self.stopping = threading.Event()

    def expect(self, probes: set[str], deadline: float) -> None:
        self.expected, self.deadline = probes, deadline

    def done(self) -> bool:
        if self.stopping.is_set() or time.monotonic() >= self.deadline:
            return True
        return self.expected is not None and self.expected <= self.seen.keys()

    def run(self) -> None:
        while not self.done():
            began = time.monotonic()
            ids = self.query()
            ended = time.monotonic()
            if ids is None:
                if self.latencies:
                    self.failed += 1
                else:
                    self.failed_before_table += 1
            else:
                self.latencies.append(ended - began)
                for probe in ids:
                    self.seen.setdefault(probe, (began, ended))
            self.stopping.wait(max(0.0, began + self.interval - time.monotonic()))

    def query(self) -> list[str] | None:
        """The probe ids the engine returns now; None when the query failed."""
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            process = subprocess.Popen(
                self.command, stdout=out, stderr=err, env=self.env, cwd=self.cwd, start_new_session=True
            )
            self.sampler.add_root(process.pid, f"query {self.engine}")
            timer = threading.Timer(QUERY_TIMEOUT, _kill_group, (process.pid,))
            timer.start()
            try:  # wait without reaping, so its own CPU can still be read in /proc
                os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
                self.sampler.finish(process.pid)
            finally:
                timer.cancel()
                code = process.wait()
            out.seek(0)
            err.seek(0)
            if code != 0:
                lines = err.read().decode(errors="replace").strip().splitlines()
                self.last_error = lines[-1] if lines else f"exit {code}"
                return None
            try:
                rows = orjson.loads(out.read())
            except orjson.JSONDecodeError as exc:
                self.last_error = f"not JSON: {exc}"
                return None
        return [
            str(row["message_id"]) for row in rows if str(row.get("message_id", "")).startswith(PROBE_PREFIX)
        ]


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# the project and `up` -----------------------------------------------------------------------


def bench_environment() -> tuple[dict[str, str], dict[str, str]]:
    """The environment for eventlake commands (no EVENTLAKE_CONFIG), and its setting overrides."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("EVENTLAKE") or k.startswith("EVENTLAKE__")
    }
    return env, {k: v for k, v in env.items() if k.startswith("EVENTLAKE__")}


def make_project(work: Path, env: dict[str, str]) -> Path:
    for command in (
        ["init", str(work)],
        ["--config", str(work / "eventlake.toml"), "sources", "add", SOURCE, "--write-key", WRITE_KEY],
    ):
        done = subprocess.run(
            [str(EVENTLAKE), *command], env=env, capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode:
            raise SystemExit(f"eventlake {' '.join(command)} failed: {done.stderr.strip()}")
    return work / "eventlake.toml"


def base_sync(config: Path, env: dict[str, str], messages: int) -> str:
    """One archive file of ``messages`` of the soak's kinds of message (bench/collector.py's, enriched
    as the collector archives them; no probe), synced by ``eventlake sync``: the tables exist, and
    :mod:`aging` samples their files and the report. Returns what it did."""
    from eventlake import layout, state_layout
    from eventlake.config import load_settings
    from eventlake.spec.message import enrich

    settings = load_settings(config, environ={})
    source = settings.source(SOURCE)
    now = datetime.now(timezone.utc)
    rng = random.Random(25)
    lines = []
    for i in range(messages):
        message = realistic_message(i, rng)
        message["messageId"] = f"aged-base-{i:06d}"  # not a probe's
        message["timestamp"] = str(message["timestamp"]).replace(TIME_MARKER.decode(), "000")
        message["sentAt"] = SENT_AT  # as the collector merges the batch's: the same columns
        lines.append(orjson.dumps(enrich(message, received_at=now, source_id=source.id)) + b"\n")
    now_ms = int(now.timestamp() * 1000)
    day = now_ms - now_ms % 86_400_000
    name = state_layout.spool_segment_name(day, now_ms, "agedbase", 1)
    settings.lake.storage().write(
        layout.archive_file(settings.lake.root, source.id, day, name), gzip.compress(b"".join(lines))
    )
    began = time.monotonic()
    done = subprocess.run(
        [str(EVENTLAKE), "--config", str(config), "sync"],
        cwd=config.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"the base `eventlake sync` failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return f"base batch of {messages} messages synced by `eventlake sync` in {time.monotonic() - began:.0f} s"


def age_project(config: Path, days: int, rate: float, scale: float) -> str:
    """Lays ``days`` days of `up`'s state at ``rate`` messages/s (bench/aging.py); returns what was laid."""
    from aging import lay_aged

    began = time.monotonic()
    laid = lay_aged(config, SOURCE, days, max(1, round(rate)), scale)
    return (
        f"aged: {days} closed days at {rate:,.0f} msg/s and today's folder ({laid['today_hours']:.1f} h) "
        f"laid in {time.monotonic() - began:.0f} s: {laid['files']:,} files, {laid['archive_files']:,} "
        f"archive files, {laid['index_ids']:,} dedupe ids in the window (scale {scale:g}), "
        f"{len(laid['tables'])} tables' compacted files per hour of each closed day; ledger checkpoint "
        f"closed through {datetime.fromtimestamp(laid['closed_through'] / 1000, timezone.utc):%Y-%m-%d}; "
        f"the console's summaries of the closed days made in {laid['console_summaries_s']:.0f} s"
    )


def settle() -> str:
    """Writes back what the project's making left in the page cache (``sync``) before ``up`` starts.

    Laying 30 days writes about 600,000 files and a GB of index in a minute or two, and the kernel
    would write them back while ``up`` starts; a lake aged by 30 days of ``up`` has no such backlog.
    (Measured: 1.2 GB dirty, written back in under a second on this machine: not what slowed the
    aged start, which was the DuckDB poller opening every table while the probe table did not exist
    yet; see bench/README.md.)"""
    dirty = _meminfo_kib("Dirty") + _meminfo_kib("Writeback")
    began = time.monotonic()
    os.sync()
    took = time.monotonic() - began
    return f"settled: {dirty / 1024:,.0f} MiB dirty in the page cache written back in {took:.1f} s"


def _meminfo_kib(field: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == field:
            return int(value.split()[0])
    return 0


def describe_settings(config: Path, overrides: dict[str, str]) -> str:
    """The settings that decide freshness, as the project's eventlake.toml and the environment say."""
    raw = tomllib.loads(config.read_text())
    parts = []
    for section in ("sync", "collector"):
        for key, value in raw.get(section, {}).items():
            if section == "sync" or key.startswith("seal_"):
                parts.append(f"{section}.{key} = {value}")
    if not any(p.startswith("sync.") for p in parts):
        parts.append("[sync]: none in eventlake.toml (built-in defaults)")
    text = "settings (eventlake.toml from `eventlake init`): " + ", ".join(parts)
    if overrides:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(overrides.items()))
        text += f"\n  environment overrides: {shown}"
        text += "\n  ** NOT default settings: this run does not measure the goal **"
    else:
        text += "; no environment overrides (default settings)"
    return text


def start_up(config: Path, port: int, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as handle:
        process = subprocess.Popen(
            [str(EVENTLAKE), "--config", str(config), "up", "--port", str(port)],
            cwd=config.parent,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group (and session)
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"eventlake up exited ({process.returncode}):\n{tail(log)}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return process
        except OSError:
            time.sleep(0.2)
    stop_up(process, None)
    raise SystemExit(f"eventlake up did not answer /health in {START_TIMEOUT:.0f} s:\n{tail(log)}")


def stop_up(process: subprocess.Popen[bytes], sampler: CpuSampler | None) -> str:
    """SIGTERM to ``up``; SIGKILL to its group and every process it started if it does not stop."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT)
        outcome = f"stopped (exit {process.returncode})"
    except subprocess.TimeoutExpired:
        _kill_group(process.pid)
        process.wait(10)
        outcome = f"did not stop within {STOP_TIMEOUT:.0f} s of SIGTERM: killed"
    if sampler is not None:  # processes `up` started that outlived it (own sessions, re-parented)
        grace = time.monotonic() + LEFTOVER_GRACE
        while (leftovers := sampler.live("sync")) and time.monotonic() < grace:
            time.sleep(0.5)
        if leftovers:
            shown = "; ".join(f"{pid} {_command_line(pid)}" for pid in leftovers)
            outcome += (
                f"; {len(leftovers)} of its processes were still running {LEFTOVER_GRACE:.0f} s "
                f"after it exited, killed: {shown}"
            )
        for pid in leftovers:
            _kill(pid)
    return outcome


def _command_line(pid: int) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    text = " ".join(w.decode(errors="replace") for w in words if w)
    return text if len(text) <= 120 else text[:117] + "..."


def tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def sync_runs(config: Path, env: dict[str, str], since: str = "") -> str:
    """A summary of ``eventlake reports`` for the source (whatever the sync's process model): the runs
    whose id (a UTC time first) is not before ``since`` (an aged lake holds laid copies of a report)."""
    command = ["reports", "--source", SOURCE, "--format", "json", "--limit", "1000"]
    try:
        done = subprocess.run(
            [str(EVENTLAKE), "--config", str(config), *command],
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )
        runs = orjson.loads(done.stdout) if done.returncode == 0 else None
    except (subprocess.TimeoutExpired, orjson.JSONDecodeError):
        runs = None
    if runs is None:
        return "sync runs: `eventlake reports` failed"
    runs = [run for run in runs if str(run.get("run_id") or "") >= since]
    if not runs:
        return "sync runs (eventlake reports): none"
    statuses: dict[str, int] = {}
    for run in runs:
        statuses[str(run.get("status"))] = statuses.get(str(run.get("status")), 0) + 1
    durations = sorted(float(r.get("duration_s") or 0) for r in runs)
    rows = sum(int(r.get("rows") or 0) for r in runs)
    return (
        f"sync runs (eventlake reports): {len(runs)} ({', '.join(f'{n} {s}' for s, n in statuses.items())}), "
        f"duration p50 {statistics.median(durations):.1f} s, max {durations[-1]:.1f} s; {rows:,} rows synced"
    )


# figures ------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of a sorted list."""
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


def report(
    args: argparse.Namespace,
    plan: Schedule,
    load: LoadResult,
    pollers: list[Poller],
    cpu: dict[str, float],
    loop_cpu: float,
    window: float,
    bench_cpu: float,
    query_cpu: dict[str, float],
) -> dict[str, tuple[float, float, int, int]]:
    """Prints the figures; returns (p50, p99, probes seen, probes acknowledged) per engine that saw any."""
    figures: dict[str, tuple[float, float, int, int]] = {}
    lat = sorted(load.latencies) or [math.nan]
    errors = ", ".join(f"{k}: {v}" for k, v in sorted(load.errors.items())) or "none"
    sent_rate = load.sent_messages / max(load.elapsed, 1e-9)
    print(
        f"load: {args.rate:,.0f} msg/s for {args.duration:.0f} s, batches of {plan.batch} every "
        f"{plan.period * 1000:.0f} ms over {plan.connections} connections; "
        f"sent {load.sent_messages:,} messages in {load.requests:,} requests ({sent_rate:,.0f}/s), "
        f"acknowledged {load.acknowledged:,}; errors: {errors}"
    )
    print(
        f"  request p50 / p99 {statistics.median(lat) * 1000:.1f} / {percentile(lat, 0.99) * 1000:.1f} ms; "
        f"sent late: max {load.max_lag * 1000:.0f} ms, {load.late:,} requests more than one period late"
    )
    probes = load.probes
    print(
        f"probes: {len(probes):,} acknowledged (one per {plan.probe_every * plan.period:.1f} s), "
        f"{load.probes_failed} not acknowledged; polled every {args.poll_interval:.0f} s per engine, "
        f"for at most {args.drain:.0f} s after the load"
    )
    print(
        "freshness = end of the first query that returned the probe - the probe's 200 "
        "(in brackets: to that query's start)"
    )
    head = (
        "engine",
        "seen",
        "missing",
        "p50 s",
        "p90 s",
        "p99 s",
        "max s",
        "p50/60s",
        "p99/120s",
        "query p50",
    )
    print("  ".join(f"{h:>9}" for h in head))
    for poller in pollers:
        ends = sorted(poller.seen[p][1] - probes[p] for p in probes if p in poller.seen)
        starts = sorted(poller.seen[p][0] - probes[p] for p in probes if p in poller.seen)
        missing = sorted(p for p in probes if p not in poller.seen)
        query = f"{statistics.median(poller.latencies):.2f} s" if poller.latencies else "-"
        if ends:
            cells = [
                f"{percentile(ends, q):.1f} ({percentile(starts, q):.1f})" for q in (0.5, 0.9, 0.99, 1.0)
            ]
            ratios = [f"{percentile(ends, 0.5) / GOAL_P50:.2f}", f"{percentile(ends, 0.99) / GOAL_P99:.2f}"]
            figures[poller.engine] = (percentile(ends, 0.5), percentile(ends, 0.99), len(ends), len(probes))
        else:
            cells, ratios = ["-"] * 4, ["-", "-"]
        row = (poller.engine, f"{len(ends):,}", f"{len(missing):,}", *cells, *ratios, query)
        print("  ".join(f"{c:>9}" for c in row))
        failures = poller.failed + poller.failed_before_table
        note = f"  {poller.engine}: {len(poller.latencies) + failures} queries"
        if failures:
            note += (
                f", {poller.failed_before_table} failed before the first success (no probe table yet), "
                f"{poller.failed} failed after it; last error: {poller.last_error}"
            )
        if missing:
            shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
            note += f"; missing probes: {shown}"
        print(note)
    shares = {label: seconds / window for label, seconds in cpu.items()}
    print(
        f"CPU (cores, over the {window:.0f} s of load; {os.cpu_count()} CPUs): "
        f"collector {shares.get('collector', 0):.2f} (event-loop thread {loop_cpu / window:.2f}), "
        f"sync {shares.get('sync', 0):.2f}, "
        + ", ".join(f"queries {e} {shares.get(f'query {e}', 0):.2f}" for e in ENGINES)
        + f", load generator {load.cpu_seconds / window:.2f}, this script {bench_cpu / window:.2f}"
    )
    for poller in pollers:
        n = len(poller.latencies) + poller.failed + poller.failed_before_table
        if n:
            per_query = query_cpu.get(poller.engine, 0.0) / n
            print(f"  {poller.engine} poller: {per_query:.2f} CPU s per query (whole run, {n} queries)")
    return figures


def compare(runs: list[tuple[str, dict[str, tuple[float, float, int, int]]]], days: int) -> None:
    """The aged soak against the fresh one (the baseline, same script): aged / fresh per engine."""
    (_, fresh), (label, aged) = runs
    print(f"\naged ({days} days) against fresh: freshness in s (probes seen / acknowledged), aged / fresh")
    print(f"goal (issue 25 item 7): p50 and p99 ratios at most {AGE_GOAL:.2f} on both engines")
    head = ("engine", "fresh p50", "fresh p99", "aged p50", "aged p99", "p50 ratio", "p99 ratio", "goal")
    print("  ".join(f"{h:>14}" for h in head))
    for engine in ENGINES:
        if engine not in fresh or engine not in aged:
            print(f"{engine:>14}  no probe seen in the {'fresh' if engine not in fresh else label} soak")
            continue
        (f50, f99, fn, ft), (a50, a99, an, at) = fresh[engine], aged[engine]
        r50, r99 = a50 / f50, a99 / f99
        met = "met" if max(r50, r99) <= AGE_GOAL else "not met"
        cells = (engine, f"{f50:.1f} ({fn}/{ft})", f"{f99:.1f}", f"{a50:.1f} ({an}/{at})", f"{a99:.1f}",
                 f"{r50:.2f}", f"{r99:.2f}", met)  # fmt: skip
        print("  ".join(f"{c:>14}" for c in cells))
        if fn < ft or an < at:
            print(f"{'':>14}  ** probes missing: the figures cover only the probes seen; raise --drain **")


def soak(
    args: argparse.Namespace,
    env: dict[str, str],
    overrides: dict[str, str],
    days: int,
    base: bool,
    work: Path | None,
) -> dict[str, tuple[float, float, int, int]]:
    """One soak on a new project (in ``work``, or a temporary folder): a base batch synced first if
    ``base``, ``days`` days of state laid if any; returns (p50, p99, probes seen, acknowledged) per engine."""
    if work is not None:
        work = work.resolve()
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="eventlake-freshness-"))
    keep = args.keep or args.workdir is not None
    config = make_project(work, env)
    figures: dict[str, tuple[float, float, int, int]] = {}
    log = work / "up.log"
    print(
        f"project {work} ({'kept' if keep else 'removed at the end'}); {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    print(describe_settings(config, overrides), flush=True)

    port = free_port()
    sampler = CpuSampler()
    up: subprocess.Popen[bytes] | None = None
    load_proc: multiprocessing.process.BaseProcess | None = None
    pollers: list[Poller] = []
    try:
        if base:
            print(base_sync(config, env, args.batch), flush=True)
        if days:
            print(age_project(config, days, args.rate, args.index_scale), flush=True)
        print(settle(), flush=True)
        began = time.monotonic()
        since = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        up = start_up(config, port, env, log)
        sampler.add_root(up.pid, "collector", "sync")
        sampler.start()
        print(f"eventlake up answers on port {port} after {time.monotonic() - began:.1f} s", flush=True)

        period = args.batch / args.rate
        plan = Schedule(
            port=port,
            batch=args.batch,
            period=period,
            requests=max(1, round(args.duration / period)),
            probe_every=max(1, round(args.probe_every / period)),
            connections=args.connections,
            start_at=time.monotonic() + 2.0,  # the load process starts and prepares its requests
        )
        pollers = [Poller(engine, config, env, args.poll_interval, sampler) for engine in ENGINES]
        for poller in pollers:
            poller.start()
        context = multiprocessing.get_context("spawn")
        queue = context.Queue()
        load_proc = context.Process(target=load_process, args=(plan, queue), name="load")
        load_proc.start()

        while time.monotonic() < plan.start_at:
            time.sleep(0.01)
        cpu_before, loop_before = sampler.totals(), cpu_seconds(up.pid, up.pid)
        bench_before = time.process_time()
        load: LoadResult | None = None
        deadline = plan.start_at + args.duration + 120
        next_note = plan.start_at + 60
        while load is None:
            try:
                load = queue.get(timeout=1.0)
            except Empty:
                now = time.monotonic()
                if up.poll() is not None:
                    raise SystemExit(
                        f"eventlake up exited ({up.returncode}) during the load:\n{tail(log)}"
                    ) from None
                if load_proc.exitcode not in (None, 0) or now > deadline:
                    raise SystemExit("the load process failed or did not finish") from None
                if now >= next_note:
                    next_note += 60
                    seen = ", ".join(f"{p.engine} {len(p.seen)}" for p in pollers)
                    print(f"  {now - plan.start_at:.0f} s: probes seen {seen}", flush=True)
        window = time.monotonic() - plan.start_at
        cpu_after, loop_after = sampler.totals(), cpu_seconds(up.pid, up.pid)
        bench_cpu = time.process_time() - bench_before
        load_proc.join(10)
        print(
            f"load done after {window:.0f} s; waiting at most {args.drain:.0f} s for "
            f"{len(load.probes)} probes on both engines",
            flush=True,
        )

        drain_until = time.monotonic() + args.drain
        for poller in pollers:
            poller.expect(set(load.probes), drain_until)
        for poller in pollers:
            poller.join(args.drain + QUERY_TIMEOUT + 30)
        if up.poll() is not None:
            print(f"warning: eventlake up exited ({up.returncode}) while draining:\n{tail(log)}")

        cpu = {label: cpu_after.get(label, 0.0) - cpu_before.get(label, 0.0) for label in cpu_after}
        cpu_end = sampler.totals()
        query_cpu = {engine: cpu_end.get(f"query {engine}", 0.0) for engine in ENGINES}
        print()
        figures = report(
            args, plan, load, pollers, cpu, loop_after - loop_before, window, bench_cpu, query_cpu
        )
    finally:
        for poller in pollers:
            poller.stopping.set()
        if load_proc is not None and load_proc.is_alive():
            load_proc.kill()
            load_proc.join(5)
        for poller in pollers:
            poller.join(QUERY_TIMEOUT + 10)
        for engine in ENGINES:  # e.g. a query's JVM still exiting after its Python process
            for pid in sampler.live(f"query {engine}"):
                _kill(pid)
        if up is not None:
            print(f"eventlake up {stop_up(up, sampler)}")
        sampler.stop()
        if up is not None:
            print(sync_runs(config, env, since))
        if keep:
            print(f"project kept in {work} (log: {log})")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=2000.0, help="messages per second (default 2000)")
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load (default 600)")
    parser.add_argument("--batch", type=int, default=100, help="messages per request (default 100)")
    parser.add_argument("--connections", type=int, default=8, help="keep-alive connections (default 8)")
    parser.add_argument("--probe-every", type=float, default=1.0, help="seconds between probes (default 1)")
    parser.add_argument(
        "--poll-interval", type=float, default=5.0, help="seconds between queries (default 5)"
    )
    parser.add_argument(
        "--drain",
        type=float,
        default=300.0,
        help="seconds to wait for the probes after the load (default 300)",
    )
    parser.add_argument("--workdir", type=Path, help="create the project here and keep it")
    parser.add_argument("--keep", action="store_true", help="keep the temporary project")
    parser.add_argument(
        "--age-days",
        type=int,
        default=0,
        help="lay this many days of `up`'s state at --rate into the project before `up` (default 0)",
    )
    parser.add_argument(
        "--compare-age",
        type=int,
        metavar="D",
        help="run the soak on a fresh project, then on one aged D days; print aged / fresh",
    )
    parser.add_argument(
        "--index-scale",
        type=float,
        default=INDEX_SCALE,
        help=f"share of the dedupe index's ids laid when aging (default {INDEX_SCALE:g})",
    )
    args = parser.parse_args()
    if args.rate <= 0 or args.duration <= 0 or args.batch < 1 or args.connections < 1:
        parser.error("--rate, --duration, --batch and --connections must be positive")
    if args.age_days < 0 or (args.compare_age is not None and args.compare_age < 1):
        parser.error("--age-days must be at least 0 and --compare-age at least 1")
    if args.compare_age is not None and args.age_days:
        parser.error("--compare-age runs its own ages: leave out --age-days")
    if not 0 < args.index_scale <= 1:
        parser.error("--index-scale must be in (0, 1]")

    env, overrides = bench_environment()
    if args.workdir:
        root = args.workdir.resolve()
        if (root / "eventlake.toml").exists():
            parser.error(f"{root} already holds a project: the benchmark needs a fresh one")
    if args.compare_age is None:
        soak(args, env, overrides, args.age_days, base=args.age_days > 0, work=args.workdir)
        return
    runs = []
    for days in (0, args.compare_age):
        label = "fresh" if days == 0 else f"aged {days} days"
        print(f"\n===== soak {len(runs) + 1} of 2: {label} =====", flush=True)
        work = args.workdir.resolve() / ("fresh" if days == 0 else f"aged-{days}") if args.workdir else None
        runs.append((label, soak(args, env, overrides, days, base=True, work=work)))
    compare(runs, args.compare_age)


if __name__ == "__main__":
    main()
