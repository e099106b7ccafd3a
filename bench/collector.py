"""Collector throughput: concurrent clients posting batches of realistic messages over loopback.

Runs the load twice against the same server stack (uvicorn + the collector's Starlette app):

- ``durable``: the real ``eventlake serve`` process; every 200 means fsynced to the spool;
- ``bare``: the same app and server with a spool that stores nothing (parse, validate, enrich,
  answer), so the ratio of the two shows what durability costs.

The load comes from separate processes speaking HTTP/1.1 with keep-alive over raw sockets, with
every request prepared in advance (only the messageIds change, so each message is unique), so that
the load generator is not the bottleneck. Prints messages/s, requests/s and p50/p99 latency, and
what the server spent: CPU (cores, all threads), CPU per message, and CPU per message of the event
loop thread, which holds the GIL and so bounds one process at ``1e6 / loop us/msg`` messages/s
however many cores there are ("loop-bound"; these CPU figures hold even when other processes
compete for the machine, the throughput figures do not).

    .venv/bin/python bench/collector.py                  # 30 s per mode, 8 clients, batches of 100
    .venv/bin/python bench/collector.py --duration 10 --mode durable --clients 16
    .venv/bin/python bench/collector.py --collectors 2   # two collector processes on one lake
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import multiprocessing
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty

import orjson

EVENTLAKE = Path(sys.executable).parent / "eventlake"
WRITE_KEY = "wk_bench"
MARKER = b"@@@@@@@@@@@@"  # replaced by a per-request counter of the same width: unique messageIds
TIME_MARKER = b"!!!"  # the milliseconds of every timestamp, replaced per request: few repeated values

EVENTS = ("Product Viewed", "Product Added", "Checkout Started", "Order Completed", "Signed Up")
PAGES = ("/", "/pricing", "/docs/getting-started", "/blog/2026/11/launch", "/cart")


def realistic_message(index: int, rng: random.Random) -> dict[str, object]:
    """One message as analytics.js or a server library sends it (about 0.7-1 KB of JSON)."""
    kind = rng.choices(("track", "page", "identify"), weights=(70, 20, 10))[0]
    user = f"user-{rng.randrange(100_000):06d}"
    path = rng.choice(PAGES)
    message: dict[str, object] = {
        "type": kind,
        "messageId": f"{MARKER.decode()}-{index:04d}",
        "anonymousId": str(uuid.UUID(int=rng.getrandbits(128))),
        "userId": user,
        "timestamp": f"2026-11-22T10:{index % 60:02d}:{index * 7 % 60:02d}.{TIME_MARKER.decode()}Z",
        "context": {
            "library": {"name": "analytics.js", "version": "next-1.84.3"},
            "ip": f"203.0.113.{rng.randrange(256)}",
            "locale": "en-US",
            "userAgent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
            "Chrome/156.0.0.0 Safari/537.36",
            "page": {
                "path": path,
                "referrer": "https://www.google.com/",
                "search": "",
                "title": "Example Store",
                "url": f"https://shop.example.com{path}",
            },
            "campaign": {"name": "winter", "source": "newsletter", "medium": "email"},
        },
        "integrations": {},
    }
    if kind == "track":
        message["event"] = rng.choice(EVENTS)
        message["properties"] = {
            "product_id": f"sku-{rng.randrange(10_000)}",
            "price": round(rng.uniform(1, 500), 2),
            "quantity": rng.randrange(1, 5),
            "currency": "EUR",
            "category": "Shoes",
            "in_stock": rng.random() < 0.9,
        }
    elif kind == "page":
        message["name"] = "Store"
        message["properties"] = {
            "path": path,
            "title": "Example Store",
            "url": f"https://shop.example.com{path}",
        }
    else:
        message["traits"] = {"email": f"{user}@example.com", "plan": rng.choice(("free", "pro")), "logins": 3}
    return message


def batch_request(port: int, batch: int, seed: int) -> bytes:
    """A complete ``POST /v1/batch`` HTTP/1.1 request with ``MARKER`` in every messageId."""
    rng = random.Random(seed)
    body = orjson.dumps(
        {
            "batch": [realistic_message(i, rng) for i in range(batch)],
            "sentAt": "2026-11-22T10:47:02.000Z",
            "context": {"library": {"name": "analytics.js", "version": "next-1.84.3"}},
        }
    )
    token = base64.b64encode(f"{WRITE_KEY}:".encode()).decode()
    head = (
        f"POST /v1/batch HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Basic {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


# load generator (runs in its own processes) --------------------------------------------------------


@dataclass
class LoadResult:
    latencies: list[float] = field(default_factory=list)  # seconds, requests answered 200 in the window
    messages: int = 0
    errors: dict[int, int] = field(default_factory=dict)  # non-200 statuses in the window
    window: float = 0.0
    cpu_seconds: float = 0.0  # the load generator's own CPU, whole run
    sent_messages: int = 0  # messages acknowledged over the whole run (warm-up included)


async def _client(
    port: int, templates: list[bytes], worker: int, client: int, start: float, stop: float, result: LoadResult
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    counter = 0
    batch = templates[0].count(MARKER)
    while True:
        template = templates[counter % len(templates)]
        request = template.replace(MARKER, b"%03d%03d%06d" % (worker, client, counter % 1_000_000))
        request = request.replace(TIME_MARKER, b"%03d" % (counter * 7 % 1000))
        counter += 1
        sent = time.perf_counter()
        if sent >= stop:
            break
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        await reader.readexactly(length)
        answered = time.perf_counter()
        if status == 200:
            result.sent_messages += batch
        if sent >= start:
            if status == 200:
                result.latencies.append(answered - sent)
                result.messages += batch
            else:
                result.errors[status] = result.errors.get(status, 0) + 1
                await asyncio.sleep(0.05)
    writer.close()


def _load_worker(
    ports: list[int], clients: int, batch: int, worker: int, start: float, stop: float, out: object
) -> None:
    templates = [batch_request(ports[0], batch, seed=worker * 1000 + i) for i in range(8)]
    result = LoadResult(window=stop - start)

    async def run() -> None:
        await asyncio.gather(
            *(
                _client(ports[(worker + c) % len(ports)], templates, worker, c, start, stop, result)
                for c in range(clients)
            )
        )

    began = time.process_time()
    asyncio.run(run())
    result.cpu_seconds = time.process_time() - began
    out.put(result)  # type: ignore[attr-defined]


def run_load(
    ports: list[int], clients: int, processes: int, batch: int, duration: float, warmup: float
) -> LoadResult:
    """``clients`` connections spread over ``processes`` load processes and over ``ports``; measured
    after ``warmup``."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    start = time.perf_counter() + 1.0 + warmup  # perf_counter is system-wide (CLOCK_MONOTONIC)
    stop = start + duration
    per_process = [clients // processes + (1 if i < clients % processes else 0) for i in range(processes)]
    workers = [
        context.Process(target=_load_worker, args=(ports, n, batch, i, start, stop, queue))
        for i, n in enumerate(per_process)
        if n
    ]
    for worker in workers:
        worker.start()
    results: list[LoadResult] = []
    deadline = time.monotonic() + 1.0 + warmup + duration + 60
    while len(results) < len(workers):
        try:
            results.append(queue.get(timeout=0.5))
        except Empty:
            if any(w.exitcode not in (None, 0) for w in workers) or time.monotonic() > deadline:
                for worker in workers:
                    worker.kill()
                raise SystemExit("a load generator process failed") from None
    for worker in workers:
        worker.join()
    total = LoadResult(window=duration)
    for result in results:
        total.latencies += result.latencies
        total.messages += result.messages
        total.cpu_seconds += result.cpu_seconds
        total.sent_messages += result.sent_messages
        for status, n in result.errors.items():
            total.errors[status] = total.errors.get(status, 0) + n
    return total


# servers ------------------------------------------------------------------------------------------


class _NullSpool:
    """A spool that stores nothing: the bare endpoint answers as soon as the request is parsed."""

    closed = False

    def append(self, source_id: str, lines: list[bytes], received_day_ms: int) -> object:
        from concurrent.futures import Future

        future: Future[None] = Future()
        future.set_result(None)
        return future

    def stats(self) -> object:
        from eventlake.archive import SpoolStats

        return SpoolStats()


def serve_bare(config: Path, port: int) -> None:
    """The collector's app and server stack with :class:`_NullSpool` (``--serve-bare``)."""
    import dataclasses

    from eventlake.collect.app import create_app
    from eventlake.collect.server import serve_app
    from eventlake.config import load_settings

    settings = load_settings(config, environ={})
    settings = dataclasses.replace(settings, collector=dataclasses.replace(settings.collector, port=port))
    serve_app(create_app(settings, _NullSpool()), settings)


def make_project(directory: Path) -> Path:
    from eventlake.config import add_source, write_initial_config

    config = write_initial_config(directory)
    add_source(config, "bench", write_key=WRITE_KEY)
    return config


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(
    mode: str, config: Path, port: int, log: Path, state_dir: Path | None = None
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLAKE")}
    if state_dir is not None:  # another collector process on the same lake: its own spool
        env["EVENTLAKE__LAKE__STATE_DIR"] = f'"{state_dir}"'

    if mode == "durable":
        command = [str(EVENTLAKE), "--config", str(config), "serve", "--port", str(port)]
    else:
        command = [sys.executable, __file__, "--serve-bare", str(config), "--port", str(port)]
    with open(log, "ab") as handle:
        process = subprocess.Popen(command, env=env, stderr=handle)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{mode} server exited: {log.read_text()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit(f"{mode} server did not start: {log.read_text()}")


def metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        total = 0.0
        for line in response.read().decode().splitlines():
            if line.startswith(name) and not line.startswith("#"):
                total += float(line.rsplit(" ", 1)[1])
        return total


def cpu_seconds(pid: int, tid: int | None = None) -> float:
    """User + system CPU seconds of a process (all threads), or of one of its threads, from /proc."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    fields = Path(path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class ModeResult:
    mode: str
    messages_per_second: float
    requests_per_second: float
    p50_ms: float
    p99_ms: float
    errors: dict[int, int]
    server_cpu: float  # cores the server used on average
    cpu_us_per_message: float  # server CPU (every thread) per acknowledged message
    loop_us_per_message: float  # the event loop thread's CPU per message: it holds the GIL
    load_us_per_message: float  # the load generator's CPU per message


def measure(mode: str, args: argparse.Namespace, work: Path) -> ModeResult:
    """Run ``args.collectors`` server processes of ``mode`` (one lake, a spool each) under the load."""
    config = make_project(work / mode)
    ports = [free_port() for _ in range(args.collectors)]
    servers = [
        start_server(mode, config, port, work / f"{mode}-{i}.log", work / mode / f"state-{i}" if i else None)
        for i, port in enumerate(ports)
    ]
    try:
        cpu_before = sum(cpu_seconds(s.pid) for s in servers)
        loop_before = sum(cpu_seconds(s.pid, s.pid) for s in servers)
        began = time.perf_counter()
        load = run_load(ports, args.clients, args.processes, args.batch, args.duration, args.warmup)
        elapsed = time.perf_counter() - began
        cpu_used = sum(cpu_seconds(s.pid) for s in servers) - cpu_before
        loop_used = sum(cpu_seconds(s.pid, s.pid) for s in servers) - loop_before
        served = load.messages * elapsed / load.window  # messages over the same span, warm-up included
        if mode == "durable":
            accepted = sum(metric(port, "eventlake_messages_accepted_total") for port in ports)
            assert accepted >= load.messages, f"{accepted} accepted < {load.messages} acknowledged"
    finally:
        for server in servers:
            server.send_signal(signal.SIGTERM)
        for server in servers:
            server.wait(timeout=60)
    latencies = sorted(load.latencies)
    if not latencies:
        raise SystemExit(f"{mode}: no request succeeded; see {work}/{mode}-*.log")
    return ModeResult(
        mode=mode,
        messages_per_second=load.messages / load.window,
        requests_per_second=len(latencies) / load.window,
        p50_ms=statistics.median(latencies) * 1000,
        p99_ms=latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        errors=load.errors,
        server_cpu=cpu_used / elapsed,
        cpu_us_per_message=cpu_used / served * 1e6,
        loop_us_per_message=loop_used / served * 1e6,
        load_us_per_message=load.cpu_seconds / max(1, load.sent_messages) * 1e6,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=30.0, help="measured seconds per mode (default 30)")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds first (default 3)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent connections (default 8)")
    parser.add_argument("--processes", type=int, default=1, help="load generator processes (default 1)")
    parser.add_argument("--batch", type=int, default=100, help="messages per request (default 100)")
    parser.add_argument(
        "--collectors",
        type=int,
        default=1,
        help="collector processes on one lake, each with its own spool and port (default 1)",
    )
    parser.add_argument("--mode", choices=("both", "durable", "bare"), default="both")
    parser.add_argument("--dir", type=Path, help="work directory (default: a temporary one, removed)")
    parser.add_argument("--serve-bare", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_bare:
        serve_bare(args.serve_bare, args.port)
        return

    work = args.dir or Path(tempfile.mkdtemp(prefix="eventlake-bench-", dir=Path.cwd()))
    work.mkdir(parents=True, exist_ok=True)
    try:
        size = len(batch_request(0, args.batch, 0).split(b"\r\n\r\n", 1)[1])
        print(
            f"{args.collectors} collector process(es); {args.clients} clients in {args.processes} load "
            f"process(es), batches of {args.batch} messages ({size / 1024:.0f} KB); "
            f"{args.duration:.0f} s per mode after {args.warmup:.0f} s warm-up; {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        modes = ("durable", "bare") if args.mode == "both" else (args.mode,)
        results = [measure(mode, args, work) for mode in modes]
        columns = ("mode", "messages/s", "requests/s", "p50 ms", "p99 ms", "CPU", "us/msg", "loop us/msg")
        print("  ".join(f"{c:>11}" for c in columns), " loop-bound msg/s  errors")
        for r in results:
            values = (
                r.mode,
                f"{r.messages_per_second:,.0f}",
                f"{r.requests_per_second:,.1f}",
                f"{r.p50_ms:.1f}",
                f"{r.p99_ms:.1f}",
                f"{r.server_cpu:.2f}",
                f"{r.cpu_us_per_message:.1f}",
                f"{r.loop_us_per_message:.1f}",
            )
            ceiling = args.collectors * 1e6 / r.loop_us_per_message
            print("  ".join(f"{v:>11}" for v in values), f"{ceiling:>17,.0f}  {r.errors or '-'}")
        for r in results:
            cores = os.cpu_count() or 1
            total = r.cpu_us_per_message + r.load_us_per_message
            estimate = min(args.collectors * 1e6 / r.loop_us_per_message, cores * 1e6 / total)
            print(
                f"{r.mode}: load generator {r.load_us_per_message:.1f} us/msg; server + load generator "
                f"{total:.1f} us/msg, so on {cores} otherwise idle cores at most {estimate:,.0f} msg/s"
            )
        print(f"load average after: {os.getloadavg()[0]:.1f}")
        if len(results) == 2:
            print(f"durable / bare: {results[0].messages_per_second / results[1].messages_per_second:.2f}")
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
