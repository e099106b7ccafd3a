"""The Hive metastore's tables in a JDBC database, created once with the wheel's DataNucleus
SchemaTool (and BeeLine for the few tables MySQL needs besides)."""

from __future__ import annotations

import hashlib
import os
import subprocess

from eventlake import progress, state_layout
from eventlake.config import Settings
from eventlake.errors import EventLakeError, PermissionsError
from eventlake.flock import exclusive
from eventlake.jvm.errors import MetastoreError
from eventlake.jvm.java import java_executable, pyspark_home
from eventlake.jvm.metastore.jdbc import jdbc_driver, jdbc_properties, redact
from eventlake.progress import Say
from eventlake.storage.local import write_atomic


def ensure_schema(settings: Settings, say: Say = progress.say) -> None:
    """Create the Hive metastore tables in ``catalog.jdbc_url`` once (DataNucleus SchemaTool with the
    ``package.jdo`` of the wheel's hive-metastore jar; existing tables are kept). A marker in
    ``state_dir`` remembers that it was done for this URL and user."""
    catalog = settings.catalog
    state = settings.lake.state_dir
    digest = hashlib.sha256(f"{catalog.jdbc_url}\n{catalog.user}".encode()).hexdigest()[:16]
    marker = state_layout.metastore_schema_marker(state, digest)
    if marker.exists():
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(state_layout.metastore_schema_lock_file(state)):
        if marker.exists():
            return
        say(f"creating the metastore schema in {redact(catalog.jdbc_url)} (first use) ...")
        properties = jdbc_properties(catalog)
        try:
            run_schema_tool(settings, properties, jdbc_driver(catalog)[1])
        except MetastoreError:  # another machine may have been creating it at the same time
            run_schema_tool(settings, properties, jdbc_driver(catalog)[1])
        if properties["javax.jdo.option.ConnectionDriverName"] == "org.mariadb.jdbc.Driver":
            run_sql(settings, properties, jdbc_driver(catalog)[1], MYSQL_CLEANUP_TABLES)
        write_atomic(marker, (redact(catalog.jdbc_url) + "\n").encode())


def run_schema_tool(settings: Settings, properties: dict[str, str], driver_jar: str) -> None:
    state = settings.lake.state_dir
    folder = state_layout.metastore_state_dir(state)
    # has the password: owner-only
    props = state_layout.metastore_temp_file(state, "schematool", os.getpid(), ".properties")
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
    folder = state_layout.metastore_state_dir(state)
    sql_file = state_layout.metastore_temp_file(state, "schema", os.getpid(), ".sql")
    sql_file.write_text(script)
    password_file = state_layout.metastore_temp_file(state, "schema", os.getpid(), ".pw")
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
    message = f"the metastore database {redact(url)} failed: {detail[:300]}"
    lowered = output.lower()
    if "password authentication failed" in lowered or "access denied" in lowered:
        return PermissionsError(message + " (check catalog.user and catalog.password)")
    return MetastoreError(message)
