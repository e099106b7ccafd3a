"""ISO-8601 timestamps as Segment clients send them, and the one format eventlake writes.

Clients send ``Z``, ``+00:00``, ``+0200``, milli-, micro- and nanoseconds, or a space instead of
``T``. Everything is normalised to timezone-aware UTC ``datetime`` with microsecond precision.

>>> parse_timestamp("2026-11-22T10:47:01.123456789Z").isoformat()
'2026-11-22T10:47:01.123456+00:00'
>>> format_timestamp(parse_timestamp("2026-11-22 12:47:01+02:00"))
'2026-11-22T10:47:01.000Z'
>>> parse_timestamp("yesterday") is None
True
"""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

UTC = timezone.utc

_ISO = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<h>\d{2}):(?P<m>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<frac>\d{1,9}))?)?"
    r"(?P<tz>Z|z|[+-]\d{2}(?::?\d{2})?)?$"
)


# what Segment libraries send: datetime.fromisoformat handles it, several times faster than _ISO
_CANONICAL = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})$")


def parse_timestamp(value: object) -> datetime | None:
    """An ISO-8601 date-time string as an aware UTC datetime, or None when it is not one.

    A date-time without an offset is taken as UTC. Date-only strings are not date-times.
    """
    if type(value) is not str or len(value) > 40:
        return None
    return _parse(value)


@functools.lru_cache(maxsize=4096)  # a message's timestamp, originalTimestamp and sentAt often agree
def _parse(value: str) -> datetime | None:
    if _CANONICAL.match(value):
        try:
            parsed = datetime.fromisoformat(value[:-1] + "+00:00" if value[-1] == "Z" else value)
        except ValueError:
            return None
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            return None
    match = _ISO.match(value.strip())
    if match is None:
        return None
    frac = (match["frac"] or "").ljust(6, "0")[:6]
    try:
        year, month, day = (int(part) for part in match["date"].split("-"))
        result = datetime(
            year, month, day, int(match["h"]), int(match["m"]), int(match["s"] or 0), int(frac), tzinfo=UTC
        )
    except ValueError:
        return None
    tz = match["tz"]
    if tz and tz not in ("Z", "z"):
        sign = 1 if tz[0] == "+" else -1
        digits = tz[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
        if hours > 23 or minutes > 59:
            return None
        try:
            result -= sign * timedelta(hours=hours, minutes=minutes)
        except OverflowError:
            return None
    return result


def as_utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive one is taken as UTC (Spark hands naive datetimes in its UTC
    session zone).

    >>> as_utc(datetime(2026, 11, 22, 10)).isoformat(), as_utc(parse_timestamp("2026-11-22T12:00+02:00")).hour
    ('2026-11-22T10:00:00+00:00', 10)
    """
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def format_timestamp(value: datetime) -> str:
    """The ISO-8601 form eventlake writes: UTC, milliseconds, ``Z`` (as Segment does)."""
    t = value.astimezone(UTC)
    day = f"{t.year:04d}-{t.month:02d}-{t.day:02d}"
    return f"{day}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}.{t.microsecond // 1000:03d}Z"


def day_start_ms(value: datetime) -> int:
    """UTC midnight of ``value``'s day in Unix milliseconds (the raw archive's day folder).

    >>> day_start_ms(parse_timestamp("2019-08-18T13:00:00Z"))
    1566086400000
    """
    value = value.astimezone(UTC)
    midnight = datetime(value.year, value.month, value.day, tzinfo=UTC)
    return int(midnight.timestamp()) * 1000


def now_utc() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class RunClock:
    """When a run started, on the wall clock (what its report says) and on the monotonic clock (how
    long it took): the one owner of a run's duration. :meth:`finish` is the start plus the
    monotonic time elapsed, so a run's finish is never before its start and its duration never
    counts a step of the machine's clock (NTP, an operator, a VM resumed), however far it jumps."""

    started_at: datetime
    started_monotonic: float

    @classmethod
    def start(cls) -> RunClock:
        return cls(now_utc(), time.monotonic())

    def elapsed_seconds(self) -> float:
        return time.monotonic() - self.started_monotonic

    def finish(self) -> datetime:
        """The run's finish time: its start plus the time elapsed since (never before the start)."""
        return self.started_at + timedelta(seconds=self.elapsed_seconds())
