"""How a process reaches the metastore, without starting a JVM: the Spark settings of each mode,
the JDBC driver, and the discovery of the project's metastore service."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from eventlake import state_layout
from eventlake.config import CatalogSettings, LakeSettings, Secret, Settings
from eventlake.errors import DependencyError
from eventlake.flock import LockFile
from eventlake.jvm.metastore import derby, schema
from eventlake.jvm.metastore.access import MetastoreAccess, client_access, database_access
from eventlake.jvm.metastore.derby import acquire_embedded, embedded_lock, running_service, write_service_file
from eventlake.jvm.metastore.jdbc import connection_url
from eventlake.jvm.session import spark_conf
from eventlake.progress import quiet
from eventlake.storage import local


def settings(tmp_path: Path, **catalog: object) -> Settings:
    return Settings(
        path=None,
        lake=LakeSettings(root=tmp_path / "lake", state_dir=tmp_path / "state"),
        catalog=CatalogSettings(**catalog),  # type: ignore[arg-type]
    )


def test_a_metastore_uri_is_handed_to_spark(tmp_path: Path) -> None:
    access = client_access(settings(tmp_path, uri="thrift://hms:9083"))
    conf = spark_conf(settings(tmp_path), "app", access)
    assert conf["spark.hadoop.hive.metastore.uris"] == "thrift://hms:9083"
    assert conf["spark.sql.catalogImplementation"] == "hive"
    assert not any("ConnectionURL" in key for key in conf)


def test_a_jdbc_metastore_puts_its_driver_on_the_driver_class_path(tmp_path: Path) -> None:
    jar = tmp_path / "driver.jar"
    jar.write_bytes(b"")
    configured = settings(
        tmp_path,
        jdbc_url="jdbc:postgresql://db:5432/hms",
        user="hive",
        password=Secret("pw"),
        jdbc_driver_jar=str(jar),
    )
    access = database_access(configured)
    conf = spark_conf(configured, "app", access)
    private, driver = conf["spark.driver.extraClassPath"].split(os.pathsep)
    assert driver == str(jar)
    assert conf["spark.hadoop.javax.jdo.option.ConnectionDriverName"] == "org.postgresql.Driver"
    assert conf["spark.hadoop.datanucleus.schema.autoCreateAll"] == "false"  # SchemaTool creates it
    # the password never goes on a command line: Spark reads it from a private hive-site.xml
    assert "pw" not in {v for k, v in conf.items() if k != "spark.driver.extraClassPath"}
    site = Path(private) / "hive-site.xml"
    assert "<value>pw</value>" in site.read_text() and site.stat().st_mode & 0o077 == 0
    assert access.description == "metastore database jdbc:postgresql://db:5432/hms"


def test_a_missing_driver_says_what_to_install(tmp_path: Path) -> None:
    configured = settings(
        tmp_path, jdbc_url="jdbc:postgresql://db/hms", jdbc_driver_jar=str(tmp_path / "no.jar")
    )
    with pytest.raises(DependencyError, match="catalog.jdbc_driver_jar"):
        database_access(configured)


def test_mariadb_reports_itself_as_mysql_to_hive() -> None:
    assert connection_url(CatalogSettings(jdbc_url="jdbc:mariadb://db/hms")).endswith(
        "?useMysqlMetadata=true"
    )
    assert connection_url(CatalogSettings(jdbc_url="jdbc:mysql://db/hms?ssl=true")).endswith(
        "?ssl=true&useMysqlMetadata=true"
    )
    assert connection_url(CatalogSettings(jdbc_url="jdbc:postgresql://db/hms")) == "jdbc:postgresql://db/hms"


def test_glue_sessions_have_no_hive_catalog(tmp_path: Path) -> None:
    conf = spark_conf(settings(tmp_path, kind="glue", region="us-east-1"), "app", None)
    assert conf["spark.sql.catalogImplementation"] == "in-memory"
    assert not any(key.startswith("spark.hadoop.") for key in conf)


def test_processes_find_the_running_project_service(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert running_service(state) is None
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        write_service_file(state, {"uri": f"thrift://127.0.0.1:{port}", "port": port, "pid": os.getpid()})
        assert acquire_embedded(state) == f"thrift://127.0.0.1:{port}"  # no lock taken
        access = client_access(settings(tmp_path))
        assert access == MetastoreAccess("service", {"hive.metastore.uris": f"thrift://127.0.0.1:{port}"})
    assert running_service(state) is None  # nothing listens any more: a stale file is ignored


def test_without_a_service_the_embedded_derby_is_used(tmp_path: Path) -> None:
    state = tmp_path / "state"
    try:
        access = client_access(settings(tmp_path))
        assert access.mode == "derby"
        assert access.properties["javax.jdo.option.ConnectionURL"].startswith("jdbc:derby:;databaseName=")
        assert state in derby._embedded_locks  # held until the process exits
    finally:
        held = derby._embedded_locks.pop(state, None)
        if held is not None:
            held.close()


def test_a_waiting_process_switches_to_a_service_that_starts(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with LockFile(state_layout.metastore_lock_file(state)) as holder, socket.socket() as listener:
        assert holder.try_lock()  # another process has Derby open
        holder.claim()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        uri = f"thrift://127.0.0.1:{port}"
        info = {"uri": uri, "port": port, "pid": os.getpid()}
        threading.Timer(0.3, write_service_file, (state, info)).start()
        said: list[str] = []
        assert acquire_embedded(state, said.append) == uri
    assert state not in derby._embedded_locks
    waiting = f"waiting for another eventlake process (pid {os.getpid()}) using the embedded metastore ..."
    assert said == [waiting]


def test_a_service_on_derby_holds_the_lock_while_it_runs(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with embedded_lock(state, quiet) as uri:
        assert uri is None
        with LockFile(state_layout.metastore_lock_file(state)) as other:
            assert not other.try_lock() and other.holder() == str(os.getpid())
    with LockFile(state_layout.metastore_lock_file(state)) as other:
        assert other.try_lock()


def test_the_schema_marker_is_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The marker that says the schema exists is a state file: it goes through the durable writer
    (temp file, fsync, rename), so a crash never leaves a torn or unsynced one."""
    jar = tmp_path / "driver.jar"
    jar.write_bytes(b"")
    configured = settings(
        tmp_path,
        jdbc_url="jdbc:postgresql://db:5432/hms?ssl=true",
        user="hive",
        password=Secret("pw"),
        jdbc_driver_jar=str(jar),
    )
    runs: list[str] = []
    monkeypatch.setattr(schema, "run_schema_tool", lambda s, properties, jar: runs.append(jar))
    written: list[Path] = []

    def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
        written.append(path)
        local.write_atomic(path, data, mode)

    monkeypatch.setattr(schema, "write_atomic", write_atomic)
    said: list[str] = []
    schema.ensure_schema(configured, said.append)
    schema.ensure_schema(configured, said.append)  # the marker says it is done
    assert runs == [str(jar)]
    assert said == ["creating the metastore schema in jdbc:postgresql://db:5432/hms (first use) ..."]
    [marker] = written
    assert marker.parent == state_layout.metastore_state_dir(tmp_path / "state")
    assert marker.read_text() == "jdbc:postgresql://db:5432/hms\n"
    assert [p.name for p in marker.parent.iterdir()] == [marker.name]  # no temp file left
