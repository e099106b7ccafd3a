"""What a run of :class:`~eventlake.sync.pipeline.job.SourceSync` reads and how it commits: its selection.

A sync and a replay are the same run (parse, dedupe, plan, write to the run's stage, commit
through a manifest) over different archive files, committed differently. The run asks its
:class:`Selection` at each point where they differ, and has no other branch on what it is:

- :class:`NewFiles` (here): a sync. The archive files of the open days no run has synced, every
  message of them; the staged files are moved into place and the files recorded in the ledger.
- :class:`~eventlake.sync.maintenance.replay.Replay`: a replay of a received-time range. The synced files
  around the range, only the range's messages; the range's partitions are replaced and nothing
  is recorded.

A selection gets what it needs from the run through :class:`Run` (which ``SourceSync``
satisfies), so this module and :mod:`.replay` do not import :mod:`.job`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from pyspark.sql import DataFrame

from eventlake.archive import ArchiveFile
from eventlake.config import SourceSettings
from eventlake.progress import Say
from eventlake.schema.table_names import TableNames
from eventlake.storage import Location, Storage
from eventlake.storage.lease import LeaseLostError
from eventlake.sync.protocol.damaged import DamagedFile, retry_files
from eventlake.sync.protocol.manifest import PartitionRewrite
from eventlake.sync.protocol.runner import Hold
from eventlake.sync.protocol.stage import RunStage, StagedFile
from eventlake.sync.protocol.state import SyncState
from eventlake.timestamps import now_utc


class Run(Protocol):
    """The run a selection serves: its source, lake and state (``SourceSync`` has these)."""

    storage: Storage
    lake: Location
    source: SourceSettings
    state: SyncState
    names: TableNames  # the source's table names (adopted SDL names, or eventlake's)
    database: str
    hold: Hold
    say: Say


@dataclass(frozen=True)
class Commit:
    """How the run's staged files are committed: ``moves`` are moved into place, ``rewrites``
    replace partitions, ``files`` are recorded in the ledger as handled (synced, or found damaged),
    and ``cleared`` leave the damaged files' list (see :mod:`.damaged`)."""

    files: tuple[ArchiveFile, ...]
    moves: tuple[StagedFile, ...]
    rewrites: tuple[PartitionRewrite, ...]
    cleared: tuple[str, ...] = ()


class Selection(Protocol):
    """What a run reads and how it commits. :meth:`files` is called first, once per run."""

    def files(self, run: Run) -> list[ArchiveFile]:
        """The archive files the run reads (none: nothing to do; a replay raises
        :class:`~eventlake.errors.UsageError` instead)."""
        ...

    def doing(self) -> str:
        """The progress line's verb, before ``<n> archive files``."""
        ...

    def rows(self, parsed: DataFrame) -> DataFrame:
        """The parsed frame's rows the run keeps."""
        ...

    def window(self) -> tuple[datetime, datetime] | None:
        """The received-time range ``[start, end)`` the run rebuilds (None: no range), for the
        write pass and the report."""
        ...

    def until(self) -> datetime | None:
        """Dedupe's ``until``: the run's messages are deduplicated against the index's ids
        received before it (None: against all the window's; see :func:`.dedupe.dedupe`)."""
        ...

    def commit(
        self, run: Run, stage: RunStage, staged: list[StagedFile], files: Sequence[ArchiveFile]
    ) -> Commit:
        """How the run's ``staged`` files, read from ``files``, are committed."""
        ...

    def on_damaged(self, run: Run, damaged: Sequence[DamagedFile]) -> None:
        """Called when the run found archive files that are not whole gzip (none of their lines
        read): return to commit without them (they are named in the report), or raise."""
        ...


class NewFiles:
    """A sync: the archive files no run has synced, appended to the lake and recorded; a damaged
    file is quarantined by name and recorded as handled (:mod:`.damaged`)."""

    def __init__(self) -> None:
        self.cleared: tuple[str, ...] = ()  # damaged files a retry reads again, or found gone

    def files(self, run: Run) -> list[ArchiveFile]:
        """The archive files of the open days that no run has synced, and the damaged files a
        retry asks for (``eventlake sync --rescan``); the ledger's checkpoint catches up on the
        way (see :mod:`.ledger`)."""
        ledger, now_ms = run.state.ledger, int(now_utc().timestamp() * 1000)
        view = ledger.read()
        scan = ledger.scan(view, now_ms)
        try:  # an optimisation: a sync goes on without it, and the next one tries again
            if ledger.checkpoint(view, scan, now_ms, run.hold.check):
                run.say(f"ledger checkpoint: {len(view.runs)} run entries folded")
        except LeaseLostError:
            raise
        except Exception as exc:  # killed or failed at any step, the ledger reads the same (ledger.py)
            run.say(f"ledger checkpoint failed, retried next sync: {type(exc).__name__}: {exc}")
        retried, gone = retry_files(run.storage, run.lake, run.source.id)
        pending = {f.key: f for f in scan.pending}
        if retried or gone:
            run.say(
                f"retrying {len(retried)} damaged archive files"
                + (f" ({len(gone)} no longer in the archive)" if gone else "")
            )
            pending.update((f.key, f) for f in retried)
        self.cleared = (*(f.key for f in retried), *gone)
        return sorted(pending.values(), key=lambda f: f.key)

    def doing(self) -> str:
        return "syncing"

    def rows(self, parsed: DataFrame) -> DataFrame:
        return parsed

    def window(self) -> tuple[datetime, datetime] | None:
        return None

    def until(self) -> datetime | None:
        return None

    def commit(
        self, run: Run, stage: RunStage, staged: list[StagedFile], files: Sequence[ArchiveFile]
    ) -> Commit:
        """Every staged file is moved into place; the files are recorded (the damaged ones too:
        handled, so that their day can close)."""
        return Commit(tuple(files), tuple(staged), (), self.cleared)

    def on_damaged(self, run: Run, damaged: Sequence[DamagedFile]) -> None:
        """A sync goes on without them: they are quarantined by name."""
