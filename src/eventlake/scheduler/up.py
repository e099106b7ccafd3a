"""``eventlake up``: the collector and the web console in this process, one long-lived engine in a
child process.

On the embedded Derby metastore, ``up`` first starts the project's metastore service (a Hive
metastore JVM over Derby, see :mod:`eventlake.jvm.service`) and keeps it while it runs: the engine,
and any ``eventlake sql``, ``sync`` or ``thrift`` started meanwhile from other processes, connect to
it instead of opening Derby, so they all work at the same time.

The engine (``python -m eventlake engine``, see :mod:`eventlake.scheduler.engine`) holds one Spark
session and one catalog connection for its whole life: it syncs every ``[sync] interval_seconds``
and serves SQL (Spark's Thrift server) to ``eventlake sql``. It runs in its own process group, so
that the collector's event loop keeps its GIL and the engine can be stopped with everything it
started (Spark's JVM included). If it dies, :class:`EngineSupervisor` says so and starts a new one
after a pause that doubles up to :data:`RESTART_MAX_SECONDS`; if the project's metastore service
had to be restarted (on a new port), the engine is restarted to reach the new one.

On SIGTERM or Ctrl-C the collector stops and seals its spool, then the engine is stopped (SIGTERM,
then SIGKILL of its group after a grace period), then the metastore service; a sync stopped
half-way is completed by the next one (see eventlake.sync.pipeline.job).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from eventlake.collect import run_collector
from eventlake.config import Settings
from eventlake.console import Console
from eventlake.errors import UsageError
from eventlake.jvm.service import STOP_GRACE_SECONDS, SharedMetastore

RESTART_MIN_SECONDS = 1.0
RESTART_MAX_SECONDS = 60.0
# an engine that ran this long was healthy: the next restart pauses RESTART_MIN_SECONDS again
HEALTHY_SECONDS = 300.0
WATCH_SECONDS = 1.0  # how often the engine and the metastore service are checked


def _say(line: str) -> None:
    print(f"scheduler: {line}", file=sys.stderr, flush=True)


class EngineSupervisor:
    """Keeps one engine process running from :meth:`start` until :meth:`stop`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._stop = threading.Event()
        self._child: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="eventlake-engine-supervisor", daemon=True)
        self.starts = 0  # engine processes started
        self.metastore = SharedMetastore(settings)

    def start(self) -> None:
        self._thread.start()

    def _command(self) -> list[str]:
        command = [sys.executable, "-m", "eventlake"]
        if self.settings.path is not None:
            command += ["--config", str(self.settings.path)]
        return [*command, "engine"]

    def _loop(self) -> None:
        pause = RESTART_MIN_SECONDS
        while not self._stop.is_set():
            try:  # the metastore service the engine uses (started once, restarted if it died)
                uri = self.metastore.ensure()
            except Exception as exc:
                _say(f"no metastore service: {exc}; retrying in {pause:g} s")
                self._stop.wait(pause)
                pause = min(pause * 2, RESTART_MAX_SECONDS)
                continue
            with self._lock:
                if self._stop.is_set():
                    return
                child = self._child = subprocess.Popen(self._command(), start_new_session=True)
                self.starts += 1
            _say(f"engine started (pid {child.pid})")
            started = time.monotonic()
            reason = self._watch(child, uri)
            with self._lock:
                if reason is not None:  # the metastore moved: stop this engine for a new one
                    _say(f"{reason}; restarting the engine (pid {child.pid})")
                    _stop_child(child)
                code = child.wait()
                _signal_group(child, signal.SIGKILL)  # anything the engine left behind in its group
                self._child = None  # reaped: its pid may be reused, never signal it again
            if self._stop.is_set():
                return
            if reason is not None:
                pause = RESTART_MIN_SECONDS
                continue
            ran = time.monotonic() - started
            if ran >= HEALTHY_SECONDS:
                pause = RESTART_MIN_SECONDS
            _say(f"the engine (pid {child.pid}) exited with code {code} after {ran:.0f} s; "
                 f"starting a new one in {pause:g} s")  # fmt: skip
            self._stop.wait(pause)
            pause = min(pause * 2, RESTART_MAX_SECONDS)

    def _watch(self, child: subprocess.Popen[bytes], uri: str | None) -> str | None:
        """Wait while the engine runs; a reason to restart it (the metastore service moved), or None
        once it exited or :meth:`stop` was called."""
        while not self._stop.wait(WATCH_SECONDS):
            if child.poll() is not None:
                return None
            try:
                now = self.metastore.ensure()
            except Exception as exc:
                return f"the metastore service is gone ({exc})"
            if now != uri:
                return f"the metastore service moved to {now}"
        return None

    def stop(self) -> None:
        """Stop the engine (its whole process group) and wait for it, then the metastore service."""
        with self._lock:
            self._stop.set()
            child = self._child
            if child is not None:
                _say(f"stopping the engine (pid {child.pid})")
                _stop_child(child)
        self._thread.join(STOP_GRACE_SECONDS * 2)
        self.metastore.close()


def _stop_child(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the engine (it stops its Thrift server and Spark), SIGKILL to its group after
    :data:`STOP_GRACE_SECONDS`. The caller holds the supervisor's lock: ``child`` is not reaped."""
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(child, signal.SIGKILL)  # the engine and anything it started


def _signal_group(child: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(child.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_up(settings: Settings) -> None:
    """Serve the collector, the engine and the console until SIGTERM or Ctrl-C. Blocking."""
    console = None
    if settings.console.enabled:
        console = Console(settings, _say)  # refuses a bind off loopback without a token, before anything
    supervisor = EngineSupervisor(settings)
    supervisor.start()
    try:
        if console is not None:
            try:
                console.start()
            except UsageError as exc:  # the collector matters more: serve without the console
                _say(f"no console: {exc}")
                console = None
        run_collector(settings)
    finally:
        if console is not None:
            console.stop()
        supervisor.stop()
