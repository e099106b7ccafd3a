"""A table's partition folders as every reader in eventlake sees them, read through
:mod:`eventlake.storage`: their files (:func:`partition_listing`, :func:`folder_names`), which of
them are data (:func:`partition_files`, :func:`table_data_files`: the rule of
:func:`eventlake.layout.partition_data`; every caller asks here, nobody re-derives it), whether
they hold rows another writer wrote (:func:`holds_foreign_data`), where a partition's data is now
(:func:`current_folder`), and the commit marker's content (:func:`marker_document`,
:func:`read_marker`), which :mod:`eventlake.sync.protocol.rewrite` writes when it rewrites a partition. The
names are in :mod:`eventlake.layout`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator

import orjson

from eventlake import layout
from eventlake.layout import Marker, current_version, partition_data, version_number
from eventlake.storage.base import BATCH_THREADS, FileInfo, Storage, in_parallel
from eventlake.storage.location import Location, relative_to


def marker_document(
    run_id: str, files: Iterable[str], replaced: Iterable[str], *, kind: str = "",
    covers: Iterable[str] | None = None, foreign: bool | None = None,
) -> bytes:  # fmt: skip
    """A rewrite's commit marker: its outputs and the names they replace, in one folder; for a
    version folder's, also every name of the partition it ``covers`` (supersedes) and whether it
    holds rows another writer wrote (see :class:`eventlake.layout.Marker`); the rewrite's ``kind``."""
    document: dict[str, object] = {"run_id": run_id, "files": sorted(files), "replaced": sorted(replaced)}
    if kind:
        document["kind"] = kind
    if covers is not None:
        document["covers"] = sorted(covers)
    if foreign is not None:
        document["foreign"] = foreign
    return orjson.dumps(document, option=orjson.OPT_INDENT_2)


def parse_marker(data: bytes) -> Marker:
    """A marker's content as the data rule reads it."""
    document = orjson.loads(data)
    covers = document.get("covers")
    return Marker(
        tuple(document["replaced"]), None if covers is None else frozenset(covers), document.get("foreign")
    )


def marker_replaced(data: bytes) -> list[str]:
    """The names a marker's rewrite replaced."""
    return list(parse_marker(data).replaced)


def read_marker(storage: Storage, folder: Location) -> Callable[[str], Marker]:
    """The reader of the markers of partition ``folder`` (by name relative to it) that the rule of
    :func:`~eventlake.layout.partition_data` asks for; each read once."""
    found: dict[str, Marker] = {}

    def read(name: str) -> Marker:
        if name not in found:
            found[name] = parse_marker(storage.read(layout.partition_file(folder, name)))
        return found[name]

    return read


def partition_files(storage: Storage, folder: Location, names: Collection[str]) -> list[str]:
    """:func:`~eventlake.layout.partition_data` of one partition folder whose files are ``names``
    (relative to it, as :func:`partition_listing` gives them), reading its markers through
    ``storage``."""
    return partition_data(names, read_marker(storage, folder))


def holds_foreign_data(
    storage: Storage, folder: Location, names: Collection[str], data: Collection[str] | None = None
) -> bool:
    """Whether a partition's data (``data``, default :func:`partition_files`) holds rows eventlake
    did not write (Segment Data Lakes', another writer's): a Parquet data file of another writer's
    name, or a marker of the rewrite that wrote the data saying it took in such rows: the current
    version's, or without a version folder (a rewrite in place, on a local disk) those in the
    folder. No data holds no rows. A partition rewritten before markers recorded it says False
    (``eventlake adopt``'s progress file names the partitions adopted)."""
    if data is None:
        data = partition_files(storage, folder, names)
    if not data:
        return False
    leaves = [name.rsplit("/", 1)[-1] for name in data]
    if any(layout.is_data_file_name(leaf) and not layout.is_eventlake_file_name(leaf) for leaf in leaves):
        return True
    version = current_version(names)
    home = "" if version is None else version + "/"  # where the data's rewrite left its marker
    markers = [
        n for n in names
        if n.startswith(home) and "/" not in n[len(home) :] and layout.marker_run_id(n[len(home) :])
    ]  # fmt: skip
    reader = read_marker(storage, folder)
    return any(bool(reader(marker).foreign) for marker in markers)


def list_partition_files(
    storage: Storage, root: Location, pattern: str
) -> Iterator[tuple[list[str], FileInfo]]:
    """The files under ``root`` (a table's or a partition's folder, or one between) whose path
    relative to it matches ``pattern``, each with that path's parts, as if the version folders of the
    partitions below ``root`` were inside their partition folders: the partition's files and its
    ``_v-`` version folders' (a lake written before the versions tree), then its versions tree's
    (:func:`eventlake.layout.versions_dir`; one listing more). A folder inside a partition folder
    named like a version of the tree is not one: its files are not taken. Every listing of
    partitions goes through here."""
    for info in storage.list(root, pattern):
        parts = relative_to(info.path, root).as_posix().split("/")
        if len(parts) < 2 or not layout.in_versions_tree(parts[-2]):
            yield parts, info
    home = layout.versions_dir(root)
    if home is None:
        return
    for info in storage.list(home, pattern):
        parts = relative_to(info.path, home).as_posix().split("/")
        if len(parts) >= 2 and layout.in_versions_tree(parts[-2]):
            yield parts, info


def partition_listing(
    storage: Storage, location: Location, depth: int
) -> dict[Location, dict[str, FileInfo]]:
    """Every file (data, markers, anything else not hidden) of each partition folder of a table
    with ``depth`` partition keys, by folder and name relative to the folder (a version's files as
    ``v-.../name``, wherever the version is: :func:`eventlake.layout.partition_file`): two listings
    of the table (its folder, its versions tree)."""
    folders: dict[Location, dict[str, FileInfo]] = {}
    for parts, info in list_partition_files(storage, location, "*/" * depth + "**/*"):
        if len(parts) == depth + 1 or (len(parts) == depth + 2 and version_number(parts[depth]) is not None):
            folders.setdefault(_below(location, parts[:depth]), {})["/".join(parts[depth:])] = info
    return folders


def _below(root: Location, parts: list[str]) -> Location:
    for part in parts:
        root = root / part
    return root


def folder_names(storage: Storage, folder: Location) -> dict[str, FileInfo]:
    """The files of one partition folder, by name relative to it (as :func:`partition_listing`)."""
    found = {}
    for parts, info in list_partition_files(storage, folder, "**/*"):
        if len(parts) == 1 or (len(parts) == 2 and version_number(parts[0]) is not None):
            found["/".join(parts)] = info
    return found


def current_folder(storage: Storage, folder: Location) -> Location:
    """Where a partition's data is now: its current version's folder, or the folder itself."""
    return _current(folder, folder_names(storage, folder))


def _current(folder: Location, names: Collection[str]) -> Location:
    version = current_version(names)
    return layout.version_dir(folder, version) if version is not None else folder


def current_folders(
    storage: Storage, folders: Collection[Location], by_parent: bool = False
) -> dict[Location, Location]:
    """:func:`current_folder` of each of ``folders``, ``BATCH_THREADS`` listings at once.
    ``by_parent``: the folders that share their parent with another of them are found in one
    listing of the parent (a day's hours: one listing of the day, not one of each hour); for
    partition folders whose parent is below the table's folder only (the caller knows: a listing
    of the table grows with its age)."""
    groups: dict[Location, list[Location]] = {}
    for folder in dict.fromkeys(folders):
        groups.setdefault(folder.parent if by_parent else folder, []).append(folder)

    def find(group: tuple[Location, list[Location]]) -> dict[Location, Location]:
        parent, members = group
        if len(members) == 1:
            return {members[0]: current_folder(storage, members[0])}
        names: dict[str, dict[str, FileInfo]] = {member.name: {} for member in members}
        for (first, *parts), info in list_partition_files(storage, parent, "*/**/*"):
            if first in names and (
                len(parts) == 1 or (len(parts) == 2 and version_number(parts[0]) is not None)
            ):
                names[first]["/".join(parts)] = info
        return {member: _current(member, names[member.name]) for member in members}

    found: dict[Location, Location] = {}
    for answer in in_parallel(find, list(groups.items()), BATCH_THREADS):
        found.update(answer)
    return found


def table_data_files(storage: Storage, location: Location, depth: int) -> list[FileInfo]:
    """Every data file of a table (``depth`` partition keys), by the rule of
    :func:`~eventlake.layout.partition_data`, in path order: what a reader of the table reads."""
    found = []
    for folder, infos in partition_listing(storage, location, depth).items():
        found += [infos[name] for name in partition_files(storage, folder, infos)]
    return sorted(found, key=lambda f: f.path)


# -- report folders (the reports table's partitions) ---------------------------------------------


def report_folder_names(storage: Storage, folder: Location) -> dict[str, FileInfo]:
    """The files of one source's day folder by name relative to it: its own, its version folders'
    and the per-run folders' of a lake written before the merge (one listing)."""
    found = {}
    for parts, info in list_partition_files(storage, folder, "**/*"):
        name = "/".join(parts)
        if layout.in_report_folder(name):
            found[name] = info
    return found


def report_day_files(
    storage: Storage, lake: Location, day: str, source_id: str | None = None
) -> list[Location]:
    """The report files of one UTC day (of one source, or every source's), by
    :func:`~eventlake.layout.report_folder_files`, sorted: one listing of the day's folder."""
    return _report_files(storage, layout.report_day_dir(lake, day), f"source={source_id or '*'}/**/*", 1)


def every_report_file(storage: Storage, lake: Location) -> list[Location]:
    """Every report file of the lake (every day, every source), sorted: one listing of all."""
    return report_table_files(storage, layout.reports_root(lake))


def report_table_files(storage: Storage, location: Location) -> list[Location]:
    """:func:`every_report_file` under the reports table's ``location``."""
    return _report_files(storage, location, "day=*/source=*/**/*", 2)


def _report_files(storage: Storage, root: Location, pattern: str, depth: int) -> list[Location]:
    folders: dict[Location, dict[str, FileInfo]] = {}
    for parts, info in list_partition_files(storage, root, pattern):
        folder, name = _below(root, parts[:depth]), "/".join(parts[depth:])
        if layout.in_report_folder(name):
            folders.setdefault(folder, {})[name] = info
    found = []
    for folder, names in folders.items():
        found += [names[n].path for n in layout.report_folder_files(names, read_marker(storage, folder))]
    return sorted(found)
