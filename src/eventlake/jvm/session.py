"""The one place a SparkSession is built: from settings, with the catalog's metastore wired in.

:func:`spark_conf` is also what ``eventlake thrift`` hands to ``spark-submit``, so the Thrift
server sees exactly the catalog an ``eventlake sql`` sees.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from typing import Any

from eventlake import layout, progress
from eventlake.config import Settings
from eventlake.errors import DependencyError
from eventlake.jvm.metastore import (
    JAVA_HINT,
    MetastoreAccess,
    client_access,
    java_executable,
    private_conf_dir,
)
from eventlake.progress import Say

__all__ = ["JAVA_HINT", "check_java", "owned_session", "spark_conf", "spark_session"]


def check_java() -> None:
    java_executable()


def log4j_config() -> str:
    return str(resources.files("eventlake.jvm").joinpath("log4j2.properties"))


def spark_conf(settings: Settings, app_name: str, access: MetastoreAccess | None) -> dict[str, str]:
    """Every Spark setting of an eventlake session; ``access`` None: no Hive catalog (``glue``).

    The embedded Derby metastore and the warehouse live in ``[lake] state_dir``, so nothing is
    written into the working directory.
    """
    state = settings.lake.state_dir
    java_options = " ".join(
        _java_property(name, value)
        for name, value in (
            ("derby.system.home", state),
            ("derby.stream.error.file", layout.derby_log(state)),
            ("log4j2.configurationFile", log4j_config()),
        )
    )
    conf = {
        "spark.master": settings.spark.master,
        "spark.app.name": app_name,
        "spark.driver.memory": settings.spark.driver_memory,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.catalogImplementation": "in-memory" if access is None else "hive",
        "spark.sql.warehouse.dir": str(layout.warehouse_dir(state)),
        "spark.driver.extraJavaOptions": java_options,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.sql.shuffle.partitions": "4",
        # the sync's Python passes exchange Arrow batches: small ones keep the heap flat
        "spark.sql.execution.arrow.maxRecordsPerBatch": "2000",
        "spark.sql.inMemoryColumnarStorage.batchSize": "2000",
        # partition values are strings ("hr=07"), never inferred as numbers
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    }
    if access is not None:
        for key, value in access.properties.items():
            conf[f"spark.hadoop.{key}"] = value
    user_conf = dict(settings.spark.conf)
    classpath = list(access.classpath) if access else []
    private = private_conf_dir(state, access) if access else None
    if private is not None:  # the password, in a hive-site.xml only we can read: not on a command line
        classpath.insert(0, str(private))
    classpath += filter(None, [user_conf.pop("spark.driver.extraClassPath", "")])
    if classpath:  # a JDBC driver must be on the driver's class path: spark.jars is too late for it
        conf["spark.driver.extraClassPath"] = os.pathsep.join(classpath)
    conf.update(user_conf)
    return conf


def _java_property(name: str, value: object) -> str:
    """``-Dname=value`` quoted for spark-submit, which splits extraJavaOptions on white space."""
    text = str(value)
    if "'" not in text:
        return f"'-D{name}={text}'"
    return '"-D' + name + "=" + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def spark_session(settings: Settings, app_name: str = "eventlake", say: Say = progress.say):
    """A SparkSession on ``[spark] master`` with the metastore of ``[catalog]`` (-> SparkSession).

    With ``kind = "glue"`` the session has no Hive catalog (Spark here cannot read Glue): the
    sync writes files with it and registers them in Glue through boto3.
    """
    check_java()
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise DependencyError("pyspark is not installed: pip install 'eventlake[spark]'") from None

    state = settings.lake.state_dir
    state.mkdir(parents=True, exist_ok=True)
    layout.log_dir(state).mkdir(parents=True, exist_ok=True)
    access = None if settings.catalog.kind == "glue" else client_access(settings, say)
    if access is not None and access.mode == "service":
        say(f"using the project's {access.description}")
    # eventlake works in UTC: Spark hands timestamps to Python in the process's local time zone
    os.environ["TZ"] = "UTC"
    time.tzset()
    # PySpark logs every failed query with its Java stack trace; the CLI prints one line instead
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder
    for key, value in spark_conf(settings, app_name, access).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@contextmanager
def owned_session(
    settings: Settings, app_name: str, spark: Any = None, say: Say = progress.say
) -> Iterator[Any]:
    """``spark`` when given (its owner stops it); otherwise a session of its own, built by
    :func:`spark_session` (saying "starting Spark ...") and stopped when the ``with`` block ends.

    For library entry points that take an optional session (tests and long-lived services pass
    theirs; a command builds one)."""
    if spark is not None:
        yield spark
        return
    say("starting Spark ...")
    session = spark_session(settings, app_name, say)
    try:
        yield session
    finally:
        session.stop()
