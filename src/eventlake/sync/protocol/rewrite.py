"""Rewriting a partition that already holds data (compaction, replay, user deletion, ``schema
set-type``), in one place: the staged content's commit marker and where it goes
(:func:`finish_rewrite`), the switch of readers to it (:func:`apply_rewrite`: one folder swap on a
local disk; on an object store a version folder, then the catalog's partition location moved to it
by :func:`switch_location`), and the old files deleted once ``sync.rewrite_grace_minutes`` passed
(:func:`retire`, :func:`drop_retired`); so are the files of a partition retention drops whole
(:func:`retire_partitions`). The names (version folders, markers) are in
:mod:`eventlake.layout`; which files readers take as data, in :mod:`eventlake.partitions`.

A rewrite stages the partition's new content (:func:`stage_output`, :func:`finish_rewrite`) and
then, on a local disk, swaps the staged folder with the partition folder in one
``renameat2(RENAME_EXCHANGE)``: any reader that lists the folder (Spark through the metastore, Hive,
DuckDB) sees the old files or the new ones, and the catalog's location does not change. On an object
store it publishes the new content into a new version folder ``v-<number>-<rewrite>/`` outside
the table's folder (:func:`eventlake.layout.version_dir`: ``segment-data/versions/<the partition's
path>/``, so that no reader of the partition's location ever lists two versions), with the files
the partition keeps copied there, then the marker (eventlake's readers switch here), then moves the
partition's location in the catalog to the version folder in one change (Glue BatchUpdatePartition,
Hive ``ALTER TABLE ... PARTITION ... SET LOCATION``: readers through the catalog switch here). The
old files stay for ``sync.rewrite_grace_minutes`` (recorded in ``_state/retired/<source-id>/``), for
queries still reading them. A local file system that cannot exchange folders (NFS, some FUSE ones)
rewrites in place instead (:func:`apply_rewrite`): a reader listing the folder sees both sets of
files between the new files' publishing and the old ones' deletes.

What a rewrite supersedes and retires has one owner here: :func:`finish_rewrite` records, in the
version folder's marker, every name of the partition it listed (``covers``: a file another writer
puts into the folder afterwards stays data, see :func:`eventlake.layout.partition_data`), and in
the manifest the exact names it retires (:func:`retirement`: the data it read and superseded, and
eventlake's own files they made obsolete; never a file it did not read). Every rewrite's id and kind
come from :meth:`RewriteRun.new`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from eventlake import layout, partitions, state_layout
from eventlake.catalog import Catalog, TableSpec
from eventlake.errors import EventLakeError
from eventlake.progress import Say
from eventlake.storage import Location, Storage, to_location
from eventlake.storage.base import BATCH_THREADS, in_parallel
from eventlake.storage.local import fsync_dir
from eventlake.sync.protocol.manifest import PartitionRewrite
from eventlake.sync.protocol.stage import RunStage, new_run_id
from eventlake.timestamps import format_timestamp, now_utc, parse_timestamp


class RewriteIdError(EventLakeError):
    """A rewrite's id is in use in a partition folder already: its marker would pass for the new
    one (the folder emptied), so nothing is staged."""

    def __init__(self, run_id: str, folder: Location) -> None:
        super().__init__(
            f"rewrite {run_id} already has a marker in {folder}: nothing was changed; run it again "
            "(a new run gets a new id)",
            run_id=run_id, folder=str(folder),
        )  # fmt: skip


class RewriteKind(str, Enum):
    """What rewrote a partition (recorded in its marker)."""

    COMPACTION = "compaction"
    REPLAY = "replay"
    USER_DELETION = "user deletion"
    SET_TYPE = "set-type"
    REPORT_MERGE = "report merge"
    RETENTION = "retention"  # a partition dropped whole: an empty version (see retire_partitions)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class RewriteRun:
    """One rewrite of partitions: its kind and its id, which names its outputs, markers, version
    folders and retired record (``compact-<time>-<16 hex digits>``, of the moment it starts: unique
    whatever range it rewrites). The one place rewrite ids are minted."""

    kind: RewriteKind
    id: str

    @classmethod
    def new(cls, kind: RewriteKind, now: datetime | None = None) -> RewriteRun:
        return cls(kind, new_run_id(now or now_utc(), layout.COMPACT_RUN_PREFIX, token_bytes=8))


def stage_output(storage: Storage, stage: RunStage, folder: Location, name: str, table: pa.Table) -> str:
    """Write one new file of partition ``folder`` into the rewrite's staged content (Parquet,
    snappy, as a sync writes); returns its name, one of the ``outputs`` of :func:`finish_rewrite`."""
    with storage.open_write(stage.rewrite_folder(folder) / name) as handle:
        pq.write_table(table, handle, compression="snappy")
    return name


def finish_rewrite(
    storage: Storage, stage: RunStage, folder: Location, names: Collection[str], outputs: list[str],
    replaced: list[str], run: RewriteRun, table: TableSpec | None = None, sources: Sequence[str] = (),
    data: Collection[str] | None = None,
) -> PartitionRewrite:  # fmt: skip
    """Stage the commit marker of a partition folder whose files ``replaced`` give way to the ``outputs``
    staged in its rewrite folder (``stage.rewrite_folder(folder)``: compaction, replay, user
    deletion, set-type, a reports day's merge). ``names``: every file in the folder now (relative to
    it, as :func:`eventlake.partitions.partition_listing` gives them); ``data``: those that are its
    data (default: :func:`eventlake.partitions.partition_files`; a reports day's, by its rule): the
    ones not replaced are kept (copied into the version folder on an object store); an older
    compaction's marker is replaced too once none of its outputs stays. ``run``: the rewrite's id
    (naming the outputs, the marker and the version folder) and kind. ``table``: the catalog's table
    of the partition, whose location moves when the partition moves to a version folder. ``sources``:
    where each of the ``outputs`` is staged when not in the rewrite folder (on an object store only:
    see :class:`~eventlake.sync.protocol.manifest.PartitionRewrite`).

    The marker records every name listed (``covers``): the new version supersedes them, and a file
    that shows up after is data (see :func:`eventlake.layout.partition_data`); the rewrite retires
    only :func:`retirement`'s names."""
    marker = layout.compaction_marker_name(run.id)
    if any(n.rsplit("/", 1)[-1] == marker for n in names):
        raise RewriteIdError(run.id, folder)
    if data is None:
        data = partitions.partition_files(storage, folder, names)
    replaced = list(replaced)
    for name in names:
        older = layout.marker_run_id(name)
        if older is not None and all(n in replaced for n in names if layout.output_run_id(n) == older):
            replaced.append(name)
    staged = stage.rewrite_folder(folder)
    kept = [n for n in sorted(data) if n not in replaced]
    version = layout.version_folder_name(layout.next_version_number(names), run.id)
    foreign = partitions.holds_foreign_data(storage, folder, names, data)
    document = partitions.marker_document(
        run.id, outputs, replaced, kind=str(run.kind), covers=names, foreign=foreign
    )
    storage.write(staged / marker, document)
    values = None
    if table is not None:
        values = layout.partition_values(to_location(table.location), folder, table.partition_keys)
    return PartitionRewrite(
        str(folder), str(staged), tuple(outputs), tuple(replaced), marker,
        version=version, kept=tuple(kept),
        retired=tuple(retirement(names, data, {*replaced, *kept}, version)),
        database=table.database if table is not None and values is not None else "",
        table=table.name if table is not None and values is not None else "",
        keys=table.partition_keys if table is not None and values is not None else (),
        values=values or (), sources=tuple(sources),
    )  # fmt: skip


def retirement(
    names: Collection[str], data: Collection[str], superseded: Collection[str], version: str = ""
) -> list[str]:
    """What a rewrite of a partition whose files are ``names`` and data ``data`` retires (deleted
    after the grace period, once the partition moved to its ``version`` folder): the data it read and
    ``superseded``, and the files that were no data when it listed them and are eventlake's, or data
    an earlier rewrite superseded (old versions, markers, outputs; old files still in their grace
    period). Never a data file it did not supersede, nor a file of another writer that is no data
    (``_SUCCESS``). Markers last: a crash part way leaves every version it names readable.

    >>> names = ["part-00000-a.c000.snappy.parquet", "_SUCCESS", "_v-000001-c1/_compact-c1.json",
    ...          "_v-000001-c1/part-compact-c1-00000.parquet"]
    >>> retirement(names, names[3:], names[3:], "_v-000002-c2")  # doctest: +NORMALIZE_WHITESPACE
    ['_v-000001-c1/part-compact-c1-00000.parquet', 'part-00000-a.c000.snappy.parquet',
     '_v-000001-c1/_compact-c1.json']
    """
    retired = []
    for name in names:
        folder, _, leaf = name.rpartition("/")
        if version and folder == version:  # (not there yet: a rerun's listing)
            continue
        if name in data:
            if name in superseded:
                retired.append(name)
        elif folder or any(
            rule(leaf) for rule in (layout.marker_run_id, layout.is_data_file_name, layout.is_report_name)
        ):  # a version folder's (eventlake's), a marker, or a data file an earlier rewrite superseded
            retired.append(name)
    return sorted(retired, key=lambda n: (layout.marker_run_id(n.rsplit("/", 1)[-1]) is not None, n))


def apply_rewrite(storage: Storage, rewrite: PartitionRewrite) -> bool:
    """Switch a partition folder from the files ``rewrite`` replaces to its new ones, so that a
    reader sees one set or the other (see the module's description). True when the partition moved
    to a version folder (its location in the catalog is to follow: :func:`switch_location`).

    The marker says the switch is done, so a rerun never switches twice. On an object store the new
    files are published into the version folder, the kept ones copied there, then the marker
    (:func:`publish_versions`); the old files stay for the grace period (:func:`retire`). On a local
    disk the staged folder (new files + marker, plus hard links to the folder's files that stay) is
    exchanged with the partition folder in one step (the catalog's location stays); the old files
    end in the staging folder, deleted with it. A disk that cannot exchange folders (and a manifest
    written before version folders existed) has the new files published into the folder, then the
    marker, then the replaced files deleted: eventlake's readers switch at the marker, a reader
    listing the folder sees both sets until the deletes."""
    folder, staged = to_location(rewrite.folder), to_location(rewrite.staged)
    if _versioned(storage, rewrite):
        publish_versions(storage, [rewrite])
        return True
    if not storage.exists(folder / rewrite.marker) and not _swap_local(storage, rewrite, folder, staged):
        for source, name in zip(_sources(rewrite), rewrite.files, strict=True):  # invisible to
            storage.publish(source, folder / name)  # eventlake's readers until the marker is there
        storage.commit(folder / name for name in rewrite.files)
        storage.publish(staged / rewrite.marker, folder / rewrite.marker)  # the commit point
        storage.commit([folder / rewrite.marker])
    drop_replaced(storage, folder, rewrite.replaced)
    return False


def _versioned(storage: Storage, rewrite: PartitionRewrite) -> bool:
    """Whether ``rewrite`` switches to a version folder (on an object store) rather than in place."""
    return bool(rewrite.version) and storage.local_path(to_location(rewrite.folder)) is None


def _sources(rewrite: PartitionRewrite) -> list[Location]:
    """Where each new file of ``rewrite`` is staged."""
    if rewrite.sources:
        return [to_location(source) for source in rewrite.sources]
    return [to_location(rewrite.staged) / name for name in rewrite.files]


def publish_versions(storage: Storage, rewrites: Sequence[PartitionRewrite], resumed: bool = True) -> None:
    """The object-store half of :func:`apply_rewrite` for many partitions at once, in few requests
    that run side by side: every new file published into its version folder
    (:meth:`~eventlake.storage.Storage.publish_many`), every kept file copied there, then every
    marker (eventlake's readers switch there, each partition at its own marker, after its files).
    A partition whose marker is in its version folder is done and left alone; ``resumed=False``
    (the manifest's first application: no version folder can hold its marker yet) skips that
    look-up. A crash at any point is completed by a rerun: a file found published is done."""
    if resumed:
        done = in_parallel(lambda r: storage.exists(_version_dir(r) / r.marker), rewrites, BATCH_THREADS)
        rewrites = [rewrite for rewrite, found in zip(rewrites, done, strict=True) if not found]
    places = [(to_location(r.folder), _version_dir(r), to_location(r.staged), r) for r in rewrites]
    storage.publish_many(
        [
            (source, version / name)
            for _, version, _, r in places
            for source, name in zip(_sources(r), r.files, strict=True)
        ]
    )
    copies = [  # a later sync's file, a big one: the version holds all the data
        (layout.partition_file(folder, name), version / name.rsplit("/", 1)[-1])
        for folder, version, _, r in places
        for name in r.kept
    ]
    in_parallel(lambda pair: storage.copy(*pair), copies, BATCH_THREADS)
    storage.publish_many([(staged / r.marker, version / r.marker) for _, version, staged, r in places])


def switch_partitions(
    storage: Storage, rewrites: Sequence[PartitionRewrite], catalog: Callable[[], Catalog],
    *, resumed: bool = True,
) -> tuple[list[PartitionRewrite], list[PartitionRewrite]]:  # fmt: skip
    """Switch a run's rewritten partitions (:func:`apply_rewrite`; on an object store all at once:
    :func:`publish_versions`, ``resumed`` as there), then move the catalog's location of each that
    moved to a version folder, a table's partitions in one batch (``set_partition_locations``:
    readers through the catalog switch each partition in one change). Returns the partitions moved
    (for :func:`retire`) and those whose table is not in the catalog yet (a table the run creates:
    :func:`switch_later`, once it is)."""
    publish_versions(storage, [r for r in rewrites if _versioned(storage, r)], resumed)
    moved = [
        rewrite for rewrite in rewrites if _versioned(storage, rewrite) or apply_rewrite(storage, rewrite)
    ]
    tables: dict[tuple[str, str, tuple[str, ...]], list[PartitionRewrite]] = {}
    for rewrite in moved:
        if rewrite.table:
            tables.setdefault((rewrite.database, rewrite.table, rewrite.keys), []).append(rewrite)
    later = []
    for (database, table, keys), group in tables.items():
        moves = [(rewrite.values, version_location(rewrite)) for rewrite in group]
        if not catalog().set_partition_locations(database, table, keys, moves):
            later += group
    return moved, later


def switch_later(catalog: Catalog, later: Sequence[PartitionRewrite], say: Say) -> None:
    """:func:`switch_location` of the partitions whose table the run has just registered; one
    whose table is still not there is said (its version folder is not registered)."""
    for rewrite in later:
        if not switch_location(catalog, rewrite):
            say(f"{rewrite.database}.{rewrite.table}: not in the catalog, {rewrite.version} not registered")


def switch_location(catalog: Catalog, rewrite: PartitionRewrite) -> bool:
    """Move the catalog's partition to the rewrite's version folder in one call: readers through
    the catalog (Athena, Trino, Spark through Hive) switch here. False when the table is not there."""
    return catalog.set_partition_location(
        rewrite.database, rewrite.table, rewrite.keys, rewrite.values, version_location(rewrite)
    )


def version_location(rewrite: PartitionRewrite) -> str:
    """Where the catalog's partition points after the switch: the rewrite's version folder."""
    return str(_version_dir(rewrite))


def _version_dir(rewrite: PartitionRewrite) -> Location:
    return layout.version_dir(to_location(rewrite.folder), rewrite.version)


def retire(
    storage: Storage, lake: Location, source_id: str, run_id: str, moved: Sequence[PartitionRewrite]
) -> None:
    """Record the files the moved partitions no longer read (each rewrite's :func:`retirement`),
    for :func:`drop_retired` to delete once the grace period is over (a rerun records them again,
    later: they only stay longer). Exact names only: a file another writer put into a version folder
    after the rewrite listed it is never deleted with the folder."""
    files = [str(layout.partition_file(to_location(r.folder), name)) for r in moved for name in r.retired]
    markers = [f for f in files if layout.marker_run_id(f.rsplit("/", 1)[-1]) is not None]
    ordered = sorted(set(files) - set(markers)) + sorted(set(markers))  # markers last
    document = {"retired_at": format_timestamp(now_utc()), "files": ordered, "folders": []}
    storage.write(
        state_layout.retired_file(lake, source_id, run_id), orjson.dumps(document, option=orjson.OPT_INDENT_2)
    )


@dataclass(frozen=True)
class DroppedPartition:
    """A partition that goes whole (retention): its values, its folder and every name of it
    (relative to the folder, as :func:`eventlake.partitions.partition_listing` gives them)."""

    values: tuple[str, ...]
    folder: Location
    names: tuple[str, ...]


def retire_partitions(
    storage: Storage, lake: Location, source_id: str, run: RewriteRun, spec: TableSpec,
    dropped: Sequence[DroppedPartition], registered: Sequence[tuple[str, ...]],
    catalog: Callable[[], Catalog], check: Callable[[], None] = lambda: None,
) -> None:  # fmt: skip
    """Drop partitions of ``spec`` whole (retention), their files deleted only once the grace
    period passed, like a rewrite's old files (:func:`drop_retired`), for the queries that planned
    them before the drop. In this order, each step safe to repeat:

    1. the retired record (``_state/retired/<source-id>/<run>.json``): every file of the
       partitions, then their folders, and the catalog's partitions (those of ``dropped`` and
       ``registered``). From here the files are never left for ever: whoever deletes the record's
       files after the grace (:func:`drop_retired`, at the start of the next job of the source)
       first drops those partitions from the catalog, should a crash have come before step 3;
    2. an empty version of each partition in ``dropped`` (``v-<n>-<run>/`` holding only its marker,
       which covers every name of the partition): eventlake's readers (DuckDB, the console,
       compaction, ``catalog repair``) see no data in it from here (:func:`is_dropped`);
    3. the partitions out of the catalog: a query through it that starts now does not see them; one
       planned before still reads their files, until the grace period ends.

    ``check``: called before each step (a holder that lost its lease changes nothing more)."""
    check()
    tombstones = [
        layout.version_dir(d.folder, layout.version_folder_name(layout.next_version_number(d.names), run.id))
        / layout.compaction_marker_name(run.id)
        for d in dropped
    ]
    files = [str(layout.partition_file(d.folder, name)) for d in dropped for name in d.names]
    markers = [f for f in files if layout.marker_run_id(f.rsplit("/", 1)[-1]) is not None]
    folders = [str(d.folder) for d in dropped]
    folders += [str(home) for d in dropped if (home := layout.versions_dir(d.folder)) is not None]
    values = sorted({*registered, *(d.values for d in dropped)})
    document = {
        "retired_at": format_timestamp(now_utc()),
        # markers last, the empty versions' very last: a crash part way never shows old data again
        "files": sorted(set(files) - set(markers)) + sorted(set(markers)) + [str(t) for t in tombstones],
        "folders": folders,
        "dropped": {
            "database": spec.database,
            "table": spec.name,
            "keys": list(spec.partition_keys),
            "values": [list(v) for v in values],
        },
    }
    storage.write(
        state_layout.retired_file(lake, source_id, run.id), orjson.dumps(document, option=orjson.OPT_INDENT_2)
    )
    check()
    for d, tombstone in zip(dropped, tombstones, strict=True):
        marker = partitions.marker_document(
            run.id, [], d.names, kind=str(run.kind), covers=d.names, foreign=False
        )
        storage.write(tombstone, marker)
    check()
    catalog().drop_partitions(spec, values)


def is_dropped(storage: Storage, folder: Location, names: Collection[str]) -> bool:
    """Whether the partition whose files are ``names`` was dropped by :func:`retire_partitions`
    (its files wait for the grace period): its current version is retention's empty one."""
    version = layout.current_version(names)
    if version is None or partitions.partition_files(storage, folder, names):
        return False
    for name in names:
        inside, _, leaf = name.partition("/")
        if inside == version and layout.marker_run_id(leaf) is not None:
            document = orjson.loads(storage.read(layout.partition_file(folder, name)))
            if document.get("kind") == str(RewriteKind.RETENTION):
                return True
    return False


def drop_retired(
    storage: Storage, lake: Location, source_id: str, grace: timedelta, now: datetime | None = None,
    catalog: Callable[[], Catalog] | None = None,
) -> int:  # fmt: skip
    """Delete the old files of rewritten partitions, and the files of the partitions retention
    dropped (:func:`retire_partitions`), retired more than ``grace`` ago (no query that started
    before the switch or the drop still reads them), then their records. Returns the records done.
    A dropped partition still in the catalog (a crash before retention's drop) is dropped from it
    first (through ``catalog``; without one its record waits for a job that has it)."""
    now = now or now_utc()
    done = 0
    for info in storage.list(state_layout.retired_dir(lake, source_id), "*.json"):
        document = orjson.loads(storage.read(info.path))
        retired_at = parse_timestamp(document["retired_at"])
        if retired_at is None or retired_at + grace > now:  # unreadable: keep the files
            continue
        dropped = document.get("dropped")
        if dropped:
            if catalog is None:
                continue
            spec = TableSpec(dropped["database"], dropped["table"], (), tuple(dropped["keys"]), "")
            catalog().drop_partitions(spec, [tuple(v) for v in dropped["values"]])
        for path in document["files"]:
            storage.delete(to_location(path))
        for folder in document["folders"]:
            storage.delete_tree(to_location(folder))
        storage.delete(info.path)
        done += 1
    return done


def drop_replaced(storage: Storage, folder: Location, names: tuple[str, ...]) -> None:
    """Delete the files a committed rewrite replaced (nothing left to do after a swap)."""
    for name in names:
        storage.delete(layout.partition_file(folder, name))


def _swap_local(storage: Storage, rewrite: PartitionRewrite, folder: Location, staged: Location) -> bool:
    """Exchange a local partition folder with its staged new content; False when the store is not
    a local disk, the folder holds sub-folders, or the file system cannot exchange folders."""
    local, new = storage.local_path(folder), storage.local_path(staged)
    if local is None or new is None or not local.is_dir():
        return False
    keep = [p for p in local.iterdir() if p.name not in rewrite.replaced]
    if any(p.is_dir() for p in keep):
        return False
    for path in keep:  # the folder's files that stay (a later sync's, a big one): linked, not copied
        try:
            os.link(path, new / path.name)
        except FileExistsError:  # linked before a crash
            pass
    fsync_dir(new)
    if not exchange_folders(local, new):
        return False
    fsync_dir(local.parent)
    fsync_dir(new.parent)
    return True


_RENAME_EXCHANGE = 2  # linux/fs.h
_RENAME_SWAP = 2  # macOS sys/stdio.h
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EXDEV, errno.ENOTSUP, errno.EOPNOTSUPP}


def exchange_folders(first: Path, second: Path) -> bool:
    """Atomically exchange two folders' names (Linux ``renameat2(RENAME_EXCHANGE)``, macOS
    ``renamex_np(RENAME_SWAP)``). False when this system or file system cannot."""
    libc = _libc()
    try:
        if sys.platform == "darwin":
            call = libc.renamex_np
            result = call(os.fsencode(first), os.fsencode(second), _RENAME_SWAP)
        else:
            call = libc.renameat2
            at_fdcwd = -100
            result = call(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second), _RENAME_EXCHANGE)
    except AttributeError:  # a C library without the call
        return False
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, f"cannot exchange {first} and {second}: {os.strerror(code)}")


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
