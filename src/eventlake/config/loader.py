"""Load and validate ``eventlake.toml``; every error names the bad setting and the fix."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import fields, replace
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from eventlake.config.alerts import validate_alerts
from eventlake.config.jdbc import JDBC_DRIVERS
from eventlake.config.settings import (
    DATE_PARTITIONS,
    FILL_IP_MODES,
    PARSERS,
    AlertsSettings,
    CatalogKind,
    CatalogSettings,
    CollectorSettings,
    CompactSettings,
    ConsoleSettings,
    LakeSettings,
    QuerySettings,
    RetentionSettings,
    Secret,
    Settings,
    SourceSettings,
    SparkSettings,
    SyncSettings,
    sdl_table_prefix,
)
from eventlake.errors import ConfigError
from eventlake.storage import Location, ObjectPath, load_storage, storage_scheme

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_FILE = "eventlake.toml"
CONFIG_ENV = "EVENTLAKE_CONFIG"
ENV_PREFIX = "EVENTLAKE__"

SLUG = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
IDENTIFIER = re.compile(r"^[a-z0-9_]{0,64}$")
WRITE_KEY = re.compile(r"^[A-Za-z0-9_\-.]{1,200}$")
SOURCE_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
THRIFT_URI = re.compile(r"^thrift://[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}$")
JDBC_URL = re.compile(r"^jdbc:([a-z0-9]+):")
JDBC_KNOWN = tuple(JDBC_DRIVERS)  # drivers eventlake finds by itself (Debian's jars)
AWS_REGION = re.compile(r"^[a-z]{2}(-[a-z0-9]+)+$")
HIVE_ONLY = ("uri", "jdbc_url", "user", "password", "jdbc_driver_jar", "jdbc_driver_class")
GLUE_ONLY = ("region", "endpoint_url", "catalog_id")

E = TypeVar("E", bound=Enum)

_SIMPLE_SECTIONS = {
    "catalog": CatalogSettings,
    "spark": SparkSettings,
    "collector": CollectorSettings,
    "sync": SyncSettings,
    "query": QuerySettings,
    "compact": CompactSettings,
    "retention": RetentionSettings,
    "console": ConsoleSettings,
    "alerts": AlertsSettings,
}


def resolve_config_path(
    path: str | os.PathLike[str] | None, environ: Mapping[str, str] | None = None
) -> Path:
    """The config file to use: the given path, else ``$EVENTLAKE_CONFIG``, else ``./eventlake.toml``."""
    environ = os.environ if environ is None else environ
    chosen = path or environ.get(CONFIG_ENV) or CONFIG_FILE
    return Path(chosen).expanduser().resolve()


def load_settings(
    path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Read, merge and validate the settings. Raises :class:`ConfigError` naming the bad setting."""
    environ = os.environ if environ is None else environ
    config_path = resolve_config_path(path, environ)
    if not config_path.is_file():
        raise ConfigError(
            "config", f"no config file at {config_path}", "run `eventlake init DIR` or pass --config PATH"
        )
    try:
        text = config_path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(str(config_path), f"not valid TOML: {exc}") from None
    return settings_from_text(text, config_path, environ)


def settings_from_text(text: str, config_path: Path, environ: Mapping[str, str]) -> Settings:
    """The settings ``text`` would give as the contents of ``config_path`` (relative paths are
    relative to its folder): how a new version of the file is checked before it is written."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(config_path), f"not valid TOML: {exc}") from None
    _apply_environment(raw, environ)
    return parse_settings(raw, config_path)


def parse_settings(raw: Mapping[str, Any], config_path: Path) -> Settings:
    known = {"lake", "sources", *_SIMPLE_SECTIONS}
    for key in raw:
        if key not in known:
            raise ConfigError(key, "unknown section", f"valid sections: {', '.join(sorted(known))}")
    base = config_path.parent
    lake_raw = _table(raw, "lake")
    _reject_unknown("lake", lake_raw, {"root", "state_dir", "endpoint_url"})
    root = _typed("lake.root", lake_raw.get("root", "lake"), str)
    endpoint_url = _typed("lake.endpoint_url", lake_raw.get("endpoint_url", ""), str)
    lake = LakeSettings(
        root=_lake_root(base, root),
        state_dir=_path(base, _typed("lake.state_dir", lake_raw.get("state_dir", ".eventlake"), str)),
        endpoint_url=endpoint_url,
    )
    sections = {name: _section(name, cls, _table(raw, name)) for name, cls in _SIMPLE_SECTIONS.items()}
    _validate_sections(sections)
    _validate_catalog(sections["catalog"])
    sections["alerts"] = validate_alerts(sections["alerts"])
    if sections["catalog"].jdbc_driver_jar:
        sections["catalog"] = replace(
            sections["catalog"], jdbc_driver_jar=str(_path(base, sections["catalog"].jdbc_driver_jar))
        )
    if sections["spark"].jars_dir:
        sections["spark"] = replace(sections["spark"], jars_dir=str(_path(base, sections["spark"].jars_dir)))
    if sections["spark"].class_archive_dir:
        folder = str(_path(base, sections["spark"].class_archive_dir))
        sections["spark"] = replace(sections["spark"], class_archive_dir=folder)
    sources = _sources(raw.get("sources", []))
    return Settings(path=config_path, lake=lake, sources=sources, **sections)


def _validate_sections(sections: dict[str, Any]) -> None:
    catalog, collector, sync = sections["catalog"], sections["collector"], sections["sync"]
    if not IDENTIFIER.match(catalog.database_prefix):
        raise ConfigError("catalog.database_prefix", f"{catalog.database_prefix!r}", "use [a-z0-9_] only")
    if not 0 < collector.port < 65536:
        raise ConfigError("collector.port", f"{collector.port} is not a TCP port", "use 1-65535")
    if collector.seal_max_bytes < 1024:
        raise ConfigError(
            "collector.seal_max_bytes", f"{collector.seal_max_bytes} is too small", "use >= 1024"
        )
    if collector.seal_max_age_seconds <= 0:
        raise ConfigError("collector.seal_max_age_seconds", "must be > 0")
    if collector.max_spool_bytes < collector.seal_max_bytes:
        raise ConfigError(
            "collector.max_spool_bytes",
            f"{collector.max_spool_bytes} is below collector.seal_max_bytes ({collector.seal_max_bytes})",
            "use at least seal_max_bytes",
        )
    if sync.interval_seconds < 1:
        raise ConfigError("sync.interval_seconds", f"{sync.interval_seconds} is below 1 second")
    if sync.max_tables_per_database < 1:
        raise ConfigError("sync.max_tables_per_database", f"{sync.max_tables_per_database}", "use >= 1")
    query = sections["query"]
    if not 0 < query.thrift_port < 65536:
        raise ConfigError("query.thrift_port", f"{query.thrift_port} is not a TCP port", "use 1-65535")
    if sync.parser not in PARSERS:
        raise ConfigError("sync.parser", f"{sync.parser!r}", f"use one of {', '.join(PARSERS)}")
    grace = sections["sync"].rewrite_grace_minutes
    if grace < 0:
        raise ConfigError("sync.rewrite_grace_minutes", f"{grace}", "use >= 0 (minutes)")
    compact = sections["compact"]
    if compact.target_file_mb < 1:
        raise ConfigError("compact.target_file_mb", f"{compact.target_file_mb}", "use >= 1 (MB)")
    if compact.older_than_hours < 0:
        raise ConfigError("compact.older_than_hours", f"{compact.older_than_hours}", "use >= 0")
    if compact.interval_seconds < 0:
        raise ConfigError("compact.interval_seconds", f"{compact.interval_seconds}", "use >= 0 (0: never)")
    retention = sections["retention"]
    for name in ("archive_days", "table_days"):
        if getattr(retention, name) < 0:
            raise ConfigError(
                f"retention.{name}", f"{getattr(retention, name)}", "use >= 0 (0: keep for ever)"
            )
    if retention.interval_seconds < 60:
        raise ConfigError("retention.interval_seconds", f"{retention.interval_seconds}", "use >= 60")
    console = sections["console"]
    if not 0 < console.port < 65536:
        raise ConfigError("console.port", f"{console.port} is not a TCP port", "use 1-65535")
    if console.query_max_rows < 1:
        raise ConfigError("console.query_max_rows", f"{console.query_max_rows}", "use >= 1")
    if console.query_timeout_seconds <= 0:
        raise ConfigError("console.query_timeout_seconds", f"{console.query_timeout_seconds}", "use > 0")


def _validate_catalog(catalog: CatalogSettings) -> None:
    """The ``[catalog]`` settings of the chosen kind; settings of the other kind are refused."""
    default = CatalogSettings()
    other = GLUE_ONLY if catalog.kind == CatalogKind.HIVE else HIVE_ONLY
    for name in other:
        if getattr(catalog, name) != getattr(default, name):
            owner = CatalogKind.GLUE if catalog.kind == CatalogKind.HIVE else CatalogKind.HIVE
            raise ConfigError(
                f"catalog.{name}", f'only applies to kind = "{owner}"', "remove it or change kind"
            )
    if catalog.uri:
        for uri in catalog.uri.split(","):
            if not THRIFT_URI.match(uri.strip()):
                raise ConfigError(
                    "catalog.uri", f"{uri.strip()!r} is not a metastore URI", "use thrift://host:9083"
                )
    if catalog.jdbc_url:
        match = JDBC_URL.match(catalog.jdbc_url)
        if match is None:
            raise ConfigError(
                "catalog.jdbc_url",
                "is not a JDBC URL",
                "use jdbc:postgresql://host:5432/db or jdbc:mariadb://...",
            )
        if match.group(1) not in JDBC_KNOWN and not (catalog.jdbc_driver_jar and catalog.jdbc_driver_class):
            raise ConfigError(
                "catalog.jdbc_url",
                f"eventlake has no driver for jdbc:{match.group(1)}:",
                f"use {', '.join(JDBC_KNOWN)}, or set catalog.jdbc_driver_jar and catalog.jdbc_driver_class",
            )
    else:
        for name in ("user", "password", "jdbc_driver_jar", "jdbc_driver_class"):
            if getattr(catalog, name) != getattr(default, name):
                raise ConfigError(
                    f"catalog.{name}", "needs catalog.jdbc_url", "set the metastore database's URL"
                )
    if catalog.region and not AWS_REGION.match(catalog.region):
        raise ConfigError("catalog.region", f"{catalog.region!r} is not an AWS region", "e.g. us-east-1")
    if catalog.endpoint_url and not catalog.endpoint_url.startswith(("http://", "https://")):
        raise ConfigError(
            "catalog.endpoint_url", f"{catalog.endpoint_url!r}", "use http://host:port or https://..."
        )
    if catalog.catalog_id and not (len(catalog.catalog_id) == 12 and catalog.catalog_id.isdigit()):
        raise ConfigError("catalog.catalog_id", f"{catalog.catalog_id!r}", "use the 12-digit AWS account id")


def _sources(raw_sources: Any) -> tuple[SourceSettings, ...]:
    if not isinstance(raw_sources, list):
        raise ConfigError("sources", "must be an array of tables", "write each source as [[sources]]")
    sources: list[SourceSettings] = []
    names = {f.name for f in fields(SourceSettings)}
    for index, item in enumerate(raw_sources):
        where = f"sources[{index}]"
        if not isinstance(item, dict):
            raise ConfigError(where, "must be a table")
        _reject_unknown(where, item, names)
        for required in ("slug", "id", "write_key"):
            if required not in item:
                raise ConfigError(f"{where}.{required}", "is missing")
        slug = _typed(f"{where}.slug", item["slug"], str)
        where = f"sources.{slug}"
        if not SLUG.match(slug):
            raise ConfigError(
                f"{where}.slug", f"{slug!r} is not a valid slug", "use [a-z][a-z0-9_]*, at most 63"
            )
        source = SourceSettings(
            slug=slug,
            id=_typed(f"{where}.id", item["id"], str),
            write_key=Secret(_typed(f"{where}.write_key", item["write_key"], str, secret=True)),
            database=_typed(f"{where}.database", item.get("database", slug), str),
            table_prefix=_typed(f"{where}.table_prefix", item.get("table_prefix", ""), str),
            date_partition=_typed(f"{where}.date_partition", item.get("date_partition", "day-hour"), str),
            partition_by_slug=_typed(
                f"{where}.partition_by_slug", item.get("partition_by_slug", False), bool
            ),
            dedupe_window_days=_typed(f"{where}.dedupe_window_days", item.get("dedupe_window_days", 7), int),
            fill_ip=_typed(f"{where}.fill_ip", item.get("fill_ip", "auto"), str),
            enabled=_typed(f"{where}.enabled", item.get("enabled", True), bool),
        )
        _validate_source(where, source)
        sources.append(replace(source, table_prefix=sdl_table_prefix(source.table_prefix)))
    _reject_duplicates(sources)
    return tuple(sources)


def _validate_source(where: str, source: SourceSettings) -> None:
    if not SOURCE_ID.match(source.id):
        raise ConfigError(f"{where}.id", f"{source.id!r} is not a valid source id", "use [A-Za-z0-9_-]")
    if not WRITE_KEY.match(source.write_key.reveal()):
        raise ConfigError(f"{where}.write_key", "is empty or has characters outside [A-Za-z0-9_-.]")
    if not SLUG.match(source.database):
        raise ConfigError(
            f"{where}.database", f"{source.database!r} is not a valid name", "use [a-z][a-z0-9_]*"
        )
    if not IDENTIFIER.match(source.table_prefix):
        raise ConfigError(f"{where}.table_prefix", f"{source.table_prefix!r}", "use [a-z0-9_] only")
    if source.date_partition not in DATE_PARTITIONS:
        raise ConfigError(
            f"{where}.date_partition",
            f"{source.date_partition!r}",
            f"use one of {', '.join(DATE_PARTITIONS)}",
        )
    if not 0 < source.dedupe_window_days <= 3650:
        raise ConfigError(f"{where}.dedupe_window_days", f"{source.dedupe_window_days}", "use 1-3650")
    if source.fill_ip not in FILL_IP_MODES:
        raise ConfigError(f"{where}.fill_ip", f"{source.fill_ip!r}", f"use one of {', '.join(FILL_IP_MODES)}")


def _reject_duplicates(sources: list[SourceSettings]) -> None:
    for attr, label in (("slug", "slug"), ("id", "id"), ("write_key", "write_key")):
        seen: set[object] = set()
        for source in sources:
            value = getattr(source, attr)
            if value in seen:
                shown = "(hidden)" if attr == "write_key" else repr(value)
                raise ConfigError(f"sources.{source.slug}.{label}", f"{shown} is used by two sources")
            seen.add(value)
    _reject_shared_names(sources)


def _reject_shared_names(sources: list[SourceSettings]) -> None:
    """Sources may share a database (Segment Data Lakes' one database with a table prefix per
    source) when their table prefixes keep their tables apart: neither prefix starts the other."""
    by_database: dict[str, list[SourceSettings]] = {}
    for source in sources:
        by_database.setdefault(source.database, []).append(source)
    for shared in by_database.values():
        for i, source in enumerate(shared):
            for other in shared[:i]:
                a, b = sorted((source.table_prefix, other.table_prefix), key=len)
                if b.startswith(a):
                    raise ConfigError(
                        f"sources.{source.slug}.table_prefix",
                        f"{source.table_prefix!r} would mix its tables with source {other.slug}'s "
                        f"({other.table_prefix!r}) in database {source.database!r}",
                        f'give each source in the database its own, e.g. table_prefix = "{source.slug}_"',
                    )


def _section(name: str, cls: type, raw: Mapping[str, Any]) -> Any:
    specs = {f.name: f for f in fields(cls)}
    _reject_unknown(name, raw, set(specs))
    values: dict[str, Any] = {}
    for key, value in raw.items():
        default = specs[key].default
        if isinstance(value, _EnvText) and not isinstance(default, (str, Secret)):
            value = value.as_toml()
        if key == "conf":
            if not isinstance(value, dict):
                raise ConfigError(f"{name}.conf", "must be a table of spark.* settings")
            values[key] = tuple((str(k), _conf_value(v)) for k, v in sorted(value.items()))
        elif isinstance(default, Enum):  # one of a vocabulary (catalog.kind)
            values[key] = _choice(f"{name}.{key}", value, type(default))
        elif isinstance(default, tuple):  # a list of one type: a TOML array (or one text value)
            values[key] = _list(f"{name}.{key}", value, type(default[0]) if default else str)
        elif isinstance(default, Secret):
            values[key] = Secret(_typed(f"{name}.{key}", value, str, secret=True))
        elif isinstance(default, bool):
            values[key] = _typed(f"{name}.{key}", value, bool)
        elif isinstance(default, float):
            values[key] = float(_typed(f"{name}.{key}", value, (int, float)))
        else:
            values[key] = _typed(f"{name}.{key}", value, type(default))
    return cls(**values)


def _choice(setting: str, value: Any, vocabulary: type[E]) -> E:
    """A text value that must be one of an enum's values: that member."""
    text = _typed(setting, value, str)
    choices = tuple(member.value for member in vocabulary)
    if text not in choices:
        raise ConfigError(setting, f"{text!r} is not supported", f"use one of {choices}")
    return vocabulary(text)


def _list(setting: str, value: Any, item: type) -> tuple[Any, ...]:
    """A TOML array of ``item`` values; a text value (e.g. from the environment) is one item, or
    several separated by commas."""
    if isinstance(value, str) and item is str:
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if not isinstance(value, list):
        raise ConfigError(
            setting, f"{value!r} is a {type(value).__name__}", f"expected an array of {item.__name__}"
        )
    return tuple(_typed(f"{setting}[{index}]", v, item) for index, v in enumerate(value))


def _conf_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _typed(setting: str, value: Any, expected: type | tuple[type, ...], secret: bool = False) -> Any:
    if isinstance(value, _EnvText):
        value = str(value) if expected is str else value.as_toml()
    ok = isinstance(value, expected) and not (isinstance(value, bool) and expected in (int, (int, float)))
    if not ok:
        names = expected.__name__ if isinstance(expected, type) else " or ".join(t.__name__ for t in expected)
        shown = "(hidden)" if secret else repr(value)
        raise ConfigError(setting, f"{shown} is a {type(value).__name__}", f"expected a {names}")
    return value


def _table(raw: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = raw.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(name, "must be a table", f"write it as [{name}]")
    return value


def _reject_unknown(where: str, raw: Mapping[str, Any], known: set[str]) -> None:
    for key in raw:
        if key not in known:
            raise ConfigError(f"{where}.{key}", "unknown setting", f"valid: {', '.join(sorted(known))}")


def _lake_root(base: Path, value: str) -> Location:
    """A local path (relative to the config file's folder) or an object store URI."""
    if storage_scheme(value) == "file":
        return _path(base, value)
    load_storage(value)  # refuses, naming the setting, a scheme without a back end
    try:
        root = ObjectPath.parse(value)
    except ValueError:
        raise ConfigError(
            "lake.root",
            value,
            "write it as s3://bucket/prefix or abfss://container@account.dfs.core.windows.net/prefix",
        ) from None
    return root


def _path(base: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else (base / path).resolve()


class _EnvText(str):
    """A value from the environment: text for text settings, read as TOML for the others."""

    def as_toml(self) -> Any:
        try:
            return tomllib.loads(f"v = {self}")["v"]
        except tomllib.TOMLDecodeError:
            return str(self)


def _apply_environment(raw: dict[str, Any], environ: Mapping[str, str]) -> None:
    """``EVENTLAKE__SECTION__KEY=value`` overrides ``[section] key``: taken as it is for text
    settings (paths, passwords), read as TOML for numbers, booleans and tables."""
    for name, text in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        parts = name[len(ENV_PREFIX) :].lower().split("__")
        if len(parts) != 2 or not all(parts):
            raise ConfigError(name, "environment overrides look like EVENTLAKE__SECTION__KEY")
        section, key = parts
        value = _EnvText(text)
        table = raw.setdefault(section, {})
        if not isinstance(table, dict):
            raise ConfigError(name, f"[{section}] is not a table")
        table[key] = value
