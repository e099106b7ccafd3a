"""Every path convention of the lake and the local state, in one place. Nobody else formats a path.

Lake root (Segment-compatible layout)::

    segment-logs/<source-id>/<received-day-ms>/<file>.gz             raw archive (gzip NDJSON)
    segment-data/data/<source-id>/segment_type=<t>/day=<d>/hr=<h>/    lake tables (Parquet)
    segment-data/quarantine/<source-id>/run_id=<r>/                   rejected messages and values
    segment-data/reports/day=<d>/source=<source-id>/run_id=<r>/report.json
    segment-data/_state/{ledger,dedupe,pending,schemas}/...          durable sync state
    segment-data/_state/suppression/<source-id>.json                  suppressed userIds (collector)
    segment-stage/<source-id>/<run-id>/                                temporary run output

Local state dir: ``spool/`` (collector), ``metastore_db/`` (embedded Derby), ``metastore/`` (its
service and tools), ``warehouse/``, ``locks/``, ``logs/``.
"""

from __future__ import annotations

import re
from pathlib import Path

from eventlake.storage.location import Location

ARCHIVE = "segment-logs"
DATA = "segment-data"
STAGE = "segment-stage"
ARCHIVE_SUFFIX = ".gz"
REPORT_FILE = "report.json"


# raw archive ---------------------------------------------------------------------------------


def archive_root(lake: Location) -> Location:
    return lake / ARCHIVE


def archive_source_dir(lake: Location, source_id: str) -> Location:
    return lake / ARCHIVE / source_id


def archive_file(lake: Location, source_id: str, day_ms: int, name: str) -> Location:
    """``segment-logs/<source-id>/<day-ms>/<name>.gz``."""
    return lake / ARCHIVE / source_id / str(day_ms) / f"{name}{ARCHIVE_SUFFIX}"


def lake_relative(lake: Location, path: Location) -> str:
    """A file's key: its path relative to the lake root, with ``/`` (archive files in the ledger)."""
    return path.relative_to(lake).as_posix()


# lake tables ---------------------------------------------------------------------------------


# partition keys of each ``date_partition`` setting, outermost first, with their Java date pattern
_PARTITION_PATTERNS = {
    "day-hour": (("day", "yyyy-MM-dd"), ("hr", "HH")),
    "year-month-day-hour": (("year", "yyyy"), ("month", "MM"), ("day", "dd"), ("hr", "HH")),
    "year-month-day": (("year", "yyyy"), ("month", "MM"), ("day", "dd")),
    "day": (("day", "yyyy-MM-dd"),),
}


def partition_patterns(date_partition: str) -> tuple[tuple[str, str], ...]:
    """``(key, Java date pattern)`` pairs of a ``date_partition`` setting (for Spark's date_format)."""
    return _PARTITION_PATTERNS[date_partition]


def partition_columns(date_partition: str) -> tuple[str, ...]:
    """The partition keys of a ``date_partition`` setting, outermost first."""
    return tuple(key for key, _ in _PARTITION_PATTERNS[date_partition])


def source_data_dir(lake: Location, source_dir_name: str) -> Location:
    """``segment-data/data/<source-id or slug>``."""
    return lake / DATA / "data" / source_dir_name


def table_dir(lake: Location, source_dir_name: str, segment_type: str) -> Location:
    return source_data_dir(lake, source_dir_name) / f"segment_type={segment_type}"


def partition_subdir(keys: tuple[str, ...], values: tuple[str, ...]) -> str:
    """``day=2026-11-22/hr=07``."""
    return "/".join(f"{k}={v}" for k, v in zip(keys, values, strict=True))


def quarantine_dir(lake: Location, source_id: str) -> Location:
    return lake / DATA / "quarantine" / source_id


# reports and state -----------------------------------------------------------------------------


REPORT_PARTITION_PATH = "day={day}/source={source_id}/run_id={run_id}"


def report_file(lake: Location, day: str, source_id: str, run_id: str) -> Location:
    folder = REPORT_PARTITION_PATH.format(day=day, source_id=source_id, run_id=run_id)
    return lake / DATA / "reports" / folder / REPORT_FILE


def reports_root(lake: Location) -> Location:
    return lake / DATA / "reports"


def report_files_pattern() -> str:
    """The glob, under :func:`reports_root`, of every report file."""
    return re.sub(r"\{\w+\}", "*", REPORT_PARTITION_PATH) + "/" + REPORT_FILE


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


def suppression_file(lake: Location, source_id: str) -> Location:
    """The source's suppression list: ``segment-data/_state/suppression/<source-id>.json``."""
    return lake / DATA / "_state" / "suppression" / f"{source_id}.json"


def suppression_lock_file(lake: Location, source_id: str) -> Location:
    """Held while the suppression list is rewritten: ``.../suppression/.<source-id>.lock``."""
    return lake / DATA / "_state" / "suppression" / f".{source_id}.lock"


def ledger_file(lake: Location, source_id: str, run_id: str) -> Location:
    """The ledger entry of one run: the archive files it brought into the lake."""
    return state_dir(lake, "ledger", source_id) / f"{run_id}.json"


def pending_file(lake: Location, source_id: str, run_id: str) -> Location:
    """The commit manifest of a run that has not finished publishing."""
    return state_dir(lake, "pending", source_id) / f"{run_id}.json"


def dedupe_index_dir(lake: Location, source_id: str) -> Location:
    """The source's dedupe index: ``_state/dedupe/<source-id>/run_id=<run>/*.parquet``."""
    return state_dir(lake, "dedupe", source_id)


def run_folder(run_id: str) -> str:
    """The folder of one run's files in a table partitioned by run (quarantine, dedupe index)."""
    return f"run_id={run_id}"


def stage_root(lake: Location, source_id: str) -> Location:
    return lake / STAGE / source_id


def stage_dir(lake: Location, source_id: str, run_id: str) -> Location:
    """One run's staging: ``segment-stage/<source-id>/<run-id>/<kind>/...``, where each kind of
    file (table, dedupe, values, messages, rewritten) waits until the commit publishes it."""
    return stage_root(lake, source_id) / run_id


def part_file_name(run_id: str, index: int, prefix: str = "") -> str:
    """The name of the file a run's worker ``index`` writes: ``part-<run>-00007.parquet``."""
    return f"{prefix}part-{run_id}-{index:05d}.parquet"


# local state -----------------------------------------------------------------------------------


def spool_dir(state: Path) -> Path:
    return state / "spool"


def metastore_dir(state: Path) -> Path:
    return state / "metastore_db"


def warehouse_dir(state: Path) -> Path:
    return state / "warehouse"


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
    parts = segment_name[: -len(SPOOL_SUFFIX)].split("-")
    if len(parts) != 4 or not parts[0].isdigit():
        return None
    return int(parts[0])


def is_archive_file_name(file_name: str) -> bool:
    """A sealed archive file (not a hidden temporary one)."""
    return file_name.endswith(ARCHIVE_SUFFIX) and not file_name.startswith(".")
