"""Adopting a Segment Data Lakes (SDL) lake in place (``eventlake adopt``): SDL's Parquet under
``segment-data/data/<source-id>/segment_type=<folder>/<date partition>/`` becomes the history of an
eventlake source, without copying a file.

The source's lake root is the SDL bucket prefix (or folder) and its id SDL's source id, so the
source's data folder is SDL's. For each ``segment_type=`` folder the adoption finds:

- the table: the catalog's table whose location is the folder (SDL's Glue table, whatever SDL
  named it), else one named as SDL names them (``<prefix>_<type>``, ``<prefix>_track_<event>``);
- its columns, in order, with their types: the catalog table's, else those of the folder's Parquet
  footers (oldest file first, new columns appended, as SDL appended them); ``bigint``,
  ``boolean``, ``decimal(38,6)``, ``double``, ``string``, ``timestamp`` (anything else is refused);
- its partitions: every partition folder holding data, registered where they are.

Then, in this order, each step idempotent: the source's table names
(:class:`~eventlake.schema.table_names.TableNames`, ``_state/tables/<source-id>.json``, so later
syncs write beside SDL's files into SDL's tables), each table (created if the catalog lacks it,
its partitions registered, its schema file written: DuckDB and the console read it), and the
dedupe index seeded with the message ids of the partitions inside the source's dedupe window (a
key file per partition, under a run of the adoption). The adoption file
(``_state/adopt/<source-id>.json``) records the partitions registered and seeded, table by table:
a rerun adopts only what is new (SDL still syncing during a move) and a killed adoption's rerun
finishes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from eventlake import layout, state_layout
from eventlake.catalog import Catalog, TableSpec
from eventlake.catalog.schema_file import read_schema_files, write_schema_file
from eventlake.catalog.views import database_views
from eventlake.config import DATE_PARTITIONS, Settings, SourceSettings
from eventlake.config.settings import sdl_table_prefix
from eventlake.errors import EventLakeError
from eventlake.partitions import folder_names, holds_foreign_data, list_partition_files, partition_files
from eventlake.progress import prefixed
from eventlake.schema import EXISTING_TYPES, is_safe_identifier
from eventlake.schema.table_names import TRACK, TRACK_TABLE_STYLES, TableNames, folder_segment_type
from eventlake.storage import FileInfo, Location, Storage, relative_to
from eventlake.sync.index.index_keys import records_of, write_keys
from eventlake.sync.protocol.cutoffs import ended_before, seed_since
from eventlake.sync.protocol.stage import new_run_id
from eventlake.sync.protocol.state import SyncState
from eventlake.timestamps import now_utc

Partition = tuple[str, ...]
FOLDER_KEY = "segment_type"


class AdoptError(EventLakeError):
    """The lake cannot be adopted as it is; the message says what to change."""

    exit_code = 2
    code = "invalid_settings"


@dataclass(frozen=True)
class AdoptedTable:
    folder: str  # the segment_type= folder's value
    segment_type: str  # eventlake's segment type of its messages
    table: str
    columns: tuple[tuple[str, str], ...]
    in_catalog: bool  # the catalog has it (SDL's Glue table): it is not created
    partitions: tuple[Partition, ...]  # every partition holding data
    new_partitions: tuple[Partition, ...]  # not registered by an earlier adoption
    seed: tuple[Partition, ...]  # inside the dedupe window and not seeded yet

    def row(self) -> dict[str, object]:
        return {
            "folder": f"{FOLDER_KEY}={self.folder}", "table": self.table, "segment_type": self.segment_type,
            "in_catalog": self.in_catalog, "columns": len(self.columns), "partitions": len(self.partitions),
            "new_partitions": len(self.new_partitions), "partitions_to_seed": len(self.seed),
        }  # fmt: skip


@dataclass(frozen=True)
class Adoption:
    """What an adoption of a source does (a dry run's answer), and after it, the ids it seeded."""

    source: str
    database: str
    names: TableNames
    tables: tuple[AdoptedTable, ...]
    seeded_ids: int = 0
    dry_run: bool = True

    @property
    def work(self) -> bool:
        return any(t.new_partitions or t.seed or not t.in_catalog for t in self.tables)


@dataclass
class Progress:
    """The adoption file: the partitions registered and seeded, by folder."""

    registered: dict[str, set[Partition]] = field(default_factory=dict)
    seeded: dict[str, set[Partition]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        def listed(found: dict[str, set[Partition]]) -> dict[str, list[list[str]]]:
            return {folder: sorted(list(p) for p in parts) for folder, parts in sorted(found.items())}

        document = {"registered": listed(self.registered), "seeded": listed(self.seeded)}
        return orjson.dumps(document, option=orjson.OPT_INDENT_2)

    @classmethod
    def read(cls, storage: Storage, path: Location) -> Progress:
        if not storage.exists(path):
            return cls()
        document = orjson.loads(storage.read(path))

        def sets(found: dict[str, list[list[str]]]) -> dict[str, set[Partition]]:
            return {folder: {tuple(p) for p in parts} for folder, parts in found.items()}

        return cls(sets(document["registered"]), sets(document["seeded"]))


def same_location(a: str, b: str) -> bool:
    """Whether two locations name one folder, however the catalog spelled it.

    >>> same_location("s3://b/p/segment_type=x/", "s3a://b/p/segment_type=x")
    True
    >>> same_location("file:/lake/segment_type=x", "/lake/segment_type=x"), same_location("/a/x", "/a/y")
    (True, False)
    """

    def norm(text: str) -> str:
        for scheme in ("s3a://", "s3n://"):
            if text.startswith(scheme):
                text = "s3://" + text[len(scheme) :]
        if text.startswith("file:"):
            text = "/" + text[len("file:") :].lstrip("/")
        return text.rstrip("/")

    return norm(a) == norm(b)


# -- finding what to adopt -----------------------------------------------------------------------


def plan_adoption(
    storage: Storage, catalog: Catalog, settings: Settings, source: SourceSettings, track_tables: str = "",
    now: datetime | None = None,
) -> Adoption:  # fmt: skip
    """What adopting the source's data folder does (nothing is written). ``track_tables``: what
    SDL put before a track event in the names of tables the catalog does not have (``track_`` or
    ``tracks_``; default: what the catalog's track tables show, else ``track_``)."""
    lake, database = settings.lake.root, settings.database_name(source)
    state = SyncState(storage, lake, source.id)
    progress = Progress.read(storage, state_layout.adoption_file(lake, source.id))
    folders = _folders(storage, lake, source, progress.registered)
    locations = catalog.table_locations(database)
    schemas = catalog.table_schemas(database)
    by_folder: dict[str, str] = {}
    for folder in folders:
        place = str(layout.table_dir(lake, source.dir_name, folder))
        found = sorted(name for name, where in locations.items() if same_location(where, place))
        if len(found) > 1:
            raise AdoptError(
                f"tables {', '.join(f'{database}.{n}' for n in found)} all have the location {place}: "
                "drop all but SDL's table from the catalog, then rerun eventlake adopt"
            )
        if found:
            by_folder[folder] = found[0]
    prefix = _prefix(by_folder, source)
    style = track_tables or _track_style(by_folder, prefix)
    if style not in TRACK_TABLE_STYLES:
        raise AdoptError(f"--track-tables {style!r}: use one of {', '.join(TRACK_TABLE_STYLES)}")
    earlier = state.table_names(source.table_prefix).adopted
    names = TableNames(prefix, dict(earlier), track_folder="", track_table=style)
    now = now or now_utc()
    window_start = seed_since(now, source.dedupe_window_days)
    keys = layout.partition_columns(source.date_partition)
    tables = []
    for folder, partitions in sorted(folders.items()):
        segment_type = folder_segment_type(folder)
        adopted = earlier.get(segment_type)
        name = by_folder.get(folder) or (adopted[1] if adopted else names.table(segment_type))
        place = str(layout.table_dir(lake, source.dir_name, folder))
        if folder not in by_folder and name in locations:
            raise AdoptError(
                f"table {database}.{name} exists over {locations[name]}, not over {place}: drop or rename "
                "it, or pass --track-tables to name SDL's track tables otherwise"
            )
        columns: Sequence[tuple[str, str]]
        if name in schemas and folder in by_folder:
            columns = schemas[name]
        else:
            columns = _footer_columns(storage, [f for files in partitions.values() for f in files], name)
        _check_types(database, name, columns)
        names = TableNames(prefix, {**names.adopted, segment_type: (folder, name)}, "", style)
        done, seeded = progress.registered.get(folder, set()), progress.seeded.get(folder, set())
        recent = [
            p for p in sorted(partitions)
            if (period := layout.partition_period(keys, p)) is None
            or not ended_before(period[1], window_start)
        ]  # fmt: skip
        tables.append(
            AdoptedTable(
                folder, segment_type, name, tuple(columns), name in schemas, tuple(sorted(partitions)),
                tuple(p for p in sorted(partitions) if p not in done),
                tuple(p for p in recent if p not in seeded),
            )
        )  # fmt: skip
    return Adoption(source.slug, database, names, tuple(tables))


def _folders(
    storage: Storage, lake: Location, source: SourceSettings, adopted: Mapping[str, set[Partition]]
) -> dict[str, dict[Partition, list[FileInfo]]]:
    """SDL's data files of each ``segment_type=`` folder, by partition: the partitions holding data
    eventlake did not write (:func:`eventlake.partitions.holds_foreign_data`: SDL's files, or their
    rows rewritten since: compacted, or left by ``users delete``) and those ``adopted`` before (by
    folder) that hold data; refuses a layout the source's ``date_partition`` does not describe, and
    a first adoption that finds no such data."""
    data = layout.source_data_dir(lake, source.dir_name)
    keys = layout.partition_columns(source.date_partition)
    found: dict[str, dict[Partition, list[FileInfo]]] = {}
    by_folder: dict[Location, dict[str, FileInfo]] = {}
    for parts, info in list_partition_files(storage, data, "**/*"):
        name, inside = parts[-1], parts[:-1]
        if len(parts) > 1 and layout.version_number(parts[-2]) is not None:  # a version's file
            name, inside = f"{parts[-2]}/{name}", parts[:-2]
        by_folder.setdefault(data / "/".join(inside), {})[name] = info
    for folder, infos in by_folder.items():
        parts = relative_to(folder, data).as_posix().split("/")
        if not parts[0].startswith(f"{FOLDER_KEY}="):
            continue
        files = partition_files(storage, folder, infos)
        if not files:
            continue
        name = parts[0].split("=", 1)[1]
        values = layout.partition_values(_up(folder, len(parts) - 1), folder, keys)
        if not holds_foreign_data(storage, folder, infos, files) and values not in adopted.get(name, set()):
            continue
        visible = [n for n in files if not layout.is_eventlake_file_name(n.rsplit("/", 1)[-1])]
        if values is None:
            raise AdoptError(_layout_problem(source, [p.split("=", 1)[0] for p in parts[1:]], folder))
        if not is_safe_identifier(name):
            raise AdoptError(f"folder {folder}: {name!r} is not a table name eventlake can keep ([a-z0-9_])")
        found.setdefault(name, {})[values] = [infos[n] for n in visible]
    if not found and not any(adopted.values()):  # (a rerun's: users delete may have emptied them all)
        raise AdoptError(
            f"no SDL data under {data}: set lake.root to the folder or bucket prefix that holds SDL's "
            f"segment-data/, and source {source.slug}'s id to SDL's source id (its folder under "
            "segment-data/data/)"
        )
    return found


def _up(folder: Location, levels: int) -> Location:
    for _ in range(levels):
        folder = folder.parent
    return folder


def _layout_problem(source: SourceSettings, found: Sequence[str], folder: Location) -> str:
    fitting = [p for p in DATE_PARTITIONS if layout.partition_columns(p) == tuple(found)]
    fix = (
        f'set date_partition = "{fitting[0]}" for source {source.slug}'
        if fitting
        else f"its folders are {'/'.join(found) or 'not partitioned'}, which no date_partition describes"
    )
    return (
        f"{folder} is not partitioned as source {source.slug}'s date_partition "
        f"({source.date_partition}) says: {fix}"
    )


def _prefix(by_folder: Mapping[str, str], source: SourceSettings) -> str:
    """The table prefix SDL used: what the catalog's call-type tables have before their type (all
    the same), else the source's table prefix as SDL read it (``sdl_table_prefix``)."""
    seen = {
        table[: -len(folder)] for folder, table in by_folder.items()
        if folder_segment_type(folder) == folder and table.endswith(folder)
    }  # fmt: skip
    return seen.pop() if len(seen) == 1 else sdl_table_prefix(source.table_prefix)


def _track_style(by_folder: Mapping[str, str], prefix: str) -> str:
    """What SDL's track tables in the catalog put between the prefix and the event (``track_``,
    ``tracks_``), when they all agree; else ``track_``."""
    styles = {
        style
        for folder, table in by_folder.items()
        if folder_segment_type(folder) != folder
        for style in TRACK_TABLE_STYLES
        if table == prefix + style + folder
    }
    return styles.pop() if len(styles) == 1 else TRACK


# Arrow types of SDL's Parquet (Spark's writer) -> the catalog's types
def _column_type(kind: pa.DataType) -> str | None:
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "string"
    if pa.types.is_integer(kind):
        return "bigint"
    if pa.types.is_boolean(kind):
        return "boolean"
    if pa.types.is_floating(kind):
        return "double"
    if pa.types.is_timestamp(kind):
        return "timestamp"
    if pa.types.is_decimal(kind):
        return f"decimal({kind.precision},{kind.scale})"
    return None


def _footer_columns(storage: Storage, files: Sequence[FileInfo], table: str) -> list[tuple[str, str]]:
    """A table's columns from its files' Parquet footers, oldest file first (SDL appends columns);
    only the footers are read."""
    columns: dict[str, str] = {}
    for info in sorted(files, key=lambda f: str(f.path)):
        [tail] = storage.read_ranges(info.path, [(max(0, info.size - 8), 8)])
        length = int.from_bytes(tail[:4], "little")
        [footer] = storage.read_ranges(info.path, [(max(0, info.size - 8 - length), length + 8)])
        for column in pq.read_schema(pa.BufferReader(b"PAR1" + footer)):
            if column.name in columns:
                continue
            kind = _column_type(column.type)
            if kind is None:
                raise AdoptError(
                    f"{info.path}: column {column.name} of table {table} is {column.type}, which eventlake "
                    f"cannot append to (types: {', '.join(EXISTING_TYPES)})"
                )
            columns[column.name] = kind
    return list(columns.items())


def _check_types(database: str, table: str, columns: Sequence[tuple[str, str]]) -> None:
    for name, kind in columns:
        if kind not in EXISTING_TYPES:
            raise AdoptError(
                f"column {name} of {database}.{table} is {kind}: eventlake's syncs append only to columns of "
                f"{', '.join(EXISTING_TYPES)}; change its type in the catalog (Athena: ALTER TABLE "
                f"{table} CHANGE COLUMN {name} {name} string), then rerun eventlake adopt"
            )


# -- adopting --------------------------------------------------------------------------------------


def adopt(
    storage: Storage, catalog: Catalog, settings: Settings, source: SourceSettings, track_tables: str = "",
    say: Callable[[str], None] = lambda line: None, check: Callable[[], None] = lambda: None,
) -> Adoption:  # fmt: skip
    """Adopt the source's SDL data (see the module's doc); safe to run again, at any point.
    ``check`` raises when the source's lease was lost: called before each change."""
    lake = settings.lake.root
    plan = plan_adoption(storage, catalog, settings, source, track_tables)
    state = SyncState(storage, lake, source.id)
    check()
    state.write_table_names(plan.names)  # first: a sync after a crash already writes SDL's tables
    progress_file = state_layout.adoption_file(lake, source.id)
    progress = Progress.read(storage, progress_file)
    keys = layout.partition_columns(source.date_partition)
    run_id = new_run_id(now_utc())  # names the dedupe index's folder of this adoption (as a sync's)
    changed, seeded_ids, number = False, 0, 0
    for table in plan.tables:
        location = str(layout.table_dir(lake, source.dir_name, table.folder))
        spec = TableSpec(plan.database, table.table, table.columns, keys, location)
        check()
        if not table.in_catalog:
            catalog.ensure_database(plan.database)
            catalog.create_table(spec)
            changed = True
        if table.new_partitions:
            say(f"{table.table}: registering {len(table.new_partitions)} partitions")
            catalog.add_partitions(spec, list(table.new_partitions))
        write_schema_file(storage, lake, spec)
        progress.registered.setdefault(table.folder, set()).update(table.partitions)
        storage.write(progress_file, progress.to_json())
        if table.seed:
            data = layout.table_dir(lake, source.dir_name, table.folder)
            for partition in table.seed:
                check()
                folder = data / layout.partition_subdir(keys, partition)
                seeded_ids += _seed(storage, lake, source.id, run_id, number, folder)
                number += 1
            say(f"{table.table}: dedupe index seeded from {len(table.seed)} partitions")
            progress.seeded.setdefault(table.folder, set()).update(table.seed)
            storage.write(progress_file, progress.to_json())
    if changed:
        check()
        _replace_views(storage, lake, catalog, plan.database, say)
    return Adoption(plan.source, plan.database, plan.names, plan.tables, seeded_ids, dry_run=False)


def _seed(
    storage: Storage, lake: Location, source_id: str, run_id: str, number: int, folder: Location
) -> int:
    """One key file of the dedupe index with the message ids (and received times) of a partition's
    data files (by :func:`eventlake.partitions.partition_files`: its current version's, after a
    compaction): a message SDL synced is then dropped when a client sends it again."""
    infos = folder_names(storage, folder)
    ids, received = [], []
    for name in partition_files(storage, folder, infos):
        leaf = name.rsplit("/", 1)[-1]
        if layout.is_eventlake_file_name(leaf) and layout.output_run_id(leaf) is None:
            continue  # a later sync's: its ids are in the index already (a rewrite's may hold SDL's)
        table = pq.read_table(
            pa.BufferReader(storage.read(infos[name].path)), columns=["message_id", "received_at"]
        )
        table = table.filter(pc.and_(table["message_id"].is_valid(), table["received_at"].is_valid()))
        ids.append(table["message_id"].combine_chunks().cast(pa.string()))
        received.append(table["received_at"].combine_chunks())
    if not ids or not sum(len(i) for i in ids):
        return 0
    message_ids = pa.concat_arrays(ids)
    times = pa.concat_arrays([r.cast(pa.timestamp("us", tz="UTC")) for r in received])
    path = state_layout.dedupe_index_dir(lake, source_id) / layout.run_folder(run_id)
    with storage.open_write(path / layout.index_file_name(run_id, number, "adopt-")) as handle:
        write_keys(handle, records_of(message_ids, times))
    return len(message_ids)


def _replace_views(
    storage: Storage, lake: Location, catalog: Catalog, database: str, say: Callable[[str], None]
) -> None:
    """The warehouse views (``tracks``, ``pages``, ...) over the database's tables, as a sync makes them."""
    try:
        for name, found in database_views(read_schema_files(storage, lake, [database])):
            left = catalog.replace_views(name, found.views)
            if left:
                say(f"{name}: warehouse views {', '.join(left)} not made: tables of those names exist")
    except Exception as exc:  # the adoption stands without them
        say(f"{database}: warehouse views not replaced ({type(exc).__name__}: {exc}); "
            "`eventlake catalog repair` replaces them")  # fmt: skip


def adopt_source(
    settings: Settings, slug: str, *, dry_run: bool = False, track_tables: str = "", wait: bool = True,
    spark: object = None, catalog: Catalog | None = None, say: Callable[[str], None] = lambda line: None,
) -> Adoption:  # fmt: skip
    """``eventlake adopt``: plan (``dry_run``) or adopt the SDL data of source ``slug``, holding the
    source's sync lock (no sync runs meanwhile)."""
    from eventlake.catalog import load_catalog
    from eventlake.sync.protocol.runner import Hold, run_source

    source = settings.source(slug)
    storage = settings.lake.storage()
    catalog = catalog or load_catalog(settings, spark)
    if dry_run:
        return plan_adoption(storage, catalog, settings, source, track_tables)

    def work(hold: Hold) -> Adoption:
        return adopt(storage, catalog, settings, source, track_tables, prefixed(say, slug), hold.check)

    return run_source(settings, storage, source, work, wait=wait, say=say)
