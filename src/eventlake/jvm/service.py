"""A Hive metastore service (thrift) run from the pyspark wheel's jars, over Derby or a JDBC database.

``eventlake metastore`` runs one in the foreground; ``eventlake up`` and ``eventlake thrift`` run
one for the project while they run, when the metastore is the embedded Derby (see
:func:`shared_metastore`). On Derby the service holds the project's metastore lock and publishes
its URI in ``state_dir/metastore/service.json``; every eventlake process of the project then
connects to it (:func:`eventlake.jvm.metastore.access.client_access`).

The service is Hive 2.3's ``HiveMetaStore``: it listens on every interface (Hive 2.3 has no bind
address setting) and has no authentication, like any Hive metastore: firewall its port.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from eventlake import progress, state_layout
from eventlake.config import CatalogKind, Settings
from eventlake.jvm.connectors import connector_jars, s3a_properties
from eventlake.jvm.errors import MetastoreError
from eventlake.jvm.java import java_executable, port_open, pyspark_home
from eventlake.jvm.metastore.access import MetastoreAccess, database_access, hive_site, write_private
from eventlake.jvm.metastore.derby import (
    embedded_lock,
    remove_service_file,
    running_service,
    write_service_file,
)
from eventlake.jvm.metastore.schema import ensure_schema
from eventlake.progress import Say

START_TIMEOUT_SECONDS = 180.0
STOP_GRACE_SECONDS = 10.0

try:  # Linux: the service gets SIGTERM when the thread that started it dies (even by SIGKILL)
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
    _PR_SET_PDEATHSIG = 1
except OSError:  # pragma: no cover
    _LIBC = None


def die_with_parent() -> None:  # runs in the child between fork and exec
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class MetastoreService:
    """One running ``HiveMetaStore`` JVM (a child of this process)."""

    uri: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path
    conf_dir: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
        code = self.process.wait()
        shutil.rmtree(self.conf_dir, ignore_errors=True)
        return code


def start_service(settings: Settings, access: MetastoreAccess, port: int) -> MetastoreService:
    """Start ``HiveMetaStore -p port`` over ``access`` (Derby or JDBC); returns once it accepts
    connections. The caller stops it (and it stops by itself if the calling thread dies)."""
    state = settings.lake.state_dir
    conf_dir = state_layout.metastore_service_conf_dir(state, os.getpid())
    conf_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    properties = {
        **access.properties,
        **access.secrets,
        "hive.async.log.enabled": "false",  # the wheel lacks lmax-disruptor
        "datanucleus.connectionPoolingType": "HikariCP",  # and BoneCP, Hive 2.3's default (as Spark does)
        "hive.metastore.warehouse.dir": str(state_layout.warehouse_dir(state)),
        # a lake in a bucket: the metastore checks every table's location with S3A
        **s3a_properties(settings),
    }
    write_private(conf_dir / "hive-site.xml", hive_site(properties))
    state_layout.log_dir(state).mkdir(parents=True, exist_ok=True)
    from eventlake.jvm.session import log4j_config

    jars = [*access.classpath, *connector_jars(settings)]
    classpath = os.pathsep.join([str(conf_dir), f"{pyspark_home() / 'jars'}/*", *jars])
    command = [
        java_executable(),
        "-Xmx512m",
        f"-Dderby.system.home={state}",
        f"-Dderby.stream.error.file={state_layout.derby_log(state)}",
        f"-Dlog4j2.configurationFile={log4j_config()}",
        "-cp",
        classpath,
        "org.apache.hadoop.hive.metastore.HiveMetaStore",
        "-p",
        str(port),
    ]
    log = state_layout.metastore_log(state)
    with open(log, "ab") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
    service = MetastoreService(f"thrift://127.0.0.1:{port}", port, process, log, conf_dir)
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not port_open(port):
        if process.poll() is not None or time.monotonic() > deadline:
            service.stop()
            raise MetastoreError(f"the metastore service did not start: {_tail(log)} (log: {log})")
        time.sleep(0.25)
    return service


def _tail(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    errors = [line for line in lines if "Exception" in line or "ERROR" in line]
    return (errors or lines or ["no output"])[-1][:300]


@contextlib.contextmanager
def serve_metastore(settings: Settings, port: int, say: Say = progress.say) -> Iterator[MetastoreService]:
    """Run the project's metastore service on ``port`` over its database (Derby in ``state_dir``
    or ``catalog.jdbc_url``) until the ``with`` block ends. On Derby it holds the metastore lock
    and publishes its URI for the project's other processes."""
    state = settings.lake.state_dir
    state.mkdir(parents=True, exist_ok=True)
    if settings.catalog.jdbc_url:
        ensure_schema(settings, say)
        service = start_service(settings, database_access(settings), port)
        try:
            yield service
        finally:
            service.stop()
        return
    with embedded_lock(state, say) as other:
        if other is not None:
            raise MetastoreError(f"this project's metastore service already runs at {other}")
        service = start_service(settings, database_access(settings), port)
        write_service_file(
            state,
            {"uri": service.uri, "port": port, "pid": service.process.pid, "owner_pid": os.getpid()},
        )
        try:
            yield service
        finally:
            remove_service_file(state, service.process.pid)
            service.stop()


class SharedMetastore:
    """For long-running commands on the embedded Derby (``up``, ``thrift``): a project metastore
    service on a free port while they run, so that other eventlake processes can use the catalog
    at the same time. Reuses one that already runs; restarts it if it died. A no-op with a
    configured ``uri`` or ``jdbc_url`` (every process connects by itself) or the glue catalog."""

    def __init__(self, settings: Settings, say: Say = progress.say) -> None:
        self.settings = settings
        self.say = say
        self.needed = settings.catalog.kind == CatalogKind.HIVE and not (
            settings.catalog.uri or settings.catalog.jdbc_url
        )
        self._stack: contextlib.ExitStack | None = None
        self.service: MetastoreService | None = None
        self._lock = threading.Lock()

    def ensure(self) -> str | None:
        """The URI of the running project service (started now if needed), or None if not needed."""
        if not self.needed:
            return None
        with self._lock:
            if self.service is not None and self.service.alive():
                return self.service.uri
            if self.service is not None:
                self.say(f"the metastore service stopped (log: {self.service.log}); restarting it")
                self._close()
            running = running_service(self.settings.lake.state_dir)
            if running is not None:
                return str(running["uri"])
            self.say("starting the metastore service ...")
            stack = contextlib.ExitStack()
            self.service = stack.enter_context(serve_metastore(self.settings, free_port(), self.say))
            self._stack = stack
            self.say(f"metastore service at {self.service.uri}")
            return self.service.uri

    def _close(self) -> None:
        if self._stack is not None:
            self._stack.close()
        self._stack, self.service = None, None

    def close(self) -> None:
        with self._lock:
            self._close()

    def __enter__(self) -> SharedMetastore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_metastore(settings: Settings, port: int, say: Say = progress.say) -> None:
    """``eventlake metastore``: serve until SIGTERM or Ctrl-C. Blocking."""
    stop = threading.Event()

    def _stop(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with serve_metastore(settings, port, say) as service:
            what = "Derby in " + str(state_layout.metastore_dir(settings.lake.state_dir))
            if settings.catalog.jdbc_url:
                what = settings.catalog.jdbc_url.split("?", 1)[0]
            say(f"metastore service at thrift://0.0.0.0:{port} over {what}; stop with Ctrl-C")
            while not stop.wait(1.0):
                if not service.alive():
                    raise MetastoreError(f"the metastore service exited: {_tail(service.log)}")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
