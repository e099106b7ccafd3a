"""A source's sync health: how many of its syncs in a row failed, kept in
``segment-data/_state/sync-health/<source-id>.json`` (this module reads and writes that file).

Every sync result of a source goes through :func:`record_result` (``eventlake sync`` and ``up``'s
engine call it through :mod:`eventlake.scheduler.alerts`): a ``Failed`` result adds one failure, a
sync that ended without failing (``Success``, ``Partial Success``, ``Nothing to do``) ends the
streak, a skipped one (another sync of the source was running) changes nothing. The file is written
only when the streak changes (each failure, and the first success after one), so a healthy source
costs one read per sync. It survives restarts, and it counts failures that left no report (a sync
that failed before its run started, e.g. the catalog was unreachable).

The file is not written under the source's lock: two processes recording results of the same
source at the same moment may count one failure once instead of twice.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime

import orjson

from eventlake import state_layout
from eventlake.storage import Location, Storage
from eventlake.sync.protocol.report import SyncResult
from eventlake.sync.protocol.status import Status
from eventlake.timestamps import format_timestamp, parse_timestamp

FORMAT = 1
FAILED = Status.FAILED
ENDS_STREAK = (Status.SUCCESS, Status.PARTIAL, Status.NOTHING)  # the sync ran without failing


@dataclass(frozen=True)
class SyncHealth:
    """A source's streak of failed syncs (all zero and empty: healthy, or never failed)."""

    failures_in_a_row: int = 0
    first_failure: datetime | None = None  # when the streak's first failed sync finished
    last_failure: datetime | None = None
    last_error: str = ""
    last_run_id: str = ""  # the last result counted (a result recorded twice counts once)


def advance(health: SyncHealth, result: SyncResult) -> SyncHealth:
    """The health after ``result``.

    >>> from eventlake.timestamps import parse_timestamp as t
    >>> def run(status, run_id):
    ...     start, finish = t("2026-01-01T00:00:00Z"), t("2026-01-01T00:01:00Z")
    ...     return SyncResult("web", "S1", run_id, status, start, finish)
    >>> one = advance(SyncHealth(), run("Failed", "r1"))
    >>> one.failures_in_a_row, advance(one, run("Failed", "r1")).failures_in_a_row  # the same run: once
    (1, 1)
    >>> advance(advance(one, run("Failed", "r2")), run("Skipped: already running", "")).failures_in_a_row
    2
    >>> advance(one, run("Nothing to do", "r3")) == SyncHealth()
    True
    """
    if result.run_id and result.run_id == health.last_run_id:
        return health
    if result.status == FAILED:
        return SyncHealth(
            health.failures_in_a_row + 1,
            health.first_failure or result.finish_time,
            result.finish_time,
            result.error,
            result.run_id,
        )
    if result.status in ENDS_STREAK:
        return SyncHealth()
    return health


def read_health(storage: Storage, lake: Location, source_id: str) -> SyncHealth:
    """The source's health (healthy when it has no file yet); ``ValueError`` when the file is
    damaged or of a newer format."""
    try:
        document = orjson.loads(storage.read(state_layout.sync_health_file(lake, source_id)))
    except FileNotFoundError:
        return SyncHealth()
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{state_layout.sync_health_file(lake, source_id)}: not JSON ({exc})") from None
    if document.get("format") != FORMAT:
        raise ValueError(
            f"{state_layout.sync_health_file(lake, source_id)}: format {document.get('format')!r}, "
            "this eventlake "
            f"reads format {FORMAT}: upgrade eventlake"
        )
    return SyncHealth(
        int(document["failures_in_a_row"]),
        parse_timestamp(document.get("first_failure")),
        parse_timestamp(document.get("last_failure")),
        str(document.get("last_error") or ""),
        str(document.get("last_run_id") or ""),
    )


def write_health(storage: Storage, lake: Location, source_id: str, health: SyncHealth) -> None:
    document = {
        **asdict(health),
        "format": FORMAT,
        "first_failure": format_timestamp(health.first_failure) if health.first_failure else None,
        "last_failure": format_timestamp(health.last_failure) if health.last_failure else None,
    }
    storage.write(
        state_layout.sync_health_file(lake, source_id), orjson.dumps(document, option=orjson.OPT_INDENT_2)
    )


def record_result(storage: Storage, lake: Location, result: SyncResult) -> tuple[SyncHealth, SyncHealth]:
    """Count ``result`` in its source's health file: the health before and after it. A damaged file
    counts as healthy (it is written anew at the next change)."""
    damaged = False
    try:
        before = read_health(storage, lake, result.source_id)
    except ValueError:
        before, damaged = SyncHealth(), True
    after = advance(before, result)
    if after != before or damaged:
        write_health(storage, lake, result.source_id, after)
    return before, after
