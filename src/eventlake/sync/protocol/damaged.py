"""Damaged archive files: quarantined by name, so that one bad file never stops a source.

An archive file that is not whole gzip (a copy interrupted before ``eventlake sync --rescan``, a
bad disk, another format named ``.gz``) cannot be read: the sync's workers find it when they
decompress it (:func:`eventlake.archive.archive_lines`, all or nothing: none of its lines goes to
the lake, not even those before the damage) and hand its name to the driver instead of failing
the job. The run syncs every other file and:

- names the file in its report (``damaged_files``; the run is a ``Partial Success``), on the
  command line, in the web console and in an alert (:mod:`eventlake.scheduler.alerts`);
- records it in the ledger with the files it synced: the ledger's files are those *handled* (synced
  or quarantined here), so the file's day can close and no sync reads it again;
- records it here, in ``_state/damaged/<source-id>.json`` (written by the run's commit, under the
  source's lock: :func:`record_run`).

A retry is asked with ``eventlake sync --rescan`` (:func:`ask_retry`, after restoring the file): it
writes the time of the request to ``_state/damaged-retry/<source-id>.json``, and the next sync reads
the damaged files found before that time again (:func:`retry_files`): a file now whole is synced
and leaves this list, one still damaged stays (found again, with the new run's id). A damaged file
deleted from the archive leaves the list at that retry too. A replay never reads a file of this
list: its messages are in no partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import orjson

from eventlake import state_layout
from eventlake.archive import ArchiveFile
from eventlake.archive.days import list_archive_days
from eventlake.storage import Location, Storage
from eventlake.timestamps import format_timestamp, now_utc, parse_timestamp

FORMAT = 1


@dataclass(frozen=True)
class DamagedFile:
    """One archive file found damaged: its key (``segment-logs/<source>/<day>/<name>``), why, and
    by which run, when."""

    key: str
    problem: str
    run_id: str = ""
    found: datetime | None = None

    def describe(self) -> str:
        """One line naming the file, the problem and the fix (the report's notice, the CLI)."""
        return (
            f"archive file {self.key} is damaged, not a whole gzip file ({self.problem}): quarantined, "
            "none of its messages synced; restore it (copy it again, or from a backup), then run "
            "`eventlake sync --rescan`"
        )


def read_damaged(storage: Storage, lake: Location, source_id: str) -> dict[str, DamagedFile]:
    """The source's damaged files by key (none when it has no such file)."""
    try:
        document = orjson.loads(storage.read(state_layout.damaged_files_file(lake, source_id)))
    except FileNotFoundError:
        return {}
    if document.get("format") != FORMAT:
        raise ValueError(
            f"{state_layout.damaged_files_file(lake, source_id)}: format {document.get('format')!r}, this "
            f"eventlake reads format {FORMAT}: upgrade eventlake"
        )
    return {
        key: DamagedFile(key, entry["problem"], entry.get("run_id", ""), parse_timestamp(entry.get("found")))
        for key, entry in document["files"].items()
    }


def _write(storage: Storage, lake: Location, source_id: str, files: dict[str, DamagedFile]) -> None:
    document = {
        "format": FORMAT,
        "files": {
            key: {
                "problem": f.problem,
                "run_id": f.run_id,
                "found": format_timestamp(f.found) if f.found else None,
            }
            for key, f in sorted(files.items())
        },
    }
    storage.write(
        state_layout.damaged_files_file(lake, source_id), orjson.dumps(document, option=orjson.OPT_INDENT_2)
    )


def record_run(
    storage: Storage, lake: Location, source_id: str, read: Iterable[str], damaged: Sequence[DamagedFile]
) -> None:
    """After a run read the archive files ``read`` (keys) and found ``damaged`` among them: those
    leave the list unless found again, the damaged ones are (re)listed. Idempotent (a commit
    applied again writes the same); written only when the list changes. Under the source's lock."""
    before = read_damaged(storage, lake, source_id)
    after = {key: f for key, f in before.items() if key not in set(read)}
    after.update((f.key, f) for f in damaged)
    if after != before:
        _write(storage, lake, source_id, after)


def ask_retry(storage: Storage, lake: Location, source_id: str, now: datetime | None = None) -> int:
    """Ask the next sync to read the source's damaged files again (``eventlake sync --rescan``);
    the number of files to retry."""
    damaged = read_damaged(storage, lake, source_id)
    if damaged:
        document = {"asked": format_timestamp(now or now_utc())}
        storage.write(state_layout.damaged_retry_file(lake, source_id), orjson.dumps(document))
    return len(damaged)


def retry_files(storage: Storage, lake: Location, source_id: str) -> tuple[list[ArchiveFile], list[str]]:
    """The damaged files a retry asks the run to read (found before the last retry asked; listed
    again: a restored file's size is its new one), and the keys of those no longer in the archive
    (deleted by hand: to drop from the list)."""
    damaged = read_damaged(storage, lake, source_id)
    if not damaged:
        return [], []
    try:
        asked = parse_timestamp(
            orjson.loads(storage.read(state_layout.damaged_retry_file(lake, source_id)))["asked"]
        )
    except FileNotFoundError:
        return [], []
    wanted = {key for key, f in damaged.items() if asked is not None and (f.found is None or f.found < asked)}
    if not wanted:
        return [], []
    days = {int(key.rsplit("/", 2)[1]) for key in wanted}
    there = [f for f in list_archive_days(storage, lake, source_id, days) if f.key in wanted]
    return there, sorted(wanted - {f.key for f in there})
