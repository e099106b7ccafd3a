"""A damaged archive file (truncated, not gzip) does not stop its source: the other files are
synced, the file is quarantined by name (report, `eventlake reports`, console, alert), not read
again until `eventlake sync --rescan` asks, and its day closes. Real Spark, metastore, Parquet."""

from __future__ import annotations

import dataclasses
import gzip
from datetime import timedelta

import orjson
import pytest
from starlette.testclient import TestClient

from eventlake import layout
from eventlake.archive.day_state import day_of
from eventlake.archive.days import reopen_archive
from eventlake.config import load_settings
from eventlake.console.app import create_console
from eventlake.console.lake import LakeWatch
from eventlake.reports import run_history
from eventlake.scheduler.alerts import DAMAGED, notify_results
from eventlake.sync import run_sync
from eventlake.sync.protocol.damaged import ask_retry, read_damaged
from eventlake.sync.protocol.runner import exit_code
from eventlake.sync.protocol.state import SyncState
from eventlake.timestamps import now_utc
from tests.scheduler.receivers import webhook_receiver

pytestmark = pytest.mark.spark


def sync(lake, spark):
    [result] = run_sync(lake.settings, [lake.slug], spark=spark, say=lambda line: None)
    return result


def track(n: int, prefix: str) -> dict:
    return {"type": "track", "userId": "u1", "event": "Order Completed", "messageId": f"{prefix}{n}"}


def lake_ids(lake, spark) -> set[str]:
    db = lake.source.database
    return {
        r["message_id"] for r in spark.sql(f"SELECT message_id FROM {db}.track_order_completed").collect()
    }


def with_alerts(lake, url: str):
    """The lake's settings with a webhook for alerts (as `[alerts]` in eventlake.toml)."""
    lake.config.write_text(lake.config.read_text() + f'\n[alerts]\nwebhook_url = "{url}"\n')
    settings = load_settings(lake.config, environ={})
    return dataclasses.replace(settings, lake=lake.settings.lake)


def test_a_truncated_file_beside_good_ones_is_quarantined_by_name_and_retried_when_asked(lake, spark):
    received = now_utc() - timedelta(days=2)  # a day that ended: the ledger may close it
    for f in (1, 2):  # two good files
        lake.archive([track(n, f"g{f}-") for n in range(20)], received_at=received)
    sealed = lake.archive([track(n, "d-") for n in range(20)], received_at=received)
    whole = sealed.read_bytes()
    sealed.write_bytes(whole[: len(whole) // 2])  # an interrupted copy
    key = layout.lake_relative(lake.settings.lake.root, sealed)
    storage, root = lake.settings.lake.storage(), lake.settings.lake.root

    first = sync(lake, spark)
    assert first.status == "Partial Success" and exit_code([first]) == 0
    assert [d.key for d in first.damaged] == [key]
    assert "end-of-stream" in first.damaged[0].problem  # gzip's own words, and the file's name
    good_ids = {f"g{f}-{n}" for f in (1, 2) for n in range(20)}
    assert lake_ids(lake, spark) == good_ids  # all 40 good ones; none of the damaged file, not even its start

    [run] = [r for r in run_history(lake.settings, lake.slug) if r["run_id"] == first.run_id]
    assert run["status"] == "Partial Success" and key in run["damaged_files"]
    assert set(read_damaged(storage, root, lake.source.id)) == {key}

    with webhook_receiver() as (url, hook):  # the alert of `eventlake sync` and `up`'s engine
        alerts = notify_results(with_alerts(lake, url), [first], lambda line: None)
    assert [a.event for a in alerts] == [DAMAGED]
    [body] = hook.bodies
    assert body["files"] == [key] and key in body["text"] and "eventlake sync --rescan" in body["text"]

    watch = LakeWatch(lake.settings, collector_url=None)
    watch.refresh()
    client = TestClient(create_console(lake.settings, watch), base_url="http://127.0.0.1:8089")
    assert key in client.get("/").text and "eventlake sync --rescan" in client.get("/").text
    assert key in client.get(f"/runs/{first.run_id}").text

    second = sync(lake, spark)  # not read again; the day closes (it ended over two hours ago)
    assert second.status == "Nothing to do" and second.input_files == 0
    ledger = SyncState(storage, root, lake.source.id).ledger
    assert ledger.read().closed_through >= day_of(int(received.timestamp() * 1000))
    assert key in SyncState(storage, root, lake.source.id).synced_files()  # handled

    sealed.write_bytes(whole)  # restored, then `eventlake sync --rescan`
    reopen_archive(storage, root, lake.source.id)
    assert ask_retry(storage, root, lake.source.id) == 1
    third = sync(lake, spark)
    assert third.status == "Success" and third.rows == 20 and not third.damaged
    assert lake_ids(lake, spark) == good_ids | {f"d-{n}" for n in range(20)}
    assert read_damaged(storage, root, lake.source.id) == {}
    assert sync(lake, spark).status == "Nothing to do"


def test_a_file_that_is_not_gzip_is_quarantined_and_still_damaged_after_a_retry(lake, spark):
    lake.archive([track(1, "ok-")])
    plain = lake.archive([track(1, "plain-")])
    plain.write_bytes(gzip.decompress(plain.read_bytes()))  # NDJSON named .gz
    key = layout.lake_relative(lake.settings.lake.root, plain)
    storage, root = lake.settings.lake.storage(), lake.settings.lake.root

    first = sync(lake, spark)
    assert first.status == "Partial Success" and first.rows == 1
    assert [(d.key, d.problem) for d in first.damaged] == [(key, "Not a gzipped file (b'{\"')")]
    report = layout.report_file(root, first.start_time.strftime("%Y-%m-%d"), lake.source.id, first.run_id)
    head = orjson.loads(report.read_bytes().splitlines()[0])
    assert head["damaged_files"] == [{"file": key, "problem": "Not a gzipped file (b'{\"')"}]

    assert ask_retry(storage, root, lake.source.id) == 1
    again = sync(lake, spark)  # read again on request: still damaged, still listed, by the new run
    assert again.status == "Partial Success" and [d.key for d in again.damaged] == [key]
    assert read_damaged(storage, root, lake.source.id)[key].run_id == again.run_id
    assert sync(lake, spark).status == "Nothing to do"  # the retry was answered: not read again
    assert lake_ids(lake, spark) == {"ok-1"}
