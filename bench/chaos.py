"""A bad day in production, compressed: ``eventlake up`` on a lake in S3 with Glue under faults (issue 36).

One command::

    PYTHONPATH=src .venv/bin/python bench/chaos.py --minutes 60 --seed 7      # the full run
    PYTHONPATH=src .venv/bin/python bench/chaos.py --minutes 3 --rate 100 --seed 36 --short

What runs (every server on 127.0.0.1, every loop bounded in count and time):

- **moto** (``python -m moto.server``) holds the bucket and the Glue catalog. It is never stopped:
  moto loses its state when it stops. In front of it, two **fault proxies** (:class:`FaultProxy`),
  one the project's S3 ``endpoint_url``, one its Glue ``endpoint_url``, so that each can fail alone:
  ``refuse`` accepts and resets every connection (RST), ``stall`` accepts and forwards nothing, and
  both freeze the connections already open (a stalled one is reset when the fault ends).
- **``eventlake up``** (console off) in its own session, its state folder on a small **tmpfs** of
  its own (mounted by this script: it must run as root; without root the disk-full fault is
  skipped and the table says so), supervised (:class:`Supervisor`): when it dies it is started again
  after a second, as systemd would.
- **the load** (:class:`Load`): Segment's Python library (``segment-analytics-python``, queued mode,
  its own retries) at ``--rate`` messages/s of four kinds (two track events, page, identify) from 50
  users, plus every 2 s a *probe* (track "Chaos Probe", for freshness) and, in the first third, the
  messages of the user that is erased later. The library's ``post`` is wrapped: every message id of
  a batch the collector answered 200 is *acknowledged* (with its time); a message never in such a
  batch is *never acknowledged*.
- **faults** (:func:`draw_schedule`, from ``--seed``, printed): ``kill9`` (SIGKILL to ``up`` and every
  process it started, once its log shows a micro-batch, a compaction, a retention run, the reports'
  day merge or the dedupe index's merge under way: :data:`KILL_AIMS`, :class:`LogWatch`),
  ``s3_outage`` and ``glue_outage`` (refuse or stall),
  ``second_up`` (another ``up``, its own state folder and port, on the same lake: the lease decides),
  ``disk_full`` (the tmpfs filled to ENOSPC: the collector must answer a retryable error, never 200
  for what it could not store), ``clock_step`` (the clock of ``up`` and of everything it starts,
  through libfaketime (the build the PyPI ``libfaketime`` vendors) with a timestamp file: ``LD_PRELOAD``,
  ``FAKETIME_TIMESTAMP_FILE``; the real-time clock only, monotonic clocks are left alone; not the
  Spark JVM's, which hangs under libfaketime: the Python side of the sync steps, Spark does not) and, once
  each, ``users delete``, ``replay --table`` and ``schema set-type`` as their own processes.
- **pollers**: ``eventlake sql --engine duckdb`` (through the proxies, as a user's query) and an
  Athena-like catalog reader (boto3 straight to moto: Glue partitions, every Parquet file under each
  location, ``_``/``.`` names hidden) count the rows of every partition (the erased user's rows left
  out) and note the probes they see. A partition whose count ever went down, or above its final
  count, is an *anomaly*.
- **the end**: faults lifted, load stopped, every ``up`` stopped, one last ``eventlake sync``; then
  the catalog reader reads every message id of the lake: every acknowledged message exactly once,
  a never-acknowledged one at most once, the erased user in no table and no archive file.

Freshness of a probe = end of the first poll that saw it - its 200; "longest unqueryable" is the
largest such time, a probe never seen counting until the end of the run.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import logging
import math
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EVENTLAKE = Path(sys.executable).parent / "eventlake"
SRC = Path(__file__).resolve().parents[1] / "src"
SOURCE = "chaos"
WRITE_KEY = "wk_chaos"
BUCKET = "chaos-lake"
ERASED = "chaos-erased-user"
PROBE_EVENT = "Chaos Probe"
START_TIMEOUT = 180.0
STOP_TIMEOUT = 90.0
COMMAND_TIMEOUT = 600.0
ADMIN_ATTEMPTS = 5  # an operator runs a failed command again, at most this often
ADMIN_BACKOFF = (10.0, 30.0, 60.0, 120.0)  # and waits longer each time (an outage lasts 30-90 s)
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
KINDS = ("kill9", "s3_outage", "glue_outage", "second_up", "disk_full", "clock_step")
# what a kill9 aims at, and the line of `up`'s log that says it is under way (the first match after
# the fault's time, waited for at most AIM_WAIT_SECONDS, then the kill lands anyway, said so)
KILL_AIMS = {
    "micro_batch": r"syncing \d+ archive files",  # a sync run read its files; parse, write, commit follow
    "compaction": r"partitions to compact",  # a table's compaction starts (up's log, per table)
    "retention": r"(archive|dedupe index) \d+: \d+ files deleted|: \d+ partitions deleted",  # mid-run
    "report_merge": r"run reports of \d+ days to merge|reports of \d+ finished days merged",
    "index_merge": r"partitions to compact",  # then the span the last compaction took, less 10 %
}
AIM_WAIT_SECONDS = (90.0, 600.0)  # short run, full run
ADMIN = ("users_delete", "replay_table", "set_type")


def say(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


# moto and the fault proxies -----------------------------------------------------------------


class Moto:
    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.log = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **AWS_ENV},
            start_new_session=True,
        )
        wait_for(lambda: _port_open(self.port), 60, "moto_server")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def _port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


class FaultProxy:
    """A TCP proxy to ``target`` on a free port of 127.0.0.1 whose ``mode`` is ``ok``, ``refuse``
    (connections accepted and reset at once) or ``stall`` (accepted, nothing forwarded; reset when
    the fault ends). Open connections freeze while a fault lasts and are reset when it ends."""

    def __init__(self, name: str, target: int) -> None:
        self.name, self.target = name, target
        self.mode = "ok"
        self.epoch = 0  # counts fault starts: a connection older than the last fault is reset
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=256)
        self.listener.settimeout(0.5)
        self.port = int(self.listener.getsockname()[1])
        self.stopping = threading.Event()
        self.served = 0
        self.cut = 0
        threading.Thread(target=self._accept, name=f"proxy-{name}", daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fail(self, mode: str) -> None:
        self.epoch += 1
        self.mode = mode

    def heal(self) -> None:
        self.mode = "ok"

    def close(self) -> None:
        self.stopping.set()
        self.listener.close()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    @staticmethod
    def _reset(*sockets: socket.socket) -> None:
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                sock.close()

    def _hold(self, *sockets: socket.socket) -> None:
        """While a fault lasts (at most 15 minutes), then reset."""
        deadline = time.monotonic() + 900
        while self.mode == "stall" and not self.stopping.is_set() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.cut += 1
        self._reset(*sockets)

    def _serve(self, client: socket.socket) -> None:
        if self.mode == "refuse":
            self.cut += 1
            self._reset(client)
            return
        if self.mode == "stall":
            self._hold(client)
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
        except OSError:
            self._reset(client)
            return
        self.served += 1
        epoch = self.epoch
        pair = {client: upstream, upstream: client}
        try:
            while not self.stopping.is_set():
                if self.epoch != epoch:  # a fault began: freeze, then reset
                    self._hold(client, upstream)
                    return
                ready, _, _ = select.select(list(pair), [], [], 0.2)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:  # an orderly end (moto closes after each answer): what was
                        client.close()  # forwarded is delivered before the FIN, never reset
                        upstream.close()
                        return
                    pair[sock].sendall(data)
        except OSError:
            self._reset(client, upstream)


# the spool's file system ------------------------------------------------------------------------


class SmallDisk:
    """A tmpfs of ``megabytes`` at ``path`` (root only) that :meth:`fill` fills to ENOSPC."""

    def __init__(self, path: Path, megabytes: int) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.mounted = False
        self.why_not = ""
        if os.geteuid() != 0:
            self.why_not = "not root: no tmpfs of its own, disk_full skipped"
            return
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        self.mounted = done.returncode == 0
        self.why_not = "" if self.mounted else f"mount failed: {done.stderr.strip()}"
        self.filler = path / "filler.bin"

    def fill(self) -> int:
        """Writes zeros until ENOSPC (unbuffered: nothing left to flush at close); returns the bytes
        written (bounded by the file system's size)."""
        written = 0
        try:
            fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError:  # already full
            return 0
        try:
            for size in (1 << 20, 4096, 1):  # megabytes, then the last pages, then the last bytes
                chunk = b"\0" * size
                for _ in range(1 << 20):
                    try:
                        written += os.write(fd, chunk)
                    except OSError:
                        break
        finally:
            os.close(fd)
        return written

    def free(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.filler.unlink()

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=False, capture_output=True)


# the clock ------------------------------------------------------------------------------------


def faketime_library() -> Path | None:
    """libfaketime as the PyPI package ``libfaketime`` vendors it (a dev dependency; not imported).

    Debian 12's ``faketime`` 0.9.10 is not usable here: with ``FAKETIME_DONT_FAKE_MONOTONIC=1``
    Python's ``time.sleep`` fails with EINVAL (its ``clock_nanosleep`` wrapper), and without it the
    monotonic clock steps with the real-time one, which no NTP step does."""
    import importlib.util

    spec = importlib.util.find_spec("libfaketime")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        found = Path(folder) / "vendor" / "libfaketime" / "src" / "libfaketime.so.1"
        if found.exists():
            return found
    return None


class Clock:
    """The offset of ``up``'s real-time clock (and its children's) through libfaketime's timestamp
    file; their monotonic clocks are left alone, as an NTP step leaves them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.library = faketime_library()
        self.available = self.library is not None
        self.offset = 0
        self.set(0)

    def set(self, seconds: int) -> None:
        self.offset = seconds
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(f"{seconds:+d}\n")
        tmp.replace(self.path)

    def env(self) -> dict[str, str]:
        if not self.available:
            return {}
        return {
            "LD_PRELOAD": str(self.library),
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_CACHE_DURATION": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            # the JVM hangs at start under libfaketime (measured: Spark's session never came up in
            # 2 minutes, with an offset of 0): the Spark JVM keeps the machine's clock
            "FAKETIME_SKIP_CMDS": "java",
        }


# `eventlake up` and its supervisor -------------------------------------------------------------


class LogWatch(threading.Thread):
    """Tails `up`'s log (all its starts append to it) and notes when each :data:`KILL_AIMS` line
    shows, and how long compactions take (from their first "partitions to compact" to the engine's
    "compaction <status>" line), for the kills aimed at a moment."""

    def __init__(self, log: Path) -> None:
        super().__init__(name="logwatch", daemon=True)
        import re

        self.log = log
        self.patterns = {aim: re.compile(pattern) for aim, pattern in KILL_AIMS.items()}
        self.ended = re.compile(r": compaction \w+")
        self.seen: dict[str, float] = {}  # aim -> monotonic time of its last line
        self.compacting_since: float | None = None
        self.compaction_spans: list[float] = []
        self.changed = threading.Condition()
        self.stopping = threading.Event()

    def run(self) -> None:
        offset = 0
        while not self.stopping.wait(0.2):
            try:
                with open(self.log, "rb") as handle:
                    handle.seek(offset)
                    data = handle.read()
            except FileNotFoundError:
                continue
            cut = data.rfind(b"\n") + 1
            offset += cut
            for line in data[:cut].decode(errors="replace").splitlines():
                self._line(line, time.monotonic())

    def _line(self, line: str, now: float) -> None:
        with self.changed:
            for aim, pattern in self.patterns.items():
                if pattern.search(line):
                    self.seen[aim] = now
            if self.patterns["compaction"].search(line) and self.compacting_since is None:
                self.compacting_since = now
            if self.ended.search(line) and self.compacting_since is not None:
                self.compaction_spans.append(now - self.compacting_since)
                self.compacting_since = None
            self.changed.notify_all()

    def wait(self, aim: str, timeout: float) -> str:
        """Returns once ``aim``'s line shows after now (at most ``timeout`` s): what happened."""
        asked = time.monotonic()
        deadline = asked + timeout
        with self.changed:
            while self.seen.get(aim, -math.inf) < asked:
                left = deadline - time.monotonic()
                if left <= 0:
                    return f"aimed at {aim}: not seen in {timeout:.0f} s, killed anyway"
                self.changed.wait(left)
            spans = list(self.compaction_spans)
        waited = time.monotonic() - asked
        if aim == "index_merge":  # the index merge ends a compaction: its last tenth, as last time
            delay = 0.9 * spans[-1] if spans else 0.0
            time.sleep(delay)
            return f"aimed at {aim}: compaction seen after {waited:.0f} s, killed {delay:.1f} s later"
        return f"aimed at {aim}: seen after {waited:.0f} s"

    def stop(self) -> None:
        self.stopping.set()
        self.join(5)


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            children[int(fields[1])].append(int(entry))
    found, todo = [], [pid]
    for _ in range(10_000):
        if not todo:
            break
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid: int) -> int:
    """SIGKILL to ``pid`` and every process below it (as a cgroup kill); returns how many."""
    pids = [pid, *descendants(pid)]
    for victim in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)
    return len(pids)


class Up:
    def __init__(self, name: str, config: Path, port: int, state_dir: Path, env: dict[str, str], log: Path):
        self.name, self.config, self.port, self.log = name, config, port, log
        self.env = {**env, "EVENTLAKE__LAKE__STATE_DIR": str(state_dir)}
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log, "ab") as handle:
            handle.write(f"\n===== {self.name} start {self.starts + 1} at {time.ctime()} =====\n".encode())
            handle.flush()
            self.process = subprocess.Popen(
                [str(EVENTLAKE), "--config", str(self.config), "up", "--port", str(self.port)],
                cwd=self.config.parent,
                env=self.env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.starts += 1

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=1):
                return True
        except OSError:
            return False

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill9(self) -> int:
        if self.process is None:
            return 0
        killed = kill_tree(self.process.pid)
        self.process.wait(30)
        return killed

    def stop(self) -> str:
        if self.process is None or self.process.poll() is not None:
            return "not running"
        tree = [self.process.pid, *descendants(self.process.pid)]
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT)
            outcome = f"stopped (exit {self.process.returncode})"
        except subprocess.TimeoutExpired:
            self.kill9()
            outcome = f"did not stop within {STOP_TIMEOUT:.0f} s of SIGTERM: killed"
        left = [p for p in tree[1:] if _running(p)]
        shown = "; ".join(_command_line(p) for p in left)
        for pid in left:
            kill_tree(pid)
        if left:
            outcome += f"; {len(left)} of its processes outlived it, killed: {shown}"
        return outcome


def _running(pid: int) -> bool:
    """Alive and not a zombie (an exited child nobody reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _command_line(pid: int) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    text = " ".join(w.decode(errors="replace") for w in words if w)
    return text if len(text) <= 160 else text[:157] + "..."


class Supervisor(threading.Thread):
    """Starts ``up`` again a second after it died, until :meth:`halt`; counts recoveries (a restart
    that answered /health) and how long each took."""

    def __init__(self, up: Up, deadline: float) -> None:
        super().__init__(name=f"supervise-{up.name}", daemon=True)
        self.up, self.deadline = up, deadline
        self.halted = threading.Event()
        self.restarts = 0
        self.recoveries: list[float] = []
        self.unexpected_exits: list[int] = []
        self.expected_deaths = 0

    def run(self) -> None:
        while not self.halted.is_set() and time.monotonic() < self.deadline:
            if self.up.process is not None and self.up.process.poll() is not None:
                code = self.up.process.returncode
                if self.expected_deaths:
                    self.expected_deaths -= 1
                else:
                    self.unexpected_exits.append(code)
                    say(f"{self.up.name} exited by itself ({code})")
                died = time.monotonic()
                self.halted.wait(1.0)
                if self.halted.is_set():
                    return
                self.up.start()
                self.restarts += 1
                try:
                    wait_for(
                        lambda: self.up.healthy() or not self.up.alive() or self.halted.is_set(),
                        START_TIMEOUT,
                        "up restart",
                    )
                except TimeoutError:
                    continue
                if self.up.healthy():
                    self.recoveries.append(time.monotonic() - died)
            self.halted.wait(0.5)

    def halt(self) -> None:
        self.halted.set()
        self.join(START_TIMEOUT + 10)


# the load: Segment's Python library ------------------------------------------------------------


class Record:
    """What the load handed to the library and what the collector acknowledged, by message number
    (``chaos-<n>``: one byte of flags each; an hour at 2,000/s is about 7.2 million messages, 7 MB
    here where a dict of id strings to objects took about 1.5 GB) and, for the probes
    (``probe-<n>``, one every 2 s), the monotonic time of their 200."""

    HANDED, ERASED, ACKED = 1, 2, 4

    def __init__(self, capacity: int) -> None:
        self.flags = bytearray(capacity)
        self.probes_handed: set[int] = set()
        self.probes_acked: dict[int, float] = {}

    def handed(self, n: int, erased: bool) -> None:
        self.flags[n] |= self.HANDED | (self.ERASED if erased else 0)

    def acked(self, message_id: str, at: float) -> None:
        if message_id.startswith("chaos-"):
            self.flags[int(message_id[6:])] |= self.ACKED
        else:
            self.probes_acked.setdefault(int(message_id[6:]), at)

    def numbers(self, acked: bool) -> Iterator[int]:
        """The numbers handed to the library (not the erased user's), acknowledged or never."""
        want = self.HANDED | (self.ACKED if acked else 0)
        mask = self.HANDED | self.ERASED | self.ACKED
        return (n for n, f in enumerate(self.flags) if f & mask == want)

    @property
    def erased_count(self) -> int:
        return sum(1 for f in self.flags if f & self.ERASED)

    @property
    def handed_count(self) -> int:
        return sum(1 for f in self.flags if f & self.HANDED) + len(self.probes_handed)


def message_number(message_id: str) -> tuple[str, int] | None:
    """("chaos" | "probe", n) of a message id of the load; None for any other id."""
    kind, _, digits = message_id.partition("-")
    return (kind, int(digits)) if kind in ("chaos", "probe") and digits.isdigit() else None


class Load(threading.Thread):
    """Hands ``rate`` messages/s to segment-analytics-python for ``seconds``; records what the
    collector acknowledged (200) through a wrapper of the library's ``post``."""

    KINDS = (("track", "Order Completed", "track_order_completed"), ("track", "Product Viewed",
             "track_product_viewed"), ("page", "Home", "page"), ("identify", "", "identify"))  # fmt: skip

    def __init__(
        self, url: str, rate: float, seconds: float, seed: int, erased_until: float, clients: int = 1
    ) -> None:
        super().__init__(name="load", daemon=True)
        import segment.analytics.consumer as consumer

        # the library warns once per message it refuses (its queue full): 1.5 million lines in the
        # first full run; they are counted in ``dropped`` and printed once
        logging.getLogger("segment").setLevel(logging.ERROR)
        from segment.analytics import Client

        self.rate, self.seconds, self.rng = rate, seconds, random.Random(seed)
        self.erased_until = erased_until  # monotonic: the erased user's messages stop here
        self.record = Record(int(rate * (int(seconds * 10) + 1) * 0.1) + 1)
        self.statuses: Counter[str] = Counter()
        self.dropped = 0  # the library's queue was full
        self.lock = threading.Lock()
        self.done = threading.Event()
        original = consumer.post
        self._original = original

        def recording_post(*args: Any, **kwargs: Any) -> Any:
            ids = [m["messageId"] for m in kwargs.get("batch", [])]
            try:
                answer = original(*args, **kwargs)
            except Exception as exc:
                status = getattr(exc, "status", None)
                with self.lock:
                    self.statuses[str(status) if status else type(exc).__name__] += 1
                raise
            now = time.monotonic()
            with self.lock:
                self.statuses["200"] += 1
                for message_id in ids:
                    self.record.acked(message_id, now)
            return answer

        consumer.post = recording_post
        # one Client (2 consumer threads) got 3,800 msg/s acknowledged by a collector on this 2-core
        # machine (load average 13): `clients` > 1 spreads the messages over several, round robin
        self.clients = [
            Client(
                WRITE_KEY,
                host=url,
                max_queue_size=200_000,
                upload_size=100,
                upload_interval=0.25,
                timeout=10,
                max_retries=1000,
                max_total_backoff_duration=3600,
                on_error=lambda error, items: None,
                thread=2,
            )
            for _ in range(max(1, clients))
        ]

    def run(self) -> None:
        start = time.monotonic()
        sent = 0
        probe = 0
        for tick in range(int(self.seconds * 10) + 1):
            due = start + tick * 0.1
            now = time.monotonic()
            if now < due:
                time.sleep(due - now)
            target = int(self.rate * (tick + 1) * 0.1)
            while sent < target:
                self._one(sent, erased=time.monotonic() < self.erased_until and sent % 20 == 0)
                sent += 1
            if tick % 20 == 0:
                self._probe(probe)
                probe += 1
        self.done.set()

    def _one(self, n: int, erased: bool) -> None:
        kind, name, _table = self.KINDS[n % len(self.KINDS)]
        user = ERASED if erased else f"user-{self.rng.randrange(50)}"
        # handed before the send: the library's consumer thread may post it at once
        self.record.handed(n, erased)
        props = {"n": n, "revenue": round(self.rng.random() * 100, 2)}
        if not self._send(kind, name, user, f"chaos-{n:09d}", props, self.clients[n % len(self.clients)]):
            self.record.flags[n] = 0
            self.dropped += 1

    def _probe(self, n: int) -> None:
        self.record.probes_handed.add(n)
        if not self._send("track", PROBE_EVENT, "prober", f"probe-{n:07d}", {"n": n}, self.clients[0]):
            self.record.probes_handed.discard(n)
            self.dropped += 1

    def _send(self, kind: str, name: str, user: str, message_id: str, props: dict, client: Any) -> bool:
        if kind == "track":
            ok, _ = client.track(user, name, props, message_id=message_id)
        elif kind == "page":
            ok, _ = client.page(user, name=name, properties=props, message_id=message_id)
        else:
            ok, _ = client.identify(user, {"plan": "pro", "n": props["n"]}, message_id=message_id)
        return bool(ok)

    def finish(self, timeout: float) -> bool:
        """Waits (at most ``timeout`` s) for the library to send what it holds; True when it did."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(c.queue.unfinished_tasks == 0 for c in self.clients):
                break
            time.sleep(0.5)
        drained = all(c.queue.unfinished_tasks == 0 for c in self.clients)
        for client in self.clients:
            for consumer in client.consumers or []:
                consumer.pause()
        return drained


# pollers -----------------------------------------------------------------------------------


class Observations:
    """Per reader: counts per (table, day, hr) over time (the erased user's rows left out), and the
    first time each probe was seen."""

    def __init__(self) -> None:
        self.series: dict[tuple[str, str, str], list[tuple[float, int]]] = defaultdict(list)
        self.probes: dict[str, float] = {}
        self.polls = 0
        self.failures = 0
        self.last_error = ""
        self.erased_seen: list[tuple[float, int]] = []

    def record(
        self, counts: dict[tuple[str, str, str], int], probes: list[str], erased: int, at: float
    ) -> None:
        self.polls += 1
        for key, n in counts.items():
            self.series[key].append((at, n))
        for probe in probes:
            self.probes.setdefault(probe, at)
        if erased:
            self.erased_seen.append((at, erased))

    def anomalies(
        self, final: dict[tuple[str, str, str], int], expiring: frozenset[str] = frozenset()
    ) -> list[str]:
        """Partitions whose count went down or above the final one; those of the ``expiring`` days
        (older than ``[retention] table_days``: retention deletes them) left out."""
        found = []
        for key, values in sorted(self.series.items()):
            if key[1] in expiring:
                continue
            best = 0
            for at, n in values:
                if n < best:
                    found.append(f"{'/'.join(key)} shrank {best} -> {n} at +{at:.0f} s")
                best = max(best, n)
                if n > final.get(key, 0):
                    found.append(f"{'/'.join(key)} {n} above its final {final.get(key, 0)} at +{at:.0f} s")
        return found


class Poller(threading.Thread):
    def __init__(self, name: str, read: Any, interval: float, began: float) -> None:
        super().__init__(name=f"poll-{name}", daemon=True)
        self.read, self.interval, self.began = read, interval, began
        self.seen = Observations()
        self.stopping = threading.Event()

    def run(self) -> None:
        for _ in range(100_000):
            if self.stopping.is_set():
                return
            started = time.monotonic()
            try:
                counts, probes, erased = self.read()
            except Exception as exc:  # noqa: BLE001 - a failed poll is counted, the run goes on
                self.seen.failures += 1
                self.seen.last_error = f"{type(exc).__name__}: {str(exc)[-300:]}"
            else:
                self.seen.record(counts, probes, erased, time.monotonic() - self.began)
            self.stopping.wait(max(0.0, started + self.interval - time.monotonic()))

    def stop(self) -> None:
        self.stopping.set()
        self.join(COMMAND_TIMEOUT)


class CatalogReader:
    """Athena's way with boto3 straight to moto: Glue partitions, then every Parquet file under each
    partition's location (path parts starting ``_`` or ``.`` below it hidden)."""

    def __init__(self, endpoint: str, database: str) -> None:
        import boto3

        self.database = database
        self.glue = boto3.client("glue", endpoint_url=endpoint, region_name="us-east-1")
        self.s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")

    def tables(self) -> list[str]:
        try:
            pages = self.glue.get_paginator("get_tables").paginate(DatabaseName=self.database)
            return sorted(  # not the Segment-named views (docs/querying.md): no partitions
                t["Name"] for page in pages for t in page["TableList"] if t.get("TableType") != "VIRTUAL_VIEW"
            )
        except self.glue.exceptions.EntityNotFoundException:
            return []

    def rows(self, columns: tuple[str, ...] = ("message_id", "user_id")) -> Any:
        """Yields (table, partition values, pyarrow table of ``columns``) for every file."""
        import pyarrow.parquet as pq

        for table in self.tables():
            pages = self.glue.get_paginator("get_partitions").paginate(
                DatabaseName=self.database, TableName=table
            )
            for page in pages:
                for partition in page["Partitions"]:
                    location = partition["StorageDescriptor"]["Location"]
                    bucket, _, prefix = location.removeprefix("s3://").partition("/")
                    prefix = prefix.rstrip("/") + "/"
                    for listing in self.s3.get_paginator("list_objects_v2").paginate(
                        Bucket=bucket, Prefix=prefix
                    ):
                        for item in listing.get("Contents", []):
                            rest = item["Key"][len(prefix) :].split("/")
                            if any(part.startswith(("_", ".")) for part in rest):
                                continue
                            body = self.s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
                            data = pq.read_table(io.BytesIO(body), columns=list(columns))
                            yield table, tuple(partition["Values"]), data

    def poll(self) -> tuple[dict[tuple[str, str, str], int], list[str], int]:
        counts: Counter[tuple[str, str, str]] = Counter()
        probes: list[str] = []
        erased = 0
        for table, values, data in self.rows():
            users = data.column("user_id").to_pylist()
            mine = sum(1 for u in users if u == ERASED)
            erased += mine
            counts[(table, *values[:2])] += len(users) - mine  # type: ignore[index]
            if table == "track_chaos_probe":
                probes.extend(data.column("message_id").to_pylist())
        return dict(counts), probes, erased

    def message_ids(self, capacity: int) -> LakeIds:
        """How many rows each message id of the load has in the lake (compact: see :class:`Record`)."""
        ids = LakeIds(bytearray(capacity), Counter(), 0, 0, 0)
        for _, _, data in self.rows():
            for message_id in data.column("message_id").to_pylist():
                ids.add(message_id)
            ids.erased += sum(1 for u in data.column("user_id").to_pylist() if u == ERASED)
        return ids

    def archive_mentions(self, root_prefix: str, needle: str, limit: int = 20_000) -> int:
        """Archive files (gzip JSON lines under ``segment-logs/``) that mention ``needle``."""
        found = 0
        seen = 0
        for listing in self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=BUCKET, Prefix=f"{root_prefix}/segment-logs/"
        ):
            for item in listing.get("Contents", []):
                seen += 1
                if seen > limit:
                    return found
                body = self.s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read()
                with contextlib.suppress(OSError, EOFError):
                    body = gzip.decompress(body)
                found += needle.encode() in body
        return found


@dataclass
class LakeIds:
    """Rows per message of the load in the lake: per ``chaos-<n>`` one byte (saturating at 255), per
    probe number a count; rows of other ids, and rows of the erased user."""

    counts: bytearray
    probes: Counter[int]
    unknown: int
    erased: int
    rows: int

    def add(self, message_id: str) -> None:
        self.rows += 1
        found = message_number(message_id)
        if found is None or (found[0] == "chaos" and found[1] >= len(self.counts)):
            self.unknown += 1
        elif found[0] == "chaos":
            self.counts[found[1]] = min(255, self.counts[found[1]] + 1)
        else:
            self.probes[found[1]] += 1


class DuckdbReader:
    """``eventlake sql --engine duckdb`` in its own process, over the tables Glue lists."""

    def __init__(self, config: Path, env: dict[str, str], database: str, catalog: CatalogReader) -> None:
        self.config, self.env, self.database, self.catalog = config, env, database, catalog
        self.only = ""  # one table only (a diagnosis)

    def poll(self) -> tuple[dict[tuple[str, str, str], int], list[str], int]:
        tables = [self.only] if self.only else self.catalog.tables()
        if not tables:
            return {}, [], 0
        parts = [
            f"SELECT '{t}' AS t, CAST(day AS VARCHAR) AS d, CAST(hr AS VARCHAR) AS h, "
            f"count(*) FILTER (WHERE user_id IS DISTINCT FROM '{ERASED}') AS n, "
            f"count(*) FILTER (WHERE user_id = '{ERASED}') AS erased, "
            + ("list(message_id) AS ids" if t == "track_chaos_probe" else "NULL AS ids")
            + f" FROM {self.database}.{t} GROUP BY day, hr"
            for t in tables
        ]
        done = subprocess.run(
            [str(EVENTLAKE), "--config", str(self.config), "sql", "--engine", "duckdb", "--format", "json",
             " UNION ALL ".join(parts)],
            env=self.env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False,
        )  # fmt: skip
        if done.returncode:
            raise RuntimeError((done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1])
        counts: dict[tuple[str, str, str], int] = {}
        probes: list[str] = []
        erased = 0
        for row in json.loads(done.stdout):
            counts[(row["t"], str(row["d"]), str(row["h"]))] = int(row["n"])
            erased += int(row["erased"])
            probes.extend(row["ids"] or [])
        return counts, probes, erased


# the fault schedule ----------------------------------------------------------------------------


@dataclass(order=True)
class Fault:
    at: float  # seconds after the load starts
    kind: str
    duration: float = 0.0
    detail: str = ""


def draw_schedule(seed: int, seconds: float, per_kind: int, short: bool) -> list[Fault]:
    """Each kind of fault ``per_kind`` times at random moments of the middle of the run (a kind never
    overlaps itself), each admin command once; durations scaled to a short run when ``short``."""
    rng = random.Random(seed)
    lo, hi = 0.1 * seconds, 0.75 * seconds
    outage = (10, 25) if short else (30, 90)
    faults: list[Fault] = []
    aims = list(KILL_AIMS)
    for kind in KINDS:
        count = max(per_kind, len(aims)) if kind == "kill9" and not short else per_kind
        slots = sorted(rng.uniform(lo, hi) for _ in range(count))
        last_end = -math.inf
        for number, at in enumerate(slots):
            at = max(at, last_end + 5)
            if kind == "kill9":  # each aim in turn (short: a micro-batch; the schedule's draws as before)
                fault = Fault(at, kind, detail=aims[number % len(aims)] if not short else "micro_batch")
            elif kind in ("s3_outage", "glue_outage"):
                fault = Fault(at, kind, rng.uniform(*outage), rng.choice(["refuse", "stall"]))
            elif kind == "second_up":
                fault = Fault(at, kind, rng.uniform(40, 60) if short else rng.uniform(180, 420))
            elif kind == "disk_full":
                fault = Fault(at, kind, rng.uniform(8, 15) if short else rng.uniform(30, 90))
            else:
                minutes = rng.choice([-1, 1]) * rng.randint(2, 10)
                fault = Fault(
                    at, kind, rng.uniform(15, 30) if short else rng.uniform(60, 300), f"{minutes:+d}m"
                )
            faults.append(fault)
            last_end = fault.at + fault.duration
    faults.append(Fault(rng.uniform(0.4, 0.5) * seconds, "users_delete"))
    faults.append(Fault(rng.uniform(0.55, 0.65) * seconds, "replay_table", detail="page"))
    faults.append(
        Fault(rng.uniform(0.7, 0.8) * seconds, "set_type", detail="track_order_completed.properties_revenue")
    )
    return sorted(faults)


# the run ----------------------------------------------------------------------------------------


@dataclass
class Outcome:
    seed: int
    seconds: float
    rate: float
    faults: Counter[str] = field(default_factory=Counter)
    fault_notes: list[str] = field(default_factory=list)
    admin: dict[str, str] = field(default_factory=dict)
    restarts: int = 0
    recoveries: list[float] = field(default_factory=list)
    unexpected_exits: list[int] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    sent: int = 0
    sent_erased: int = 0  # of ``sent``: the erased user's (acknowledged or not, never counted as either)
    dropped: int = 0  # messages the library refused (its queue full): never sent
    acked: int = 0
    never_acked: int = 0
    in_lake: int = 0
    lost: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    never_acked_in_lake: int = 0
    never_acked_doubled: list[str] = field(default_factory=list)
    unknown_in_lake: int = 0
    erased_in_tables: int = 0
    erased_in_archive: int = 0
    erased_in_archive_before_rerun: int = 0  # archive files sealed after the deletion (see run())
    anomalies: dict[str, list[str]] = field(default_factory=dict)
    readers_disagree: list[str] = field(default_factory=list)
    freshness: dict[str, tuple[float, float, float, int, int]] = field(default_factory=dict)
    final_sync: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(
            self.lost or self.doubled or self.never_acked_doubled or self.erased_in_tables
            or self.erased_in_archive or any(self.anomalies.values()) or self.readers_disagree
        )  # fmt: skip

    def table(self) -> str:
        rows = [("seed", str(self.seed)), ("load", f"{self.rate:g} msg/s for {self.seconds:.0f} s")]
        for kind in (*KINDS, *ADMIN):
            rows.append((f"fault {kind}", str(self.faults.get(kind, 0))))
        rows.append(("up restarts / recoveries", f"{self.restarts} / {len(self.recoveries)}"
                     + (f" (p50 {_pct(self.recoveries, 0.5):.1f} s, max {max(self.recoveries):.1f} s)"
                        if self.recoveries else "")))  # fmt: skip
        rows.append(("up exits not caused by a fault", str(len(self.unexpected_exits))))
        rows.append(("collector answers", ", ".join(f"{k}: {v}" for k, v in sorted(self.statuses.items()))))
        rows += [
            ("messages sent (of the erased user) / acknowledged",
             f"{self.sent:,} ({self.sent_erased:,}) / {self.acked:,}"),
            ("messages the library dropped (its queue full: never sent)", f"{self.dropped:,}"),
            ("in the lake (distinct ids)", f"{self.in_lake:,}"),
            ("acknowledged lost", str(len(self.lost))),
            ("acknowledged doubled", str(len(self.doubled))),
            ("never acknowledged: in lake / doubled", f"{self.never_acked_in_lake} of {self.never_acked} / "
             f"{len(self.never_acked_doubled)}"),
            ("erased user: archive files sealed after the deletion",
             f"{self.erased_in_archive_before_rerun} (a second `users delete` at the end)"),
            ("erased user: rows in tables / archive files",
             f"{self.erased_in_tables} / {self.erased_in_archive}"),
        ]  # fmt: skip
        for reader, found in self.anomalies.items():
            rows.append((f"reader anomalies ({reader})", str(len(found))))
        rows.append(("duckdb vs catalog at the end", "agree" if not self.readers_disagree else
                     f"{len(self.readers_disagree)} partitions differ"))  # fmt: skip
        for reader, (p50, p99, longest, seen, total) in self.freshness.items():
            rows.append(
                (f"freshness {reader} p50 / p99", f"{p50:.1f} / {p99:.1f} s ({seen} of {total} probes seen)")
            )
            rows.append((f"longest unqueryable ({reader})", f"{longest:.1f} s"))
        rows.append(("final sync", self.final_sync))
        width = max(len(k) for k, _ in rows)
        lines = [f"| {'what'.ljust(width)} | figure |", f"|{'-' * (width + 2)}|--------|"]
        lines += [f"| {k.ljust(width)} | {v} |" for k, v in rows]
        return "\n".join(lines)


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))] if values else math.nan


def make_project(work: Path, s3: str, glue: str, env: dict[str, str], prefix: str) -> Path:
    project = work / "project"
    done = subprocess.run(
        [str(EVENTLAKE), "init", str(project)], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"eventlake init failed: {done.stderr}")
    config = project / "eventlake.toml"
    text = config.read_text()
    text = text.replace('kind = "hive"', f'kind = "glue"\nregion = "us-east-1"\nendpoint_url = "{glue}"', 1)
    text = text.replace('root = "lake"', f'root = "s3://{BUCKET}/{prefix}"\nendpoint_url = "{s3}"', 1)
    config.write_text(text)
    done = subprocess.run(
        [str(EVENTLAKE), "--config", str(config), "sources", "add", SOURCE, "--write-key", WRITE_KEY],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"eventlake sources add failed: {done.stderr}")
    return config


FULL_RETENTION = {"archive_days": 1, "table_days": 2, "interval_seconds": 300}
SEEDED_DAYS_AGO = (3, 4)  # older than both: retention deletes their archive files and partitions
SEEDED_PER_DAY = 500


def seed_old_days(config: Path, env: dict[str, str], work: Path) -> frozenset[str]:
    """Imports (``eventlake import``) a Segment archive of :data:`SEEDED_DAYS_AGO` days ago, so that
    the full run's retention runs have archive files and partitions to delete; their days, as the
    partitions name them (their rows are not messages of the load: ids ``seed-...``)."""
    from datetime import datetime, timedelta, timezone

    root = work / "old-archive"
    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    days = []
    for ago in SEEDED_DAYS_AGO:
        day = today - timedelta(days=ago)
        days.append(f"{day:%Y-%m-%d}")
        folder = root / "segment-logs" / "SEEDED" / str(int(day.timestamp() * 1000))
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for n in range(SEEDED_PER_DAY):
            at = (day + timedelta(seconds=n * 60)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            lines.append(json.dumps({
                "type": "track", "event": "Seeded", "userId": "seeded-user", "messageId": f"seed-{ago}-{n}",
                "timestamp": at, "originalTimestamp": at, "sentAt": at, "receivedAt": at,
                "properties": {"n": n},
            }))  # fmt: skip
        (folder / "seeded.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    code, last = run_command(config, env, ["import", str(root), "--source", SOURCE], work / "commands.log")
    if code:
        raise SystemExit(f"eventlake import of the old days failed: {last}")
    return frozenset(days)


def run_command(config: Path, env: dict[str, str], args: list[str], log: Path) -> tuple[int, str]:
    with open(log, "ab") as handle:
        handle.write(f"\n===== eventlake {' '.join(args)} at {time.ctime()} =====\n".encode())
        handle.flush()
        try:
            done = subprocess.run(
                [str(EVENTLAKE), "--config", str(config), *args], env=env, stdout=handle,
                stderr=subprocess.STDOUT, timeout=COMMAND_TIMEOUT, check=False, cwd=config.parent,
            )  # fmt: skip
            code = done.returncode
        except subprocess.TimeoutExpired:
            code = -1
    lines = log.read_text(errors="replace").splitlines()
    return code, (lines[-1] if lines else "")


def run(
    seconds: float,
    rate: float,
    seed: int,
    per_kind: int,
    work: Path,
    short: bool = False,
    poll_interval: float = 10.0,
    sync_interval: int = 20,
    clients: int = 1,
) -> Outcome:
    out = Outcome(seed, seconds, rate)
    say(f"chaos: seed {seed}, {seconds:.0f} s at {rate:g} msg/s, {per_kind} of each fault, in {work}")
    work.mkdir(parents=True, exist_ok=True)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLAKE")}
    base_env.update(AWS_ENV)
    base_env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [os.environ.get("PYTHONPATH", "")])])
    base_env["PYTHONPATH"] = os.pathsep.join(
        str(Path(p).resolve()) for p in base_env["PYTHONPATH"].split(os.pathsep)
    )
    for key, value in AWS_ENV.items():  # moto's dummy credentials, for this process's readers
        os.environ.setdefault(key, value)
    moto = Moto(work / "moto.log")
    import boto3

    boto3.client("s3", endpoint_url=moto.endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    s3_proxy, glue_proxy = FaultProxy("s3", moto.port), FaultProxy("glue", moto.port)
    disk = SmallDisk(work / "statefs", 512)
    clock = Clock(work / "faketime.txt")
    if disk.why_not:
        out.notes.append(disk.why_not)
    if not clock.available:
        out.notes.append("libfaketime missing (pip install libfaketime): clock_step skipped")
    prefix = f"lake-{seed}"
    config = make_project(work, s3_proxy.endpoint, glue_proxy.endpoint, base_env, prefix)
    up_env = {
        **base_env,
        "EVENTLAKE__CONSOLE__ENABLED": "false",
        "EVENTLAKE__SYNC__INTERVAL_SECONDS": str(sync_interval),
        "EVENTLAKE__SYNC__REWRITE_GRACE_MINUTES": "2",
        "EVENTLAKE__COMPACT__INTERVAL_SECONDS": "60" if short else "600",
        "EVENTLAKE__COMPACT__OLDER_THAN_HOURS": "0",
        "EVENTLAKE__COLLECTOR__SEAL_MAX_AGE_SECONDS": "2",
        **clock.env(),
    }
    expiring: frozenset[str] = frozenset()
    if not short:  # retention runs during the run, with something to delete: days imported before it
        up_env.update({f"EVENTLAKE__RETENTION__{k.upper()}": str(v) for k, v in FULL_RETENTION.items()})
        expiring = seed_old_days(config, base_env, work)
        out.notes.append(f"retention on ({FULL_RETENTION}); days imported for it: {sorted(expiring)}")
    from eventlake.config import load_settings

    database = load_settings(config, environ={}).source(SOURCE).database
    catalog = CatalogReader(moto.endpoint, database)
    duck = DuckdbReader(config, base_env, database, CatalogReader(moto.endpoint, database))
    primary = Up("up", config, free_port(), disk.path / "state", up_env, work / "up.log")
    second = Up("second-up", config, free_port(), work / "second-state", up_env, work / "second-up.log")
    schedule = draw_schedule(seed, seconds, per_kind, short)
    say("schedule: " + "; ".join(f"+{f.at:.0f}s {f.kind}{' ' + f.detail if f.detail else ''}"
                                 f"{f' {f.duration:.0f}s' if f.duration else ''}"
                                 for f in schedule))  # fmt: skip
    supervisor: Supervisor | None = None
    watch = LogWatch(primary.log)
    watch.start()
    pollers: list[Poller] = []
    load: Load | None = None
    try:
        primary.start()
        wait_for(primary.healthy, START_TIMEOUT, "up /health")
        began = time.monotonic()
        supervisor = Supervisor(primary, began + seconds * 3 + 1800)
        supervisor.start()
        pollers = [
            Poller("catalog", catalog.poll, poll_interval, began),
            Poller("duckdb", duck.poll, poll_interval, began),
        ]
        for poller in pollers:
            poller.start()
        load = Load(primary.url, rate, seconds, seed, erased_until=began + seconds / 3, clients=clients)
        load.start()
        _inject(schedule, began, out, primary, second, supervisor, s3_proxy, glue_proxy, disk, clock, config,
                base_env, work, database, watch, AIM_WAIT_SECONDS[0 if short else 1])  # fmt: skip
        wait_for(lambda: load.done.is_set(), seconds + 120, "the load")
        say("load done; letting the library send what it holds")
        drained = load.finish(180)
        if not drained:
            out.notes.append(
                "the library still held messages 180 s after the load: they count as never acknowledged"
            )
        # let `up` sync what it holds while the pollers watch, then stop everything
        end_wait = time.monotonic() + max(60.0, 3 * sync_interval)
        probes = {f"probe-{n:07d}" for n in load.record.probes_acked}
        while time.monotonic() < end_wait and not all(probes <= p.seen.probes.keys() for p in pollers):
            time.sleep(2)
        supervisor.halt()
        say(f"up: {primary.stop()}")
        if second.alive():
            say(f"second up: {second.stop()}")
        for poller in pollers:
            poller.stop()
        ended = time.monotonic() - began
        attempts = []
        for _ in range(ADMIN_ATTEMPTS):  # as an operator would, after a failure
            code, last = run_command(config, base_env, ["sync"], work / "commands.log")
            attempts.append(f"exit {code}" + (f": {last[-120:]}" if code else ""))
            if code == 0:
                break
        out.final_sync = "; ".join(attempts)
        # a message acknowledged before the suppression and sealed after the deletion (the spool
        # lags under faults) reached the archive in the first runs; the sealer now drops it, so
        # this count must be 0 (a second `users delete` still runs if not, so the table says both)
        out.erased_in_archive_before_rerun = catalog.archive_mentions(prefix, ERASED)
        if out.erased_in_archive_before_rerun:
            code, last = run_command(
                config, base_env, ["users", "delete", ERASED, "--source", SOURCE], work / "commands.log"
            )
            out.admin["users_delete (rerun at the end)"] = f"exit {code}" + (
                f" ({last[-150:]})" if code else ""
            )
        _dump_leases(catalog, prefix, work / "leases.json")
        _verify(out, load, catalog, duck, pollers, prefix, ended, began, expiring)
        out.restarts, out.recoveries = supervisor.restarts, supervisor.recoveries
        out.unexpected_exits = supervisor.unexpected_exits
    finally:
        watch.stop()
        if supervisor is not None:
            supervisor.halted.set()
        for up in (primary, second):
            if up.alive():
                up.kill9()
        for poller in pollers:
            poller.stopping.set()
        s3_proxy.close()
        glue_proxy.close()
        moto.stop()
        disk.unmount()
    return out


def _inject(
    schedule: list[Fault], began: float, out: Outcome, primary: Up, second: Up, supervisor: Supervisor,
    s3_proxy: FaultProxy, glue_proxy: FaultProxy, disk: SmallDisk, clock: Clock, config: Path,
    env: dict[str, str], work: Path, database: str, watch: LogWatch, aim_wait: float,
) -> None:  # fmt: skip
    """Runs the schedule: each fault at its time, each lifted after its duration (timers)."""
    timers: list[threading.Timer] = []
    threads: list[threading.Thread] = []

    def admin(kind: str, args: list[str]) -> None:
        """An operator's command in its own process, tried again when it fails, a little later
        each time (:data:`ADMIN_BACKOFF`: three tries 10 s apart all fell inside one S3 outage)."""
        attempts = []
        for attempt in range(ADMIN_ATTEMPTS):
            code, last = run_command(config, env, args, work / "commands.log")
            attempts.append(f"exit {code}" + (f" ({last[-150:]})" if code else ""))
            if code == 0 or attempt + 1 == ADMIN_ATTEMPTS:
                break
            time.sleep(ADMIN_BACKOFF[min(attempt, len(ADMIN_BACKOFF) - 1)])
        out.admin[kind] = "; ".join(attempts)
        say(f"+{time.monotonic() - began:.0f}s {kind} done: {out.admin[kind]}")

    def aimed_kill(aim: str) -> None:
        """``kill -9`` of `up` once its log shows ``aim`` under way (or the wait ran out)."""
        aimed = watch.wait(aim, aim_wait)
        if primary.alive():
            supervisor.expected_deaths += 1
            note = f"{aimed}; killed {primary.kill9()} processes"
        else:
            note = f"{aimed}; up was not running"
        text = f"+{time.monotonic() - began:.0f}s kill9: {note}"
        out.fault_notes.append(text)
        say(text)

    def later(delay: float, action: Any) -> None:
        timer = threading.Timer(delay, action)
        timer.daemon = True
        timer.start()
        timers.append(timer)

    for fault in schedule:
        delay = began + fault.at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        kind, note = fault.kind, ""
        if kind == "kill9":
            thread = threading.Thread(target=aimed_kill, args=(fault.detail,), daemon=True)
            thread.start()
            threads.append(thread)
            note = f"aimed at {fault.detail} (waits at most {aim_wait:.0f} s for it)"
        elif kind in ("s3_outage", "glue_outage"):
            proxy = s3_proxy if kind == "s3_outage" else glue_proxy
            proxy.fail(fault.detail)
            later(fault.duration, proxy.heal)
            note = f"{fault.detail} for {fault.duration:.0f} s"
        elif kind == "second_up":
            # the previous one may still be stopping (it finishes its sync first): wait for it, as
            # skipping cost the first full run its third second machine
            with contextlib.suppress(TimeoutError):
                wait_for(lambda: not second.alive(), START_TIMEOUT, "the second up's stop")
            if second.alive():
                out.fault_notes.append(f"+{time.monotonic() - began:.0f}s second_up: skipped, still stopping")
                continue
            second.start()
            later(fault.duration, second.stop)
            note = f"for {fault.duration:.0f} s"
        elif kind == "disk_full":
            if not disk.mounted:
                continue
            written = disk.fill()
            later(fault.duration, disk.free)
            note = f"{written >> 20} MiB filler, for {fault.duration:.0f} s"
        elif kind == "clock_step":
            if not clock.available:
                continue
            minutes = int(fault.detail[:-1])
            clock.set(minutes * 60)
            later(fault.duration, lambda: clock.set(0))
            note = f"{fault.detail} for {fault.duration:.0f} s, then back"
        elif kind in ADMIN:
            if kind == "users_delete":
                args = ["users", "delete", ERASED, "--source", SOURCE]
            elif kind == "replay_table":
                args = ["replay", "--source", SOURCE, "--table", fault.detail]
            else:
                table, column = fault.detail.split(".")
                args = ["schema", "set-type", f"{database}.{table}", column, "string"]
            thread = threading.Thread(target=admin, args=(kind, args), daemon=True)
            thread.start()
            threads.append(thread)
            note = "started: eventlake " + " ".join(args)
        out.faults[kind] += 1
        text = f"+{time.monotonic() - began:.0f}s {kind}: {note or out.admin.get(kind, '')}"
        out.fault_notes.append(text)
        say(text)
    for timer in timers:  # the lifting of the last faults
        timer.join(900)
    for thread in threads:
        thread.join(ADMIN_ATTEMPTS * COMMAND_TIMEOUT + sum(ADMIN_BACKOFF) + 15)


def _verify(
    out: Outcome, load: Load, catalog: CatalogReader, duck: DuckdbReader, pollers: list[Poller], prefix: str,
    ended: float, began: float, expiring: frozenset[str] = frozenset(),
) -> None:  # fmt: skip
    record = load.record
    lake = catalog.message_ids(len(record.flags))
    out.erased_in_tables = lake.erased
    out.erased_in_archive = catalog.archive_mentions(prefix, ERASED)
    out.statuses = load.statuses
    out.sent = record.handed_count
    out.sent_erased = record.erased_count
    out.dropped = load.dropped
    acked_probes = set(record.probes_acked)
    never_probes = record.probes_handed - acked_probes
    out.acked = sum(1 for _ in record.numbers(acked=True)) + len(acked_probes)
    out.never_acked = sum(1 for _ in record.numbers(acked=False)) + len(never_probes)
    out.in_lake = sum(1 for c in lake.counts if c) + len(lake.probes) + lake.unknown
    out.lost = [f"chaos-{n:09d}" for n in record.numbers(acked=True) if lake.counts[n] == 0]
    out.lost += [f"probe-{n:07d}" for n in sorted(acked_probes) if lake.probes[n] == 0]
    out.doubled = [f"chaos-{n:09d}" for n in record.numbers(acked=True) if lake.counts[n] > 1]
    out.doubled += [f"probe-{n:07d}" for n in sorted(acked_probes) if lake.probes[n] > 1]
    out.never_acked_in_lake = sum(1 for n in record.numbers(acked=False) if lake.counts[n])
    out.never_acked_in_lake += sum(1 for n in never_probes if lake.probes[n])
    out.never_acked_doubled = [f"chaos-{n:09d}" for n in record.numbers(acked=False) if lake.counts[n] > 1]
    out.never_acked_doubled += [f"probe-{n:07d}" for n in sorted(never_probes) if lake.probes[n] > 1]
    # rows no message of the load has (the erased user's are counted apart): none expected
    out.unknown_in_lake = lake.unknown + sum(
        1 for n, c in enumerate(lake.counts) if c and not record.flags[n] & Record.HANDED
    )
    final, _, _ = catalog.poll()
    try:
        duck_final, _, _ = duck.poll()
        out.readers_disagree = sorted(
            f"{'/'.join(k)}: catalog {final.get(k)} duckdb {duck_final.get(k)}"
            for k in set(final) | set(duck_final) if final.get(k) != duck_final.get(k)
        )  # fmt: skip
    except Exception as exc:  # noqa: BLE001
        out.readers_disagree = [f"the final duckdb query failed: {exc}"]
        for table in catalog.tables():  # which table's query fails
            one = DuckdbReader(duck.config, duck.env, duck.database, catalog)
            one.only = table
            try:
                one.poll()
            except Exception as error:  # noqa: BLE001
                out.readers_disagree.append(f"duckdb on {table}: {error}")
    for poller in pollers:
        name = poller.name.removeprefix("poll-")
        out.anomalies[name] = poller.seen.anomalies(final, expiring)
        if poller.seen.erased_seen:
            polls = len(poller.seen.erased_seen)
            out.notes.append(f"{name}: the erased user's rows were readable in {polls} polls "
                             f"(last at +{poller.seen.erased_seen[-1][0]:.0f} s)")  # fmt: skip
        waits = []
        for number, acked_at in record.probes_acked.items():
            seen = poller.seen.probes.get(f"probe-{number:07d}")
            waits.append((seen if seen is not None else ended) - (acked_at - began))
        seen_n = sum(1 for n in record.probes_acked if f"probe-{n:07d}" in poller.seen.probes)
        out.freshness[name] = (_pct(waits, 0.5), _pct(waits, 0.99), max(waits, default=math.nan), seen_n,
                               len(waits))  # fmt: skip
        out.notes.append(f"{name}: {poller.seen.polls} polls, {poller.seen.failures} failed"
                         + (f" (last: {poller.seen.last_error[-200:]})"
                            if poller.seen.failures else ""))  # fmt: skip


def _dump_leases(catalog: CatalogReader, prefix: str, into: Path) -> None:
    """The lease objects as the run left them (for a diagnosis)."""
    found = {}
    pages = catalog.s3.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=f"{prefix}/segment-data/_state/locks/"
    )
    for page in pages:
        for item in page.get("Contents", []):
            found[item["Key"]] = catalog.s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read().decode()
    into.write_text(json.dumps(found, indent=1))


def report(out: Outcome) -> None:
    print(out.table())
    for kind, text in out.admin.items():
        print(f"{kind}: {text}")
    for note in out.notes:
        print(f"note: {note}")
    for name, found in out.anomalies.items():
        for line in found[:20]:
            print(f"anomaly ({name}): {line}")
    for what, ids in (
        ("lost", out.lost),
        ("doubled", out.doubled),
        ("never acked, doubled", out.never_acked_doubled),
    ):
        if ids:
            print(f"{what}: {len(ids)}, e.g. {', '.join(ids[:10])}")
    for line in out.readers_disagree[:20]:
        print(f"readers disagree: {line}")
    print("RESULT:", "FAILED" if out.failed else "passed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument(
        "--seed", type=int, default=None, help="the fault schedule's seed (printed; random if absent)"
    )
    parser.add_argument("--rate", type=float, default=2000.0, help="messages/s (issue 36: 2,000)")
    parser.add_argument("--per-kind", type=int, default=3, help="each fault this many times")
    parser.add_argument("--poll-interval", type=float, default=10.0)
    parser.add_argument("--sync-interval", type=int, default=30, help="up's [sync] interval_seconds")
    parser.add_argument("--clients", type=int, default=1, help="Segment Clients the load spreads over")
    parser.add_argument("--short", action="store_true", help="short outages and stays (the test's variant)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the run's files there")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="chaos-"))
    outcome = run(args.minutes * 60, args.rate, seed, args.per_kind, work, args.short, args.poll_interval,
                  args.sync_interval, args.clients)  # fmt: skip
    report(outcome)
    print(f"seed {seed}; files in {work}")
    if args.workdir is None and not outcome.failed:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if outcome.failed else 0


if __name__ == "__main__":
    sys.exit(main())
