"""`eventlake adopt` of an SDL lake on S3 with its Glue database (a moto server): the tables SDL
registered keep their names (each naming SDL's docs show), columns and partitions; later syncs
append to them beside SDL's files; a message SDL had is not synced twice."""

from __future__ import annotations

import dataclasses

import boto3
import pytest

from eventlake import layout, state_layout
from eventlake.query import run_query
from eventlake.storage.lease import LeaseLostError
from eventlake.sync import run_sync
from eventlake.sync.maintenance.adopt import adopt_source, plan_adoption
from eventlake.timestamps import now_utc
from tests.objectstore.test_lease import steal_the_lease
from tests.sync.sdl import IDENTIFY_COLUMNS, TRACK_COLUMNS, register_glue, sdl_lake

pytestmark = pytest.mark.integration

# (table prefix, identify's table, the page_viewed folder's table, a new event's table)
NAMINGS = {
    "$eventtype": ("", "identify", "track_page_viewed", "track_signed_up"),
    "$tableprefix_$eventtype": ("ios_", "ios_identify", "ios_track_page_viewed", "ios_track_signed_up"),
    "tracks_": ("", "identify", "tracks_page_viewed", "tracks_signed_up"),
    "a name no rule gives": ("", "identify", "track_page_view", "track_signed_up"),
}


@pytest.mark.parametrize("naming", list(NAMINGS))
def test_an_sdl_lake_in_glue_keeps_its_names(s3_lake, spark, moto, naming):
    prefix, identify, page_viewed, signed_up = NAMINGS[naming]
    now, storage, root = now_utc(), s3_lake.settings.lake.storage(), s3_lake.settings.lake.root
    source = dataclasses.replace(s3_lake.source, table_prefix=prefix.rstrip("_"))  # as SDL users wrote it
    settings = dataclasses.replace(s3_lake.settings, sources=(source,))
    db = settings.database_name(source)
    sdl_lake(storage, root, source.id, now)
    glue = boto3.client("glue", endpoint_url=moto.endpoint)
    tables = {"identify": (identify, IDENTIFY_COLUMNS), "page_viewed": (page_viewed, TRACK_COLUMNS)}
    register_glue(glue, db, root, source.id, tables, now)

    planned = adopt_source(settings, source.slug, dry_run=True)
    assert {t.folder: (t.table, t.in_catalog) for t in planned.tables} == {
        "identify": (identify, True), "page_viewed": (page_viewed, True)
    }  # fmt: skip
    adopted = adopt_source(settings, source.slug)
    assert adopted.seeded_ids == 4 and not adopt_source(settings, source.slug, dry_run=True).work

    def count(table: str) -> int:
        return run_query(settings, f"SELECT count(*) AS n FROM {db}.{table}", engine="duckdb").rows[0]["n"]

    assert count(page_viewed) == 5 and count(identify) == 2

    s3_lake.archive([
        {"type": "track", "userId": "u1", "event": "Page Viewed", "messageId": "t-new-1"},  # SDL had it
        {"type": "track", "userId": "u2", "event": "Page Viewed", "messageId": "t-later",
         "properties": {"discount": 3}},
        {"type": "track", "userId": "u2", "event": "Signed Up", "messageId": "s-1"},
    ], now)  # fmt: skip
    [result] = run_sync(settings, [source.slug], spark=spark, say=lambda line: None)
    assert result.status == "Success", result.error
    assert result.duplicates_dropped == 1
    assert {t.table: t.rows for t in result.tables} == {page_viewed: 1, signed_up: 1}
    assert count(page_viewed) == 6

    # Glue: SDL's table keeps its columns and types, gains the new hour's partition (if new)
    table = glue.get_table(DatabaseName=db, Name=page_viewed)["Table"]
    columns = [(c["Name"], c["Type"]) for c in table["StorageDescriptor"]["Columns"]]
    assert columns[: len(TRACK_COLUMNS)] == [(n, t) for n, t, _ in TRACK_COLUMNS]  # SDL's first, as they were
    assert len(columns) > len(TRACK_COLUMNS)  # what SDL's never had (projectId), appended after them
    hour = (f"{now:%Y-%m-%d}", f"{now:%H}")
    partitions = glue.get_partitions(DatabaseName=db, TableName=page_viewed)["Partitions"]
    assert hour in {tuple(p["Values"]) for p in partitions}
    # new files beside SDL's; a new event as SDL would have named it, its folder the event alone
    data = layout.source_data_dir(root, source.id)
    assert {p.path.parent.parent.parent.name for p in storage.list(data, "*/*/*/*.parquet")} == {
        "segment_type=identify", "segment_type=page_viewed", "segment_type=signed_up"
    }  # fmt: skip
    new = glue.get_table(DatabaseName=db, Name=signed_up)["Table"]["StorageDescriptor"]["Location"]
    assert new.rstrip("/").endswith("segment_type=signed_up")


def test_an_adoption_that_lost_its_lease_changes_nothing(s3_lake, moto, monkeypatch):
    """Another machine takes the source's lease once the adoption has planned (as when it stalled
    past its expiry): it fails before its first change, and the lake and Glue are as they were."""
    now, storage, root = now_utc(), s3_lake.settings.lake.storage(), s3_lake.settings.lake.root
    source, settings = s3_lake.source, s3_lake.settings
    db = settings.database_name(source)
    sdl_lake(storage, root, source.id, now)
    glue = boto3.client("glue", endpoint_url=moto.endpoint)
    register_glue(glue, db, root, source.id, {"identify": ("identify", IDENTIFY_COLUMNS)}, now)
    before = {(str(f.path), f.size) for f in storage.list(root, "**/*")}

    def planned_then_taken_over(*args, **kwargs):
        plan = plan_adoption(*args, **kwargs)
        steal_the_lease(s3_lake)
        return plan

    monkeypatch.setattr("eventlake.sync.maintenance.adopt.plan_adoption", planned_then_taken_over)
    with pytest.raises(LeaseLostError):
        adopt_source(settings, source.slug)
    assert glue.get_tables(DatabaseName=db)["TableList"][0]["Name"] == "identify"
    assert len(glue.get_tables(DatabaseName=db)["TableList"]) == 1  # page_viewed not registered
    leases = str(state_layout.sync_lease_dir(root, source.id))
    after = {(str(f.path), f.size) for f in storage.list(root, "**/*") if not str(f.path).startswith(leases)}
    assert after == {f for f in before if not f[0].startswith(leases)}  # no names, progress or seeds
