"""The state of an archive day: the one place its rules live (pure: no storage, the clock passed in).

A received day of a source's archive (``segment-logs/<source-id>/<day-ms>/``) is, for a sync:

- **open** while it has not ended, or ended less than :data:`CLOSE_MARGIN_MS` ago, or a file of it
  is not synced yet: every sync lists its folder;
- **closable** once it ended :data:`CLOSE_MARGIN_MS` ago (:func:`may_close`) and every file listed
  in it is synced: the next checkpoint closes it;
- **closed** once a checkpoint moved ``closed_through`` past it (its files' names in its day file):
  no sync lists it;
- **reopened** while a reopen marker names it (:func:`is_open`): a writer into a day that ended
  (the sealer, ``eventlake import``, ``sync --rescan``) writes one just before its file
  (:func:`needs_marker`), again every :data:`REMARK_AFTER_MS` while it goes on writing into the day
  (:func:`needs_remark`); a checkpoint consumes the markers once each is :data:`MARKER_AGE_MS` old
  (:func:`marker_may_be_consumed`) and every file of the day is synced: the day is closed again;
- **expired** once retention deleted its files (:func:`is_expired`): an import skips it.

``docs/sync.md`` ("An archive day's states") draws the same machine. The ledger
(:mod:`eventlake.sync.protocol.ledger`), the sealer, the importer and retention ask these functions; none
of them compares a day's times itself.
"""

from __future__ import annotations

from collections.abc import Container, Iterable

from eventlake import layout

DAY_MS = layout.DAY_MS
HOUR_MS = 3_600_000

# how long after its end a day may close: a collector whose clock is behind seals into it after
# midnight, a seal started before midnight finishes after it
CLOSE_MARGIN_MS = 2 * HOUR_MS
# how long after its writing a reopen marker may be consumed: far longer than a writer takes from
# writing the marker to its file written whole, plus the clock skew between writer and sync
MARKER_AGE_MS = 2 * HOUR_MS
# a writer that goes on writing into a day marks it again this often, so that every file it writes
# is announced by a marker younger than MARKER_AGE_MS (the rest is the slack for one file's write)
REMARK_AFTER_MS = MARKER_AGE_MS // 4


def day_of(ms: int) -> int:
    """UTC midnight of the day holding ``ms`` (Unix milliseconds).

    >>> day_of(1764115200123)
    1764115200000
    """
    return ms - ms % DAY_MS


def has_ended(day_ms: int, now_ms: int) -> bool:
    """Whether the received day ``day_ms`` is over at ``now_ms``."""
    return day_ms + DAY_MS <= now_ms


def needs_marker(day_ms: int, now_ms: int) -> bool:
    """Whether a writer must mark ``day_ms`` before writing a file into it: the day ended (a checkpoint
    may have closed it, or close it before the file is listed); a day not over is open anyway."""
    return has_ended(day_ms, now_ms)


def needs_remark(marked_ms: int, now_ms: int) -> bool:
    """Whether a writer that marked a day at ``marked_ms`` and still writes into it marks it again
    (its marker may soon be old enough to be consumed)."""
    return now_ms - marked_ms >= REMARK_AFTER_MS


def may_close(day_ms: int, now_ms: int) -> bool:
    """Whether ``day_ms`` ended long enough ago to be closed (its files all synced: the ledger's part).

    >>> may_close(0, DAY_MS + CLOSE_MARGIN_MS), may_close(0, DAY_MS + CLOSE_MARGIN_MS - 1)
    (True, False)
    """
    return day_ms + DAY_MS + CLOSE_MARGIN_MS <= now_ms


def last_closable_day(now_ms: int) -> int:
    """The newest day that may be closed at ``now_ms``.

    >>> last_closable_day(10 * DAY_MS + 60_000) == 8 * DAY_MS  # 00:01: yesterday is not closable yet
    True
    """
    return day_of(now_ms - CLOSE_MARGIN_MS) - DAY_MS


def first_closed_through(earliest_file_day: int | None, now_ms: int) -> int:
    """A new source's first ``closed_through``: the days before its earliest archive file that may
    already close (then each day after it closes by :func:`may_close`)."""
    through = last_closable_day(now_ms)
    return through if earliest_file_day is None else min(through, earliest_file_day - DAY_MS)


def marker_may_be_consumed(written_ms: int, now_ms: int) -> bool:
    """Whether a reopen marker written at ``written_ms`` is old enough for a checkpoint to consume
    (the file it announces is written whole by now); its day must be all synced too."""
    return written_ms + MARKER_AGE_MS <= now_ms


def is_open(day_ms: int, closed_through: int | None, reopened: Container[int]) -> bool:
    """Whether a sync lists ``day_ms``: no checkpoint yet, a day after ``closed_through``, or a day
    a reopen marker names."""
    return closed_through is None or day_ms > closed_through or day_ms in reopened


def is_expired(day_ms: int, expired_through: int | None) -> bool:
    """Whether retention deleted ``day_ms``'s files (its days up to ``expired_through``): a file of it
    is not imported again."""
    return expired_through is not None and day_ms <= expired_through


def listing_is_final(day_ms: int, markers_written: Iterable[int], listed_ms: int) -> bool:
    """Whether a listing of a day's archive folder taken at ``listed_ms`` shows every file the day
    will hold until a new reopen marker says otherwise: the day may close (:func:`may_close`) and
    each of its markers may be consumed (:func:`marker_may_be_consumed`); what writes into a day
    that has ended writes a marker first. A reader that keeps such a listing lists the day again
    only when a newer marker comes (the console: see :mod:`eventlake.console.pending`).

    >>> day = 1764028800000
    >>> listing_is_final(day, [], day + DAY_MS + CLOSE_MARGIN_MS)
    True
    >>> listing_is_final(day, [day + 3 * DAY_MS], day + 3 * DAY_MS + 60_000)
    False
    """
    return may_close(day_ms, listed_ms) and all(
        marker_may_be_consumed(written, listed_ms) for written in markers_written
    )
