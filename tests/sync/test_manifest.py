"""The commit manifest's JSON form: a round trip, manifests of the previous version, bad input."""

from __future__ import annotations

import orjson
import pytest

from eventlake.catalog import TableSpec
from eventlake.sync.protocol.manifest import (
    ADD_COLUMNS,
    CHECK,
    CREATE,
    NONE,
    Manifest,
    PartitionRewrite,
    TableEntry,
)

SPEC = TableSpec("web", "identify", (("user_id", "string"),), ("day", "hr"), "/lake/segment-data/data/s/x")


def manifest(*tables: TableEntry, rewrites: tuple[PartitionRewrite, ...] = ()) -> Manifest:
    return Manifest(
        "r1", "s1", ("segment-logs/s1/1/a.gz",), (("/stage/a", "/lake/a"),), tables, "/lake/report.json",
        ({"type": "source", "row_count": 1},), "/stage", rewrites,
    )  # fmt: skip


# a replay's partition on an object store: its new file published from where the workers staged it
REWRITE = PartitionRewrite(
    "s3://b/lake/t/day=1/hr=2", "s3://b/stage/rewrite/t/day=1/hr=2", ("part-c-00000.parquet",),
    ("part-r1-00000.parquet",), "_compact-c.json", "_v-1-c", (), ("part-r1-00000.parquet",),
    "web", "t", ("day", "hr"), ("1", "2"), ("s3://b/stage/table/t/day=1/hr=2/part-r2-00000.parquet",),
)  # fmt: skip


def test_a_manifest_round_trips_through_json():
    original = manifest(TableEntry(SPEC, (("2026-11-22", "10"),), CREATE), rewrites=(REWRITE,))
    assert Manifest.from_json(original.to_json()) == original


def test_a_rewrite_without_sources_has_its_files_in_its_staged_folder():
    document = orjson.loads(manifest(rewrites=(REWRITE,)).to_json())
    del document["rewrites"][0]["sources"]  # a manifest of the previous version
    assert Manifest.from_json(orjson.dumps(document)).rewrites[0].sources == ()


@pytest.mark.parametrize(
    ("is_new", "new_columns", "change"),
    [(None, None, CHECK), (True, [["user_id", "string"]], CHECK), (True, [], CREATE), (False, [], NONE)],
)
def test_a_manifest_of_the_previous_version_still_applies(is_new, new_columns, change):
    document = orjson.loads(manifest(TableEntry(SPEC, (), ADD_COLUMNS)).to_json())
    entry = document["tables"][0]
    del entry["change"]
    entry.update(is_new=is_new, new_columns=new_columns, schema_file="/lake/x.json")
    assert Manifest.from_json(orjson.dumps(document)).tables[0].change == change


def test_an_unknown_change_is_refused():
    with pytest.raises(ValueError, match="unknown table change 'drop'"):
        TableEntry(SPEC, (), "drop")
