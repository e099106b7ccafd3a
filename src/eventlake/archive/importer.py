"""Import an existing Segment archive (the gzip files Segment's S3 destination wrote; not the
Parquet Segment Data Lakes wrote under ``segment-data/``, which is never read) into a source's raw
archive, so that people leaving Segment keep their history: the sync rebuilds the tables from it.

Segment's layout is eventlake's: ``segment-logs/<segment-source-id>/<received-day-ms>/<file>.gz``.
The import finds every ``<day-ms>/<file>.gz`` under the given folder or URI (the bucket's root,
its ``segment-logs/``, one source's folder or one day's), checks that each file is gzip, and
writes it whole into ``segment-logs/<source-id>/<day-ms>/segment-<segment-source-id>-<file>.gz``
of the lake. The next sync reads the imported files like the collector's: validation and
quarantine, dedupe against what the lake holds, suppression, reports.

A rerun skips the files already imported (same name, same size), so an import killed at any
moment is finished by running it again; a file is visible to a sync only once written whole. A
file that is not whole gzip is left out and named (the caller fails the command).

Each file is announced to the syncs by a reopen marker of its day written just before it, and again
while the import goes on writing into that day (:class:`~eventlake.archive.days.DayMarks`): a sync
running hours into a long import never closes a day for good before the import wrote into it. The
days retention already deleted (:func:`~eventlake.archive.days.expired_through`) are skipped and
counted: importing an archive again does not bring back what retention dropped.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from eventlake import layout
from eventlake.archive.day_state import is_expired
from eventlake.archive.days import DayMarks, expired_through, list_archive_days, wall_ms
from eventlake.errors import UsageError
from eventlake.storage import FileInfo, Location, Storage
from eventlake.storage.prefetch import prefetched

DAY_FOLDER = re.compile(r"^\d{10,14}$")  # UTC midnight in Unix milliseconds (e.g. 1566086400000)
IMPORT_PREFIX = "segment-"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class SegmentFile:
    info: FileInfo
    segment_source: str  # the folder above the day folder ("" when the path was a day folder)
    day_ms: int


@dataclass
class ImportResult:
    files: int = 0  # files written into the archive
    skipped: int = 0  # already imported by an earlier run
    bytes: int = 0
    days: set[int] = field(default_factory=set)
    broken: list[str] = field(default_factory=list)  # not whole gzip: left out, named
    expired: int = 0  # files of days retention already deleted: not imported again
    expired_through: int | None = None  # the newest day retention deleted


def find_segment_files(
    storage: Storage, root: Location, segment_source: str | None = None
) -> list[SegmentFile]:
    """The archive files under ``root`` in Segment's layout, of one Segment source: the only one
    found, or ``segment_source``. Raises :class:`UsageError` naming what was found otherwise."""
    found: list[SegmentFile] = []
    for info in storage.list(root, "**/*" + layout.ARCHIVE_SUFFIX):
        day = info.path.parent
        if DAY_FOLDER.match(day.name):
            source = day.parent.name if day != root else ""
            found.append(SegmentFile(info, source, int(day.name)))
    if not found:
        raise UsageError(
            f"no Segment archive files under {root}: expected <segment-source-id>/<day-ms>/<file>.gz "
            "(e.g. segment-logs/AbC123/1566086400000/1566126000000.gz)"
        )
    sources = sorted({f.segment_source for f in found})
    if segment_source is not None:
        if segment_source not in sources:
            raise UsageError(
                f"no files of Segment source {segment_source!r} under {root}; found: {', '.join(sources)}"
            )
        return [f for f in found if f.segment_source == segment_source]
    if len(sources) > 1:
        raise UsageError(
            f"{root} holds the archives of {len(sources)} Segment sources ({', '.join(sources)}): "
            "choose one with --segment-source ID (one eventlake source each)"
        )
    return found


def imported_name(segment_file: SegmentFile) -> str:
    """The archive file name of an imported file: its Segment source and name, made path-safe.

    >>> from eventlake.storage import FileInfo
    >>> from pathlib import Path
    >>> imported_name(SegmentFile(FileInfo(Path("/x/1566086400000/15661.a b.gz"), 3), "AbC", 1566086400000))
    'segment-AbC-15661.a_b'
    """
    stem = segment_file.info.path.name[: -len(layout.ARCHIVE_SUFFIX)]
    source = _UNSAFE.sub("_", segment_file.segment_source) or "unknown"
    return f"{IMPORT_PREFIX}{source}-{_UNSAFE.sub('_', stem)}"


def import_segment_archive(
    source_storage: Storage, root: Location, lake_storage: Storage, lake: Location, source_id: str,
    *, segment_source: str | None = None, say: Callable[[str], None] = lambda line: None,
    clock: Callable[[], int] = wall_ms,
) -> ImportResult:  # fmt: skip
    """Copy the Segment archive files under ``root`` into the source's raw archive (see above).
    ``clock``: now in Unix milliseconds (the reopen markers' times)."""
    files = find_segment_files(source_storage, root, segment_source)
    result = ImportResult(expired_through=expired_through(lake_storage, lake, source_id))
    expired = [f for f in files if is_expired(f.day_ms, result.expired_through)]
    if expired:
        result.expired = len(expired)
        files = [f for f in files if not is_expired(f.day_ms, result.expired_through)]
        through = datetime.fromtimestamp((result.expired_through or 0) / 1000, timezone.utc).date()
        say(
            f"skipped {len(expired)} files of {len({f.day_ms for f in expired})} days up to {through}: "
            "retention already deleted those days of the archive (their messages are not synced again)"
        )
    total = sum(f.info.size for f in files)
    say(f"importing {len(files)} files ({total / 1e6:.1f} MB) from {root}")
    # what earlier runs imported: one listing per day the import writes into, not one per file
    there = {
        f.key: f.size for f in list_archive_days(lake_storage, lake, source_id, {f.day_ms for f in files})
    }
    targets = {f: layout.archive_file(lake, source_id, f.day_ms, imported_name(f)) for f in files}
    todo = [
        (number, f, targets[f])
        for number, f in enumerate(files, 1)
        if there.get(layout.lake_relative(lake, targets[f])) != f.info.size
    ]
    result.skipped = len(files) - len(todo)
    # each day is marked as written to again just before each file (and again while the import
    # goes on writing into it), so that a sync lists it even once closed, however long this runs
    marks = DayMarks(lake_storage, lake, source_id, clock)
    # the days of the files already there are marked once too: a sync lists them again, so a file
    # an earlier run wrote into a day that was then closed without it is found (a rerun recovers)
    for day in sorted({f.day_ms for f in files} - {f.day_ms for _, f, _ in todo}):
        marks.before_write(day)

    def copy(job: tuple[int, SegmentFile, Location]) -> tuple[str | None, int]:
        """Read one file, check it, write it whole into the archive: why it was left out (None:
        written) and its bytes."""
        _, segment_file, target = job
        data = source_storage.read(segment_file.info.path)
        problem = _gzip_problem(data)
        if problem is None:
            marks.before_write(segment_file.day_ms)
            lake_storage.write(target, data)  # whole or not at all: a sync never reads half a file
        return problem, len(data)

    # a few files copied at once (on an object store a GET and a PUT each: not one at a time)
    for (number, segment_file, _), (problem, size) in prefetched(copy, todo, size=lambda j: j[1].info.size):
        if problem is not None:
            say(f"left out {segment_file.info.path}: not a whole gzip file ({problem})")
            result.broken.append(f"{segment_file.info.path}: {problem}")
            continue
        result.files += 1
        result.bytes += size
        result.days.add(segment_file.day_ms)
        if number % 100 == 0 or number == len(files):
            written = result.bytes / 1e6
            say(f"{number}/{len(files)} files ({written:.1f} MB written, {result.skipped} already there)")
    return result


def _gzip_problem(data: bytes) -> str | None:
    """Why ``data`` is not a whole gzip file (a truncated download, another format), or None."""
    try:
        gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        return str(exc) or type(exc).__name__
    return None
