"""The metastore's own database over JDBC (PostgreSQL, MariaDB/MySQL): its driver and the
properties Hive opens it with."""

from __future__ import annotations

from pathlib import Path

from eventlake.config import CatalogSettings
from eventlake.config.jdbc import JDBC_DRIVERS, JdbcDriver
from eventlake.errors import DependencyError

PASSWORD_PROPERTY = "javax.jdo.option.ConnectionPassword"


def redact(url: str) -> str:
    """A JDBC URL without its query string (which may carry a password)."""
    return url.split("?", 1)[0]


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
        "datanucleus.schema.autoCreateAll": "false",  # SchemaTool creates it (see schema.ensure_schema)
        "datanucleus.identifierFactory": "datanucleus1",
        "datanucleus.rdbms.useLegacyNativeValueStrategy": "true",
    }
