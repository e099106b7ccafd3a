"""The commit manifest's JSON form: a round trip, manifests of the previous version, bad input."""

from __future__ import annotations

import orjson
import pytest

from eventlake.catalog import TableSpec
from eventlake.sync.manifest import ADD_COLUMNS, CHECK, CREATE, NONE, Manifest, TableEntry

SPEC = TableSpec("web", "identify", (("user_id", "string"),), ("day", "hr"), "/lake/segment-data/data/s/x")


def manifest(*tables: TableEntry) -> Manifest:
    return Manifest(
        "r1", "s1", ("segment-logs/s1/1/a.gz",), (("/stage/a", "/lake/a"),), tables, "/lake/report.json",
        ({"type": "source", "row_count": 1},), "/stage",
    )  # fmt: skip


def test_a_manifest_round_trips_through_json():
    original = manifest(TableEntry(SPEC, (("2026-11-22", "10"),), CREATE))
    assert Manifest.from_json(original.to_json()) == original


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
