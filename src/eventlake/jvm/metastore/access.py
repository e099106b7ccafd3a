"""How a Spark process (or a metastore service) opens the metastore: the properties of each mode,
and the mode this process takes (:func:`client_access`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from eventlake import progress, state_layout
from eventlake.config import Settings
from eventlake.jvm.metastore.derby import acquire_embedded, derby_properties
from eventlake.jvm.metastore.derby_schema import ensure_view_text_clob, orm_jar
from eventlake.jvm.metastore.jdbc import PASSWORD_PROPERTY, jdbc_driver, jdbc_properties, redact
from eventlake.jvm.metastore.schema import ensure_schema
from eventlake.progress import Say
from eventlake.storage.local import write_atomic


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
            return f"metastore database {redact(self.properties['javax.jdo.option.ConnectionURL'])}"
        return "embedded Derby metastore"


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
    folder = state_layout.metastore_client_conf_dir(state)
    write_private(folder / "hive-site.xml", hive_site(access.secrets))
    return folder


def database_access(settings: Settings) -> MetastoreAccess:
    """The metastore database itself: what a metastore service (or an embedded client) opens."""
    catalog = settings.catalog
    if catalog.jdbc_url:
        _, jar = jdbc_driver(catalog)
        properties = jdbc_properties(catalog)
        secrets = {PASSWORD_PROPERTY: properties.pop(PASSWORD_PROPERTY)}
        return MetastoreAccess("jdbc", properties, (jar,), secrets)
    ensure_view_text_clob(settings.lake.state_dir)  # its caller holds the embedded metastore's lock
    return MetastoreAccess("derby", derby_properties(settings.lake.state_dir), (orm_jar(),))


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
