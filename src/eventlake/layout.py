"""Every path convention of the lake's data, in one place (the state's are in
:mod:`eventlake.state_layout`). Nobody else formats a path.

Lake root (Segment-compatible layout)::

    segment-logs/<source-id>/<received-day-ms>/<file>.gz             raw archive (gzip NDJSON)
    segment-data/data/<source-id>/segment_type=<t>/day=<d>/hr=<h>/    lake tables (Parquet)
    segment-data/quarantine/<source-id>/run_id=<r>/                   rejected messages and values
    segment-data/reports/day=<d>/source=<source-id>/report-<r>.json  run reports (merged daily)
    segment-data/versions/<path below segment-data>/v-<n>-<r>/       a rewritten partition's version
    segment-data/_state/...                                          durable state (eventlake.state_layout)
    segment-stage/<source-id>/<run-id>/                                temporary run output

Which files of a partition folder are data (:func:`partition_data`; every reader in eventlake
applies it, through :mod:`eventlake.partitions`)::

    part-<run>-00000.parquet             a sync's file: data
    part-compact-<run>-00000.parquet     a compaction's output: data once its marker is in the folder
    _compact-<run>.json                  that compaction's commit marker: the files it ``replaced``
                                         are no longer data (they are deleted right after)
    v-000003-<rewrite>/<file>            a version of the partition (object stores): its content after a
                                         rewrite, committed by the rewrite's ``_compact-<rewrite>.json``
                                         marker in it; named relative to the partition folder, it is
                                         in the versions tree (:func:`version_dir`), or inside the
                                         folder for a ``_v-000003-<rewrite>/`` of a lake written
                                         before the tree. The committed one with the highest number
                                         is the partition's current version: its data files are
                                         data, and so is every data file outside it that its marker
                                         does not ``covers`` (one another writer put into the folder
                                         after the rewrite listed it: Segment Data Lakes during a
                                         migration's overlap). eventlake writes only into a
                                         partition's current folder, so a file of its own outside
                                         the current version is never data
    .* and _*                            never data (as for Spark, Hive and Athena)

The states a partition goes through are in ``docs/sync.md`` ("A partition's states") and
:func:`partition_state`.

How a rewrite of a partition moves readers from one set of files to the other is in
:mod:`eventlake.sync.protocol.rewrite`; reading these names through storage is :mod:`eventlake.partitions`.
A version's folder is outside every table's folder: ``segment-data/versions/`` then the partition's
path below ``segment-data/`` (:func:`versions_dir`), then ``v-<n>-<rewrite>`` (:func:`version_dir`;
a name relative to the partition becomes a location in :func:`partition_file`, nowhere else). The
catalog's location of a rewritten partition points there, so no location holds the old files or
another version (a reader listing it recursively, hiding nothing, sees one version), none has a part
starting with ``_`` or ``.``, and partition discovery of a table (``MSCK REPAIR``, a crawler) never
sees a version. Nothing here reads or writes storage.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import Enum

from eventlake.errors import EventLakeError
from eventlake.storage.location import Location, relative_to

ARCHIVE = "segment-logs"
DATA = "segment-data"
STAGE = "segment-stage"
ARCHIVE_SUFFIX = ".gz"
REPORT_FILE = "report.json"
DAY_MS = 86_400_000  # a received day of the archive, in Unix milliseconds


class LayoutError(EventLakeError):
    """A location the lake's layout has no place for."""


# raw archive ---------------------------------------------------------------------------------


def archive_root(lake: Location) -> Location:
    return lake / ARCHIVE


def archive_source_dir(lake: Location, source_id: str) -> Location:
    return lake / ARCHIVE / source_id


def archive_file(lake: Location, source_id: str, day_ms: int, name: str) -> Location:
    """``segment-logs/<source-id>/<day-ms>/<name>.gz``."""
    return lake / ARCHIVE / source_id / str(day_ms) / f"{name}{ARCHIVE_SUFFIX}"


def archive_day_dir(lake: Location, source_id: str, day_ms: int) -> Location:
    """One received day's folder of the raw archive: ``segment-logs/<source-id>/<day-ms>``."""
    return archive_source_dir(lake, source_id) / str(day_ms)


def lake_relative(lake: Location, path: Location) -> str:
    """A file's key: its path relative to the lake root, with ``/`` (archive files in the ledger)."""
    return relative_to(path, lake).as_posix()


# lake tables ---------------------------------------------------------------------------------


# partition keys of each ``date_partition`` setting, outermost first, with the format of their value
# (of the message's receivedAt in UTC; years of four digits, as Spark's yyyy)
_YEAR, _MONTH, _DAY, _HOUR = "{0.year:04d}", "{0.month:02d}", "{0.day:02d}", "{0.hour:02d}"
_DATE = f"{_YEAR}-{_MONTH}-{_DAY}"
_PARTITION_FORMATS = {
    "day-hour": (("day", _DATE), ("hr", _HOUR)),
    "year-month-day-hour": (("year", _YEAR), ("month", _MONTH), ("day", _DAY), ("hr", _HOUR)),
    "year-month-day": (("year", _YEAR), ("month", _MONTH), ("day", _DAY)),
    "day": (("day", _DATE),),
}


def received_partition(date_partition: str, received: datetime) -> tuple[str, ...]:
    """The partition values of a message received at ``received`` (UTC) under a ``date_partition``
    setting.

    >>> received_partition("day-hour", datetime(2026, 11, 22, 7, 30, tzinfo=timezone.utc))
    ('2026-11-22', '07')
    >>> received_partition("year-month-day", datetime(999, 1, 2, tzinfo=timezone.utc))
    ('0999', '01', '02')
    """
    return tuple(pattern.format(received) for _, pattern in _PARTITION_FORMATS[date_partition])


def partition_columns(date_partition: str) -> tuple[str, ...]:
    """The partition keys of a ``date_partition`` setting, outermost first."""
    return tuple(key for key, _ in _PARTITION_FORMATS[date_partition])


def source_data_dir(lake: Location, source_dir_name: str) -> Location:
    """``segment-data/data/<source-id or slug>``."""
    return lake / DATA / "data" / source_dir_name


def table_dir(lake: Location, source_dir_name: str, segment_type: str) -> Location:
    return source_data_dir(lake, source_dir_name) / f"segment_type={segment_type}"


def partition_subdir(keys: tuple[str, ...], values: tuple[str, ...]) -> str:
    """``day=2026-11-22/hr=07``."""
    return "/".join(f"{k}={v}" for k, v in zip(keys, values, strict=True))


def partition_period(keys: tuple[str, ...], values: tuple[str, ...]) -> tuple[datetime, datetime] | None:
    """The UTC time span a partition holds (received times), or None for a layout without dates.

    >>> start, end = partition_period(("day", "hr"), ("2026-11-20", "07"))
    >>> start.isoformat(), end.isoformat()
    ('2026-11-20T07:00:00+00:00', '2026-11-20T08:00:00+00:00')
    >>> partition_period(("year", "month", "day"), ("2026", "11", "20"))[1].isoformat()
    '2026-11-21T00:00:00+00:00'
    """
    named = dict(zip(keys, values, strict=True))
    try:
        if "year" in named:
            year, month, day = int(named["year"]), int(named["month"]), int(named["day"])
        else:
            year, month, day = (int(part) for part in named["day"].split("-"))
        start = datetime(year, month, day, int(named.get("hr", "0")), tzinfo=timezone.utc)
    except (KeyError, ValueError):
        return None
    return start, start + (timedelta(hours=1) if "hr" in named else timedelta(days=1))


# compaction: outputs, commit markers, and which files of a partition folder are data -------------

COMPACT_RUN_PREFIX = "compact-"  # the run id of a compaction: compact-20261122T104700123Z-1a2b
_PART_PREFIX = "part-"
_DATA_SUFFIX = ".parquet"
_MARKER_PREFIX = "_" + COMPACT_RUN_PREFIX
_MARKER_SUFFIX = ".json"


def compaction_marker_name(run_id: str) -> str:
    """The commit marker a compaction leaves in each partition folder it rewrote.

    >>> compaction_marker_name("compact-20261122T104700123Z-1a2b")
    '_compact-20261122T104700123Z-1a2b.json'
    """
    return f"_{run_id}{_MARKER_SUFFIX}"


def marker_run_id(file_name: str) -> str | None:
    """The compaction run of a marker file name; None for any other file."""
    if file_name.startswith(_MARKER_PREFIX) and file_name.endswith(_MARKER_SUFFIX):
        return file_name[1 : -len(_MARKER_SUFFIX)]
    return None


def output_run_id(file_name: str) -> str | None:
    """The compaction run that wrote a data file (:func:`part_file_name` of a ``compact-`` run);
    None for a sync's file.

    >>> output_run_id("part-compact-20261122T104700123Z-1a2b-00003.parquet")
    'compact-20261122T104700123Z-1a2b'
    >>> output_run_id("part-20261122T104700123Z-1a2b-00003.parquet") is None
    True
    """
    if file_name.startswith(_PART_PREFIX + COMPACT_RUN_PREFIX) and file_name.endswith(_DATA_SUFFIX):
        return file_name[len(_PART_PREFIX) : -len(_DATA_SUFFIX)].rsplit("-", 1)[0]
    return None


# a run's token: 4 hex digits (a sync's run), 16 (a rewrite's: see eventlake.sync.protocol.rewrite.RewriteRun)
_EVENTLAKE_FILE = re.compile(r"part-(compact-)?\d{8}T\d{9}Z-[0-9a-f]{4}(?:[0-9a-f]{12})?-\d{5}\.parquet")


def is_eventlake_file_name(file_name: str) -> bool:
    """A data file eventlake wrote (a sync's or a compaction's), not one of another writer (SDL's
    Spark: ``part-00000-<uuid>.c000.snappy.parquet``).

    >>> is_eventlake_file_name("part-20261122T104700123Z-1a2b-00003.parquet")
    True
    >>> is_eventlake_file_name("part-00000-3f2c9e1a-0b7d-4c1e-9f3a-2d5e6b7c8d9e.c000.snappy.parquet")
    False
    """
    return _EVENTLAKE_FILE.fullmatch(file_name) is not None


def is_data_file_name(file_name: str) -> bool:
    """A Parquet file that is not hidden (``.``) or metadata (``_``), as Spark, Hive and Athena see it."""
    return file_name.endswith(_DATA_SUFFIX) and not file_name.startswith((".", "_"))


def visible_data_files(names: Collection[str], replaced_by: Callable[[str], Iterable[str]]) -> list[str]:
    """The data files among the file names of one partition folder, sorted: Parquet files that are
    not hidden, less a compaction's outputs whose marker is not in the folder (not committed), less
    the files a marker in the folder replaced (committed; about to be deleted). ``replaced_by(marker)``
    reads a marker; it is called only when a marker could hide something (more than one marker, or
    a data file that is not its marker's output).

    >>> names = ["part-r1-00000.parquet", "part-compact-c1-00000.parquet", "_compact-c1.json"]
    >>> visible_data_files(names[:2], lambda m: [])  # c1 not committed: only the sync's file
    ['part-r1-00000.parquet']
    >>> visible_data_files(names, lambda m: ["part-r1-00000.parquet"])  # committed: only c1's output
    ['part-compact-c1-00000.parquet']
    """
    markers = {run: name for name in names if (run := marker_run_id(name)) is not None}
    data = sorted(n for n in names if is_data_file_name(n))
    visible = [n for n in data if output_run_id(n) is None or output_run_id(n) in markers]
    if markers and (len(markers) > 1 or any(output_run_id(n) is None for n in visible)):
        hidden = {replaced for marker in markers.values() for replaced in replaced_by(marker)}
        visible = [n for n in visible if n not in hidden]
    return visible


@dataclass(frozen=True)
class Marker:
    """A rewrite's commit marker as the data rule reads it: the names of its folder its outputs
    ``replaced``; for a version folder's marker, ``covers``: every name of the partition folder
    (outside the version) the rewrite listed, which the version supersedes (None: a marker written
    before eventlake recorded them; then what it ``replaced`` and the files it copied, by name);
    ``foreign``: the version holds rows eventlake did not write (another writer's files, or rows
    of them rewritten; None: not recorded)."""

    replaced: tuple[str, ...] = ()
    covers: frozenset[str] | None = None
    foreign: bool | None = None


def partition_data(names: Collection[str], marker: Callable[[str], Marker]) -> list[str]:
    """The data files of a partition folder whose files are ``names`` (relative to it: ``x.parquet``
    in it, ``_v-000002-<id>/x.parquet`` in a version folder), sorted: without a committed version
    folder, :func:`visible_data_files` of the files in it; with one, every data file of its current
    version (:func:`current_version`) and every data file outside it its marker does not cover
    (:func:`uncovered`). ``marker(name)`` reads a marker; it is called only when a marker could hide
    something.

    >>> partition_data(["part-r1-00000.parquet", "_v-000001-c1/part-c1-00000.parquet"], lambda m: Marker())
    ['part-r1-00000.parquet']
    >>> versioned = ["_v-000001-c1/part-c1-00000.parquet", "_v-000001-c1/_compact-c1.json"]
    >>> partition_data(["part-20261122T104700123Z-1a2b-00000.parquet", *versioned], lambda m: Marker())
    ['_v-000001-c1/part-c1-00000.parquet']
    >>> late = "part-00000-3f2c.c000.snappy.parquet"  # another writer's, after the rewrite listed the folder
    >>> partition_data([late, *versioned], lambda m: Marker(covers=frozenset()))
    ['_v-000001-c1/part-c1-00000.parquet', 'part-00000-3f2c.c000.snappy.parquet']
    >>> partition_data([late, *versioned], lambda m: Marker(covers=frozenset([late])))  # it listed it
    ['_v-000001-c1/part-c1-00000.parquet']
    """
    versions = committed_versions(names)
    base = visible_data_files([n for n in names if "/" not in n], lambda m: marker(m).replaced)
    if not versions:
        return base
    return _with_versions(names, versions, base, marker, is_data_file_name, is_eventlake_file_name)


def _with_versions(
    names: Collection[str], versions: list[str], base: list[str], marker: Callable[[str], Marker],
    is_data: Callable[[str], bool], own: Callable[[str], bool],
) -> list[str]:  # fmt: skip
    current = versions[0]
    inside: list[str] = []
    older: list[str] = []
    for name in names:
        folder, _, leaf = name.partition("/")
        if leaf and "/" not in leaf and is_data(leaf) and folder in versions:
            (inside if folder == current else older).append(name)
    return sorted(inside + uncovered(names, versions, base + older, marker, own))


def uncovered(
    names: Collection[str],
    versions: list[str],
    outside: list[str],
    marker: Callable[[str], Marker],
    own: Callable[[str], bool] = lambda name: is_eventlake_file_name(name),
) -> list[str]:
    """Of the data files ``outside`` the current version (the first of ``versions``, the committed
    version folders highest first), those no committed version supersedes: files of another writer
    that appeared after the current version listed the folder. A file eventlake wrote is never one
    (``own``: eventlake writes into a partition's current folder only); the markers are read only
    when another writer's file is there.

    >>> names = ["x.parquet", "_v-000001-c1/_compact-c1.json"]
    >>> uncovered(names, ["_v-000001-c1"], ["x.parquet"], lambda m: Marker(covers=frozenset()))
    ['x.parquet']
    >>> uncovered(names, ["_v-000001-c1"], ["x.parquet"], lambda m: Marker(replaced=("x.parquet",)))
    []
    """
    foreign = [n for n in outside if not own(n.rsplit("/", 1)[-1])]
    if not foreign:
        return []
    covered: set[str] = set()
    for version in versions:  # highest first; a marker that records what it covers ends the walk
        inside = [n.split("/", 1)[1] for n in names if n.startswith(version + "/")]
        for leaf in (n for n in inside if marker_run_id(n) is not None):
            found = marker(f"{version}/{leaf}")
            if found.covers is not None:
                return [n for n in foreign if n not in covered and n not in found.covers]
            leaves = set(inside)  # written before covers were recorded: what it replaced and copied
            covered |= set(found.replaced)
            copied = {n for n in names if not n.startswith(version + "/") and n.rsplit("/", 1)[-1] in leaves}
            covered |= copied
    return [n for n in foreign if n not in covered]


class PartitionState(str, Enum):
    """Where a partition folder is in its life (see ``docs/sync.md``, "A partition's states")."""

    BASE_ONLY = "base-only"  # no committed version folder: its data is the files in it
    REWRITING = "rewriting"  # a version folder newer than the current one, not committed (yet)
    VERSIONED = "versioned"  # its data is its current version folder's: the catalog points there
    VERSIONED_FOREIGN = "versioned+foreign"  # and data files outside it (another writer's, later)

    def __str__(self) -> str:
        return self.value


def partition_state(names: Collection[str], data: Collection[str]) -> PartitionState:
    """The state of a partition folder whose files are ``names`` and whose data (by
    :func:`partition_data`) is ``data``. (Old files waiting for their grace period are not a state of
    their own: they are outside the data, see ``docs/sync.md``.)

    >>> v1 = ["_v-000001-c1/a.parquet", "_v-000001-c1/_compact-c1.json"]
    >>> str(partition_state(["a.parquet"], ["a.parquet"])), str(partition_state(v1, v1[:1]))
    ('base-only', 'versioned')
    >>> str(partition_state([*v1, "b.parquet"], [v1[0], "b.parquet"]))
    'versioned+foreign'
    >>> str(partition_state([*v1, "_v-000002-c2/a.parquet"], v1[:1]))
    'rewriting'
    """
    versions = committed_versions(names)
    numbers = [version_number(n.partition("/")[0]) for n in names]
    newest = max((number for number in numbers if number is not None), default=0)
    if newest and (not versions or version_number(versions[0]) != newest):
        return PartitionState.REWRITING
    if not versions:
        return PartitionState.BASE_ONLY
    if any(not n.startswith(versions[0] + "/") for n in data):
        return PartitionState.VERSIONED_FOREIGN
    return PartitionState.VERSIONED


def outside_current_version(names: Collection[str], data: Collection[str]) -> list[str]:
    """The data files of a versioned partition that are not in its current version folder (the
    catalog's readers do not see them until a rewrite takes them in); [] for any other partition.

    >>> outside_current_version(["a.parquet", "_v-000001-c/_compact-c.json"], ["a.parquet"])
    ['a.parquet']
    """
    version = current_version(names)
    return [] if version is None else sorted(n for n in data if not n.startswith(version + "/"))


VERSION_PREFIX = "v-"  # a partition's version folder, in the lake's versions tree: v-000003-<rewrite id>
LEGACY_VERSION_PREFIX = "_v-"  # one inside the partition folder (written before the versions tree)
VERSIONS = "versions"  # segment-data/versions/: the version folders, outside every table's folder
_VERSIONED_TREES = ("data", "quarantine", "reports")  # the folders of segment-data/ holding tables


def version_folder_name(number: int, rewrite_id: str) -> str:
    """The name of a partition's content after a rewrite on an object store (its folder is
    :func:`version_dir`).

    >>> version_folder_name(3, "compact-20261122T104700123Z-1a2b")
    'v-000003-compact-20261122T104700123Z-1a2b'
    """
    return f"{VERSION_PREFIX}{number:06d}-{rewrite_id}"


def version_number(name: str) -> int | None:
    """The number of a version folder's name (``v-000003-...``, or ``_v-000003-...`` of a lake
    written before the versions tree); None for any other name."""
    for prefix in (VERSION_PREFIX, LEGACY_VERSION_PREFIX):
        digits = name[len(prefix) : len(prefix) + 6]
        if name.startswith(prefix) and digits.isdigit():
            return int(digits)
    return None


def in_versions_tree(name: str) -> bool:
    """A version folder's name whose folder is in the versions tree (:func:`version_dir`), not
    inside its partition folder (``_v-``, of a lake written before the tree)."""
    return name.startswith(VERSION_PREFIX) and version_number(name) is not None


def versions_dir(folder: Location) -> Location | None:
    """Where the version folders of partition ``folder`` are (of every partition below it, for a
    table's folder): the same path below ``segment-data/versions/`` as ``folder`` below
    ``segment-data/``, outside every table's folder, so that no reader of a table or a partition
    (through the catalog, by its location, partition discovery) lists a version it does not point
    at. None for a folder that is not in a lake's ``segment-data/{data,quarantine,reports}/``.

    >>> from pathlib import Path
    >>> from eventlake.storage.location import ObjectPath
    >>> str(versions_dir(ObjectPath.parse("s3://b/lk/segment-data/data/src/segment_type=page/day=2026-11-22")))
    's3://b/lk/segment-data/versions/data/src/segment_type=page/day=2026-11-22'
    >>> versions_dir(Path("/elsewhere/t")) is None
    True
    """
    below: list[str] = []
    here = folder
    while here.name:
        if here.name == DATA and below and below[-1] in _VERSIONED_TREES:
            return here / VERSIONS / "/".join(reversed(below))
        below.append(here.name)
        here = here.parent
    return None


def version_dir(folder: Location, version: str) -> Location:
    """The folder of partition ``folder``'s version ``version`` (a :func:`version_folder_name`): in
    the versions tree (:func:`versions_dir`), or inside the partition folder for a ``_v-`` one of a
    lake written before the tree. Where the catalog points a rewritten partition."""
    if not in_versions_tree(version):
        return folder / version
    home = versions_dir(folder)
    if home is None:
        raise LayoutError(
            f"{folder} is not a partition folder of the lake (segment-data/data/..., quarantine/... "
            f"or reports/...): no place for its version {version}",
            folder=str(folder), version=version,
        )  # fmt: skip
    return home / version


def partition_file(folder: Location, name: str) -> Location:
    """Where the file ``name`` of partition ``folder`` is, ``name`` relative to the partition as
    :func:`partition_data` and every listing of :mod:`eventlake.partitions` give it: ``x.parquet``
    in the folder, ``v-.../x.parquet`` in the version's folder (:func:`version_dir`). Every path of
    a partition's file that may be a version's is made here.

    >>> from pathlib import Path
    >>> str(partition_file(Path("/lk/segment-data/data/s/segment_type=t/day=d"), "v-000001-c/x.parquet"))
    '/lk/segment-data/versions/data/s/segment_type=t/day=d/v-000001-c/x.parquet'
    >>> str(partition_file(Path("/p"), "_v-000001-c/x.parquet")), str(partition_file(Path("/p"), "x.parquet"))
    ('/p/_v-000001-c/x.parquet', '/p/x.parquet')
    """
    version, slash, leaf = name.partition("/")
    if slash and version_number(version) is not None:
        return version_dir(folder, version) / leaf
    return folder / name


def current_version(names: Collection[str]) -> str | None:
    """The partition's current version folder: of the version folders among ``names`` (relative to
    the partition folder) holding a commit marker, the one with the highest number; None when none
    does (the partition's data is the files in its folder)."""
    versions = committed_versions(names)
    return versions[0] if versions else None


def version_inside_partition(names: Collection[str]) -> bool:
    """Whether the partition's current version is a ``_v-`` folder inside the partition folder (of a
    lake written before the versions tree): its location has a part starting with ``_``, and the
    next rewrite (compaction takes it) moves it to the tree.

    >>> inside, tree = ["_v-000001-c/_compact-c.json"], ["v-000001-c/_compact-c.json"]
    >>> version_inside_partition(inside), version_inside_partition(tree), version_inside_partition([])
    (True, False, False)
    """
    version = current_version(names)
    return version is not None and not in_versions_tree(version)


def committed_versions(names: Collection[str]) -> list[str]:
    """The version folders among ``names`` holding a commit marker, highest number first."""
    committed = {
        (number, folder)
        for folder, _, name in (n.partition("/") for n in names)
        if name and marker_run_id(name) is not None and (number := version_number(folder)) is not None
    }
    return [folder for _, folder in sorted(committed, reverse=True)]


def next_version_number(names: Collection[str]) -> int:
    """The number of a partition's next version folder: one more than any there (committed or not)."""
    numbers = [version_number(n.partition("/")[0]) for n in names if "/" in n]
    return max((n for n in numbers if n is not None), default=0) + 1


def partition_values(location: Location, folder: Location, keys: tuple[str, ...]) -> tuple[str, ...] | None:
    """The values of a partition folder under a table's ``location`` (``day=2026-11-22/hr=07``), in
    ``keys`` order; None for a folder that is not one of the table's partitions.

    >>> from pathlib import Path
    >>> partition_values(Path("/t"), Path("/t/day=2026-11-22/hr=07"), ("day", "hr"))
    ('2026-11-22', '07')
    """
    if not keys:
        return () if folder == location else None
    parts = relative_to(folder, location).as_posix().split("/")
    pairs = [part.split("=", 1) for part in parts]
    if [pair[0] for pair in pairs] != list(keys) or any(len(pair) != 2 for pair in pairs):
        return None
    return tuple(pair[1] for pair in pairs)


QUARANTINE_TABLE = "_quarantine"  # a source's quarantine table: <table_prefix>_quarantine


def quarantine_dir(lake: Location, source_id: str) -> Location:
    return lake / DATA / "quarantine" / source_id


# reports -----------------------------------------------------------------------------------


# A partition of the reports table per source and UTC day (the day a run started). A day's folder
# holds, directly in it (Spark, Hive and Athena read a partition's own files, not its sub-folders):
#
#     report-<run>.json                 one run's report (the day is still being written, or late)
#     reports-compact-<merge>.json      a day's runs merged into one file, data once its marker is
#     _compact-<merge>.json             there (its ``replaced``: the per-run files it holds)
#     v-000001-compact-<merge>/         on an object store, the merged file and its marker (and the
#                                       reports written into the day after it) in a version (in
#                                       segment-data/versions/reports/day=<d>/source=<s>/; ``_v-``
#                                       inside the day folder in older lakes) that the catalog's
#                                       partition points at, as a rewritten table's
#     run_id=<run>/report.json          a report of a lake written before the daily merge (a
#                                       partition per run then); merged at the source's first sync
#
# (see :mod:`eventlake.sync.protocol.report_days`).
REPORT_PARTITION_PATH = "day={day}/source={source_id}"
LEGACY_REPORT_PATH = "day={day}/source={source_id}/run_id={run_id}/" + REPORT_FILE
_RUN_REPORT_PREFIX = "report-"
_MERGED_REPORT_PREFIX = "reports-"
_REPORT_SUFFIX = ".json"
_LEGACY_REPORT = re.compile(r"run_id=[^/]+/" + re.escape(REPORT_FILE))


def report_folder(lake: Location, day: str, source_id: str) -> Location:
    """A source's reports of one UTC day: ``segment-data/reports/day=<d>/source=<source-id>``."""
    return reports_root(lake) / REPORT_PARTITION_PATH.format(day=day, source_id=source_id)


def report_file(lake: Location, day: str, source_id: str, run_id: str) -> Location:
    """A run's report file, in its day's folder: ``.../day=<d>/source=<s>/report-<run>.json``."""
    return report_folder(lake, day, source_id) / f"{_RUN_REPORT_PREFIX}{run_id}{_REPORT_SUFFIX}"


def legacy_report_file(lake: Location, day: str, source_id: str, run_id: str) -> Location:
    """A run's report file in a lake written before the daily merge (a folder per run)."""
    return reports_root(lake) / LEGACY_REPORT_PATH.format(day=day, source_id=source_id, run_id=run_id)


def merged_report_name(merge_id: str) -> str:
    """The file a merge of a day's reports writes.

    >>> merged_report_name("compact-20261122T000012345Z-1a2b")
    'reports-compact-20261122T000012345Z-1a2b.json'
    """
    return f"{_MERGED_REPORT_PREFIX}{merge_id}{_REPORT_SUFFIX}"


def is_run_report_name(name: str) -> bool:
    """A run's own report file (one in a day folder, or one of a lake written before the merge)."""
    base = name.rsplit("/", 1)[-1]
    if _LEGACY_REPORT.fullmatch(name):
        return True
    return base.startswith(_RUN_REPORT_PREFIX) and base.endswith(_REPORT_SUFFIX)


def _merged_report_run(name: str) -> str | None:
    if name.startswith(_MERGED_REPORT_PREFIX) and name.endswith(_REPORT_SUFFIX):
        return name[len(_MERGED_REPORT_PREFIX) : -len(_REPORT_SUFFIX)]
    return None


def report_folder_files(names: Collection[str], marker: Callable[[str], Marker]) -> list[str]:
    """The report files of one source's day folder whose files are ``names`` (relative to it, as
    :func:`eventlake.partitions.report_folder_names` gives them), sorted: every report file of its
    current version folder (:func:`current_version`), else its per-run files and the merged files
    whose marker is there, less what a marker there replaced. Each report is in exactly one of them.
    The rule of :func:`partition_data`, for report files, which only eventlake writes.

    >>> names = ["report-r1.json", "report-r2.json", "reports-compact-c1.json"]
    >>> report_folder_files(names, lambda m: Marker())  # c1's marker is not there: not merged yet
    ['report-r1.json', 'report-r2.json']
    >>> merged = Marker(replaced=tuple(names[:2]))
    >>> report_folder_files([*names, "_compact-c1.json", "report-r3.json"], lambda m: merged)
    ['report-r3.json', 'reports-compact-c1.json']
    >>> report_folder_files(["run_id=r1/report.json", "_v-000001-c1/_compact-c1.json",
    ...                      "_v-000001-c1/reports-compact-c1.json"], lambda m: Marker())
    ['_v-000001-c1/reports-compact-c1.json']
    """
    markers = {run: name for name in names if "/" not in name and (run := marker_run_id(name)) is not None}
    found = [
        n for n in names
        if is_run_report_name(n) and ("/" not in n or _LEGACY_REPORT.fullmatch(n))
        or _merged_report_run(n) in markers
    ]  # fmt: skip
    if markers:
        hidden = {replaced for name in markers.values() for replaced in marker(name).replaced}
        found = [n for n in found if n not in hidden]
    versions = committed_versions(names)
    if versions:
        return _with_versions(names, versions, found, marker, _is_report_name, lambda name: True)
    return sorted(found)


def _is_report_name(name: str) -> bool:
    return is_report_name(name)


def is_report_name(name: str) -> bool:
    """A report file's name (a run's, or a day's merged reports)."""
    return is_run_report_name(name) or _merged_report_run(name) is not None


def in_report_folder(name: str) -> bool:
    """A name (relative to a source's day folder) that :func:`report_folder_files` looks at."""
    parts = name.split("/")
    if len(parts) != 2:
        return len(parts) == 1
    return version_number(parts[0]) is not None or _LEGACY_REPORT.fullmatch(name) is not None


def reports_root(lake: Location) -> Location:
    return lake / DATA / "reports"


def report_day_dir(lake: Location, day: str) -> Location:
    """The folder of one UTC day's reports (every source's): ``segment-data/reports/day=<d>``."""
    return reports_root(lake) / f"day={day}"


def report_day(path: Location, lake: Location) -> str:
    """The UTC day of a report file (its ``day=`` folder)."""
    return relative_to(path, reports_root(lake)).parts[0].split("=", 1)[1]


def run_folder(run_id: str) -> str:
    """The folder of one run's files in a table partitioned by run (quarantine, dedupe index)."""
    return f"run_id={run_id}"


def stage_root(lake: Location, source_id: str) -> Location:
    return lake / STAGE / source_id


def stage_dir(lake: Location, source_id: str, run_id: str) -> Location:
    """One run's staging: ``segment-stage/<source-id>/<run-id>/<kind>/...``, where each kind of
    file (table, dedupe, values, messages, rewritten) waits until the commit publishes it."""
    return stage_root(lake, source_id) / run_id


def part_file_name(run_id: str, index: int, prefix: str = "") -> str:
    """The name of a run's file number ``index`` (a worker's, or a segment type's in the write
    pass): ``part-<run>-00007.parquet``."""
    return f"{prefix}part-{run_id}-{index:05d}.parquet"


def index_file_name(run_id: str, index: int, prefix: str = "part-") -> str:
    """The name of a dedupe key file in a run's folder of the dedupe index:
    ``part-<run>-00007.keys`` (a write task's), ``merged-<run>-00000.keys`` (a merge's)."""
    return f"{prefix}{run_id}-{index:05d}.keys"


def is_archive_file_name(file_name: str) -> bool:
    """A sealed archive file (not a hidden temporary one)."""
    return file_name.endswith(ARCHIVE_SUFFIX) and not file_name.startswith(".")
