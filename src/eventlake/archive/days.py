"""The archive by received day: list one day, mark a day written to again, and what retention deleted.

A sync lists only the archive's open days (the rules: :mod:`eventlake.archive.day_state`; the
ledger: :mod:`eventlake.sync.protocol.ledger`): the days after the ledger's ``closed_through`` and the days
named by a reopen marker. Whatever writes an archive file into a day that has ended (the sealer
sealing late, ``eventlake import``; after a restore by hand, ``eventlake sync --rescan``) first
writes a marker, ``_state/reopened/<source-id>/<day>-<written>-<token>.json``; the marker is written
before the file, so a sync that could miss the file sees the marker. A sync consumes a marker only
once it is :data:`~eventlake.archive.day_state.MARKER_AGE_MS` old and every file of its day is
synced, so a file written just after its marker is still listed; a writer that goes on writing into
a day for longer marks it again (:class:`DayMarks`).

Retention records the newest day whose files it deleted (``_state/archive-expired/<source-id>.json``,
:func:`expire_days_through`) before deleting them; an import skips the days up to it
(:func:`expired_through`), so a re-imported archive does not bring back what retention dropped.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterable

import orjson

from eventlake import layout, state_layout
from eventlake.archive.day_state import needs_marker, needs_remark
from eventlake.archive.files import ArchiveFile, archive_files, list_archive_files
from eventlake.storage import Location, Storage


def wall_ms() -> int:
    """The machine's clock, Unix milliseconds (the default ``clock`` of the writers here)."""
    return int(time.time() * 1000)


def list_archive_day(storage: Storage, lake: Location, source_id: str, day_ms: int) -> list[ArchiveFile]:
    """The sealed archive files of one received day, sorted by key (one listing of its folder)."""
    return archive_files(storage.list(layout.archive_day_dir(lake, source_id, day_ms), "*"), lake)


def list_archive_days(
    storage: Storage, lake: Location, source_id: str, days: Iterable[int]
) -> list[ArchiveFile]:
    """The sealed archive files of the given received days, sorted by key."""
    found = [f for day in sorted(set(days)) for f in list_archive_day(storage, lake, source_id, day)]
    return sorted(found, key=lambda f: f.key)


def reopen_days(
    storage: Storage, lake: Location, source_id: str, days: Iterable[int], now_ms: int | None = None
) -> list[Location]:
    """Mark ``days`` as written to again, just before writing into them; the days that have not
    ended yet are left alone (they are open anyway). Returns the markers written."""
    now_ms = wall_ms() if now_ms is None else now_ms
    return [
        _mark(storage, lake, source_id, day, now_ms) for day in sorted(set(days)) if needs_marker(day, now_ms)
    ]


def _mark(storage: Storage, lake: Location, source_id: str, day: int, now_ms: int) -> Location:
    marker = state_layout.reopened_day_file(lake, source_id, day, now_ms, secrets.token_hex(4))
    storage.write(marker, b"{}")
    return marker


class DayMarks:
    """The reopen markers of a writer that writes many files into many days (``eventlake import``):
    :meth:`before_write` just before each file marks its day if it ended, and marks it again once
    the writer's last marker of it is :data:`~eventlake.archive.day_state.REMARK_AFTER_MS` old, so
    a checkpoint never consumes the last marker of a day the writer is still writing into, however
    long the writer runs. Killed at any moment, the markers left are consumed by later syncs once
    their days are synced; a rerun marks again as it goes. Safe from several threads."""

    def __init__(
        self, storage: Storage, lake: Location, source_id: str, clock: Callable[[], int] = wall_ms
    ) -> None:
        self.storage, self.lake, self.source_id, self.clock = storage, lake, source_id, clock
        self.marked: dict[int, int] = {}  # day -> when this writer last marked it
        self._lock = threading.Lock()

    def before_write(self, day: int) -> Location | None:
        """Mark ``day`` if a file is about to be written into it and no fresh marker of this
        writer names it; the marker written, or None."""
        with self._lock:  # one marker a day at a time, not one per thread
            now_ms = self.clock()
            last = self.marked.get(day)
            if not needs_marker(day, now_ms) or (last is not None and not needs_remark(last, now_ms)):
                return None
            marker = _mark(self.storage, self.lake, self.source_id, day, now_ms)
            self.marked[day] = now_ms
            return marker


def reopened_days(storage: Storage, lake: Location, source_id: str) -> dict[int, list[tuple[int, Location]]]:
    """The reopen markers by day: ``{day: [(written_ms, marker), ...]}`` (one listing)."""
    found: dict[int, list[tuple[int, Location]]] = {}
    for info in storage.list(state_layout.reopened_days_dir(lake, source_id), "*.json"):
        times = state_layout.reopened_day_times(info.path.name)
        if times is not None:
            found.setdefault(times[0], []).append((times[1], info.path))
    return found


def reopen_archive(storage: Storage, lake: Location, source_id: str) -> int:
    """Mark every day of the source's archive as written to again (``eventlake sync --rescan``:
    after files were copied into the archive by hand); the next sync lists every day once. Returns
    the number of days marked."""
    return len(
        reopen_days(
            storage, lake, source_id, {f.day_ms for f in list_archive_files(storage, lake, source_id)}
        )
    )


def expired_through(storage: Storage, lake: Location, source_id: str) -> int | None:
    """The newest archive day whose files retention deleted (None: it deleted none)."""
    try:
        return int(orjson.loads(storage.read(state_layout.archive_expired_file(lake, source_id)))["through"])
    except FileNotFoundError:
        return None


def expire_days_through(storage: Storage, lake: Location, source_id: str, day: int) -> None:
    """Record that retention deletes the archive files of the days up to ``day`` (before deleting
    them: killed in between, the files left are synced already and go at the next retention)."""
    through = expired_through(storage, lake, source_id)
    if through is None or through < day:
        storage.write(state_layout.archive_expired_file(lake, source_id), orjson.dumps({"through": day}))
