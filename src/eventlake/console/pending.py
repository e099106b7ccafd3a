"""A source's archive files no sync has read, as the console shows them every few seconds, at a
cost that does not grow with the archive's age.

:meth:`eventlake.sync.protocol.ledger.Ledger.pending` lists every open day of the archive; a source whose
checkpoint is more than :data:`~eventlake.sync.protocol.ledger.WIDE_GAP_DAYS` behind (disabled, paused, or
never synced) has it list the whole archive, which the console's refresh would do every 5 s
(millions of keys after a year). :class:`PendingFiles` reads the ledger as a sync does (the
checkpoint, the run entries after it, the reopen markers: a few requests), but keeps each open
day's listing: a day is listed again only while its listing may still miss a file
(:func:`eventlake.archive.day_state.listing_is_final`: the day ended, and its reopen markers were
written, less than the margin before it was listed), so a refresh lists today, yesterday and the
days a new marker reopened. The whole archive is listed once, at the first refresh of a source
that far behind; a day leaves the cache when the ledger closes it. Per day only the names that
were not synced when it was listed are kept (they can only become synced), so memory follows
the pending files, not the archive.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from eventlake import layout
from eventlake.archive import list_archive_files
from eventlake.archive.day_state import day_of, listing_is_final
from eventlake.archive.days import list_archive_day
from eventlake.storage import Location, Storage
from eventlake.sync.protocol.ledger import WIDE_GAP_DAYS, Ledger, LedgerView


@dataclass
class _Listed:
    listed_ms: int  # when the day's folder was listed
    names: frozenset[str]  # its files no sync had read then (closed day file of a reopened day included)


class PendingFiles:
    """One source's unsynced archive files, kept up to date by :meth:`refresh` (not thread-safe:
    the console's background thread owns it). See the module's description."""

    def __init__(self, storage: Storage, lake: Location, source_id: str) -> None:
        self.storage, self.lake, self.source_id = storage, lake, source_id
        self.ledger = Ledger(storage, lake, source_id)
        self._days: dict[int, _Listed] = {}
        self._started = False

    def refresh(self, now_ms: int) -> list[tuple[int, str]]:
        """The pending files as ``(day, name)``, sorted: reads the ledger, then lists the open days
        whose kept listing may be incomplete (see the module's description)."""
        view = self.ledger.read()
        fresh: set[int] = set()  # the days listed by this refresh
        behind = view.closed_through is None or now_ms - view.closed_through > WIDE_GAP_DAYS * layout.DAY_MS
        if not self._started and behind:  # the whole archive, once
            by_day: dict[int, list[str]] = defaultdict(list)
            for f in list_archive_files(self.storage, self.lake, self.source_id):
                if view.is_open(f.day_ms):
                    by_day[f.day_ms].append(f.path.name)
            fresh = set(by_day) | self._open_days(view, now_ms)
            for day in fresh:
                self._keep(day, by_day.get(day, []), view, now_ms)
        self._started = True
        wanted = self._open_days(view, now_ms)
        for day in [d for d in self._days if d not in wanted]:
            del self._days[day]  # closed by a sync meanwhile
        for day in sorted(d for d in wanted - fresh if not self._final(d, view)):
            names = [f.path.name for f in list_archive_day(self.storage, self.lake, self.source_id, day)]
            self._keep(day, names, view, now_ms)
        return sorted(
            (day, name)
            for day, listed in self._days.items()
            for name in listed.names - view.synced.get(day, set())
        )

    def _open_days(self, view: LedgerView, now_ms: int) -> set[int]:
        """The days a sync would list now: after ``closed_through`` up to tomorrow (a collector's
        clock a little ahead), and the reopened ones; with no checkpoint yet, the days listed so
        far (the first refresh lists the whole archive) and the recent ones."""
        today = day_of(now_ms)
        if view.closed_through is None:
            days = set(self._days) | {today - layout.DAY_MS, today, today + layout.DAY_MS}
        else:
            days = set(range(view.closed_through + layout.DAY_MS, today + 2 * layout.DAY_MS, layout.DAY_MS))
        return {d for d in days | set(view.reopened) if view.is_open(d)}

    def _final(self, day: int, view: LedgerView) -> bool:
        listed = self._days.get(day)
        return listed is not None and listing_is_final(
            day, (written for written, _ in view.reopened.get(day, ())), listed.listed_ms
        )

    def _keep(self, day: int, names: list[str], view: LedgerView, now_ms: int) -> None:
        synced = set(view.synced.get(day, ()))
        if view.closed_through is not None and day <= view.closed_through:  # reopened after closing
            synced |= self.ledger.closed_day(day)
        self._days[day] = _Listed(now_ms, frozenset(n for n in names if n not in synced))
