"""Every path of the lake's durable state and of the local state folder, in one place (the
lake's data paths are in :mod:`eventlake.layout`). Nobody else formats a path.

Lake root::

    segment-data/_state/{ledger,dedupe,pending,schemas}/...          durable sync state
    segment-data/_state/suppression/<source-id>.json                  suppressed userIds (collector)
    segment-data/_state/deletions/<source-id>/<run-id>.json            user deletions' audit records
    segment-data/_state/retired/<source-id>/...                       a rewrite's old files (grace)

Local state dir: ``spool/`` (collector), ``metastore_db/`` (embedded Derby), ``metastore/`` (its
service and tools), ``sql-service/`` (where the running Spark Thrift servers listen), ``warehouse/``,
``locks/``, ``logs/``.

Nothing here reads or writes storage.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from eventlake.layout import DATA
from eventlake.storage.location import Location


def retired_dir(lake: Location, source_id: str) -> Location:
    """Old files of partitions rewritten on an object store, kept for ``sync.rewrite_grace_minutes``:
    ``_state/retired/<source-id>/<rewrite-id>.json``, one record per committed rewrite."""
    return state_dir(lake, "retired", source_id)


def retired_file(lake: Location, source_id: str, rewrite_id: str) -> Location:
    return retired_dir(lake, source_id) / f"{rewrite_id}.json"


def report_days_file(lake: Location, source_id: str) -> Location:
    """How far a source's days of reports are merged (and that its reports were upgraded to a
    partition per day): ``segment-data/_state/report-days/<source-id>.json``."""
    return lake / DATA / "_state" / "report-days" / f"{source_id}.json"


def reports_index_file(lake: Location) -> Location:
    """The oldest day holding reports (where readers walking back day by day stop):
    ``segment-data/_state/reports.json``."""
    return lake / DATA / "_state" / "reports.json"


def state_dir(lake: Location, kind: str, source_id: str) -> Location:
    """Durable sync state: ``segment-data/_state/<kind>/<source-id>`` (ledger, dedupe, pending)."""
    return lake / DATA / "_state" / kind / source_id


def sync_lock_file(lake: Location, source_id: str) -> Location:
    """Held by the sync of a source: beside the state it protects, so it holds across state dirs."""
    return lake / DATA / "_state" / "locks" / f"sync-{source_id}.lock"


def sync_lease_dir(lake: Location, source_id: str) -> Location:
    """The sync lease of a source on an object store: ``_state/locks/sync-<id>/lease-<n>.json``."""
    return lake / DATA / "_state" / "locks" / f"sync-{source_id}"


def schemas_root(lake: Location) -> Location:
    return lake / DATA / "_state" / "schemas"


def schema_file(lake: Location, database: str, table: str) -> Location:
    return schemas_root(lake) / database / f"{table}.json"


def table_names_file(lake: Location, source_id: str) -> Location:
    """Where each segment type of a source lives, when not eventlake's default names (a lake adopted
    from Segment Data Lakes): ``segment-data/_state/tables/<source-id>.json``."""
    return lake / DATA / "_state" / "tables" / f"{source_id}.json"


def adoption_file(lake: Location, source_id: str) -> Location:
    """The progress of ``eventlake adopt`` on a source: ``segment-data/_state/adopt/<source-id>.json``."""
    return lake / DATA / "_state" / "adopt" / f"{source_id}.json"


def suppression_file(lake: Location, source_id: str) -> Location:
    """The source's suppression list: ``segment-data/_state/suppression/<source-id>.json``."""
    return lake / DATA / "_state" / "suppression" / f"{source_id}.json"


def deletion_audit_file(lake: Location, source_id: str, run_id: str) -> Location:
    """A user deletion's audit record: ``segment-data/_state/deletions/<source-id>/<run-id>.json``."""
    return lake / DATA / "_state" / "deletions" / source_id / f"{run_id}.json"


def deletion_pending_file(lake: Location, source_id: str, key: str) -> Location:
    """The ids a running user deletion matches, until it ends: ``.../_pending-<key>.json`` beside
    the audit records."""
    return lake / DATA / "_state" / "deletions" / source_id / f"_pending-{key}.json"


def suppression_lock_file(lake: Location, source_id: str) -> Location:
    """Held while the suppression list is rewritten: ``.../suppression/.<source-id>.lock``."""
    return lake / DATA / "_state" / "suppression" / f".{source_id}.lock"


def ledger_file(lake: Location, source_id: str, run_id: str) -> Location:
    """The ledger entry of one run: the archive files it brought into the lake."""
    return state_dir(lake, "ledger", source_id) / f"{run_id}.json"


def ledger_checkpoint_file(lake: Location, source_id: str) -> Location:
    """The ledger's checkpoint: ``_state/ledger-checkpoint/<source-id>.json`` (see
    sync/protocol/ledger.py)."""
    return lake / DATA / "_state" / "ledger-checkpoint" / f"{source_id}.json"


def sync_health_file(lake: Location, source_id: str) -> Location:
    """A source's failures in a row (alerts, metrics): ``_state/sync-health/<source-id>.json``."""
    return lake / DATA / "_state" / "sync-health" / f"{source_id}.json"


def damaged_files_file(lake: Location, source_id: str) -> Location:
    """The source's damaged archive files, quarantined by name (never read again unless a retry is
    asked): ``_state/damaged/<source-id>.json`` (see sync/protocol/damaged.py)."""
    return lake / DATA / "_state" / "damaged" / f"{source_id}.json"


def damaged_retry_file(lake: Location, source_id: str) -> Location:
    """When a retry of the source's damaged archive files was last asked (``eventlake sync
    --rescan``): ``_state/damaged-retry/<source-id>.json``."""
    return lake / DATA / "_state" / "damaged-retry" / f"{source_id}.json"


def closed_day_file(lake: Location, source_id: str, day_ms: int) -> Location:
    """A closed received day's synced archive files: ``_state/ledger-days/<source-id>/<day-ms>.json``."""
    return state_dir(lake, "ledger-days", source_id) / f"{day_ms}.json"


def archive_expired_file(lake: Location, source_id: str) -> Location:
    """The newest archive day retention deleted: ``_state/archive-expired/<source-id>.json``."""
    return lake / DATA / "_state" / "archive-expired" / f"{source_id}.json"


def reopened_days_dir(lake: Location, source_id: str) -> Location:
    """Markers of archive days written after they may have been closed: ``_state/reopened/<source-id>``."""
    return state_dir(lake, "reopened", source_id)


def reopened_day_file(lake: Location, source_id: str, day_ms: int, written_ms: int, token: str) -> Location:
    """One marker: ``<day-ms>-<written-ms>-<token>.json`` (see :func:`reopened_day_times`)."""
    return reopened_days_dir(lake, source_id) / f"{day_ms}-{written_ms}-{token}.json"


def reopened_day_times(file_name: str) -> tuple[int, int] | None:
    """The (day, written) Unix milliseconds a reopen marker's name holds; None for another name.

    >>> reopened_day_times("1764028800000-1764115200123-ab12.json")
    (1764028800000, 1764115200123)
    >>> reopened_day_times("notes.txt") is None
    True
    """
    parts = file_name.removesuffix(".json").split("-")
    if len(parts) != 3 or not file_name.endswith(".json") or not (parts[0] + parts[1]).isdigit():
        return None
    return int(parts[0]), int(parts[1])


def pending_file(lake: Location, source_id: str, run_id: str) -> Location:
    """The commit manifest of a run that has not finished publishing."""
    return state_dir(lake, "pending", source_id) / f"{run_id}.json"


def dedupe_index_dir(lake: Location, source_id: str) -> Location:
    """The source's dedupe index: ``_state/dedupe/<source-id>/run_id=<run>/*.keys`` (key files,
    :mod:`eventlake.sync.index.index_keys`; ``*.parquet`` of message ids in lakes written before them)."""
    return state_dir(lake, "dedupe", source_id)


# local state -----------------------------------------------------------------------------------


def spool_dir(state: Path) -> Path:
    return state / "spool"


def metastore_dir(state: Path) -> Path:
    return state / "metastore_db"


def warehouse_dir(state: Path) -> Path:
    return state / "warehouse"


def dedupe_filter_dir(state: Path, source_id: str) -> Path:
    """Local copies of the filters of a source's dedupe key files on an object store (a lookup
    maps them instead of sending a ranged GET per id): ``<key-file-digest>-<size>.filter``, one per
    key file in the window (:mod:`eventlake.sync.index.index_keys`); disposable."""
    return state / "dedupe-filters" / source_id


def lock_file(state: Path, name: str) -> Path:
    return state / "locks" / f"{name}.lock"


def log_dir(state: Path) -> Path:
    return state / "logs"


def derby_log(state: Path) -> Path:
    """Where Derby (embedded in Spark or in the metastore service) writes its log."""
    return log_dir(state) / "derby.log"


def metastore_log(state: Path) -> Path:
    """The project's metastore service's output."""
    return log_dir(state) / "metastore.log"


def error_log(state: Path, at: datetime, pid: int) -> Path:
    """The full traceback of an error the CLI did not expect:
    ``logs/error-20261122T104700Z-4242.log``."""
    return log_dir(state) / f"error-{at.astimezone(timezone.utc):%Y%m%dT%H%M%SZ}-{pid}.log"


def console_day_summary(state: Path, source_id: str, day: str) -> Path:
    """The console's summary of one source's runs of one older day, kept so that a restarted
    console does not read the day's reports again: ``console/report-days/<source-id>/<day>.json``."""
    return state / "console" / "report-days" / source_id / f"{day}.json"


def metastore_lock_file(state: Path) -> Path:
    """Held by the one process (or metastore service) that has the embedded Derby open."""
    return lock_file(state, "metastore")


def metastore_schema_lock_file(state: Path) -> Path:
    """Held while the metastore schema is created in a JDBC database."""
    return lock_file(state, "metastore-schema")


def metastore_state_dir(state: Path) -> Path:
    """``metastore/``, beside Derby's ``metastore_db/``: the service file, private hive-site.xml
    folders, schema markers and the metastore tools' temporary files."""
    return state / "metastore"


def metastore_service_file(state: Path) -> Path:
    """The running project service's address: ``{"uri", "port", "pid", "owner_pid"}``."""
    return metastore_state_dir(state) / "service.json"


def sql_service_dir(state: Path) -> Path:
    """Where the running SQL services of the project (the engine of ``eventlake up``, ``eventlake
    thrift``) record where they listen: one file per process, see :func:`sql_service_file`."""
    return state / "sql-service"


def compaction_clock_file(state: Path) -> Path:
    """When the engine of ``eventlake up`` last compacted (or, before its first compaction, first
    started): the wall-clock time, in seconds, as text. Its schedule survives its restarts (see
    :class:`eventlake.scheduler.engine.Interval`)."""
    return state / "engine" / "compacted-at"


def sql_service_file(state: Path, pid: int) -> Path:
    """The record of the HiveServer2 (Spark Thrift server) that process ``pid`` serves:
    ``{"host", "port", "pid", "kind", "app_id", "started"}``; stale once ``pid`` is gone."""
    return sql_service_dir(state) / f"{pid}.json"


def metastore_client_conf_dir(state: Path) -> Path:
    """A private hive-site.xml (the database password) for Spark drivers' class path."""
    return metastore_state_dir(state) / "client-conf"


def metastore_service_conf_dir(state: Path, pid: int) -> Path:
    """The hive-site.xml of the metastore service that process ``pid`` starts."""
    return metastore_state_dir(state) / f"conf-{pid}"


def metastore_schema_marker(state: Path, key: str) -> Path:
    """Marks that the metastore schema exists in the database ``key`` stands for."""
    return metastore_state_dir(state) / f"schema-{key}.done"


def metastore_temp_file(state: Path, stem: str, pid: int, suffix: str) -> Path:
    """A hidden per-process input of a metastore tool (``.schematool-<pid>.properties``)."""
    return metastore_state_dir(state) / f".{stem}-{pid}{suffix}"


# collector spool and archive sealing -----------------------------------------------------------

SPOOL_SUFFIX = ".ndjson"
SPOOL_LOCK = ".lock"


def spool_lock_file(spool: Path) -> Path:
    """The lock held by the one collector that owns ``spool``."""
    return spool / SPOOL_LOCK


def spool_source_dir(spool: Path, source_id: str) -> Path:
    return spool / source_id


def spool_segment_name(day_ms: int, opened_ms: int, process_token: str, seq: int) -> str:
    """A spool segment's name without suffix; the sealed archive file keeps it.

    >>> spool_segment_name(1566086400000, 1566090000123, "1a2b3c4d", 7)
    '1566086400000-1566090000123-1a2b3c4d-000007'
    """
    return f"{day_ms}-{opened_ms}-{process_token}-{seq:06d}"


def spool_segment_file(spool: Path, source_id: str, name: str) -> Path:
    """``<spool>/<source-id>/<name>.ndjson``."""
    return spool / source_id / f"{name}{SPOOL_SUFFIX}"


def spool_segment_day_ms(segment_name: str) -> int | None:
    """The received day (ms) a segment file name was opened for, or None for a foreign file.

    >>> spool_segment_day_ms("1566086400000-1566090000123-1a2b3c4d-000007.ndjson")
    1566086400000
    >>> spool_segment_day_ms(".lock") is None
    True
    """
    if not segment_name.endswith(SPOOL_SUFFIX) or segment_name.startswith("."):
        return None
    times = _segment_times(segment_name[: -len(SPOOL_SUFFIX)])
    return times[0] if times else None


def segment_opened_ms(file_name: str) -> int | None:
    """When the spool segment a spool or sealed archive file name comes from was opened (ms), or
    None for another name (an imported archive file).

    >>> segment_opened_ms("1566086400000-1566090000123-1a2b3c4d-000007.gz")
    1566090000123
    >>> segment_opened_ms("segment-abc-part.gz") is None
    True
    """
    times = _segment_times(file_name.split(".", 1)[0])
    return times[1] if times else None


def _segment_times(stem: str) -> tuple[int, int] | None:
    """``(day_ms, opened_ms)`` of a :func:`spool_segment_name`, or None for another name."""
    parts = stem.split("-")
    if len(parts) != 4 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return int(parts[0]), int(parts[1])
