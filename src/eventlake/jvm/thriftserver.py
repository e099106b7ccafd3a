"""Spark's Thrift server (HiveServer2 protocol: JDBC/ODBC, dbt-spark, BI tools, ``eventlake sql``)
over the project's catalog, two ways:

- ``eventlake thrift``: its own JVM, run from the pyspark wheel with ``spark-submit``
  (:func:`run_thrift_server`);
- inside a running session (:func:`start_in_session`): what the engine of ``eventlake up`` does,
  so that the queries run in the JVM that syncs.

Both get the settings an ``eventlake sql`` session gets (:func:`eventlake.jvm.session.spark_conf`,
plus :data:`SERVING_CONF`) and record where they listen in ``state_dir/sql-service/<pid>.json``
(:func:`write_sql_service`); ``eventlake sql --engine spark`` sends its query to a live one
(:func:`running_sql_service`) instead of starting a JVM. On the embedded Derby ``eventlake thrift``
runs through the project's metastore service, which it starts when none runs, so ``eventlake sql``
and syncs keep working beside it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from eventlake import progress, state_layout
from eventlake.config import CatalogKind, Settings, client_host
from eventlake.errors import UsageError
from eventlake.jvm.java import port_open, pyspark_home
from eventlake.jvm.metastore.access import MetastoreAccess, client_access
from eventlake.jvm.service import STOP_GRACE_SECONDS, SharedMetastore, die_with_parent
from eventlake.jvm.session import check_java, spark_conf
from eventlake.progress import Say
from eventlake.storage.local import process_alive, write_atomic

THRIFT_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"

# Spark settings of a session that serves SQL to other processes (before [spark.conf], which wins)
SERVING_CONF = (
    # every query lists the files of the partitions it reads: a connection held open (a BI tool,
    # dbt) sees the files that later syncs add to a partition, not the ones of its first query
    ("spark.sql.hive.filesourcePartitionFileCacheSize", "0"),
)
# HiveServer2 settings of a server started inside a session
IN_SESSION_CONF = {
    "hive.server2.logging.operation.enabled": "false",  # no per-query log files in /tmp
}
# how many ports above the configured one are tried before any free port is taken
PORT_TRIES = 20
START_TIMEOUT_SECONDS = 30.0


def serving_settings(settings: Settings) -> Settings:
    """``settings`` with :data:`SERVING_CONF` under the user's ``[spark.conf]``."""
    spark = dataclasses.replace(settings.spark, conf=(*SERVING_CONF, *settings.spark.conf))
    return dataclasses.replace(settings, spark=spark)


def thrift_command(settings: Settings, access: MetastoreAccess, host: str, port: int) -> list[str]:
    conf = spark_conf(serving_settings(settings), "eventlake-thrift", access)
    command = [str(pyspark_home() / "bin" / "spark-submit"), "--class", THRIFT_SERVER_CLASS]
    classpath = conf.pop("spark.driver.extraClassPath", "")
    if classpath:
        command += ["--driver-class-path", classpath]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    command += [
        "spark-internal",
        "--hiveconf",
        f"hive.server2.thrift.port={port}",
        "--hiveconf",
        f"hive.server2.thrift.bind.host={host}",
    ]
    return command


def run_thrift_server(settings: Settings, host: str, port: int, say: Say = progress.say) -> int:
    """Serve HiveServer2 on ``host:port`` until SIGTERM or Ctrl-C; the server's exit code."""
    if settings.catalog.kind != CatalogKind.HIVE:
        raise UsageError(
            f'eventlake thrift needs a Hive metastore (catalog.kind = "{settings.catalog.kind}"): '
            "Spark here cannot read the Glue catalog"
        )
    check_java()
    client = client_host(host)
    if port_open(port, client):
        running = running_sql_service(settings.lake.state_dir)
        serving = (
            f" (the project's {running['kind']}, pid {running['pid']}, serves SQL on port {running['port']})"
            if running is not None
            else ""
        )
        raise UsageError(f"port {port} is in use: pass another --port{serving}")
    stop = threading.Event()
    process: subprocess.Popen[bytes] | None = None

    def _stop(signum: int, frame: object) -> None:
        stop.set()
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with SharedMetastore(settings, say) as metastore:
            metastore.ensure()
            access = client_access(settings, say)
            state_layout.log_dir(settings.lake.state_dir).mkdir(parents=True, exist_ok=True)
            env = {**os.environ, "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"), "TZ": "UTC"}
            env.setdefault("PYSPARK_PYTHON", sys.executable)
            say(f"starting the Thrift server on {host}:{port} over the {access.description} ...")
            if stop.is_set():
                return 0
            process = subprocess.Popen(
                thrift_command(settings, access, host, port),
                env=env,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,
            )
            ready = False
            try:
                while process.poll() is None:
                    if not ready and port_open(port, client):
                        ready = True
                        write_sql_service(settings.lake.state_dir, client, port, process.pid, "thrift")
                        say(f"Thrift server ready: jdbc:hive2://{host}:{port}/default; stop with Ctrl-C")
                    if stop.wait(0.5):
                        try:
                            process.wait(STOP_GRACE_SECONDS * 3)
                        except subprocess.TimeoutExpired:
                            process.kill()
                code = process.wait()
            finally:
                remove_sql_service(settings.lake.state_dir, process.pid)
            return 0 if stop.is_set() else code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# -- a Thrift server inside a running session (the engine of `eventlake up`) -------------------


@dataclasses.dataclass
class SessionThriftServer:
    """A HiveServer2 running in this process's Spark session; queries run in that session's JVM,
    each connection in a session of its own (``newSession``: the same catalog and SparkContext)."""

    host: str
    port: int
    handle: Any  # the JVM's HiveThriftServer2

    def stop(self) -> None:
        with contextlib.suppress(Exception):  # the JVM may be gone already
            self.handle.stop()


def bindable(host: str, port: int) -> bool:
    """Whether a server could listen on ``host:port`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the Thrift server does
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def choose_port(host: str, preferred: int, tries: int = PORT_TRIES) -> int:
    """``preferred`` if free, else the first free port of the ``tries`` above it, else any free one."""
    for port in range(preferred, min(preferred + tries, 65536)):
        if bindable(host, port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def start_in_session(
    spark: Any, host: str, preferred_port: int, say: Say = progress.say
) -> SessionThriftServer:
    """Start Spark's Thrift server inside ``spark`` (a session with a Hive catalog) on ``host`` and
    ``preferred_port``, or the first free port above it; returns once it accepts connections.

    ``startWithSparkSession(session, exitOnError=false)``: a failure to listen must not end the JVM
    (``startWithContext`` would call ``System.exit``); it is seen here as a port that never opens.
    """
    jvm = spark.sparkContext._jvm
    for _ in range(3):  # another process may take the port between the check and the bind
        port = choose_port(host, preferred_port)
        conf = {
            **IN_SESSION_CONF,
            "hive.server2.thrift.bind.host": host,
            "hive.server2.thrift.port": str(port),
        }
        for key, value in conf.items():
            spark.conf.set(key, value)
        server_class = jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2  # THRIFT_SERVER_CLASS
        handle = server_class.startWithSparkSession(spark._jsparkSession, False)
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if port_open(port, host):
                return SessionThriftServer(host, port, handle)
            time.sleep(0.1)
        SessionThriftServer(host, port, handle).stop()
        say(f"the Thrift server did not listen on {host}:{port}; trying another port")
    raise UsageError(f"Spark's Thrift server did not start on {host} (ports from {preferred_port})")


# -- where the project's SQL services listen -----------------------------------------------------


def write_sql_service(state: Path, host: str, port: int, pid: int, kind: str, app_id: str = "") -> Path:
    """Record that process ``pid`` (kind ``engine`` or ``thrift``) serves HiveServer2 on
    ``host:port``; records of processes that are gone are removed on the way."""
    folder = state_layout.sql_service_dir(state)
    folder.mkdir(parents=True, exist_ok=True)
    for record in folder.glob("*.json"):
        info = _read_record(record)
        if info is None or not process_alive(int(info["pid"])):
            record.unlink(missing_ok=True)
    path = state_layout.sql_service_file(state, pid)
    info = {"host": host, "port": port, "pid": pid, "kind": kind, "app_id": app_id, "started": time.time()}
    write_atomic(path, json.dumps(info).encode())
    return path


def remove_sql_service(state: Path, pid: int) -> None:
    state_layout.sql_service_file(state, pid).unlink(missing_ok=True)


def running_sql_service(state: Path) -> dict[str, Any] | None:
    """The most recently started SQL service of the project that is live (its process runs and
    its port accepts connections), or None."""
    folder = state_layout.sql_service_dir(state)
    if not folder.is_dir():
        return None
    records = [info for path in folder.glob("*.json") if (info := _read_record(path)) is not None]
    for info in sorted(records, key=lambda i: i["started"], reverse=True):
        if process_alive(int(info["pid"])) and port_open(int(info["port"]), str(info["host"])):
            return info
    return None


def _read_record(path: Path) -> dict[str, Any] | None:
    try:
        info = json.loads(path.read_text())
        int(info["pid"]), int(info["port"]), str(info["host"]), float(info["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if isinstance(info, dict) else None
