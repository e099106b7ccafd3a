"""`eventlake schema set-type`: the catalog, the schema file and the existing files change together."""

from __future__ import annotations

import orjson
import pytest

from eventlake import layout, state_layout
from eventlake.errors import UsageError
from eventlake.sync.maintenance.retype import set_column_type
from tests.sync.test_sync import rows, sync, track

pytestmark = pytest.mark.spark


def retype(lake, spark, table, column, kind):
    qualified = f"{lake.source.database}.{table}"
    return set_column_type(lake.settings, spark, qualified, column, kind, lambda line: None)


def column_types(spark, lake, table):
    described = rows(spark, f"DESCRIBE {lake.source.database}.{table}")
    return {r["col_name"]: r["data_type"] for r in described if not r["col_name"].startswith("#")}


def test_widening_a_column_rewrites_old_files_and_later_values_fit(lake, spark):
    lake.archive([track("m1", revenue=10), track("m2", revenue=20)])
    sync(lake, spark)
    result = retype(lake, spark, "track_order_completed", "properties_revenue", "string")
    assert (result.old_type, result.new_type, result.files_rewritten) == ("bigint", "string", 1)
    assert column_types(spark, lake, "track_order_completed")["properties_revenue"] == "string"
    schema = orjson.loads(state_layout.schema_file(lake.settings.lake.root, lake.source.database,
                                             "track_order_completed").read_bytes())  # fmt: skip
    assert {"name": "properties_revenue", "type": "string"} in schema["columns"]
    lake.archive([track("m3", revenue="a lot")])
    assert sync(lake, spark).rejected_values == 0
    table = f"{lake.source.database}.track_order_completed"
    got = rows(spark, f"SELECT message_id, properties_revenue FROM {table} ORDER BY message_id")
    assert [r["properties_revenue"] for r in got] == ["10", "20", "a lot"]
    again = retype(lake, spark, "track_order_completed", "properties_revenue", "string")
    assert again.files_rewritten == 0  # idempotent


def test_narrowing_quarantines_what_does_not_fit(lake, spark):
    lake.archive([track("m1", code="12"), track("m2", code="twelve")])
    sync(lake, spark)
    result = retype(lake, spark, "track_order_completed", "properties_code", "bigint")
    assert result.values_quarantined == 1
    db = lake.source.database
    got = rows(spark, f"SELECT message_id, properties_code FROM {db}.track_order_completed ORDER BY 1")
    assert got == [{"message_id": "m1", "properties_code": 12}, {"message_id": "m2", "properties_code": None}]
    quarantined = rows(spark, f"SELECT message_id, column_name, raw_value, target_type FROM {db}._quarantine")
    assert quarantined == [
        {"message_id": "m2", "column_name": "properties_code", "raw_value": "twelve", "target_type": "bigint"}
    ]


def test_bad_requests_name_the_choices(lake, spark):
    lake.archive([track("m1", revenue=1)])
    sync(lake, spark)
    with pytest.raises(UsageError, match="unknown type 'int'.*bigint"):
        retype(lake, spark, "track_order_completed", "properties_revenue", "int")
    with pytest.raises(UsageError, match="no table .*nope.*track_order_completed"):
        retype(lake, spark, "nope", "x", "string")
    with pytest.raises(UsageError, match="no column 'x'.*properties_revenue"):
        retype(lake, spark, "track_order_completed", "x", "string")
    with pytest.raises(UsageError, match="DATABASE.TABLE"):
        set_column_type(lake.settings, spark, "notqualified", "x", "string", print)


RETYPE_CRASH_POINTS = {
    "after staging, before publishing": ("eventlake.sync.protocol.runner", "apply", 1),
    "after publishing the first file": ("eventlake.storage.LocalStorage", "publish", 2),
    "before changing the catalog": ("eventlake.catalog.hive.HiveCatalog", "set_column_type", 1),
    "before writing the schema file": ("eventlake.sync.protocol.commit", "write_schema_file", 1),
    "before dropping the manifest": ("eventlake.sync.protocol.state.SyncState", "drop_pending", 1),
}


@pytest.mark.parametrize("point", list(RETYPE_CRASH_POINTS))
def test_a_type_change_killed_at_any_step_completes_exactly_once(lake, spark, monkeypatch, point):
    from tests.sync.test_sync import Killed, kill_on_call

    lake.archive([track("m1", code="12"), track("m2", code="twelve")])
    lake.archive([track("m3", code="13")])  # a second file: the publish is cut between two files
    sync(lake, spark)
    sync(lake, spark)
    db = lake.source.database
    quarantine = layout.quarantine_dir(lake.settings.lake.root, lake.source.id)
    kill_on_call(monkeypatch, *RETYPE_CRASH_POINTS[point])
    with pytest.raises(Killed):
        retype(lake, spark, "track_order_completed", "properties_code", "bigint")
    monkeypatch.undo()
    if point == "after staging, before publishing":  # staged only: nothing in the lake changed yet
        assert not list(quarantine.rglob("*.parquet"))

    sync(lake, spark)  # the next sync of the source completes the interrupted change
    assert column_types(spark, lake, "track_order_completed")["properties_code"] == "bigint"
    spark.catalog.refreshTable(f"{db}.track_order_completed")
    got = rows(spark, f"SELECT message_id, properties_code FROM {db}.track_order_completed ORDER BY 1")
    assert got == [
        {"message_id": "m1", "properties_code": 12},
        {"message_id": "m2", "properties_code": None},
        {"message_id": "m3", "properties_code": 13},
    ]
    quarantined = rows(spark, f"SELECT message_id, raw_value FROM {db}._quarantine")
    assert quarantined == [{"message_id": "m2", "raw_value": "twelve"}]
    schema = orjson.loads(
        state_layout.schema_file(lake.settings.lake.root, db, "track_order_completed").read_bytes()
    )
    assert {"name": "properties_code", "type": "bigint"} in schema["columns"]
    again = retype(lake, spark, "track_order_completed", "properties_code", "bigint")
    assert (again.files_rewritten, again.values_quarantined) == (0, 0)  # nothing left to do
