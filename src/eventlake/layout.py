"""Every path convention of the lake and the local state, in one place. Nobody else formats a path.

Lake root (Segment-compatible layout)::

    segment-logs/<source-id>/<received-day-ms>/<file>.gz             raw archive (gzip NDJSON)
    segment-data/data/<source-id>/segment_type=<t>/day=<d>/hr=<h>/    lake tables (Parquet)
    segment-data/quarantine/<source-id>/run_id=<r>/                   rejected messages and values
    segment-data/reports/day=<d>/source=<source-id>/run_id=<r>/report.json
    segment-data/_state/{ledger,dedupe,pending,schemas}/...          durable sync state
    segment-stage/<source-id>/<run-id>/                                temporary run output

Local state dir: ``spool/`` (collector), ``metastore_db/`` (embedded Derby), ``warehouse/``, ``locks/``.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from eventlake.timestamps import UTC

ARCHIVE = "segment-logs"
DATA = "segment-data"
STAGE = "segment-stage"
ARCHIVE_SUFFIX = ".gz"
REPORT_FILE = "report.json"


# raw archive ---------------------------------------------------------------------------------


def archive_root(lake: Path) -> Path:
    return lake / ARCHIVE


def archive_source_dir(lake: Path, source_id: str) -> Path:
    return lake / ARCHIVE / source_id


def archive_file(lake: Path, source_id: str, day_ms: int, name: str) -> Path:
    """``segment-logs/<source-id>/<day-ms>/<name>.gz``."""
    return lake / ARCHIVE / source_id / str(day_ms) / f"{name}{ARCHIVE_SUFFIX}"


def archive_relative(lake: Path, path: Path) -> str:
    """The archive file's key in the ledger: its path relative to the lake root, with ``/``."""
    return path.relative_to(lake).as_posix()


# lake tables ---------------------------------------------------------------------------------


def partition_columns(date_partition: str) -> tuple[str, ...]:
    """The partition keys of a ``date_partition`` setting, outermost first."""
    return {
        "day-hour": ("day", "hr"),
        "year-month-day-hour": ("year", "month", "day", "hr"),
        "year-month-day": ("year", "month", "day"),
        "day": ("day",),
    }[date_partition]


def partition_values(date_partition: str, received_at: datetime) -> tuple[str, ...]:
    """The partition values of a message received at ``received_at`` (UTC).

    >>> from eventlake.timestamps import parse_timestamp
    >>> partition_values("day-hour", parse_timestamp("2026-11-22T07:05:00Z"))
    ('2026-11-22', '07')
    >>> partition_values("year-month-day", parse_timestamp("2026-11-22T07:05:00Z"))
    ('2026', '11', '22')
    """
    t = received_at.astimezone(UTC)
    parts = {"day": t.strftime("%Y-%m-%d"), "hr": t.strftime("%H")}
    if date_partition.startswith("year-"):
        parts = {"year": t.strftime("%Y"), "month": t.strftime("%m"), "day": t.strftime("%d"), "hr": parts["hr"]}
    return tuple(parts[key] for key in partition_columns(date_partition))


def source_data_dir(lake: Path, source_dir_name: str) -> Path:
    """``segment-data/data/<source-id or slug>``."""
    return lake / DATA / "data" / source_dir_name


def table_dir(lake: Path, source_dir_name: str, segment_type: str) -> Path:
    return source_data_dir(lake, source_dir_name) / f"segment_type={segment_type}"


def partition_subdir(keys: tuple[str, ...], values: tuple[str, ...]) -> str:
    """``day=2026-11-22/hr=07``."""
    return "/".join(f"{k}={v}" for k, v in zip(keys, values, strict=True))


def quarantine_dir(lake: Path, source_id: str) -> Path:
    return lake / DATA / "quarantine" / source_id


# reports and state -----------------------------------------------------------------------------


def report_file(lake: Path, day: str, source_id: str, run_id: str) -> Path:
    return lake / DATA / "reports" / f"day={day}" / f"source={source_id}" / f"run_id={run_id}" / REPORT_FILE


def reports_root(lake: Path) -> Path:
    return lake / DATA / "reports"


def state_dir(lake: Path, kind: str, source_id: str) -> Path:
    """Durable sync state: ``segment-data/_state/<kind>/<source-id>`` (ledger, dedupe, pending)."""
    return lake / DATA / "_state" / kind / source_id


def schema_file(lake: Path, database: str, table: str) -> Path:
    return lake / DATA / "_state" / "schemas" / database / f"{table}.json"


def stage_dir(lake: Path, source_id: str, run_id: str) -> Path:
    return lake / STAGE / source_id / run_id


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
