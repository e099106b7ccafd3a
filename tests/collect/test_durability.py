"""Acknowledged means durable: sealing by age and size, graceful stop, and kill -9 recovery."""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter

import httpx
import pytest

from eventlake.archive import list_archive_files

from .harness import Collector, Project, StartCollector

pytestmark = pytest.mark.integration

NEVER = 3600  # a seal age no test waits for


def send(collector: Collector, count: int, padding: int = 0, batch: int = 1) -> list[str]:
    """Send ``count`` track messages in requests of ``batch``; their ids, every one acknowledged."""
    ids: list[str] = []
    with httpx.Client(base_url=collector.url, auth=(collector.project.write_key, ""), timeout=10) as http:
        for _ in range(0, count, batch):
            messages = [
                {
                    "type": "track",
                    "userId": "u1",
                    "event": "E",
                    "messageId": str(uuid.uuid4()),
                    "properties": {"pad": "p" * padding},
                }
                for _ in range(batch)
            ]
            response = http.post("/v1/batch", json={"batch": messages})
            assert response.json() == {"success": True}
            ids.extend(m["messageId"] for m in messages)
    return ids


def assert_archived_exactly_once(project: Project, ids: list[str]) -> None:
    counts = Counter(m["messageId"] for m in project.archived())
    assert {i for i in ids if counts[i] != 1} == set(), "messages missing or archived twice"
    assert sum(counts.values()) == len(ids)


def test_seals_by_age(project: Project, start_collector: StartCollector) -> None:
    collector = start_collector(project, seal_max_age_seconds=1)
    ids = send(collector, 3)
    assert project.spool_segments() and not list_archive_files(project.lake, project.source_id)
    started = time.monotonic()
    project.wait_for_archive(set(ids), timeout=5)
    assert time.monotonic() - started < 3
    while project.spool_segments():  # the sealer deletes the segment right after its rename
        assert time.monotonic() - started < 5
        time.sleep(0.02)
    assert_archived_exactly_once(project, ids)


def test_seals_by_size(project: Project, start_collector: StartCollector) -> None:
    collector = start_collector(project, seal_max_bytes=1024, seal_max_age_seconds=NEVER)
    ids = send(collector, 20, padding=300)
    deadline = time.monotonic() + 5
    while len(list_archive_files(project.lake, project.source_id)) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    files = list_archive_files(project.lake, project.source_id)
    assert len(files) >= 4, "full segments are sealed without waiting for their age"
    assert collector.stop() == 0
    assert_archived_exactly_once(project, ids)


def test_sigterm_seals_everything(project: Project, start_collector: StartCollector) -> None:
    collector = start_collector(project, seal_max_age_seconds=NEVER)
    ids = send(collector, 50, batch=10)
    assert project.spool_segments()
    started = time.monotonic()
    assert collector.stop(signal.SIGTERM) == 0
    assert time.monotonic() - started < 5
    assert project.spool_segments() == []
    log = collector.log.read_text()
    assert f"eventlake collector listening on http://127.0.0.1:{collector.port}" in log
    assert "Traceback" not in log
    assert_archived_exactly_once(project, ids)


def test_sigint_stops_gracefully(project: Project, start_collector: StartCollector) -> None:
    collector = start_collector(project, seal_max_age_seconds=NEVER)
    ids = send(collector, 5)
    assert collector.stop(signal.SIGINT) == 0
    assert project.spool_segments() == []
    assert_archived_exactly_once(project, ids)


def test_kill9_loses_and_duplicates_nothing(project: Project, start_collector: StartCollector) -> None:
    collector = start_collector(project, seal_max_age_seconds=NEVER)
    ids = send(collector, 30, batch=3)
    collector.kill()
    assert project.spool_segments(), "killed before sealing: the acknowledged messages are in the spool"
    assert list_archive_files(project.lake, project.source_id) == []

    collector = start_collector(project, seal_max_age_seconds=NEVER)  # recovers before it listens
    assert_archived_exactly_once(project, ids)
    more = send(collector, 5)
    collector.kill()

    collector = start_collector(project, seal_max_age_seconds=NEVER)
    assert_archived_exactly_once(project, ids + more)
    assert collector.stop() == 0
    assert project.spool_segments() == []
    assert_archived_exactly_once(project, ids + more)


def test_second_collector_on_one_spool_is_refused(project: Project, start_collector: StartCollector) -> None:
    start_collector(project)
    second = Collector(project, {}, project.root / "second.log")
    with pytest.raises(pytest.fail.Exception, match="in use by another eventlake collector"):
        second.start()
    assert second.process is not None and second.process.returncode == 2


def test_a_spool_write_failure_answers_503(project: Project, start_collector: StartCollector) -> None:
    project.spool.mkdir(parents=True)
    (project.spool / project.source_id).write_bytes(b"not a directory")
    collector = start_collector(project)
    response = httpx.post(
        f"{collector.url}/v1/track", json={"userId": "u1", "event": "E"}, auth=(project.write_key, "")
    )
    assert response.status_code == 503
    assert response.json()["code"] == "spool_write_failed"
    assert "retry later" in response.json()["message"]
