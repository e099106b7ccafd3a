"""User deletion (right to erasure): every message of a userId goes from a source's lake.

For each source, under its sync lock (no sync runs beside it; on an object store a lease, checked
before each change: a holder that lost it changes nothing more):

1. the userId is added to the source's suppression list first: the collector blocks its new
   messages and a sync drops any it finds in the archive;
2. the raw archive is listed once and read, **before the lock is taken** (:func:`scan_archive`), to
   find the user's **linked anonymous ids** (the ``anonymousId`` of the user's ``identify`` calls,
   the ``previousId`` and ``anonymousId`` of its ``alias`` calls), the ids of its messages and the
   files holding one (``userId``, or an ``anonymousId`` / ``previousId`` among the linked ones);
   under the lock only the days that may have changed since are listed again and their new files
   read (:func:`catch_up`), and at the end only the files holding a message of the user are read
   again and rewritten without those lines, in place and whole (a reader sees the old file or the
   new one). A sync of the source (``up``) is kept waiting only for the rewrites;
3. every data file of the source's tables and of its quarantine holding such a row (by
   ``user_id``, ``anonymous_id``, ``previous_id``, ``message_id``, or for a quarantined message its
   raw payload) is rewritten without those rows, committed like a compaction (staged files and a
   manifest of :class:`~eventlake.sync.protocol.manifest.PartitionRewrite` s: each partition switches to its
   new files at once on both engines; killed at any instant, the next run completes or drops it);
4. an audit record is written: ``segment-data/_state/deletions/<source-id>/<run-id>.json`` with the
   userId, who asked, when, and counts (no other personal data).

Running it again finds nothing left and deletes nothing. A message the collector acknowledged
before the suppression (the collector's request path sees a new list within about a second) may
still sit in its spool, sealed later (the spool held back by a full disk or an unreachable store).
The sealer closes that gap (:mod:`eventlake.archive.seal`): it reads the suppression list itself at
each seal, before gzipping a segment and again once the archive object is written, and drops (and
counts) the lines of suppressed userIds, writing the object again if a user was suppressed while it
was being written. So an archive file is either whole in the archive before the suppression was
written (then step 2's listing, which comes after, finds it) or holds none of the user's lines; the
deletion needs no second run for them. What the suppression does not cover is not covered here
either: a message without a userId whose anonymousId the user's ``identify`` linked, acknowledged
after the deletion listed the archive (and, if the user was suppressed while its file was being
written, such messages of that one file), stays until the next ``users delete`` of the user.
The userId itself stays in two places by design: the suppression list (to block it) and the audit
record (what was done, for whom).
"""

from __future__ import annotations

import getpass
import gzip
import hashlib
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from eventlake import layout, partitions, state_layout
from eventlake.archive import (
    ArchiveFile,
    DamagedArchiveFileError,
    SuppressionList,
    list_archive_files,
    read_archive_lines,
)
from eventlake.archive.day_state import MARKER_AGE_MS, day_of, listing_is_final
from eventlake.archive.days import list_archive_day, reopened_days
from eventlake.catalog import Catalog, TableSpec
from eventlake.catalog.schema_file import source_tables
from eventlake.config import Settings, SourceSettings
from eventlake.errors import UsageError
from eventlake.progress import Say, prefixed, say
from eventlake.storage import FileInfo, Location, Storage, to_location
from eventlake.sync.protocol.commit import CatalogOnce
from eventlake.sync.protocol.manifest import Manifest
from eventlake.sync.protocol.rewrite import RewriteKind, RewriteRun, finish_rewrite, stage_output
from eventlake.sync.protocol.runner import Hold, error_text, publish, run_source
from eventlake.sync.protocol.stage import RunStage
from eventlake.sync.protocol.state import SyncState
from eventlake.sync.protocol.status import Status
from eventlake.timestamps import RunClock, format_timestamp

ID_COLUMNS = ("user_id", "anonymous_id", "previous_id")  # a row is the user's by these ...
OTHER_ID_COLUMNS = ("message_id", "raw_value")  # ... or its message id, or (quarantine) its raw payload
BATCH_PARTITIONS = 200  # partitions per manifest
# a file to rewrite: its folder, the folder's files, its name, its rows kept (a pyarrow Table), its
# rows before
_Rewritten = tuple[Location, dict[str, FileInfo], str, Any, int]


@dataclass
class ErasureResult:
    source: str
    user_id: str
    status: str = Status.SUCCESS  # Success | Nothing to do | Skipped: already running | Failed
    run_id: str = ""
    linked_anonymous_ids: int = 0
    archive_files_rewritten: int = 0
    archive_messages_deleted: int = 0
    table_files_rewritten: int = 0
    rows_deleted: int = 0
    quarantine_rows_deleted: int = 0
    error: str = ""

    def count_rewritten(self, deleted: int, quarantine: bool) -> None:
        """One table file rewritten without ``deleted`` rows (of the quarantine or not)."""
        self.table_files_rewritten += 1
        if quarantine:
            self.quarantine_rows_deleted += deleted
        else:
            self.rows_deleted += deleted

    def summary(self) -> str:
        return (
            f"{self.archive_messages_deleted} archived messages ({self.archive_files_rewritten} files), "
            f"{self.rows_deleted} table rows and {self.quarantine_rows_deleted} quarantined rows "
            f"({self.table_files_rewritten} files) deleted"
        )


@dataclass(frozen=True)
class Identity:
    """What makes a message or a row the user's."""

    user_id: str
    anonymous_ids: frozenset[str]
    message_ids: frozenset[str]

    def to_json(self) -> bytes:
        document = {"user_id": self.user_id, "anonymous_ids": sorted(self.anonymous_ids),
                    "message_ids": sorted(self.message_ids)}  # fmt: skip
        return orjson.dumps(document)

    def owns(self, message: object) -> bool:
        """The user's message: its userId, or no userId and one of the linked anonymous ids (a
        device the user shared with someone who signed in as another user keeps their messages)."""
        if not isinstance(message, dict):
            return False
        if message.get("userId") is not None:
            return message.get("userId") == self.user_id
        return message.get("anonymousId") in self.anonymous_ids or (
            message.get("type") == "alias" and message.get("previousId") in self.anonymous_ids
        )

    def merged(self, other: Identity | None) -> Identity:
        """This identity with the ids of ``other`` (the same user's) added."""
        if other is None:
            return self
        return Identity(
            self.user_id, self.anonymous_ids | other.anonymous_ids, self.message_ids | other.message_ids
        )


def pending_identity(storage: Storage, path: Location) -> Identity | None:
    """The identity an interrupted deletion of the user kept (None: none)."""
    try:
        document = orjson.loads(storage.read(path))
    except FileNotFoundError:
        return None
    return Identity(
        document["user_id"], frozenset(document["anonymous_ids"]), frozenset(document["message_ids"])
    )


# -- reading the archive (before the source's lock) ----------------------------------------------


@dataclass
class ArchiveScan:
    """What a read of a source's archive found for a user (:func:`scan_archive`)."""

    identity: Identity
    holding: list[Location]  # the files holding a message of the user (or a line naming them)
    listed_ms: int  # when the archive was listed (before the listing started)
    days: dict[int, frozenset[str]] = field(default_factory=dict)  # day -> the file names read
    # day -> when its reopen markers were written, as read just before the listing (a sync may
    # consume one before the lock is taken, while its writer's file came after the listing)
    markers: dict[int, tuple[int, ...]] = field(default_factory=dict)


def scan_archive(
    storage: Storage, lake: Location, source_id: str, user_id: str, earlier: Identity | None
) -> ArchiveScan:
    """List the source's archive once and find the user in it: a first read of each file for the
    anonymous ids the user's ``identify`` and ``alias`` calls link, a second for the messages of
    the user and of those ids (which may come before the call that links them) and the files
    holding one. ``earlier``: what an interrupted deletion found (kept in its pending file).

    Done without the source's lock, so that a sync (``up``) is not kept waiting while a whole
    archive is read. That is safe: an archive file is only ever written whole (the sealer and
    ``import`` write new names; a deletion rewrites a file in place, under the lock) and deleted
    (retention) only once synced, so each file read is seen whole, as it was or as it is; what
    the scan finds is used under the lock only as ids (which a later change can only add to:
    :func:`catch_up` reads what was written meanwhile) and as the files to rewrite, each read
    again under the lock before it is rewritten."""
    listed_ms = int(time.time() * 1000)
    markers = {d: tuple(w for w, _ in found) for d, found in reopened_days(storage, lake, source_id).items()}
    files = list_archive_files(storage, lake, source_id)
    days: dict[int, set[str]] = {}
    for f in files:
        days.setdefault(f.day_ms, set()).add(f.path.name)
    found = _find(storage, [f.path for f in files], user_id, earlier)
    return replace(
        found, listed_ms=listed_ms, days={d: frozenset(n) for d, n in days.items()}, markers=markers
    )


def catch_up(storage: Storage, lake: Location, source_id: str, scan: ArchiveScan) -> ArchiveScan:
    """``scan`` with the archive files written since it listed the archive (under the source's
    lock): the days whose listing then may have missed a file (the recent days, the days a reopen
    marker names now or named when the archive was listed:
    :func:`eventlake.archive.day_state.listing_is_final`) are listed again and their new
    files read. Once the listing is :data:`~eventlake.archive.day_state.MARKER_AGE_MS` old, a marker
    written after it may have been consumed by a sync already (its day closed again, nothing names
    it): then the whole archive is listed again (a listing; only the new files are read)."""
    if int(time.time() * 1000) - scan.listed_ms >= MARKER_AGE_MS:
        listed: Iterable[ArchiveFile] = list_archive_files(storage, lake, source_id)
    else:
        markers = {d: [w for w, _ in found] for d, found in reopened_days(storage, lake, source_id).items()}
        for day, written in scan.markers.items():  # those seen at the listing (maybe consumed since)
            markers.setdefault(day, []).extend(written)
        today = day_of(scan.listed_ms)
        recent = {today - layout.DAY_MS, today, today + layout.DAY_MS}
        stale = sorted(
            day for day in set(scan.days) | recent | set(markers)
            if not listing_is_final(day, markers.get(day, ()), scan.listed_ms)
        )  # fmt: skip
        listed = (f for day in stale for f in list_archive_day(storage, lake, source_id, day))
    new = [f.path for f in listed if f.path.name not in scan.days.get(f.day_ms, ())]
    if not new:
        return scan
    found = _find(storage, new, scan.identity.user_id, scan.identity)
    return replace(scan, identity=found.identity, holding=[*scan.holding, *found.holding])


def _find(storage: Storage, paths: Sequence[Location], user_id: str, earlier: Identity | None) -> ArchiveScan:
    """The user's identity in ``paths`` (two reads of each: see :func:`scan_archive`), with
    ``earlier``'s ids, and the files holding a message of the user."""
    anonymous = set(earlier.anonymous_ids) if earlier else set()
    for _, message in _messages(storage, paths):
        if not isinstance(message, dict):
            continue
        if message.get("userId") == user_id and message.get("type") in ("identify", "alias"):
            anonymous.update(
                v for k in ("anonymousId", "previousId") if isinstance(v := message.get(k), str) and v
            )
    linked = Identity(user_id, frozenset(anonymous), frozenset())
    quoted = orjson.dumps(user_id)
    messages = set(earlier.message_ids) if earlier else set()
    holding: dict[Location, None] = {}
    for path, message in _messages(storage, paths, quoted):
        if isinstance(message, bytes) or linked.owns(message):
            holding[path] = None
        if isinstance(message, dict) and linked.owns(message) and isinstance(message.get("messageId"), str):
            messages.add(message["messageId"])
    identity = Identity(user_id, frozenset(anonymous), frozenset(messages))
    return ArchiveScan(identity, list(holding), 0)


def _messages(
    storage: Storage, paths: Iterable[Location], naming: bytes | None = None
) -> Iterator[tuple[Location, dict[str, Any] | bytes]]:
    """Each archive file's messages, by file; with ``naming``, also its lines that are not JSON
    and hold those bytes (as bytes). A file deleted since it was listed (retention) is skipped, and
    so is a damaged one (not whole gzip: none of its lines can be read; a sync quarantines it, see
    :mod:`eventlake.sync.protocol.damaged`), so that it never stops a deletion."""
    for path in paths:
        try:
            lines = list(read_archive_lines(storage, path))
        except (FileNotFoundError, DamagedArchiveFileError):
            continue
        for line in lines:
            message = _loads(line)
            if isinstance(message, dict):
                yield path, message
            elif message is None and naming is not None and naming in line:
                yield path, line


def delete_user(
    settings: Settings, user_id: str, slugs: Sequence[str] = (), *, requested_by: str | None = None,
    catalog: Catalog | None = None, spark: Any = None, wait: bool = True, say: Say = say,
) -> list[ErasureResult]:  # fmt: skip
    """Delete ``user_id`` from the given sources (default: all); see the module's description."""
    if not user_id.strip():
        raise UsageError("USER_ID must not be empty")
    sources = [settings.source(slug) for slug in slugs] if slugs else list(settings.sources)
    if not sources:
        raise UsageError("no sources configured: add one with `eventlake sources add SLUG`")
    requested_by = requested_by or getpass.getuser()
    storage = settings.lake.storage()
    catalog_once = CatalogOnce(settings, spark, catalog)

    return [
        _erase_source(settings, storage, source, user_id, requested_by, catalog_once, wait, say)
        for source in sources
    ]


def _erase_source(
    settings: Settings, storage: Storage, source: SourceSettings, user_id: str, requested_by: str,
    catalog: CatalogOnce, wait: bool, say: Say,
) -> ErasureResult:  # fmt: skip
    """Delete the user from one source: suppressed first (new messages blocked, even while another
    process holds the source) and the archive read, then the lake and the archive changed under
    the source's lock."""
    result = ErasureResult(source.slug, user_id)
    tell = prefixed(say, source.slug)
    scanned: list[ArchiveScan] = []

    def before() -> None:
        SuppressionList(storage, settings.lake.root, source.id).add([user_id])
        earlier = pending_identity(
            storage, state_layout.deletion_pending_file(settings.lake.root, source.id, _key(user_id))
        )
        scanned.append(scan_archive(storage, settings.lake.root, source.id, user_id, earlier))

    def work(hold: Hold) -> ErasureResult:
        SourceErasure(settings, source, storage, tell, hold).run(result, requested_by, catalog, scanned[0])
        return result

    def failed(status: Status, exc: BaseException) -> ErasureResult:
        result.status, result.error = status, error_text(status, exc)
        return result

    return run_source(
        settings, storage, source, work, failed=failed, what="deletion", catalog=catalog,
        before=before,
        wait=wait, say=say,
    )  # fmt: skip


class SourceErasure:
    """The deletion of one user from one held source: :meth:`run`'s steps are the identity
    (:meth:`identity`), each table (:meth:`table`), the archive (:meth:`archive`), the audit."""

    def __init__(
        self, settings: Settings, source: SourceSettings, storage: Storage, say: Say, hold: Hold,
    ) -> None:  # fmt: skip
        self.settings, self.source, self.storage, self.say = settings, source, storage, say
        self.lake = settings.lake.root
        self.state = SyncState(storage, self.lake, source.id)
        self.hold = hold
        # on an object store: before each change, a holder that lost the source's lease stops
        self.check = hold.check

    def run(self, result: ErasureResult, requested_by: str, catalog: CatalogOnce, scan: ArchiveScan) -> None:
        """The deletion, once the source is held and its interrupted runs completed; ``scan``: the
        archive as read before the lock (:func:`scan_archive`)."""
        clock = RunClock.start()
        pending = state_layout.deletion_pending_file(self.lake, self.source.id, _key(result.user_id))
        identity = self.identity(result.user_id, scan, pending)
        result.linked_anonymous_ids = len(identity.anonymous_ids)
        # the run id names its audit record
        result.run_id = RewriteRun.new(RewriteKind.USER_DELETION, clock.started_at).id
        self.catalog = catalog
        for spec in self.tables():  # tables first, the archive (the source of truth) last
            self.table(spec, identity, result)
        self.archive(identity, result)
        changed = result.archive_files_rewritten or result.table_files_rewritten
        result.status = Status.SUCCESS if changed else Status.NOTHING
        audit = audit_record(result, self.source.id, requested_by, clock)
        path = state_layout.deletion_audit_file(self.lake, self.source.id, result.run_id)
        self.check()
        self.storage.write(path, orjson.dumps(audit, option=orjson.OPT_INDENT_2))
        self.storage.delete(pending)
        self.say(result.summary())

    def identity(self, user_id: str, scan: ArchiveScan, pending: Location) -> Identity:
        """What makes a row the user's: the scan's ids caught up with the archive written since
        (:func:`catch_up`), and those an interrupted deletion kept in ``pending``, written there
        again with the new ones until the end (a rerun after a kill finds the rows whose linking
        messages an earlier run already deleted from the archive)."""
        earlier = pending_identity(self.storage, pending)
        if earlier is not None and not earlier.anonymous_ids <= scan.identity.anonymous_ids:
            # another deletion of the user wrote it after the scan read it: read the archive again
            scan = scan_archive(self.storage, self.lake, self.source.id, user_id, earlier)
        self.scan = catch_up(self.storage, self.lake, self.source.id, scan)
        identity = self.scan.identity.merged(earlier)
        self.check()
        self.storage.write(pending, identity.to_json())
        return identity

    # -- the archive ---------------------------------------------------------------------------

    def archive(self, identity: Identity, result: ErasureResult) -> None:
        """Rewrite each archive file holding a message of the user without it (whole, in place):
        the files the scan found, each read again here, under the lock."""
        for path in self.scan.holding:
            try:
                lines = list(read_archive_lines(self.storage, path))
            except FileNotFoundError:  # deleted by retention meanwhile
                continue
            kept, dropped = _lines_kept(lines, identity)
            if dropped:
                data = gzip.compress(b"".join(line + b"\n" for line in kept), compresslevel=6)
                self.check()
                self.storage.write(path, data)
                result.archive_files_rewritten += 1
                result.archive_messages_deleted += dropped

    # -- tables and quarantine -----------------------------------------------------------------

    def tables(self) -> list[TableSpec]:
        """The source's tables (schema files): its event tables and its quarantine."""
        database = self.settings.database_name(self.source)
        return source_tables(
            self.storage, self.lake, database, self.source.id, self.source.dir_name, quarantine=True
        )

    def table(self, spec: TableSpec, identity: Identity, result: ErasureResult) -> None:
        """Rewrite the table's files holding a row of the user, :data:`BATCH_PARTITIONS` a commit."""
        pending = files_to_rewrite(self.storage, spec, identity)
        quarantine = spec.location == str(layout.quarantine_dir(self.lake, self.source.id))
        for start in range(0, len(pending), BATCH_PARTITIONS):
            self._commit(spec, pending[start : start + BATCH_PARTITIONS], quarantine, result)

    def _commit(
        self, spec: TableSpec, files: list[_Rewritten], quarantine: bool, result: ErasureResult
    ) -> None:
        run = RewriteRun.new(RewriteKind.USER_DELETION)
        stage = RunStage(self.lake, self.source.id, self.source.dir_name, run.id, spec.partition_keys)
        by_folder: dict[Location, tuple[dict[str, FileInfo], list[tuple[str, Any, int]]]] = {}
        for folder, infos, name, kept, before in files:
            by_folder.setdefault(folder, (infos, []))[1].append((name, kept, before))
        rewrites = []
        for folder, (infos, changed) in by_folder.items():
            outputs = []
            for index, (_, kept, before) in enumerate(changed):
                result.count_rewritten(before - kept.num_rows, quarantine)
                if kept.num_rows:
                    output = layout.part_file_name(run.id, index)
                    outputs.append(stage_output(self.storage, stage, folder, output, kept))
            replaced = [name for name, _, _ in changed]
            rewrites.append(finish_rewrite(self.storage, stage, folder, infos, outputs, replaced, run, spec))
        manifest = Manifest(
            run_id=stage.run_id, source_id=self.source.id, files=(), moves=(), tables=(), report_path="",
            report=(), stage=str(stage.root), rewrites=tuple(rewrites),
        )  # fmt: skip
        publish(manifest, self.hold, self.state, self.storage, self.lake, load_catalog=self.catalog)


def audit_record(result: ErasureResult, source_id: str, requested_by: str, clock: RunClock) -> dict[str, Any]:
    """The deletion's audit record: the userId, who asked, when, and counts (no other personal data)."""
    return {
        "run_kind": "user deletion", "run_id": result.run_id, "source_id": source_id,
        "user_id": result.user_id, "requested_by": requested_by,
        "started_at": format_timestamp(clock.started_at), "finished_at": format_timestamp(clock.finish()),
        **{k: v for k, v in asdict(result).items() if k not in ("source", "user_id", "run_id", "error")},
    }  # fmt: skip


def files_to_rewrite(storage: Storage, spec: TableSpec, identity: Identity) -> list[_Rewritten]:
    """The table's data files holding a row of the user, each with the rows to keep: of most
    files (none of the user's rows) only the id columns are read."""
    location = to_location(spec.location)
    listing = partitions.partition_listing(storage, location, len(spec.partition_keys))
    pending: list[_Rewritten] = []
    for folder, infos in sorted(listing.items(), key=lambda item: str(item[0])):
        for name in partitions.partition_files(storage, folder, infos):
            data = pa.BufferReader(storage.read(infos[name].path))
            names = pq.read_schema(data).names
            ids = pq.read_table(data, columns=[c for c in (*ID_COLUMNS, *OTHER_ID_COLUMNS) if c in names])
            if _rows_to_keep(ids, identity) is None:
                continue
            table = pq.read_table(data)
            pending.append(
                (folder, infos, name, table.filter(_rows_to_keep(table, identity)), table.num_rows)
            )
    return pending


def _lines_kept(lines: Sequence[bytes], identity: Identity) -> tuple[list[bytes], int]:
    """An archive file's lines that are not the user's, and how many were; a line that is not
    JSON is the user's when it names them: better gone than kept."""
    quoted = orjson.dumps(identity.user_id)
    kept, dropped = [], 0
    for line in lines:
        message = _loads(line)
        if identity.owns(message) or (message is None and quoted in line):
            dropped += 1
        else:
            kept.append(line)
    return kept, dropped


def _rows_to_keep(table: pa.Table, identity: Identity) -> pa.ChunkedArray | None:
    """The mask of rows that are not the user's (by :meth:`Identity.owns`' rule, or by message
    id, or for a quarantined message by a raw payload naming the user), or None when no row is."""
    names = table.column_names
    hits = []
    no_user = pc.is_null(table["user_id"]) if "user_id" in names else None
    if "user_id" in names:
        hits.append(pc.equal(table["user_id"].cast(pa.string()), identity.user_id))
    linked = pa.array(sorted(identity.anonymous_ids), pa.string())
    for column in ("anonymous_id", "previous_id"):
        if column in names and len(linked):
            hit = pc.is_in(table[column].cast(pa.string()), value_set=linked)
            hits.append(hit if no_user is None else pc.and_kleene(hit, no_user))
    if "message_id" in names and identity.message_ids:
        ids = pa.array(sorted(identity.message_ids), pa.string())
        hits.append(pc.is_in(table["message_id"].cast(pa.string()), value_set=ids))
    if "raw_value" in names:  # a quarantined message that could not be parsed
        hits.append(pc.match_substring(table["raw_value"], orjson.dumps(identity.user_id).decode()))
    if not hits:
        return None
    mine = hits[0]
    for hit in hits[1:]:
        mine = pc.or_kleene(mine, hit)  # true or null is true
    mine = pc.fill_null(mine, False)
    if not pc.any(mine).as_py():
        return None
    return pc.invert(mine)


def _key(user_id: str) -> str:
    """A file name for a userId (which may hold any character)."""
    return hashlib.sha256(user_id.encode()).hexdigest()[:32]


def _loads(line: bytes) -> object | None:
    try:
        value: object = orjson.loads(line)
        return value
    except orjson.JSONDecodeError:
        return None


__all__ = ["ErasureResult", "delete_user"]
