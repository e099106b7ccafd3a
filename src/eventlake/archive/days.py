"""The archive by received day: list one day, and reopen a day that may have been closed.

A sync lists only the archive's open days (see :mod:`eventlake.sync.ledger`): the days after the
ledger's ``closed_through`` and the days named by a reopen marker. Whatever writes an archive file
into a day that has ended (the sealer sealing late, ``eventlake import``; after a restore by hand,
``eventlake sync --rescan``) first writes a marker, ``_state/reopened/<source-id>/<day>-<written>-
<token>.json``; the marker is written before the file, so a sync that could miss the file sees the
marker. A sync consumes a marker only once it is older than :data:`REOPEN_MARGIN` and every file of
its day is synced, so a file written just after its marker is still listed.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable

from eventlake import layout
from eventlake.archive.files import ArchiveFile, archive_files, list_archive_files
from eventlake.storage import Location, Storage

# how long after its day ended a day may be closed, and after its writing a marker consumed: far
# longer than a seal or import takes to write a file once it wrote the marker, and than clock skew
REOPEN_MARGIN_MS = 2 * 3_600_000


def day_of(ms: int) -> int:
    """UTC midnight of the day holding ``ms`` (Unix milliseconds).

    >>> day_of(1764115200123)
    1764115200000
    """
    return ms - ms % layout.DAY_MS


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
    """Mark ``days`` as written to again, before writing into them; the days that have not ended
    yet are left alone (they are open anyway). Returns the markers written."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    written = []
    for day in sorted(set(days)):
        if day + layout.DAY_MS <= now_ms:
            marker = layout.reopened_day_file(lake, source_id, day, now_ms, secrets.token_hex(4))
            storage.write(marker, b"{}")
            written.append(marker)
    return written


def reopened_days(storage: Storage, lake: Location, source_id: str) -> dict[int, list[tuple[int, Location]]]:
    """The reopen markers by day: ``{day: [(written_ms, marker), ...]}`` (one listing)."""
    found: dict[int, list[tuple[int, Location]]] = {}
    for info in storage.list(layout.reopened_days_dir(lake, source_id), "*.json"):
        times = layout.reopened_day_times(info.path.name)
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


def listing_is_final(day_ms: int, markers_written: Iterable[int], listed_ms: int) -> bool:
    """Whether a listing of a day's archive folder taken at ``listed_ms`` shows every file the day
    will hold until a new reopen marker says otherwise: the day had ended :data:`REOPEN_MARGIN_MS`
    before, and so had each of its markers been written (what writes into a day that has ended
    writes a marker first, and its file within the margin). A reader that keeps such a listing
    lists the day again only when a newer marker comes (the console: see
    :mod:`eventlake.console.pending`).

    >>> day = 1764028800000
    >>> listing_is_final(day, [], day + layout.DAY_MS + REOPEN_MARGIN_MS)
    True
    >>> listing_is_final(day, [day + 3 * layout.DAY_MS], day + 3 * layout.DAY_MS + 60_000)
    False
    """
    return day_ms + layout.DAY_MS + REOPEN_MARGIN_MS <= listed_ms and all(
        written + REOPEN_MARGIN_MS <= listed_ms for written in markers_written
    )
