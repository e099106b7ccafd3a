"""The settings sections. Every field here is documented in docs/configuration.md (a test checks it)."""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from eventlake.storage import Location, Storage, load_storage

DATE_PARTITIONS = ("day-hour", "year-month-day-hour", "year-month-day", "day")
FILL_IP_MODES = ("auto", "always", "never")


def client_host(host: str) -> str:
    """Where a client on this machine reaches a server bound to ``host`` (all interfaces: loopback).

    >>> client_host("0.0.0.0"), client_host("::"), client_host("10.0.0.5")
    ('127.0.0.1', '::1', '10.0.0.5')
    """
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)


def is_loopback(host: str) -> bool:
    """
    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("::1"), is_loopback("0.0.0.0")
    (True, True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Secret:
    """A secret value (write key, password) that never shows in logs or reprs."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    @property
    def is_set(self) -> bool:
        """Whether a value was given (what a check of a secret setting asks, without revealing it).

        >>> Secret("").is_set, Secret("s3cret").is_set
        (False, True)
        """
        return bool(self._value)

    def matches(self, given: str) -> bool:
        """Whether ``given`` is the secret, compared in constant time (a client timing the
        answers learns nothing of how much of a guessed write key was right)."""
        return hmac.compare_digest(given.encode("utf-8"), self._value.encode("utf-8"))

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and self.matches(other._value)

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class LakeSettings:
    root: Location  # the lake root (raw archive, lake data, reports, durable sync state): a path or a URI
    state_dir: Path  # local state: collector spool, embedded metastore, Spark warehouse, locks
    # the object store's endpoint (MinIO, R2, Ceph, emulators); default: AWS_ENDPOINT_URL_S3, ...
    endpoint_url: str = ""

    def storage(self) -> Storage:
        """The store that holds the lake."""
        return load_storage(self.root, endpoint_url=self.endpoint_url)


class CatalogKind(str, Enum):  # enum.StrEnum once Python 3.10 is dropped
    """``[catalog] kind``: which catalog back end holds the lake's tables."""

    HIVE = "hive"  # a Hive metastore: embedded Derby by default
    GLUE = "glue"  # the AWS Glue Data Catalog

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class CatalogSettings:
    kind: CatalogKind = CatalogKind.HIVE  # hive (Hive metastore: embedded Derby by default) | glue (AWS Glue)
    database_prefix: str = ""  # prepended to every source's database name
    # hive: a running metastore service to use (thrift://host:9083[,thrift://...]) ...
    uri: str = ""
    # ... or the metastore's own database (jdbc:postgresql://, jdbc:mariadb://, jdbc:mysql://);
    # neither: embedded Derby in state_dir (shared through `eventlake up`'s metastore service)
    jdbc_url: str = ""
    user: str = ""
    password: Secret = Secret("")
    jdbc_driver_jar: str = ""  # default: Debian's jar for the URL's database
    jdbc_driver_class: str = ""  # default: the driver class for the URL's database
    # glue: the AWS region, an endpoint URL (emulators, VPC endpoints), the catalog's account id
    region: str = ""
    endpoint_url: str = ""
    catalog_id: str = ""


@dataclass(frozen=True)
class SparkSettings:
    master: str = "local[*]"
    driver_memory: str = "2g"
    conf: tuple[tuple[str, str], ...] = ()  # extra spark.* settings, applied last
    # a folder of jars for Spark's class path and the metastore service's: Hadoop's S3 connector
    # (hadoop-aws and the AWS SDK, as scripts/ensure-jars.sh fetches them into .cache/jars/s3a)
    jars_dir: str = ""
    # the driver JVM's class-data archive (AppCDS: eventlake.jvm.class_archive), made once per
    # machine: a Spark start costs about a third less CPU with it
    class_archive: bool = True
    class_archive_dir: str = ""  # where it is kept; default $XDG_CACHE_HOME/eventlake/jvm (~/.cache/...)


@dataclass(frozen=True)
class CollectorSettings:
    host: str = "127.0.0.1"
    port: int = 8088
    seal_max_bytes: int = 64 * 1024 * 1024
    seal_max_age_seconds: float = 5.0
    max_spool_bytes: int = 1024 * 1024 * 1024  # unsealed bytes in the spool past which requests get 429
    reuse_port: bool = False  # SO_REUSEPORT: several collectors (a state_dir each) share host:port


@dataclass(frozen=True)
class SyncSettings:
    # how often `eventlake up`'s engine starts a sync (start to start; back to back when one takes
    # longer): with the collector's 5 s seal, a message is queryable within about seal + interval +
    # one sync's duration (see docs/configuration.md)
    interval_seconds: float = 30.0
    max_tables_per_database: int = 200_000  # Glue's limit; past it new tables are not created
    # a lake on an object store: how long a sync's lease on its source lasts unless renewed (a killed
    # sync on another machine blocks the next one at most this long)
    lease_seconds: float = 60.0
    # a rewritten partition's old files (compaction, replay, user deletion, set-type on an object store)
    # stay this long after the catalog moved to the new ones: longer than the longest query reading them
    rewrite_grace_minutes: float = 60.0
    # how the parse pass reads the archive: "columnar" (pyarrow's JSON reader and Arrow compute,
    # the per-message rules for what it cannot judge) or "per-message" (every line through the
    # per-message rules: the specification, several times slower); both give the same lake
    parser: str = "columnar"


PARSERS = ("columnar", "per-message")


@dataclass(frozen=True)
class CompactSettings:
    target_file_mb: int = 128  # compaction packs a partition's smaller files into files of about this size
    # a partition is compacted once the hour (or day) it holds ended at least this long ago
    older_than_hours: float = 1.0
    interval_seconds: float = 3600.0  # how often `eventlake up` compacts (0: never)


@dataclass(frozen=True)
class RetentionSettings:
    # archive files whose received day ended more than this many days ago are deleted once synced
    # (0: keep them for ever); a replay can only rebuild what the archive still holds
    archive_days: int = 0
    # table partitions whose hour (or day) ended more than this many days ago are deleted, files and
    # catalog entries (0: keep them for ever)
    table_days: int = 0
    interval_seconds: float = 3600.0  # how often `eventlake up` applies them (when one is set)


@dataclass(frozen=True)
class QuerySettings:
    # the HiveServer2 port of `eventlake up`'s engine (the first free one above it when taken), and
    # `eventlake thrift`'s default --port
    thrift_port: int = 10000


@dataclass(frozen=True)
class ConsoleSettings:
    # the web console (`eventlake up` serves it beside the collector; `eventlake console` alone)
    enabled: bool = True  # served by `eventlake up`
    host: str = "127.0.0.1"  # any other address needs a token
    port: int = 8089
    token: Secret = Secret("")  # required off loopback (or EVENTLAKE__CONSOLE__TOKEN)
    query_max_rows: int = 1000  # rows the query box shows and downloads
    query_timeout_seconds: float = 30.0  # a query box statement is interrupted after this long


@dataclass(frozen=True)
class AlertsSettings:
    # a source's sync failing 1, 5 and 20 times in a row (as Segment Data Lakes emailed), and its
    # first success after failing, are sent to each channel set here (none set: no alerts)
    webhook_url: Secret = Secret("")  # JSON POSTed here (Slack's incoming webhooks take it as it is)
    email_to: tuple[str, ...] = ()  # addresses the alert email goes to (needs smtp_host, email_from)
    email_from: str = ""
    smtp_host: str = ""
    smtp_port: int = 587
    starttls: bool = True  # STARTTLS before anything is sent (required to send smtp_password off loopback)
    smtp_user: str = ""
    smtp_password: Secret = Secret("")
    on_failures: tuple[int, ...] = (1, 5, 20)  # the failures in a row that alert
    on_recovery: bool = True  # alert on the first success after a failure
    timeout_seconds: float = 10.0  # per channel and alert

    @property
    def enabled(self) -> bool:
        return bool(self.webhook_url.is_set or self.email_to)


def sdl_table_prefix(table_prefix: str) -> str:
    """The prefix before a source's table names for its ``table_prefix`` as users write it, the way
    Segment Data Lakes read it (``$tableprefix_$eventtype``): ``ios`` gives ``ios_identify``.

    >>> sdl_table_prefix("ios"), sdl_table_prefix("ios_"), sdl_table_prefix("")
    ('ios_', 'ios_', '')
    """
    return table_prefix if not table_prefix or table_prefix.endswith("_") else table_prefix + "_"


@dataclass(frozen=True)
class SourceSettings:
    slug: str
    id: str
    write_key: Secret
    database: str
    table_prefix: str = ""  # as the loader read it: ends with "_" unless empty (sdl_table_prefix)
    date_partition: str = "day-hour"
    partition_by_slug: bool = False
    dedupe_window_days: int = 7
    fill_ip: str = "auto"  # context.ip from the request: auto (browser/mobile messages), always, never
    # false: its events are still collected and archived, but no sync (nor `up`'s engine) reads them
    # until it is enabled again; the sync then takes everything archived meanwhile
    enabled: bool = True

    @property
    def dir_name(self) -> str:
        """The source's folder under ``segment-data/data``: its id, or its slug when partitioned by slug."""
        return self.slug if self.partition_by_slug else self.id


@dataclass(frozen=True)
class Settings:
    path: Path | None  # the eventlake.toml these came from (None: defaults only)
    lake: LakeSettings
    catalog: CatalogSettings = field(default_factory=CatalogSettings)
    spark: SparkSettings = field(default_factory=SparkSettings)
    collector: CollectorSettings = field(default_factory=CollectorSettings)
    sync: SyncSettings = field(default_factory=SyncSettings)
    query: QuerySettings = field(default_factory=QuerySettings)
    compact: CompactSettings = field(default_factory=CompactSettings)
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    console: ConsoleSettings = field(default_factory=ConsoleSettings)
    alerts: AlertsSettings = field(default_factory=AlertsSettings)
    sources: tuple[SourceSettings, ...] = ()

    def source(self, slug: str) -> SourceSettings:
        for source in self.sources:
            if source.slug == slug:
                return source
        from eventlake.errors import UsageError

        known = ", ".join(s.slug for s in self.sources) or "none configured"
        raise UsageError(f"unknown source {slug!r} (known: {known}; add one with `eventlake sources add`)")

    def database_name(self, source: SourceSettings) -> str:
        """The catalog database of a source's tables: ``catalog.database_prefix`` + its database."""
        return self.catalog.database_prefix + source.database

    def source_by_write_key(self, write_key: str) -> SourceSettings | None:
        """The source whose write key this is; every key is compared (in constant time), so how
        long the answer takes says nothing of which source's key came close."""
        found = None
        for source in self.sources:
            if source.write_key.matches(write_key) and found is None:
                found = source
        return found
