"""One Trino server for the Trino tier: ``io.trino:trino-server`` as scripts/ensure-trino.sh unpacks it
into ``.cache/trino/`` (lib/ and the Hive plugin), run as one JVM that is coordinator and worker on
a free port of 127.0.0.1, with about 1 GB of heap and dynamic catalogs (``CREATE CATALOG``), so one
server reads every lake of the tier.

Trino 476 needs Java 24 or newer: :func:`trino_java` finds one (``EVENTLAKE_TRINO_JAVA_HOME``, then
``JAVA_HOME``, ``java`` on the PATH, then the JDKs in ``/usr/lib/jvm``)."""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.catalog.servers import free_port, missing, stop_process

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / ".cache" / "trino" / "trino-server-476"
JAVA_HOME_VARIABLE = "EVENTLAKE_TRINO_JAVA_HOME"
MIN_JAVA = 24
START_TIMEOUT = 180.0
INSTALL = "scripts/ensure-trino.sh"
ATHENA_CATALOG = "awsdatacatalog"  # the catalog Athena's views (and so eventlake's in Glue) name

SERVER_ZONE = "America/New_York"  # the test server's zone (UTC-5 in November): not UTC on purpose
JVM_OPTIONS = (  # Trino's recommended jvm.config, with a small heap
    "-Xmx1G",
    "-XX:+UseG1GC",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:-OmitStackTraceInFastThrow",
    "-XX:ReservedCodeCacheSize=256M",
    "-XX:+EnableDynamicAgentLoading",
    "-Djdk.attach.allowAttachSelf=true",
    "-Dfile.encoding=UTF-8",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--enable-native-access=ALL-UNNAMED",
    # a server whose zone is not UTC: what the lake holds must not depend on it
    f"-Duser.timezone={SERVER_ZONE}",
)


def java_major(java: str) -> int | None:
    try:
        result = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    found = re.search(r'version "(\d+)', result.stderr)
    return int(found.group(1)) if found else None


def trino_java() -> str | None:
    """A ``java`` of version 24 or newer, or None."""
    homes = [os.environ.get(JAVA_HOME_VARIABLE), os.environ.get("JAVA_HOME")]
    candidates = [str(Path(home) / "bin" / "java") for home in homes if home]
    if shutil.which("java"):
        candidates.append(str(shutil.which("java")))
    candidates += sorted(glob.glob("/usr/lib/jvm/*/bin/java"), reverse=True)
    if os.environ.get(JAVA_HOME_VARIABLE):  # named: that one or none
        candidates = candidates[:1]
    for java in candidates:
        major = java_major(java)
        if major is not None and major >= MIN_JAVA:
            return java
    return None


@dataclass
class Trino:
    """A running server and a DB-API connection factory."""

    port: int
    process: subprocess.Popen
    directory: Path
    log: Path
    started_seconds: float
    catalogs: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)

    @classmethod
    def start(cls, directory: Path) -> Trino:
        if not (SERVER / "lib").is_dir() or not (SERVER / ".unpacked").exists():
            missing("the Trino server (io.trino:trino-server:476)", INSTALL)
        java = trino_java()
        if java is None:
            message = (
                f"Trino 476 needs Java {MIN_JAVA} or newer and none was found ({JAVA_HOME_VARIABLE}, "
                f"JAVA_HOME, PATH, /usr/lib/jvm): install a JDK {MIN_JAVA}+ (e.g. Temurin 25, the package "
                f"temurin-25-jdk from packages.adoptium.net) and name it: {JAVA_HOME_VARIABLE}=/path/to/jdk"
            )
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        port = free_port()
        (directory / "etc").mkdir(parents=True, exist_ok=True)
        properties = {
            "coordinator": "true",
            "node-scheduler.include-coordinator": "true",
            "http-server.http.port": str(port),
            "discovery.uri": f"http://127.0.0.1:{port}",
            "node.environment": "eventlake_test",
            "node.id": f"eventlake-{uuid.uuid4().hex[:8]}",
            "node.internal-address": "127.0.0.1",
            "plugin.dir": str(SERVER / "plugin"),
            "catalog.management": "dynamic",
            "catalog.store": "memory",  # the catalogs live as long as the server
            "query.max-memory": "512MB",
            "query.max-memory-per-node": "512MB",
            "task.concurrency": "2",
        }
        config = directory / "etc" / "config.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
        (directory / "etc" / "log.properties").write_text("io.trino=INFO\n")
        log = directory / "server.log"  # Trino's log; the JVM's own output goes to stdout.log
        command = [java, *JVM_OPTIONS, "-cp", str(SERVER / "lib" / "*"), f"-Dconfig={config}",
                   f"-Dlog.levels-file={directory / 'etc' / 'log.properties'}", f"-Dlog.output-file={log}",
                   "io.trino.server.TrinoServer"]  # fmt: skip
        began = time.monotonic()
        with open(directory / "stdout.log", "ab") as out:
            process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=directory
            )
        server = cls(port, process, directory, log, 0.0)
        server._wait_started(began)
        server.started_seconds = time.monotonic() - began
        return server

    def _wait_started(self, began: float) -> None:
        while not self.log.exists() or "======== SERVER STARTED ========" not in self.log.read_text(
            errors="replace"
        ):
            if self.process.poll() is not None:
                pytest.fail(f"Trino exited with {self.process.returncode}: {self.tail()}")
            if time.monotonic() - began > START_TIMEOUT:
                stop_process(self.process)
                pytest.fail(f"Trino did not start in {START_TIMEOUT} s: {self.tail()}")
            time.sleep(0.5)

    def tail(self, lines: int = 60) -> str:
        """The end of the JVM's output and of Trino's log."""
        text = []
        for log in (self.directory / "stdout.log", self.log):
            if log.exists():
                text += [f"--- {log}", *log.read_text(errors="replace").splitlines()[-lines:]]
        return "\n".join(text)

    def connect(self, catalog: str | None = None, **session: Any):
        import trino

        return trino.dbapi.connect(
            host="127.0.0.1", port=self.port, user="eventlake-tests", catalog=catalog,
            session_properties=session or None,
        )  # fmt: skip

    def query(self, sql: str, catalog: str | None = None, **session: Any) -> tuple[list[tuple], dict]:
        """The rows of ``sql`` and the query's statistics (splits, rows and bytes read)."""
        connection = self.connect(catalog, **session)
        try:
            cursor = connection.cursor()
            cursor.execute(sql)
            rows = [tuple(row) for row in cursor.fetchall()]
            return rows, dict(cursor.stats)
        finally:
            connection.close()

    def rows(self, sql: str, catalog: str | None = None, **session: Any) -> list[tuple]:
        return self.query(sql, catalog, **session)[0]

    def create_catalog(self, name: str, properties: dict[str, str]) -> None:
        """``CREATE CATALOG name USING hive WITH (...)`` (dynamic catalogs: no restart)."""
        settings = ", ".join(f"\"{key}\" = '{value}'" for key, value in properties.items())
        self.rows(f"CREATE CATALOG {name} USING hive WITH ({settings})")
        self.catalogs[name] = properties

    def ensure_catalog(self, name: str, properties: dict[str, str]) -> None:
        """``name`` with ``properties``, created unless it exists with them."""
        if name not in self.catalogs:
            self.create_catalog(name, properties)
        assert self.catalogs[name] == properties, f"catalog {name} exists with other settings"

    def stop(self) -> None:
        stop_process(self.process, timeout=30)


# The lake's timestamps are instants (Parquet timestamps adjusted to UTC); Trino shows them in
# hive.parquet.time-zone, the server's JVM zone unless set: hours off on a server not in UTC
PARQUET_UTC = {"hive.parquet.time-zone": "UTC"}


def hive_metastore_catalog(uri: str) -> dict[str, str]:
    """A Trino catalog on a Hive metastore (Thrift) over a lake on a local disk (docs/querying.md)."""
    return {
        "hive.metastore.uri": uri,
        "fs.hadoop.enabled": "true",  # file: locations (Hadoop's local file system)
        "hive.hive-views.enabled": "true",  # Spark's views, translated (all but `users`)
        **PARQUET_UTC,
    }


def glue_catalog(endpoint: str, **extra: str) -> dict[str, str]:
    """A Trino catalog on Glue and S3, both at ``endpoint`` (moto; on AWS: no endpoints, no keys)."""
    return {
        "hive.metastore": "glue",
        "hive.metastore.glue.region": "us-east-1",
        "hive.metastore.glue.endpoint-url": endpoint,
        "hive.metastore.glue.aws-access-key": "testing",
        "hive.metastore.glue.aws-secret-key": "testing",
        "fs.native-s3.enabled": "true",
        "s3.region": "us-east-1",
        "s3.endpoint": endpoint,
        "s3.path-style-access": "true",
        "s3.aws-access-key": "testing",
        "s3.aws-secret-key": "testing",
        **PARQUET_UTC,
        **extra,
    }
