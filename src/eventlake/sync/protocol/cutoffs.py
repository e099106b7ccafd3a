"""The lake's cut-offs in time, and the clock margin that keeps them apart: the one place they are
computed (pure: the clock is passed in).

- **Retention** deletes an archive day, or a table partition, once the time it holds ended before
  ``now - days`` (:func:`retention_cutoff`, :func:`ended_before`, :func:`archive_day_ended_before`).
- **Dedupe** drops a run's message whose id the index holds received up to ``dedupe_window_days``
  before the run's first message (:func:`dedupe_since`).
- **The dedupe index** is read by the run that started each of its folders: a folder of a run that
  started more than :data:`CLOCK_MARGIN` before the dedupe's ``since`` holds only ids received
  before it (:func:`index_floor`; the margin is for the clocks of the collector, which sets
  ``receivedAt``, and of the sync, which names runs). Retention deletes the folders no sync of new
  messages and no replay of the archive it keeps can read (:func:`index_expired_before`); an
  adoption seeds the ids a sync from now on can look up (:func:`seed_since`). Compaction merges a
  day's files whole once its runs are over (:func:`index_day_over`).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from eventlake import layout
from eventlake.timestamps import as_utc

# a margin for the clocks of the collector (which sets receivedAt) and of the sync (which names runs)
CLOCK_MARGIN = timedelta(days=1)
# the runs of a UTC day (named by when they started) have all ended this long after the day did
INDEX_DAY_OVER = timedelta(hours=1)


def retention_cutoff(now: datetime, days: int) -> datetime:
    """What ended before this goes, under a retention of ``days`` days."""
    return now - timedelta(days=days)


def ended_before(end: datetime, cutoff: datetime) -> bool:
    """Whether a span of time that ends at ``end`` (a partition's hour or day) is past ``cutoff``."""
    return end <= cutoff


def archive_day_ended_before(day_ms: int, cutoff: datetime) -> bool:
    """Whether the received day ``day_ms`` of the archive is past ``cutoff``.

    >>> archive_day_ended_before(0, datetime(1970, 1, 2, tzinfo=timezone.utc))
    True
    """
    return day_ms + layout.DAY_MS <= int(cutoff.timestamp() * 1000)


def dedupe_since(first_received: datetime, window_days: int) -> datetime:
    """The ids a run's messages are deduplicated against: those received at or after this."""
    return first_received - timedelta(days=window_days)


def index_floor(since: datetime) -> datetime:
    """The dedupe index's folders of runs that started before this hold only ids received before
    ``since`` (aware, or naive in UTC): a lookup from ``since`` does not read them."""
    return as_utc(since) - CLOCK_MARGIN


def index_expired_before(archive_cutoff: datetime, window_days: int) -> datetime:
    """Retention deletes the dedupe index's folders of runs that started before this: neither a sync
    of new messages nor a replay of the archive kept after ``archive_cutoff`` reads them."""
    return index_floor(dedupe_since(archive_cutoff, window_days))


def seed_since(now: datetime, window_days: int) -> datetime:
    """An adoption seeds the dedupe index with the ids received since this: all a sync from ``now``
    on can look up (the window and the clock margin)."""
    return index_floor(dedupe_since(now, window_days))


def index_day_over(day: str, now: datetime) -> bool:
    """Whether the runs of the UTC ``day`` (``YYYY-MM-DD``) have all ended at ``now``: its index files
    can be merged whole.

    >>> index_day_over("2026-11-20", datetime(2026, 11, 21, 1, tzinfo=timezone.utc))
    True
    """
    start = datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=timezone.utc)
    return now >= start + timedelta(days=1) + INDEX_DAY_OVER
