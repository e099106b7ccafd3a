"""A partition another writer keeps writing into after eventlake rewrote it (Segment Data Lakes
during the migration guide's overlap), on S3 + Glue (moto): eventlake's readers see the new file at
once, the next compaction takes it into the partition's new version (readers through Glue see it
from there), every row counted once, and no rewrite deletes a file it did not read. Needs no Spark:
an adopted SDL lake, compacted."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import boto3
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventlake import layout, partitions, state_layout
from eventlake.config import Settings, SourceSettings
from eventlake.query import run_query
from eventlake.storage import to_location
from eventlake.sync.maintenance.adopt import adopt_source
from eventlake.sync.maintenance.compact import compact_sources
from eventlake.sync.protocol import rewrite
from eventlake.timestamps import now_utc
from tests.sync.sdl import IDENTIFY_COLUMNS, TRACK_COLUMNS, identify_row, track_row, write_partition

pytestmark = pytest.mark.integration
TABLE = "track_page_viewed"


def quiet(line: str) -> None:
    pass


@pytest.fixture
def adopted(s3_lake, moto):
    """An SDL lake adopted (tables created in Glue), two SDL files in each hour of the track table:
    an old hour (30 days ago) and a recent one (2 hours ago, in the dedupe window)."""
    now, storage, root = now_utc(), s3_lake.settings.lake.storage(), s3_lake.settings.lake.root
    source = s3_lake.source
    hours = {
        now - timedelta(days=30): ["t-old-1", "t-old-2"],
        now - timedelta(hours=2): ["t-new-1", "t-new-2"],
    }
    for received, ids in hours.items():
        for message_id in ids:
            write_partition(
                storage, root, source.id, "page_viewed", TRACK_COLUMNS, [track_row(message_id, received)]
            )
    write_partition(storage, root, source.id, "identify", IDENTIFY_COLUMNS, [identify_row("i-1", now)])
    adopted = adopt_source(s3_lake.settings, s3_lake.slug)
    assert adopted.seeded_ids == 3
    return Adopted(s3_lake.settings, s3_lake.slug, s3_lake.source, min(hours))


@dataclasses.dataclass(frozen=True)
class Adopted:
    settings: Settings
    slug: str
    source: SourceSettings
    old: datetime  # the old hour's time


def compact(lake):
    [result] = compact_sources(lake.settings, [lake.slug], say=quiet)
    assert result.status in ("Success", "Nothing to do"), result.error
    return result


def duckdb_ids(lake) -> list[str]:
    """What eventlake's readers read."""
    sql = f"SELECT message_id FROM {lake.source.database}.{TABLE} ORDER BY 1"
    return [r["message_id"] for r in run_query(lake.settings, sql, engine="duckdb").rows]


def glue_ids(lake, moto) -> list[str]:
    """What a catalog-only reader (Athena) reads: each Glue partition's location, its files less the
    hidden ones."""
    glue = boto3.client("glue", endpoint_url=moto.endpoint)
    storage = lake.settings.lake.storage()
    found = []
    for partition in glue.get_partitions(DatabaseName=lake.source.database, TableName=TABLE)["Partitions"]:
        location = to_location(partition["StorageDescriptor"]["Location"].rstrip("/"))
        for info in storage.list(location, "*"):
            if not info.path.name.startswith((".", "_")):
                table = pq.read_table(pa.BufferReader(storage.read(info.path)), columns=["message_id"])
                found += table["message_id"].to_pylist()
    return sorted(found)


def old_folder(lake):
    root, old = lake.settings.lake.root, lake.old
    return layout.table_dir(root, lake.source.id, "page_viewed") / f"day={old:%Y-%m-%d}/hr={old:%H}"


def retired_names(lake) -> list[str]:
    storage, root = lake.settings.lake.storage(), lake.settings.lake.root
    return [
        name
        for info in storage.list(state_layout.retired_dir(root, lake.source.id), "*.json")
        for name in orjson.loads(storage.read(info.path))["files"]
    ]


def drop_retired(lake) -> None:
    storage, root = lake.settings.lake.storage(), lake.settings.lake.root
    rewrite.drop_retired(storage, root, lake.source.id, timedelta(0), now=now_utc() + timedelta(minutes=1))


def test_a_file_written_into_a_compacted_partition_is_read_then_compacted_never_lost(adopted, moto):
    lake, storage = adopted, adopted.settings.lake.storage()
    everything = ["t-new-1", "t-new-2", "t-old-1", "t-old-2"]
    assert compact(lake).partitions == 2
    assert duckdb_ids(lake) == glue_ids(lake, moto) == everything
    folder = old_folder(lake)
    assert layout.current_version(partitions.folder_names(storage, folder))  # moved to a version folder

    # SDL still writing: a file into the compacted partition's folder, after its version
    late = write_partition(storage, lake.settings.lake.root, lake.source.id, "page_viewed", TRACK_COLUMNS,
                           [track_row("t-late", lake.old)])  # fmt: skip
    assert duckdb_ids(lake) == sorted([*everything, "t-late"])  # eventlake's readers: at once
    assert glue_ids(lake, moto) == everything  # Glue's: from the next rewrite of the partition
    names = partitions.folder_names(storage, folder)
    assert str(layout.partition_state(names, partitions.partition_files(storage, folder, names))) == (
        "versioned+foreign"
    )

    result = compact(lake)  # the regular compaction takes it in
    assert result.partitions == 1 and result.files_in == 2
    assert duckdb_ids(lake) == glue_ids(lake, moto) == sorted([*everything, "t-late"])
    drop_retired(lake)  # read and superseded: now it may go
    assert not storage.exists(late)
    assert duckdb_ids(lake) == glue_ids(lake, moto) == sorted([*everything, "t-late"])
    assert compact(lake).status == "Nothing to do"


def test_a_file_written_while_a_rewrite_runs_is_neither_hidden_nor_deleted(adopted, moto, monkeypatch):
    """The file lands after the compaction listed the folder, before its commit: the rewrite did not
    read it, so it does not retire it, and eventlake's readers keep reading it."""
    lake, storage = adopted, adopted.settings.lake.storage()
    written = []
    publish = rewrite.publish_versions

    def sdl_writes_meanwhile(*args, **kwargs):
        if not written:
            written.append(write_partition(
                storage, lake.settings.lake.root, lake.source.id, "page_viewed", TRACK_COLUMNS,
                [track_row("t-meanwhile", lake.old)],
            ))  # fmt: skip
        return publish(*args, **kwargs)

    monkeypatch.setattr(rewrite, "publish_versions", sdl_writes_meanwhile)
    assert compact(lake).partitions == 2
    monkeypatch.undo()
    [late] = written
    everything = ["t-meanwhile", "t-new-1", "t-new-2", "t-old-1", "t-old-2"]
    assert duckdb_ids(lake) == everything
    assert str(late) not in retired_names(lake)
    drop_retired(lake)
    assert storage.exists(late) and duckdb_ids(lake) == everything
    compact(lake)
    assert duckdb_ids(lake) == glue_ids(lake, moto) == everything


def test_adopt_runs_again_after_a_compaction_and_seeds_from_the_version_folder(adopted, moto):
    lake, storage = adopted, adopted.settings.lake.storage()
    assert compact(lake).partitions == 2
    drop_retired(lake)  # SDL's files are gone: their rows are in the version folders only
    again = adopt_source(lake.settings, lake.slug)
    assert not again.work and {t.table: len(t.partitions) for t in again.tables} == {TABLE: 2, "identify": 1}
    # a killed adoption that registered but did not seed: the rerun seeds from the compacted files
    progress = state_layout.adoption_file(lake.settings.lake.root, lake.source.id)
    document = orjson.loads(storage.read(progress))
    storage.write(progress, orjson.dumps({**document, "seeded": {}}))
    assert adopt_source(lake.settings, lake.slug).seeded_ids == 3
    # SDL's file that the compaction copied as it is (a big one): in the version folder, SDL's name
    folder = old_folder(lake)
    names = partitions.folder_names(storage, folder)
    version = layout.current_version(names)
    [first] = partitions.partition_files(storage, folder, names)[:1]
    storage.write(layout.partition_file(folder, f"{version}/part-00000-copied.c000.snappy.parquet"),
                  storage.read(layout.partition_file(folder, first)))  # fmt: skip
    storage.delete(layout.partition_file(folder, first))
    assert not adopt_source(lake.settings, lake.slug).work


def test_a_rewrite_retires_only_what_it_read(adopted, moto):
    """A file of another writer that is no data (SDL's ``_SUCCESS``) stays through every rewrite."""
    lake, storage = adopted, adopted.settings.lake.storage()
    success = old_folder(lake) / "_SUCCESS"
    storage.write(success, b"")
    compact(lake)
    write_partition(storage, lake.settings.lake.root, lake.source.id, "page_viewed", TRACK_COLUMNS,
                    [track_row("t-late", lake.old)])  # fmt: skip
    compact(lake)
    drop_retired(lake)
    assert storage.exists(success)
    assert duckdb_ids(lake) == glue_ids(lake, moto) == ["t-late", "t-new-1", "t-new-2", "t-old-1", "t-old-2"]
