"""The ledger: which archive files are in the lake, read at a cost that does not grow with age.

Three kinds of files under ``segment-data/_state``, each written whole (atomic):

- ``ledger/<source-id>/<run>.json``: the archive files one run brought into the lake, written by the
  run's commit as its last step (:meth:`Ledger.record`); never changed;
- ``ledger-checkpoint/<source-id>.json``: ``closed_through``, a received day (Unix ms) up to which
  every day is *closed*, and the synced files of the days still open;
- ``ledger-days/<source-id>/<day>.json``: the archive files of one closed day, every one synced.

A sync reads the checkpoint, the run entries written since it (at most about
:data:`CHECKPOINT_RUNS`), and the reopen markers (:mod:`eventlake.archive.days`), then lists only
the open days' archive folders: the days after ``closed_through`` and the reopened ones. Under the
source's lock it then folds what it read into a new checkpoint (:meth:`Ledger.checkpoint`): a day
whose files are all synced and that may close (:func:`~eventlake.archive.day_state.may_close`: it
ended two hours ago) is closed (its files go to its day file, then the checkpoint moves past it,
then the run entries it read and the markers it consumed are deleted). What is open, when a day may
close and when a marker may be consumed are :mod:`eventlake.archive.day_state`'s rules. Killed at
any step, the files a rerun reads say the same: a day file written before its checkpoint is
rewritten by the rerun, and a run entry or marker left behind after it is read again (a union:
reading it twice changes nothing).

A lake written before checkpoints existed has run entries only: its first sync reads them all and
lists the whole archive once, then checkpoints; that is the upgrade.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import orjson

from eventlake import layout, state_layout
from eventlake.archive import ArchiveFile, list_archive_files
from eventlake.archive.day_state import (
    day_of,
    first_closed_through,
    is_open,
    marker_may_be_consumed,
    may_close,
)
from eventlake.archive.days import list_archive_days, reopened_days
from eventlake.storage import Location, Storage
from eventlake.storage.base import in_parallel

CHECKPOINT_RUNS = 16  # run entries a sync reads before it folds them into the checkpoint
WIDE_GAP_DAYS = 7  # more open days than this (a long pause): list the whole archive once instead
FORMAT = 1  # the checkpoint's format
_PARALLEL = 8  # concurrent reads of state files (GETs on an object store)

T = TypeVar("T")
R = TypeVar("R")


def read_many(read: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``read`` of each item, a few at a time (on an object store each is a request), in order."""
    return in_parallel(read, items, _PARALLEL)


def _day_and_name(key: str) -> tuple[int, str]:
    """``segment-logs/<source>/<day>/<name>`` -> (day, name).

    >>> _day_and_name("segment-logs/src1/1764028800000/seg.gz")
    (1764028800000, 'seg.gz')
    """
    _, day, name = key.rsplit("/", 2)
    return int(day), name


@dataclass
class LedgerView:
    """What the ledger says, as read by :meth:`Ledger.read`."""

    closed_through: int | None  # None: no checkpoint yet (a new source, or a lake before checkpoints)
    synced: dict[int, set[str]]  # day -> synced file names (the checkpoint's open days and the run entries)
    runs: list[Location]  # the run entries read
    reopened: dict[int, list[tuple[int, Location]]]  # day -> its reopen markers (written ms, path)

    def is_open(self, day: int) -> bool:
        return is_open(day, self.closed_through, self.reopened)


@dataclass
class Scan:
    """The open days' archive files, and which of them are synced."""

    listed: list[ArchiveFile]
    synced: dict[int, set[str]]  # day -> synced names, for every listed day (closed day files included)
    closed_names: dict[int, set[str]] = field(default_factory=dict)  # reopened closed days: their day file

    @property
    def pending(self) -> list[ArchiveFile]:
        """The listed files no run has synced, sorted by key."""
        return [f for f in self.listed if f.path.name not in self.synced.get(f.day_ms, ())]


class Ledger:
    """The ledger of one source (see the module's description)."""

    def __init__(self, storage: Storage, lake: Location, source_id: str) -> None:
        self.storage, self.lake, self.source_id = storage, lake, source_id
        self.runs_dir = state_layout.state_dir(lake, "ledger", source_id)
        self.checkpoint_file = state_layout.ledger_checkpoint_file(lake, source_id)

    # -- reading -----------------------------------------------------------------------------------

    def read(self) -> LedgerView:
        """The checkpoint, the run entries after it and the reopen markers: three reads and a GET
        per run entry, whatever the lake's age."""
        closed_through, synced = self._read_checkpoint()
        runs = [info.path for info in self.storage.list(self.runs_dir, "*.json")]
        for keys in read_many(self.run_files, runs):
            for key in keys:
                day, name = _day_and_name(key)
                synced.setdefault(day, set()).add(name)
        reopened = reopened_days(self.storage, self.lake, self.source_id)
        return LedgerView(closed_through, synced, runs, reopened)

    def scan(self, view: LedgerView, now_ms: int) -> Scan:
        """List the open days of the archive (see the module's description)."""
        if view.closed_through is None or now_ms - view.closed_through > WIDE_GAP_DAYS * layout.DAY_MS:
            every = list_archive_files(self.storage, self.lake, self.source_id)
            listed = [f for f in every if view.is_open(f.day_ms)]
        else:
            days = set(
                range(view.closed_through + layout.DAY_MS, day_of(now_ms) + 2 * layout.DAY_MS, layout.DAY_MS)
            )
            listed = list_archive_days(self.storage, self.lake, self.source_id, days | set(view.reopened))
        closed = sorted(
            d for d in view.reopened if view.closed_through is not None and d <= view.closed_through
        )
        closed_names = dict(zip(closed, read_many(self.closed_day, closed), strict=True))
        synced: dict[int, set[str]] = defaultdict(set)
        for day in {f.day_ms for f in listed} | set(closed_names):
            synced[day] = view.synced.get(day, set()) | closed_names.get(day, set())
        return Scan(listed, dict(synced), closed_names)

    def pending(self, now_ms: int) -> list[ArchiveFile]:
        """The archive files no sync has read (read only: nothing is written)."""
        return self.scan(self.read(), now_ms).pending

    def run_files(self, entry: Location) -> list[str]:
        """The archive files (keys) one run entry records as synced."""
        return list(orjson.loads(self.storage.read(entry))["files"])

    def closed_day(self, day: int) -> set[str]:
        """The file names a closed day's file records (empty when the day had none)."""
        try:
            return set(
                orjson.loads(self.storage.read(state_layout.closed_day_file(self.lake, self.source_id, day)))
            )
        except FileNotFoundError:
            return set()

    def synced_keys(self, days: Iterable[int] | None = None) -> set[str]:
        """The keys of the synced archive files of ``days`` (all days when None: reads every closed
        day's file, for tools and tests, not for a sync)."""
        view = self.read()
        if days is None:
            closed = self.storage.list(
                state_layout.state_dir(self.lake, "ledger-days", self.source_id), "*.json"
            )
            wanted = {int(info.path.name.removesuffix(".json")) for info in closed} | set(view.synced)
        else:
            wanted = set(days)
        names = {d: set(view.synced.get(d, ())) for d in wanted}
        closed_days = sorted(
            d for d in wanted if view.closed_through is not None and d <= view.closed_through
        )
        for day, found in zip(closed_days, read_many(self.closed_day, closed_days), strict=True):
            names[day] |= found
        root = layout.lake_relative(self.lake, layout.archive_source_dir(self.lake, self.source_id))
        return {f"{root}/{day}/{name}" for day, found in names.items() for name in found}

    def _read_checkpoint(self) -> tuple[int | None, dict[int, set[str]]]:
        try:
            document = orjson.loads(self.storage.read(self.checkpoint_file))
        except FileNotFoundError:
            return None, {}
        if document.get("format") != FORMAT:
            raise ValueError(
                f"{self.checkpoint_file}: ledger checkpoint format {document.get('format')!r}, this "
                f"eventlake reads format {FORMAT}: upgrade eventlake"
            )
        return document["closed_through"], {int(day): set(names) for day, names in document["open"].items()}

    # -- writing (under the source's lock) --------------------------------------------------------

    def record(self, run_id: str, files: list[str]) -> None:
        """A run's entry: the archive files (keys) it brought into the lake."""
        document = {"run_id": run_id, "files": sorted(files)}
        self.storage.write(
            state_layout.ledger_file(self.lake, self.source_id, run_id),
            orjson.dumps(document, option=orjson.OPT_INDENT_2),
        )

    def checkpoint(
        self, view: LedgerView, scan: Scan, now_ms: int, check: Callable[[], None] = lambda: None
    ) -> bool:
        """Close the days that can be, fold the run entries read into the checkpoint and consume
        the markers of days closed again; a no-op (False) while there is little to fold. ``check``
        is called before the first write (the source lease, on an object store)."""
        listed: dict[int, list[str]] = defaultdict(list)
        for f in scan.listed:
            listed[f.day_ms].append(f.path.name)

        def closable(day: int) -> bool:
            return may_close(day, now_ms) and all(
                name in scan.synced.get(day, ()) for name in listed.get(day, ())
            )

        old = view.closed_through
        through = old if old is not None else first_closed_through(min(listed, default=None), now_ms)
        while closable(through + layout.DAY_MS):
            through += layout.DAY_MS
        newly = [d for d in sorted(listed) if (old is None or d > old) and d <= through]
        refold = [
            d for d, markers in sorted(view.reopened.items())
            if d <= through and (old is None or d <= old or d in listed) and closable(d)
            and all(marker_may_be_consumed(written, now_ms) for written, _ in markers)
        ]  # fmt: skip
        if old == through and not refold and len(view.runs) < CHECKPOINT_RUNS:
            return False
        check()
        for day in sorted(set(newly) | set(refold)):
            names = set(listed.get(day, ())) | scan.synced.get(day, set()) | scan.closed_names.get(day, set())
            self.storage.write(
                state_layout.closed_day_file(self.lake, self.source_id, day), orjson.dumps(sorted(names))
            )
        kept = {
            day: sorted(names) for day, names in view.synced.items()
            if names and (day > through or (day in view.reopened and day not in refold))
        }  # fmt: skip
        document = {
            "format": FORMAT,
            "closed_through": through,
            "open": {str(d): n for d, n in sorted(kept.items())},
        }
        self.storage.write(self.checkpoint_file, orjson.dumps(document))
        read_many(self.storage.delete, view.runs)
        read_many(self.storage.delete, [path for day in refold for _, path in view.reopened[day]])
        return True
