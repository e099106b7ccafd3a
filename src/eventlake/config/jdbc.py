"""The JDBC drivers eventlake finds by itself for a metastore database (``[catalog] jdbc_url``).

One table, read by the settings check (a URL with another scheme needs ``jdbc_driver_jar`` and
``jdbc_driver_class``) and by the metastore (:mod:`eventlake.jvm.metastore.jdbc`: which class to load,
which jar to put on the class path, which Debian package to name when it is missing).
"""

from __future__ import annotations

from typing import NamedTuple


class JdbcDriver(NamedTuple):
    driver_class: str
    jar: str  # where Debian's package installs it
    package: str  # the Debian package that has the jar


# jdbc:<scheme>: -> its driver
JDBC_DRIVERS = {
    "postgresql": JdbcDriver(
        "org.postgresql.Driver", "/usr/share/java/postgresql.jar", "libpostgresql-jdbc-java"
    ),
    "mariadb": JdbcDriver(
        "org.mariadb.jdbc.Driver", "/usr/share/java/mariadb-java-client.jar", "libmariadb-java"
    ),
    "mysql": JdbcDriver(
        "org.mariadb.jdbc.Driver", "/usr/share/java/mariadb-java-client.jar", "libmariadb-java"
    ),
}
