"""A real Spark standalone cluster for the tests: one master and two workers started from the
pyspark installation (``bin/spark-class``), bound to 127.0.0.1 on free ports, each worker with one
core and 1 GiB. Their environment has no PYSPARK_PYTHON and no cloud variables, as on another
machine: the executors run the project's Python because the eventlake driver says so. Started once
per test run, stopped (their process groups, executors included) at the end.

Also the lake the cluster tests sync into, as a fixture (:func:`lake_store`) so that the same tests
can run against a lake on object storage: a store gives each project its ``lake.root``, the
environment a sync needs for it, and a pyarrow filesystem to write the archive and read the result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import httpx
import pyarrow.fs as pafs
import pytest

from tests.catalog.servers import AWS_ENV, Moto, free_port, port_open

START_TIMEOUT = 90.0  # master and workers are up in ~6 s each on this machine
WORKERS = 2
WORKER_CORES = 1
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "768m"  # below the worker's 1g; Spark refuses executors under ~470 MB
DRIVER_ONLY = ("EVENTLAKE", "SPARK_", "PYSPARK_", "AWS_", "AZURE_")


def spark_home() -> Path:
    try:
        import pyspark
    except ImportError:
        pytest.skip("pyspark is not installed")
    return Path(pyspark.__file__).parent


def tail(path: Path, lines: int = 25) -> str:
    if not path.exists():
        return f"({path.name}: no log)"
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return f"--- {path.name}:\n" + "\n".join(text)


@dataclass
class Daemon:
    name: str
    process: subprocess.Popen
    log: Path

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM to the whole process group (spark-class, the JVM, a worker's executors), then
        SIGKILL if it is not gone in ``timeout`` seconds."""
        if self.process.poll() is None:
            _signal_group(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(self.process.pid, signal.SIGKILL)  # executors may outlive their worker's JVM
        if self.process.poll() is None:
            self.process.wait(10)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


@dataclass
class SparkCluster:
    """A standalone master at :attr:`url` and its workers, all on 127.0.0.1."""

    root: Path
    port: int
    ui_port: int
    daemons: list[Daemon] = field(default_factory=list)
    work_dirs: list[Path] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def state(self) -> dict[str, Any]:
        """The master's JSON status: workers, active and completed applications."""
        return httpx.get(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5).json()

    def conf(self) -> dict[str, str]:
        """The [spark.conf] an eventlake driver on this machine uses for this cluster: one core per
        executor, both workers' cores, and a driver the executors reach on 127.0.0.1."""
        return {
            "spark.executor.cores": str(WORKER_CORES),
            "spark.cores.max": str(WORKERS * WORKER_CORES),
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.sql.shuffle.partitions": "4",
        }

    def executor_dirs(self, app_id: str) -> list[Path]:
        """The executors' working directories of application ``app_id``, on every worker."""
        return sorted(p for work in self.work_dirs for p in (work / app_id).glob("*") if p.is_dir())

    def logs(self) -> str:
        return "\n".join(tail(d.log) for d in self.daemons)

    def credentials_file(self) -> Path:
        path = self.root / "aws-credentials"
        path.write_text("[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
        return path

    def start_daemon(self, name: str, main_class: str, *args: str) -> Daemon:
        home = spark_home()
        # as on another machine: none of the test run's settings, Spark variables or cloud credentials
        env = {k: v for k, v in os.environ.items() if not k.startswith(DRIVER_ONLY)}
        conf_dir = self.root / "conf"  # empty: no spark-defaults.conf or spark-env.sh from anywhere
        conf_dir.mkdir(exist_ok=True)
        env.update(
            # the node's own credentials (fakes for the test S3 server), in a file as an instance
            # profile would provide them: never from the driver
            AWS_SHARED_CREDENTIALS_FILE=str(self.credentials_file()),
            SPARK_HOME=str(home),
            SPARK_CONF_DIR=str(conf_dir),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_DAEMON_MEMORY="512m",
            SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        )
        # no PYSPARK_PYTHON: a worker would start the system python3 (no pyarrow, no eventlake); the
        # executors run the venv's Python because the driver names it (spark_conf), as on a cluster
        log = self.root / f"{name}.log"
        with open(log, "ab") as out:
            process = subprocess.Popen(
                [str(home / "bin" / "spark-class"), main_class, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.root,
                start_new_session=True,  # its own process group: stopped with everything it started
            )
        daemon = Daemon(name, process, log)
        self.daemons.append(daemon)
        return daemon

    def wait_until(self, check, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                if check():
                    return
            except (httpx.HTTPError, ValueError):
                pass
            for daemon in self.daemons:
                if daemon.process.poll() is not None:
                    pytest.fail(f"{daemon.name} exited with {daemon.process.returncode}:\n{self.logs()}")
            if time.monotonic() > deadline:
                pytest.fail(f"{what} not in {START_TIMEOUT:.0f} s:\n{self.logs()}")
            time.sleep(0.3)

    def alive_workers(self) -> int:
        return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")

    def stop(self) -> None:
        for daemon in reversed(self.daemons):  # workers (and their executors) first
            daemon.stop()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """Master plus two workers (1 core, 1 GiB each) on 127.0.0.1, for the whole test run."""
    root = tmp_path_factory.mktemp("spark cluster")
    cluster = SparkCluster(root, free_port(), free_port())
    try:
        cluster.start_daemon(
            "master", "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(cluster.port), "--webui-port", str(cluster.ui_port),
        )  # fmt: skip
        cluster.wait_until(lambda: port_open(cluster.port) and cluster.state() is not None, "master")
        for n in range(1, WORKERS + 1):
            work = root / f"worker{n}"
            work.mkdir()
            cluster.work_dirs.append(work)
            cluster.start_daemon(
                f"worker{n}", "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1", "--port", str(free_port()), "--webui-port", str(free_port()),
                "--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY, "--work-dir", str(work),
                cluster.url,
            )  # fmt: skip
        cluster.wait_until(lambda: cluster.alive_workers() == WORKERS, f"{WORKERS} workers registered")
        yield cluster
    finally:
        cluster.stop()


# -- the lake the cluster syncs into -----------------------------------------------------------


@dataclass
class LocalLakeStore:
    """Lakes in local directories. The same-machine workers share them with the driver, which a
    real cluster would not: there the lake is on object storage (a store of the same shape)."""

    base: Path
    filesystem: pafs.FileSystem = field(default_factory=pafs.LocalFileSystem)

    def root(self, name: str) -> str:
        """``lake.root`` of the lake called ``name``."""
        return str(self.base / name)

    def path(self, name: str, key: str = "") -> str:
        """Where ``key`` (relative to the lake root, with ``/``) is on :attr:`filesystem`."""
        return str(self.base / name / key) if key else str(self.base / name)

    def environment(self, name: str) -> dict[str, str]:
        """What a sync of the lake called ``name`` needs in its environment (endpoint, catalog)."""
        return {}

    def put(self, name: str, key: str, data: bytes) -> None:
        path = self.path(name, key)
        self.filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
        with self.filesystem.open_output_stream(path, compression=None) as out:  # bytes as given
            out.write(data)


@dataclass
class S3LakeStore(LocalLakeStore):
    """Lakes in a bucket of a moto server (S3 and Glue): the cluster's workers reach it with their
    own credentials (a shared credentials file in their environment, as a node's own chain), the
    driver names the endpoint (``lake.endpoint_url``) and registers the tables in Glue on moto
    (a Hive metastore would need hadoop-aws)."""

    endpoint: str = ""
    bucket: str = "eventlake-cluster"

    def root(self, name: str) -> str:
        return f"s3://{self.path(name)}"

    def path(self, name: str, key: str = "") -> str:
        folder = f"{self.bucket}/{self.base.name}/{name}"
        return f"{folder}/{key}" if key else folder

    def environment(self, name: str) -> dict[str, str]:
        # a Glue catalog of its own per lake (moto keeps one per region): each sync creates its tables
        region = "us-east-1" if name == "local" else "us-west-2"
        return {
            "EVENTLAKE__LAKE__ENDPOINT_URL": self.endpoint,
            "EVENTLAKE__CATALOG__KIND": "glue",
            "EVENTLAKE__CATALOG__REGION": region,
            "EVENTLAKE__CATALOG__ENDPOINT_URL": self.endpoint,
            **AWS_ENV,
        }

    def put(self, name: str, key: str, data: bytes) -> None:
        with self.filesystem.open_output_stream(self.path(name, key), compression=None) as out:
            out.write(data)


@pytest.fixture(scope="session")
def cluster_moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    server = Moto.start(tmp_path_factory.mktemp("cluster-moto") / "moto.log")
    boto3.client(
        "s3", endpoint_url=server.endpoint, region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing",
    ).create_bucket(Bucket=S3LakeStore.bucket)  # fmt: skip
    yield server
    server.stop()


@pytest.fixture(params=["local", "s3"])
def lake_store(request: pytest.FixtureRequest, tmp_path: Path) -> LocalLakeStore:
    """Where the cluster tests' lakes live: local folders (shared by the same-machine workers) and
    a bucket on S3 (moto), as on a real cluster."""
    if request.param == "local":
        return LocalLakeStore(tmp_path / "lakes")
    moto = request.getfixturevalue("cluster_moto")
    host = moto.endpoint.removeprefix("http://")
    filesystem = pafs.S3FileSystem(
        access_key="testing", secret_key="testing", region="us-east-1", endpoint_override=host, scheme="http"
    )
    return S3LakeStore(tmp_path / f"lakes-{uuid.uuid4().hex[:8]}", filesystem, moto.endpoint)
