"""Applying a run's :class:`~eventlake.sync.manifest.Manifest`: publish, rewrite, register, record.

Applying moves the staged files into the lake, switches the partitions a compaction rewrote to
their new files, writes the report, registers tables, columns and partitions, writes the schema
files, replaces the warehouse views of a database whose tables changed, and finally records the
ledger. Every step is idempotent: a run killed at any point after
its manifest exists is completed by the next run; killed before, it left nothing but staging.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import sys
from pathlib import Path
from typing import Any

from eventlake.catalog import Catalog
from eventlake.catalog.schema_file import read_schema_files, write_schema_file
from eventlake.catalog.views import database_views, lake_table
from eventlake.config import Settings
from eventlake.progress import say
from eventlake.storage import Location, Storage, to_location
from eventlake.storage.local import fsync_dir
from eventlake.sync.manifest import ADD_COLUMNS, CHECK, CREATE, NONE, RETYPE, Manifest, PartitionRewrite
from eventlake.sync.report import note_report_day, write_report_rows
from eventlake.sync.state import SyncState


class CatalogOnce:
    """A run's catalog, loaded at its first use (a run that registers nothing starts no Spark):
    ``catalog`` when given, else one from the settings on ``spark`` (None: built if needed)."""

    def __init__(self, settings: Settings, spark: Any = None, catalog: Catalog | None = None) -> None:
        self.settings, self.spark, self.catalog = settings, spark, catalog

    def __call__(self) -> Catalog:
        if self.catalog is None:
            from eventlake.catalog import load_catalog

            self.catalog = load_catalog(self.settings, self.spark)
        return self.catalog

    def for_manifest(self, manifest: Manifest) -> Catalog | None:
        """The catalog when ``manifest`` registers tables; None when it needs none."""
        return self() if manifest.tables else None


def apply(
    manifest: Manifest, catalog: Catalog | None, state: SyncState, storage: Storage, lake: Location
) -> None:
    """Publish a run. Safe to call again after a crash at any point. ``catalog`` may be None for a
    manifest that registers no table (a compaction's)."""
    for staged, final in manifest.moves:
        storage.publish(to_location(staged), to_location(final))
    for rewrite in manifest.rewrites:
        apply_rewrite(storage, rewrite)
    if manifest.report:
        write_report_rows(storage, to_location(manifest.report_path), list(manifest.report))
        note_report_day(storage, lake, manifest.report[0]["day"])  # where readers walking back stop
    if manifest.tables and catalog is None:
        raise ValueError(f"run {manifest.run_id} registers tables: applying it needs the catalog")
    databases: set[str] = set()
    for entry in manifest.tables:
        assert catalog is not None
        spec = entry.spec
        if entry.change in (CHECK, ADD_COLUMNS):
            catalog.ensure_table(spec)  # looks the table up: creates it or appends what it lacks
        elif entry.change == CREATE:
            if spec.database not in databases:
                catalog.ensure_database(spec.database)
                databases.add(spec.database)
            catalog.create_table(spec)  # IF NOT EXISTS: a rerun after a crash is a no-op
        elif entry.change == RETYPE:
            have = dict(catalog.table_columns(spec.database, spec.name) or ())
            for column, kind in spec.columns:
                if column in have and have[column] != kind:
                    catalog.set_column_type(spec.database, spec.name, column, kind)
        elif entry.change != NONE:
            raise ValueError(f"run {manifest.run_id}: unknown table change {entry.change!r}")
        if entry.partitions:
            catalog.add_partitions(spec, list(entry.partitions))
        write_schema_file(storage, lake, spec)  # the reports table's too: the DuckDB engine reads it
    _replace_views(manifest, catalog, storage, lake)
    storage.commit(to_location(final) for _, final in manifest.moves)  # durable before the ledger says so
    if manifest.files:
        state.record_synced(manifest.run_id, list(manifest.files))
    state.drop_pending(manifest.run_id)
    storage.delete_tree(to_location(manifest.stage))


def _replace_views(manifest: Manifest, catalog: Catalog | None, storage: Storage, lake: Location) -> None:
    """A run that created a lake table or changed its columns replaces its database's warehouse
    views (``tracks``, ``pages``, one per event, ...), so that they show the new columns."""
    changed = {
        e.spec.database for e in manifest.tables
        if e.change in (CREATE, ADD_COLUMNS, RETYPE) and lake_table(e.spec) is not None
    }  # fmt: skip
    for database in sorted(changed):
        assert catalog is not None
        try:
            for name, found in database_views(read_schema_files(storage, lake, [database])):
                left = catalog.replace_views(name, found.views)
                if left:
                    say(f"{name}: warehouse views {', '.join(left)} not made: tables of those names exist")
        except Exception as exc:  # the views must not hold the run: the data is published either way
            say(f"{database}: warehouse views not replaced ({type(exc).__name__}: {exc}); "
                "`eventlake catalog repair` replaces them")  # fmt: skip


# -- rewriting a partition (compaction) ---------------------------------------------------------


def apply_rewrite(storage: Storage, rewrite: PartitionRewrite) -> None:
    """Switch a partition folder from the files ``rewrite`` replaces to its new ones, so that a
    reader sees one set or the other (see :mod:`eventlake.layout`), then drop the replaced files.

    The marker in the folder says the switch is done, so a rerun never switches twice. On a local
    disk the staged folder (new files + marker, plus hard links to the folder's files that stay)
    is exchanged with the partition folder in one step; the old files end in the staging folder,
    deleted with it. Elsewhere (object stores, or a disk that cannot exchange folders) the new files
    are published, then the marker, then the replaced files are deleted."""
    folder, staged = to_location(rewrite.folder), to_location(rewrite.staged)
    if not storage.exists(folder / rewrite.marker):
        if not _swap_local(storage, rewrite, folder, staged):
            for name in rewrite.files:  # invisible to eventlake's readers until the marker is there
                storage.publish(staged / name, folder / name)
            storage.commit(folder / name for name in rewrite.files)
            storage.publish(staged / rewrite.marker, folder / rewrite.marker)  # the commit point
            storage.commit([folder / rewrite.marker])
    drop_replaced(storage, folder, rewrite.replaced)


def drop_replaced(storage: Storage, folder: Location, names: tuple[str, ...]) -> None:
    """Delete the files a committed rewrite replaced (nothing left to do after a swap)."""
    for name in names:
        storage.delete(folder / name)


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
