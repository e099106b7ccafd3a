"""`eventlake import` from a bucket holding a Segment export (moto in server mode) into a lake on
S3, then the normal sync: dedupe against the lake, quarantine, suppression, reports."""

from __future__ import annotations

import gzip
import subprocess
import uuid

import boto3
import orjson
import pytest

from eventlake.archive import SuppressionList
from eventlake.query import run_query
from eventlake.sync import run_sync
from eventlake.timestamps import day_start_ms, format_timestamp, parse_timestamp
from tests.catalog.conftest import clean_env
from tests.collect.harness import EVENTLAKE

pytestmark = pytest.mark.integration
RECEIVED = parse_timestamp("2026-10-02T09:15:00Z")
EXPORT_BUCKET = "old-segment-bucket"


def segment_message(message_id: str, user: str = "u1", **extra) -> bytes:
    """A track call as Segment's S3 destination archived it."""
    at = format_timestamp(RECEIVED)
    return orjson.dumps({
        "anonymousId": "a-1", "context": {"library": {"name": "analytics.js", "version": "4.1.0"}},
        "event": "Order Completed", "integrations": {}, "messageId": message_id, "originalTimestamp": at,
        "projectId": "AbC123", "properties": {"revenue": 9.5}, "receivedAt": at, "sentAt": at,
        "timestamp": at, "type": "track", "userId": user, "version": 2, **extra,
    })  # fmt: skip


def test_a_segment_export_in_a_bucket_is_imported_and_synced_like_collected_messages(s3_lake, spark, moto):
    prefix = f"export-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3", endpoint_url=moto.endpoint)
    if EXPORT_BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=EXPORT_BUCKET)
    lines = [segment_message("seg-1"), segment_message("seg-2"), segment_message("already"),
             segment_message("seg-1"), segment_message("gone", user="u-erased"), b"{not json"]  # fmt: skip
    key = f"{prefix}/segment-logs/AbC123/{day_start_ms(RECEIVED)}/1601630100000.5f2a.gz"
    s3.put_object(Bucket=EXPORT_BUCKET, Key=key, Body=gzip.compress(b"\n".join(lines) + b"\n"))
    s3_lake.archive([orjson.loads(segment_message("already"))], RECEIVED)  # collected before the move
    [first] = run_sync(s3_lake.settings, [s3_lake.slug], spark=spark, say=lambda line: None)
    assert first.rows == 1
    SuppressionList(s3_lake.settings.lake.storage(), s3_lake.settings.lake.root, s3_lake.source.id).add(
        ["u-erased"]
    )

    command = [str(EVENTLAKE), "--config", str(s3_lake.config), "import", f"s3://{EXPORT_BUCKET}/{prefix}",
               "--source", s3_lake.slug, "--endpoint-url", moto.endpoint]  # fmt: skip
    for attempt in ("first", "again"):
        done = subprocess.run(command, capture_output=True, text=True, env=clean_env(), timeout=120)
        assert done.returncode == 0, done.stderr
        expected = (
            "imported 1 files" if attempt == "first" else "imported 0 files (0.0 MB, 0 days), 1 already"
        )
        assert expected in done.stderr, done.stderr

    [synced] = run_sync(s3_lake.settings, [s3_lake.slug], spark=spark, say=lambda line: None)
    assert (synced.rows, synced.duplicates_dropped, synced.rejected_messages, synced.suppressed) == (
        2,
        2,
        1,
        1,
    )
    table = f"{s3_lake.source.database}.track_order_completed"
    got = run_query(s3_lake.settings, f"SELECT message_id FROM {table} ORDER BY 1", engine="duckdb").rows
    assert [r["message_id"] for r in got] == ["already", "seg-1", "seg-2"]


def test_a_missing_folder_and_an_unknown_source_are_one_line_errors(s3_lake, tmp_path):
    for args, message in (
        ([str(tmp_path / "nowhere"), "--source", s3_lake.slug], "nowhere: no such folder"),
        ([str(tmp_path), "--source", "nope"], "nope"),
    ):
        done = subprocess.run([str(EVENTLAKE), "--config", str(s3_lake.config), "import", *args],
                              capture_output=True, text=True, env=clean_env(), timeout=120)  # fmt: skip
        assert done.returncode != 0 and message in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
