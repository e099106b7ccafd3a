"""The web console on a lake in a bucket (moto): runs, schemas, quarantine and the read-only query
box read through eventlake's storage, the sync reports table included. The app is served in
process (Starlette's test client); the pages in a browser are tests/console's."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from eventlake.console.app import create_console
from eventlake.console.lake import LakeWatch
from eventlake.query.duckdb_engine import run_duckdb
from eventlake.query.errors import QueryError
from eventlake.timestamps import now_utc
from tests.objectstore.test_s3_sync import MESSAGES, sync, track

pytestmark = pytest.mark.integration


def test_the_console_reads_a_lake_on_s3(s3_lake, spark):
    received = now_utc()
    s3_lake.archive(MESSAGES, received)
    first = sync(s3_lake, spark)
    s3_lake.archive([track("m9", revenue="plenty")], received)  # not a number: quarantined
    second = sync(s3_lake, spark)
    assert first.status == second.status == "Success" and second.rejected_values == 1

    settings = s3_lake.settings
    watch = LakeWatch(settings, collector_url=None)
    watch.refresh()
    runs, total = watch.runs()
    assert total == 2 and [r.run_id for r in runs] == [second.run_id, first.run_id]
    (health,) = watch.health()
    assert health.oldest_unqueryable is None and health.unsynced_files == 0

    db = s3_lake.source.database
    client = TestClient(create_console(settings, watch), base_url="http://127.0.0.1:8089")
    assert second.run_id in client.get("/runs").text
    assert "track_order_completed" in client.get(f"/runs/{first.run_id}").text
    schema = client.get(f"/schemas/{db}/track_order_completed").text
    assert "properties_revenue" in schema and first.run_id in schema
    quarantine = client.get("/quarantine").text
    assert "plenty" in quarantine and f"eventlake schema set-type {db}.track_order_completed" in quarantine
    answer = client.post("/query", data={"sql": f"SELECT count(*) AS n FROM {db}.track_order_completed"})
    assert "<tbody><tr><td>3</td></tr></tbody>" in answer.text  # m1, m2, m9 (its revenue null)

    reports = "SELECT count(*) AS n FROM __segment_datalake.sync_reports WHERE type = 'source'"
    assert run_duckdb(settings, reports, read_only=True).rows == ({"n": 2},)
    with pytest.raises(QueryError, match=r"read_text\(\) is refused"):
        run_duckdb(settings, "SELECT * FROM read_text('/etc/hostname')", read_only=True)
