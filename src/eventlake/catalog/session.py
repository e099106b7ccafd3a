"""The one place a SparkSession is built: from settings, with the catalog's metastore wired in."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import sys
import time
from importlib import resources
from typing import IO

from eventlake import layout
from eventlake.config import Settings
from eventlake.errors import DependencyError

JAVA_HINT = "eventlake needs Java 17: apt-get install openjdk-17-jre-headless (or set JAVA_HOME)"

# the embedded Derby metastore admits one JVM at a time: processes take turns through this lock,
# held until the process exits (the kernel releases it, also after a crash)
_metastore_lock: IO[str] | None = None


def _lock_embedded_metastore(settings: Settings) -> None:
    global _metastore_lock
    if _metastore_lock is not None:
        return
    path = layout.lock_file(settings.lake.state_dir, "metastore")
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")  # noqa: SIM115 - held for the life of the process
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "?"
        print(
            f"waiting for another eventlake process (pid {holder}) using the embedded metastore ...",
            file=sys.stderr,
            flush=True,
        )
        fcntl.flock(handle, fcntl.LOCK_EX)
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    _metastore_lock = handle


def check_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.exists(os.path.join(java_home, "bin", "java")):
        return
    if shutil.which("java") is None:
        raise DependencyError(JAVA_HINT)


def spark_session(settings: Settings, app_name: str = "eventlake"):  # -> pyspark.sql.SparkSession
    """A SparkSession on ``[spark] master`` with the Hive metastore of ``[catalog]``.

    The embedded Derby metastore and the warehouse live in ``[lake] state_dir``, so nothing is
    written into the working directory.
    """
    check_java()
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise DependencyError("pyspark is not installed: pip install 'eventlake[spark]'") from None

    state = settings.lake.state_dir
    state.mkdir(parents=True, exist_ok=True)
    _lock_embedded_metastore(settings)
    # eventlake works in UTC: Spark hands timestamps to Python in the process's local time zone
    os.environ["TZ"] = "UTC"
    time.tzset()
    # PySpark logs every failed query with its Java stack trace; the CLI prints one line instead
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    logs = layout.log_dir(state)
    logs.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log4j = resources.files("eventlake.catalog").joinpath("log4j2.properties")
    java_options = (
        f"-Dderby.system.home={state} -Dderby.stream.error.file={logs / 'derby.log'} "
        f"-Dlog4j2.configurationFile={log4j}"
    )
    metastore_url = f"jdbc:derby:;databaseName={layout.metastore_dir(state)};create=true"
    builder = (
        SparkSession.builder.master(settings.spark.master)
        .appName(app_name)
        .config("spark.driver.memory", settings.spark.driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.catalogImplementation", "hive")
        .config("spark.hadoop.javax.jdo.option.ConnectionURL", metastore_url)
        .config("spark.hadoop.hive.metastore.schema.verification", "false")
        .config("spark.sql.warehouse.dir", str(layout.warehouse_dir(state)))
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        .config("spark.sql.shuffle.partitions", "4")
        # partition values are strings ("hr=07"), never inferred as numbers
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    )
    for key, value in settings.spark.conf:
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
