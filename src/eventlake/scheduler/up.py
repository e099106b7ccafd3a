"""The collector in this process, syncs in child processes on a schedule.

On the embedded Derby metastore, ``up`` first starts the project's metastore service (a Hive
metastore JVM over Derby, see :mod:`eventlake.jvm.service`) and keeps it while it runs: the
syncs, and any ``eventlake sql``, ``sync`` or ``thrift`` started meanwhile from other processes,
connect to it instead of opening Derby, so they all work at the same time.

Each sync is its own process (``python -m eventlake sync``) in its own process group, so it can be
stopped with everything it started (Spark's JVM included). On SIGTERM or Ctrl-C the collector stops
and seals its spool, a running sync is stopped, then the metastore service; a sync stopped
half-way is completed by the next one (see eventlake.sync.job).
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
from eventlake.jvm.service import STOP_GRACE_SECONDS, SharedMetastore


class SyncScheduler:
    """Runs ``eventlake sync`` now and then every ``interval`` seconds until :meth:`stop`."""

    def __init__(self, settings: Settings, interval: float) -> None:
        self.settings = settings
        self.interval = interval
        self._stop = threading.Event()
        self._child: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="eventlake-scheduler", daemon=True)
        self.runs = 0
        self.metastore = SharedMetastore(settings)

    def start(self) -> None:
        self._thread.start()

    def _command(self) -> list[str]:
        command = [sys.executable, "-m", "eventlake"]
        if self.settings.path is not None:
            command += ["--config", str(self.settings.path)]
        return [*command, "sync"]

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:  # the metastore service the syncs use (started once, restarted if it died)
                self.metastore.ensure()
            except Exception as exc:
                print(f"scheduler: no metastore service: {exc}", file=sys.stderr, flush=True)
                self._stop.wait(self.interval)
                continue
            with self._lock:
                if self._stop.is_set():
                    return
                print("scheduler: starting a sync", file=sys.stderr, flush=True)
                child = self._child = subprocess.Popen(self._command(), start_new_session=True)
            code = child.wait()
            with self._lock:
                _signal_group(child, signal.SIGKILL)  # anything the sync left behind in its group
                self._child = None  # reaped: its pid may be reused, never signal it again
            self.runs += 1
            print(f"scheduler: sync finished (exit {code})", file=sys.stderr, flush=True)
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def stop(self) -> None:
        """Stop scheduling; stop a running sync (its whole process group) and wait for it."""
        with self._lock:
            self._stop.set()
            child = self._child
        if child is not None:
            print("scheduler: stopping the running sync", file=sys.stderr, flush=True)
            _signal_group(child, signal.SIGTERM)
            try:
                child.wait(STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                pass
            _signal_group(child, signal.SIGKILL)  # the sync and anything it started
        self._thread.join(STOP_GRACE_SECONDS)
        self.metastore.close()


def _signal_group(child: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(child.pid, sig)
    except ProcessLookupError:
        pass


def run_up(settings: Settings) -> None:
    """Serve the collector and run scheduled syncs until SIGTERM or Ctrl-C. Blocking."""
    scheduler = SyncScheduler(settings, settings.sync.interval_seconds)
    scheduler.start()
    try:
        run_collector(settings)
    finally:
        scheduler.stop()
