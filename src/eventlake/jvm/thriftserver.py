"""``eventlake thrift``: Spark's Thrift server (HiveServer2 protocol: JDBC/ODBC, dbt-spark, BI tools)
over the project's catalog, run from the pyspark wheel with ``spark-submit``.

It gets the settings an ``eventlake sql`` session gets (:func:`eventlake.jvm.session.spark_conf`);
on the embedded Derby it runs through the project's metastore service, which it starts when none
runs, so ``eventlake sql`` and syncs keep working beside it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

from eventlake import layout, progress
from eventlake.config import Settings
from eventlake.errors import UsageError
from eventlake.jvm.metastore import MetastoreAccess, client_access, port_open, pyspark_home
from eventlake.jvm.service import STOP_GRACE_SECONDS, SharedMetastore, die_with_parent
from eventlake.jvm.session import check_java, spark_conf
from eventlake.progress import Say

THRIFT_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"


def thrift_command(settings: Settings, access: MetastoreAccess, host: str, port: int) -> list[str]:
    conf = spark_conf(settings, "eventlake-thrift", access)
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
    if settings.catalog.kind != "hive":
        raise UsageError(
            f'eventlake thrift needs a Hive metastore (catalog.kind = "{settings.catalog.kind}"): '
            "Spark here cannot read the Glue catalog"
        )
    check_java()
    if port_open(port, "127.0.0.1" if host in ("0.0.0.0", "") else host):
        raise UsageError(f"port {port} is in use: pass another --port")
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
            layout.log_dir(settings.lake.state_dir).mkdir(parents=True, exist_ok=True)
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
            while process.poll() is None:
                if not ready and port_open(port, "127.0.0.1" if host in ("0.0.0.0", "") else host):
                    ready = True
                    say(f"Thrift server ready: jdbc:hive2://{host}:{port}/default; stop with Ctrl-C")
                if stop.wait(0.5):
                    try:
                        process.wait(STOP_GRACE_SECONDS * 3)
                    except subprocess.TimeoutExpired:
                        process.kill()
            code = process.wait()
            return 0 if stop.is_set() else code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
