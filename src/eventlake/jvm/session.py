"""The one place a SparkSession is built: from settings, with the catalog's metastore wired in.

:func:`spark_conf` is also what ``eventlake thrift`` hands to ``spark-submit``, so the Thrift
server sees exactly the catalog an ``eventlake sql`` sees.

``[spark] master`` may be a cluster (``spark://host:7077``, ``yarn``, ``k8s://...``): the driver
stays in the eventlake process, the executors run on other machines. What they need is in
:func:`cluster_conf`: the Python to run (one with eventlake installed) and the object store's
endpoint; never the driver's credentials.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib import resources
from typing import TYPE_CHECKING, Any

from eventlake import progress, state_layout
from eventlake.config import CatalogKind, Settings
from eventlake.errors import DependencyError
from eventlake.jvm import class_archive
from eventlake.jvm.class_archive import ArchivePlan
from eventlake.jvm.connectors import connector_jars, s3a_properties
from eventlake.jvm.java import JAVA_HINT, java_executable
from eventlake.jvm.metastore.access import MetastoreAccess, client_access, private_conf_dir
from eventlake.progress import Say
from eventlake.schema.storage_formats import SCHEMA_FROM_METASTORE_PROPERTY, SERDES_WITH_METASTORE_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "EXECUTOR_ENVIRONMENT",
    "JAVA_HINT",
    "check_java",
    "cluster_conf",
    "executor_python",
    "is_local_master",
    "owned_session",
    "spark_conf",
    "spark_session",
]

# what the lake's storage reads from the environment besides credentials: where the object store is
# and which region. Copied to the executors of a cluster when set on the driver.
EXECUTOR_ENVIRONMENT = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AZURE_STORAGE_BLOB_ENDPOINT",
)
PYSPARK_PYTHON = "spark.pyspark.python"
DRIVER_OPTIONS = "spark.driver.extraJavaOptions"
# A command's driver lives for one run (a minute for a million messages), mostly in the metastore's
# and Spark's framework code: the optimising compiler (C2) compiles that code for the whole run and
# never pays back (a fifth of a 1,000,000-message sync's CPU; bench/README.md "The driver's JIT").
ONE_RUN_JIT = "-XX:TieredStopAtLevel=1"


def return_driver_heap(spark: Any) -> None:
    """A full collection in the driver's JVM, which gives the heap back to the system down to what
    is live: G1 grows the heap for a big run's parse and dedupe (Spark's sort and aggregation pages
    live on it) and keeps it, a large part of a sync's peak while the Python workers write (1,000,000
    messages: 1.14 GiB of RSS, 82 MiB live after; bench/README.md "Peak memory")."""
    spark.sparkContext._jvm.java.lang.System.gc()


def check_java() -> None:
    java_executable()


def log4j_config() -> str:
    return str(resources.files("eventlake.jvm").joinpath("log4j2.properties"))


def is_local_master(master: str) -> bool:
    """Whether ``master`` runs the executors inside the driver (``local``, ``local[4]``, ``local[*, 2]``)."""
    master = master.strip()
    return master == "local" or master.startswith("local[")


def executor_python(settings: Settings, environ: Mapping[str, str] | None = None) -> str:
    """The Python the executors run: ``spark.pyspark.python`` of ``[spark.conf]``, else the
    driver's ``PYSPARK_PYTHON``, else the driver's own interpreter (:data:`sys.executable`).

    The last default is right in local mode and wherever the executors have the driver's Python
    at the same path (a same-machine cluster, a Kubernetes image shared by driver and executors,
    a Databricks or EMR cluster whose nodes are set up alike). Otherwise name a Python with
    eventlake installed on every node, or ship a packed environment:
    ``spark.archives = "eventlake-env.tar.gz#env"`` with ``spark.pyspark.python = "./env/bin/python"``.
    """
    environ = os.environ if environ is None else environ
    configured = dict(settings.spark.conf).get(PYSPARK_PYTHON, "").strip()
    return configured or environ.get("PYSPARK_PYTHON", "").strip() or sys.executable


def cluster_conf(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the executors of a cluster master need (nothing for ``local[...]``): the Python to run
    (:func:`executor_python`) and the storage environment of :data:`EXECUTOR_ENVIRONMENT` (the
    object store's endpoint and region) that is set on the driver, as ``spark.executorEnv.*``.

    Credentials are never copied: not ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/
    ``AWS_SESSION_TOKEN``, not ``AZURE_STORAGE_KEY``/``AZURE_STORAGE_CONNECTION_STRING``/SAS tokens.
    Spark conf is shown in the Spark UI, the event log and the master's pages. Executors use their
    own credential chain: an instance profile or IRSA role, a managed identity, or the
    environment of the worker/executor image (``spark-env.sh``, a Kubernetes secret).
    """
    if is_local_master(settings.spark.master):
        return {}
    environ = os.environ if environ is None else environ
    python = executor_python(settings, environ)
    conf = {PYSPARK_PYTHON: python, "spark.executorEnv.PYSPARK_PYTHON": python}
    for name in EXECUTOR_ENVIRONMENT:
        value = environ.get(name, "").strip()
        if value:
            conf[f"spark.executorEnv.{name}"] = value
    return conf


def spark_conf(
    settings: Settings,
    app_name: str,
    access: MetastoreAccess | None,
    environ: Mapping[str, str] | None = None,
    *,
    one_run: bool = False,
) -> dict[str, str]:
    """Every Spark setting of an eventlake session; ``access`` None: no Hive catalog (``glue``);
    ``one_run``: the session of a command that runs once and exits (its driver compiles with C1
    only, :data:`ONE_RUN_JIT`), not a service's (``up``, the Thrift server, ``eventlake sql``).

    The embedded Derby metastore and the warehouse live in ``[lake] state_dir``, so nothing is
    written into the working directory. On a cluster master, :func:`cluster_conf` adds what the
    executors need (from ``environ``, default :data:`os.environ`); ``[spark.conf]`` comes last
    and overrides any of it.

    The jars of ``[spark] jars_dir`` go on the driver's class path (and, on a cluster, to the
    executors through ``spark.jars``), with the ``fs.s3a.*`` properties of the lake's bucket
    (:mod:`eventlake.jvm.connectors`): Spark then reads a lake on S3 itself.
    """
    state = settings.lake.state_dir
    java_options = " ".join(
        _java_property(name, value)
        for name, value in (
            ("derby.system.home", state),
            ("derby.stream.error.file", state_layout.derby_log(state)),
            ("log4j2.configurationFile", log4j_config()),
        )
    )
    if one_run:
        java_options += " " + _java_option(ONE_RUN_JIT)
    conf = {
        "spark.master": settings.spark.master,
        "spark.app.name": app_name,
        "spark.driver.memory": settings.spark.driver_memory,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.catalogImplementation": "in-memory" if access is None else "hive",
        "spark.sql.warehouse.dir": str(state_layout.warehouse_dir(state)),
        DRIVER_OPTIONS: java_options,
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
    conf.update(cluster_conf(settings, environ))
    for key, value in s3a_properties(settings, environ).items():
        conf[f"spark.hadoop.{key}"] = value
    if access is not None:
        for key, value in access.properties.items():
            conf[f"spark.hadoop.{key}"] = value
        # the reports table's JSON SerDe is not on Spark's class path: its columns are the metastore's
        conf[f"spark.hadoop.{SCHEMA_FROM_METASTORE_PROPERTY}"] = SERDES_WITH_METASTORE_SCHEMA
    user_conf = dict(settings.spark.conf)
    classpath = list(access.classpath) if access else []
    private = private_conf_dir(state, access) if access else None
    if private is not None:  # the password, in a hive-site.xml only we can read: not on a command line
        classpath.insert(0, str(private))
    jars = connector_jars(settings)
    classpath += jars
    if jars and not is_local_master(settings.spark.master):  # the executors load them from the driver
        conf["spark.jars"] = ",".join(filter(None, [*jars, user_conf.pop("spark.jars", "")]))
    classpath += filter(None, [user_conf.pop("spark.driver.extraClassPath", "")])
    if classpath:  # a JDBC driver must be on the driver's class path: spark.jars is too late for it
        conf["spark.driver.extraClassPath"] = os.pathsep.join(classpath)
    conf.update(user_conf)
    return conf


def _java_property(name: str, value: object) -> str:
    """``-Dname=value`` quoted for spark-submit, which splits extraJavaOptions on white space."""
    return _java_option(f"-D{name}={value}")


def _java_option(text: str) -> str:
    """One JVM option quoted for spark-submit's split of extraJavaOptions."""
    if "'" not in text:
        return f"'{text}'"
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def spark_session(
    settings: Settings, app_name: str = "eventlake", say: Say = progress.say, *, one_run: bool = False
) -> SparkSession:
    """A SparkSession on ``[spark] master`` with the metastore of ``[catalog]`` (``one_run``: see
    :func:`spark_conf`).

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
    state_layout.log_dir(state).mkdir(parents=True, exist_ok=True)
    access = None if settings.catalog.kind == CatalogKind.GLUE else client_access(settings, say)
    if access is not None and access.mode == "service":
        say(f"using the project's {access.description}")
    # eventlake works in UTC: Spark hands timestamps to Python in the process's local time zone
    os.environ["TZ"] = "UTC"
    time.tzset()
    # PySpark logs every failed query with its Java stack trace; the CLI prints one line instead
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    if is_local_master(settings.spark.master):
        # in local mode nobody connects from elsewhere; on a cluster the executors must reach the
        # driver, on the address Spark picks or on spark.driver.host / spark.driver.bindAddress
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    conf = spark_conf(settings, app_name, access, one_run=one_run)
    archive = _class_archive(settings, conf)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    # PySpark takes the Python its workers run from PYSPARK_PYTHON when the context starts (not
    # from spark.pyspark.python), and sends that path to every executor
    with _environment(PYSPARK_PYTHON=executor_python(settings)):
        session = builder.getOrCreate()
    if archive is not None:
        gateway = session.sparkContext._gateway
        archive.started(getattr(gateway, "proc", None))
    session.sparkContext.setLogLevel("ERROR")
    return session


def _class_archive(settings: Settings, conf: dict[str, str]) -> ArchivePlan | None:
    """The class-data archive's options added to ``conf``'s driver options (:mod:`class_archive`),
    when this process starts a driver JVM (not when PySpark's gateway already runs one)."""
    from pyspark import SparkContext

    if SparkContext._gateway is not None:
        return None
    archive = class_archive.plan(settings, conf.get("spark.driver.extraClassPath", ""))
    if archive is not None:
        options = " ".join(_java_option(option) for option in archive.java_options())
        conf[DRIVER_OPTIONS] = f"{conf.get(DRIVER_OPTIONS, '')} {options}".strip()
    return archive


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    """``os.environ`` with ``values`` for the duration of the block."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def owned_session(
    settings: Settings, app_name: str, spark: Any = None, say: Say = progress.say, *, one_run: bool = False
) -> Iterator[Any]:
    """``spark`` when given (its owner stops it); otherwise a session of its own, built by
    :func:`spark_session` (saying "starting Spark ...") and stopped when the ``with`` block ends.

    For library entry points that take an optional session (tests and long-lived services pass
    theirs; a command builds one)."""
    if spark is not None:
        yield spark
        return
    say("starting Spark ...")
    session = spark_session(settings, app_name, say, one_run=one_run)
    try:
        yield session
    finally:
        session.stop()
