"""Retries are normal: a real client whose first attempts fail resends, and the lake has each once.

segment-analytics-python (queued mode, which retries 5xx) posts through a proxy that forwards each
first attempt to the collector but answers it 503. The client retries, so the raw archive holds every
message twice; after a sync (Spark, the shared session) the lake holds every message exactly once.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from segment.analytics import Client

from eventlake.config import load_settings
from tests.collect.harness import Collector, make_project

from .proxy import FailFirstProxy

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def archived_counts(collector: Collector) -> Counter[str]:
    return Counter(m["messageId"] for m in collector.project.archived())


def test_retried_messages_are_in_the_lake_once(spark: Any, spark_state: Path, tmp_path: Path) -> None:
    slug = f"retry_{uuid.uuid4().hex[:8]}"  # its own database in the shared metastore
    project = make_project(tmp_path / "project", write_key=f"wk_{slug}", slug=slug)
    collector = Collector(project, {"seal_max_age_seconds": 0.2}, tmp_path / "collector.log").start()
    errors: list[Any] = []
    sent: dict[str, str] = {}
    try:
        with FailFirstProxy(collector.url) as proxy:
            client = Client(
                project.write_key,
                host=proxy.url,
                gzip=True,
                upload_size=10,
                on_error=lambda error, items: errors.append(error),
            )
            for i in range(25):
                message_id = f"retry-{uuid.uuid4()}"
                client.track(f"user-{i % 3}", "Item Viewed", {"n": i}, message_id=message_id)
                sent[message_id] = "track_item_viewed"
            for i in range(5):
                message_id = f"retry-{uuid.uuid4()}"
                client.identify(f"user-{i}", {"plan": "pro"}, message_id=message_id)
                sent[message_id] = "identify"
            client.flush()
            client.shutdown()
            assert errors == []
            assert proxy.failed >= 3 and proxy.forwarded == 2 * proxy.failed  # each batch sent twice
        deadline = time.monotonic() + 10
        while (counts := archived_counts(collector)) != {i: 2 for i in sent}:  # all, twice, nothing else
            assert time.monotonic() < deadline, f"archive: {Counter(counts.values())}"
            time.sleep(0.1)
    finally:
        collector.stop()

    from eventlake.sync import run_sync

    settings = load_settings(project.config, environ={})
    settings = dataclasses.replace(settings, lake=dataclasses.replace(settings.lake, state_dir=spark_state))
    [result] = run_sync(settings, [slug], spark=spark, say=lambda line: None)
    assert result.status == "Success", result
    assert result.duplicates_dropped == len(sent)
    in_lake: Counter[str] = Counter()
    for table in result.tables:
        rows = spark.sql(f"SELECT message_id FROM {table.database}.{table.table}").collect()
        in_lake.update(row.message_id for row in rows)
    assert in_lake == {i: 1 for i in sent}
    assert {t.table for t in result.tables} == set(sent.values())
