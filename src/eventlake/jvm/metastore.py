"""Where the Hive metastore is, and how a process reaches it (no JVM is started here).

``[catalog]`` (kind ``hive``) picks one of four modes:

- ``uri``: a running metastore service (``thrift://host:9083``): Spark connects with
  ``hive.metastore.uris``.
- ``jdbc``: the metastore's own PostgreSQL or MariaDB/MySQL database: every process opens its own
  connections, so any number share it. The JDBC driver jar goes on the driver's class path; the
  schema is created on first use with DataNucleus SchemaTool (``autoCreateAll`` deadlocks on
  PostgreSQL).
- ``derby`` (default): embedded Derby in ``state_dir``. Derby admits one JVM, so while a project's
  metastore service runs (``eventlake up``, ``eventlake thrift`` or ``eventlake metastore`` start
  one, see :mod:`eventlake.jvm.service`) every eventlake process of the project connects to it
  through the thrift URI it published in ``state_dir/metastore/service.json`` (mode ``service``);
  with no service running, processes open Derby themselves and take turns through a lock.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from eventlake import layout, progress
from eventlake.config import CatalogSettings, Settings
from eventlake.config.jdbc import JDBC_DRIVERS, JdbcDriver
from eventlake.errors import DependencyError, EventLakeError, PermissionsError
from eventlake.flock import LockFile, exclusive
from eventlake.progress import Say
from eventlake.storage.local import write_atomic

JAVA_HINT = "eventlake needs Java 17: apt-get install openjdk-17-jre-headless (or set JAVA_HOME)"

PASSWORD_PROPERTY = "javax.jdo.option.ConnectionPassword"
# how long a client waits for a lock or a starting service before it says so again
POLL_SECONDS = 0.5


class MetastoreError(EventLakeError):
    """The metastore could not be reached, created or started."""


# -- Java and the wheel's jars --------------------------------------------------------------------


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.exists(os.path.join(java_home, "bin", "java")):
        return os.path.join(java_home, "bin", "java")
    found = shutil.which("java")
    if found is None:
        raise DependencyError(JAVA_HINT)
    return found


def pyspark_home() -> Path:
    """The installed pyspark package: its ``jars/`` hold the Hive metastore, Derby and DataNucleus."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise DependencyError("pyspark is not installed: pip install 'eventlake[spark]'")
    return Path(spec.origin).parent


# -- properties of each mode ----------------------------------------------------------------------


@dataclass(frozen=True)
class MetastoreAccess:
    """How a Spark process (or a metastore service) opens the metastore."""

    mode: str  # derby | service | jdbc | uri
    properties: dict[str, str]  # Hive/Hadoop properties (spark.hadoop.* in Spark, hive-site.xml)
    classpath: tuple[str, ...] = ()  # extra jars for the driver (the JDBC driver)
    # properties that must not show on a command line (the database password): Spark reads them
    # from a private hive-site.xml on its class path (see private_conf_dir)
    secrets: dict[str, str] = field(default_factory=dict)

    @property
    def description(self) -> str:
        if self.mode in ("service", "uri"):
            return f"metastore service {self.properties['hive.metastore.uris']}"
        if self.mode == "jdbc":
            return f"metastore database {_redact(self.properties['javax.jdo.option.ConnectionURL'])}"
        return "embedded Derby metastore"


def _redact(url: str) -> str:
    """A JDBC URL without its query string (which may carry a password)."""
    return url.split("?", 1)[0]


def hive_site(properties: dict[str, str]) -> str:
    """A hive-site.xml with these properties."""
    items = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
        for k, v in sorted(properties.items())
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{items}</configuration>\n'


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (it may hold a password), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomic(path, text.encode(), mode=0o600)


def private_conf_dir(state: Path, access: MetastoreAccess) -> Path | None:
    """A directory with a private hive-site.xml holding ``access.secrets``, for the driver's class
    path (Spark loads hive-site.xml from there), or None when there is no secret."""
    if not access.secrets:
        return None
    folder = layout.metastore_client_conf_dir(state)
    write_private(folder / "hive-site.xml", hive_site(access.secrets))
    return folder


def jdbc_scheme(url: str) -> str:
    return url.split(":", 2)[1] if url.count(":") >= 2 else ""


def jdbc_driver(catalog: CatalogSettings) -> tuple[str, str]:
    """``(driver class, jar)`` for ``catalog.jdbc_url``; the jar must exist."""
    scheme = jdbc_scheme(catalog.jdbc_url)
    default_class, default_jar, package = JDBC_DRIVERS.get(scheme, JdbcDriver("", "", ""))
    driver_class = catalog.jdbc_driver_class or default_class
    jar = catalog.jdbc_driver_jar or default_jar
    if not Path(jar).is_file():
        where = "catalog.jdbc_driver_jar" if catalog.jdbc_driver_jar else f"Debian's {package}"
        raise DependencyError(
            f"the JDBC driver for jdbc:{scheme}: is missing: no {jar} ({where}); "
            + (f"apt-get install {package}, or " if package else "")
            + "set catalog.jdbc_driver_jar"
        )
    return driver_class, jar


def connection_url(catalog: CatalogSettings) -> str:
    """The JDBC URL as Hive uses it. With the MariaDB driver, ``useMysqlMetadata=true`` makes the
    server report itself as MySQL, which DataNucleus and Hive need to pick their MySQL dialect."""
    url = catalog.jdbc_url
    known = JDBC_DRIVERS.get(jdbc_scheme(url))
    driver_class = catalog.jdbc_driver_class or (known.driver_class if known else "")
    if driver_class == "org.mariadb.jdbc.Driver" and "usemysqlmetadata" not in url.lower():
        url += ("&" if "?" in url else "?") + "useMysqlMetadata=true"
    return url


def jdbc_properties(catalog: CatalogSettings) -> dict[str, str]:
    driver_class, _ = jdbc_driver(catalog)
    return {
        "javax.jdo.option.ConnectionURL": connection_url(catalog),
        "javax.jdo.option.ConnectionDriverName": driver_class,
        "javax.jdo.option.ConnectionUserName": catalog.user,
        "javax.jdo.option.ConnectionPassword": catalog.password.reveal(),
        "hive.metastore.schema.verification": "false",
        # `eventlake schema set-type` changes a type on purpose and rewrites the files itself
        "hive.metastore.disallow.incompatible.col.type.changes": "false",
        "datanucleus.schema.autoCreateAll": "false",  # SchemaTool creates it (see ensure_schema)
        "datanucleus.identifierFactory": "datanucleus1",
        "datanucleus.rdbms.useLegacyNativeValueStrategy": "true",
    }


def derby_properties(state: Path) -> dict[str, str]:
    return {
        "javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={layout.metastore_dir(state)};create=true"
        ),
        "hive.metastore.schema.verification": "false",
        "hive.metastore.disallow.incompatible.col.type.changes": "false",  # see jdbc_properties
        "datanucleus.schema.autoCreateAll": "true",
    }


def database_access(settings: Settings) -> MetastoreAccess:
    """The metastore database itself: what a metastore service (or an embedded client) opens."""
    catalog = settings.catalog
    if catalog.jdbc_url:
        _, jar = jdbc_driver(catalog)
        properties = jdbc_properties(catalog)
        secrets = {PASSWORD_PROPERTY: properties.pop(PASSWORD_PROPERTY)}
        return MetastoreAccess("jdbc", properties, (jar,), secrets)
    return MetastoreAccess("derby", derby_properties(settings.lake.state_dir))


def client_access(settings: Settings, say: Say = progress.say) -> MetastoreAccess:
    """How this process's Spark session reaches the metastore (waits for the embedded Derby's lock
    when neither a service nor a database is configured and no project service runs)."""
    catalog = settings.catalog
    if catalog.uri:
        return MetastoreAccess("uri", {"hive.metastore.uris": catalog.uri})
    if catalog.jdbc_url:
        ensure_schema(settings, say)
        return database_access(settings)
    state = settings.lake.state_dir
    uri = acquire_embedded(state, say)
    if uri is not None:
        return MetastoreAccess("service", {"hive.metastore.uris": uri})
    return database_access(settings)


# -- the embedded Derby: a project service, or one process at a time -------------------------------

# per state dir, held until the process exits (the kernel releases them, also after a crash)
_embedded_locks: dict[Path, LockFile] = {}


def running_service(state: Path) -> dict[str, Any] | None:
    """The project's metastore service, if one is running and accepts connections."""
    try:
        info = json.loads(layout.metastore_service_file(state).read_text())
        port, pid = int(info["port"]), int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    if not port_open(port):
        return None
    return info


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def _lock_or_service(state: Path, say: Say, waiting: str) -> tuple[str | None, LockFile | None]:
    """The URI of the project's service when one runs (nothing locked), else the embedded Derby's
    lock, held. Waits while another process has Derby open (saying ``waiting`` once, ``{holder}``:
    its pid), and switches to a service that starts meanwhile."""
    lock = LockFile(layout.metastore_lock_file(state))
    told = False
    try:
        while True:
            info = running_service(state)
            if info is not None:
                lock.close()
                return str(info["uri"]), None
            if lock.try_lock():
                lock.claim()
                return None, lock
            if not told:
                say(waiting.format(holder=lock.holder() or "?"))
                told = True
            time.sleep(POLL_SECONDS)
    except BaseException:
        lock.close()
        raise


def acquire_embedded(state: Path, say: Say = progress.say) -> str | None:
    """The project service's URI when one runs; otherwise the embedded Derby's lock, held for the
    life of this process (returns None). Waits while another process has Derby open, and switches
    to a service that starts meanwhile."""
    if state in _embedded_locks:
        return None
    waiting = "waiting for another eventlake process (pid {holder}) using the embedded metastore ..."
    uri, lock = _lock_or_service(state, say, waiting)
    if lock is not None:
        _embedded_locks[state] = lock
    return uri


@contextmanager
def embedded_lock(state: Path, say: Say = progress.say) -> Iterator[str | None]:
    """For a metastore service on Derby: the lock (yields None), or the URI of a service that is
    already running (yields it; nothing is locked). Released on exit."""
    waiting = "waiting for the eventlake process using the embedded metastore to finish ..."
    uri, lock = _lock_or_service(state, say, waiting)
    try:
        yield uri
    finally:
        if lock is not None:
            lock.close()


def write_service_file(state: Path, info: dict[str, Any]) -> None:
    path = layout.metastore_service_file(state)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(info).encode())


def remove_service_file(state: Path, pid: int) -> None:
    """Remove the service file if it still names the service ``pid``."""
    path = layout.metastore_service_file(state)
    try:
        if int(json.loads(path.read_text())["pid"]) == pid:
            path.unlink()
    except (OSError, ValueError, KeyError, TypeError):
        pass


# -- the metastore schema in a JDBC database ------------------------------------------------------


def ensure_schema(settings: Settings, say: Say = progress.say) -> None:
    """Create the Hive metastore tables in ``catalog.jdbc_url`` once (DataNucleus SchemaTool with the
    ``package.jdo`` of the wheel's hive-metastore jar; existing tables are kept). A marker in
    ``state_dir`` remembers that it was done for this URL and user."""
    catalog = settings.catalog
    state = settings.lake.state_dir
    digest = hashlib.sha256(f"{catalog.jdbc_url}\n{catalog.user}".encode()).hexdigest()[:16]
    marker = layout.metastore_schema_marker(state, digest)
    if marker.exists():
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(layout.metastore_schema_lock_file(state)):
        if marker.exists():
            return
        say(f"creating the metastore schema in {_redact(catalog.jdbc_url)} (first use) ...")
        properties = jdbc_properties(catalog)
        try:
            run_schema_tool(settings, properties, jdbc_driver(catalog)[1])
        except MetastoreError:  # another machine may have been creating it at the same time
            run_schema_tool(settings, properties, jdbc_driver(catalog)[1])
        if properties["javax.jdo.option.ConnectionDriverName"] == "org.mariadb.jdbc.Driver":
            run_sql(settings, properties, jdbc_driver(catalog)[1], MYSQL_CLEANUP_TABLES)
        write_atomic(marker, (_redact(catalog.jdbc_url) + "\n").encode())


def run_schema_tool(settings: Settings, properties: dict[str, str], driver_jar: str) -> None:
    state = settings.lake.state_dir
    folder = layout.metastore_state_dir(state)
    # has the password: owner-only
    props = layout.metastore_temp_file(state, "schematool", os.getpid(), ".properties")
    fd = os.open(props, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        for key in (
            "javax.jdo.option.ConnectionURL",
            "javax.jdo.option.ConnectionDriverName",
            "javax.jdo.option.ConnectionUserName",
            "javax.jdo.option.ConnectionPassword",
            "datanucleus.identifierFactory",
            "datanucleus.rdbms.useLegacyNativeValueStrategy",
        ):
            out.write(f"{key}={_escape_property(properties[key])}\n")
    classpath = f"{pyspark_home() / 'jars'}/*:{driver_jar}"
    command = [
        java_executable(),
        "-cp",
        classpath,
        "org.datanucleus.store.schema.SchemaTool",
        "-create",
        "-api",
        "JDO",
        "-props",
        str(props),
        "package.jdo",  # found in hive-metastore-2.3.x.jar on the class path
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=folder)
    finally:
        props.unlink(missing_ok=True)
    if result.returncode != 0:
        raise database_error(result.stdout + result.stderr, properties["javax.jdo.option.ConnectionURL"])


# Hive's DROP DATABASE deletes the database's rows from its ACID bookkeeping tables, which the
# JDO schema does not include; PostgreSQL's "does not exist" answer is tolerated by Hive, MySQL's
# "doesn't exist" is not. eventlake never uses Hive ACID: these are just enough for that cleanup.
MYSQL_CLEANUP_TABLES = """\
CREATE TABLE IF NOT EXISTS TXN_COMPONENTS (TC_TXNID bigint NOT NULL, TC_DATABASE varchar(128) NOT NULL,
  TC_TABLE varchar(128), TC_PARTITION varchar(767), TC_OPERATION_TYPE char(1) NOT NULL);
CREATE TABLE IF NOT EXISTS COMPLETED_TXN_COMPONENTS (CTC_TXNID bigint NOT NULL,
  CTC_DATABASE varchar(128) NOT NULL, CTC_TABLE varchar(256), CTC_PARTITION varchar(767));
CREATE TABLE IF NOT EXISTS COMPACTION_QUEUE (CQ_ID bigint PRIMARY KEY, CQ_DATABASE varchar(128) NOT NULL,
  CQ_TABLE varchar(128) NOT NULL, CQ_PARTITION varchar(767), CQ_STATE char(1) NOT NULL,
  CQ_TYPE char(1) NOT NULL);
CREATE TABLE IF NOT EXISTS COMPLETED_COMPACTIONS (CC_ID bigint PRIMARY KEY, CC_DATABASE varchar(128) NOT NULL,
  CC_TABLE varchar(128) NOT NULL, CC_PARTITION varchar(767), CC_STATE char(1) NOT NULL,
  CC_TYPE char(1) NOT NULL);
"""


def run_sql(settings: Settings, properties: dict[str, str], driver_jar: str, script: str) -> None:
    """Run SQL statements on the metastore database with the wheel's BeeLine as a JDBC client."""
    state = settings.lake.state_dir
    folder = layout.metastore_state_dir(state)
    sql_file = layout.metastore_temp_file(state, "schema", os.getpid(), ".sql")
    sql_file.write_text(script)
    password_file = layout.metastore_temp_file(state, "schema", os.getpid(), ".pw")
    fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(properties["javax.jdo.option.ConnectionPassword"])
    command = [
        java_executable(),
        "-cp",
        f"{pyspark_home() / 'jars'}/*:{driver_jar}",
        "org.apache.hive.beeline.BeeLine",
        "-u",
        properties["javax.jdo.option.ConnectionURL"],
        "-d",
        properties["javax.jdo.option.ConnectionDriverName"],
        "-n",
        properties["javax.jdo.option.ConnectionUserName"],
        "-w",
        str(password_file),
        "--silent=true",
        "-f",
        str(sql_file),
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=folder)
    finally:
        sql_file.unlink(missing_ok=True)
        password_file.unlink(missing_ok=True)
    if result.returncode != 0:
        raise database_error(result.stdout + result.stderr, properties["javax.jdo.option.ConnectionURL"])


def _escape_property(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\:").replace("=", "\\=")


def database_error(output: str, url: str) -> EventLakeError:
    """One line from a Java tool's failure: the innermost cause."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    causes = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Caused by:")]
    errors = [line.split(" ERROR ", 1)[1] for line in lines if " ERROR " in line]
    detail = (causes or errors or lines or ["no output"])[-1 if causes else 0]
    message = f"the metastore database {_redact(url)} failed: {detail[:300]}"
    lowered = output.lower()
    if "password authentication failed" in lowered or "access denied" in lowered:
        return PermissionsError(message + " (check catalog.user and catalog.password)")
    return MetastoreError(message)
