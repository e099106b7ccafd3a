"""Acknowledged means durable: sealing by age and size, graceful stop, and kill -9 recovery."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import pytest

from eventlake import layout
from eventlake.archive import list_archive_files
from eventlake.storage import LocalStorage

from .harness import (
    EVENTLAKE,
    NEVER,
    Collector,
    Project,
    StartCollector,
    clean_environment,
    kill9_under_load,
    send,
)

pytestmark = pytest.mark.integration


def assert_archived_exactly_once(project: Project, ids: list[str]) -> None:
    counts = Counter(m["messageId"] for m in project.archived())
    assert {i for i in ids if counts[i] != 1} == set(), "messages missing or archived twice"
    assert sum(counts.values()) == len(ids)


def test_seals_by_age(project: Project, start_collector: StartCollector) -> None:
    collector = start_collector(project, seal_max_age_seconds=1)
    ids = send(collector, 3)
    assert project.spool_segments() and not list_archive_files(
        LocalStorage(), project.lake, project.source_id
    )
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
    while (
        len(list_archive_files(LocalStorage(), project.lake, project.source_id)) < 4
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    files = list_archive_files(LocalStorage(), project.lake, project.source_id)
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
    assert list_archive_files(LocalStorage(), project.lake, project.source_id) == []

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


def test_kill9_during_sustained_load(project: Project, start_collector: StartCollector) -> None:
    """Four clients post batches nonstop (segments sealing meanwhile) when the collector gets SIGKILL:
    after the restart every acknowledged message is in the archive exactly once, and nothing is
    archived twice (unacknowledged messages may or may not be there)."""
    kill9_under_load(project, start_collector)


def test_429_with_retry_after_when_sealing_falls_behind(
    project: Project, start_collector: StartCollector
) -> None:
    blocker = layout.archive_root(project.lake)
    project.lake.mkdir(parents=True, exist_ok=True)
    blocker.write_bytes(b"a file where the archive should be: every seal fails until it is gone")
    collector = start_collector(project, seal_max_bytes=1024, seal_max_age_seconds=0.1, max_spool_bytes=4096)
    acknowledged: list[str] = []
    with httpx.Client(base_url=collector.url, auth=(project.write_key, ""), timeout=10) as http:
        for _ in range(50):
            message_id = str(uuid.uuid4())
            message = {
                "userId": "u1",
                "event": "E",
                "messageId": message_id,
                "properties": {"pad": "p" * 400},
            }
            response = http.post("/v1/track", json=message)
            if response.status_code != 200:
                break
            acknowledged.append(message_id)
        assert response.status_code == 429
        assert (
            response.json()["code"] == "overloaded"
            and "sealed into the archive" in response.json()["message"]
        )
        assert int(response.headers["Retry-After"]) > 0
        blocker.unlink()  # the sealer catches up, and the collector accepts again
        deadline = time.monotonic() + 10
        while http.post("/v1/track", json={"userId": "u1", "event": "Again"}).status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    project.wait_for_archive(set(acknowledged))
    assert collector.stop() == 0


@pytest.mark.parametrize("reuse_port", [False, True], ids=["own-ports", "one-port"])
def test_two_collectors_write_one_archive(project: Project, tmp_path: Path, reuse_port: bool) -> None:
    """Two collector processes (a spool each) on one lake, on their own ports or sharing one with
    SO_REUSEPORT: names never collide, nothing is lost, both seal into the same folders."""
    settings = {"seal_max_age_seconds": 0.2, "reuse_port": str(reuse_port).lower()}
    first = Collector(project, settings, tmp_path / "first.log").start()
    second = Collector(
        project,
        settings,
        tmp_path / "second.log",
        port=first.port if reuse_port else 0,
        environment={"EVENTLAKE__LAKE__STATE_DIR": f'"{tmp_path / "second-state"}"'},
    ).start()
    assert (first.port == second.port) is reuse_port
    deadline = time.monotonic() + 20  # on a shared port, /health may have been answered by the first
    while "eventlake collector listening on" not in second.log.read_text():
        assert second.running and time.monotonic() < deadline, second.log.read_text()
        time.sleep(0.05)
    try:
        sent: list[str] = []
        threads = [
            threading.Thread(target=lambda c=c: sent.extend(send(c, 200, batch=10)))
            for c in [first, second] * 2
        ]
        if reuse_port:  # one connection per request: the kernel spreads them over both processes
            threads += [
                threading.Thread(target=lambda: sent.extend(send_each_on_a_new_connection(first, 40)))
            ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert len(sent) == 800 + (40 if reuse_port else 0)
    finally:
        for collector in (first, second):
            assert collector.stop() == 0
    assert_archived_exactly_once(project, sent)
    files = list_archive_files(LocalStorage(), project.lake, project.source_id)
    tokens = {f.path.name.split("-")[2] for f in files}
    assert len(tokens) == 2, "both processes sealed files into the same source folder"


def send_each_on_a_new_connection(collector: Collector, count: int) -> list[str]:
    ids = [str(uuid.uuid4()) for _ in range(count)]
    for message_id in ids:
        body = {"userId": "u1", "event": "E", "messageId": message_id}
        response = httpx.post(f"{collector.url}/v1/track", json=body, auth=(collector.project.write_key, ""))
        assert response.json() == {"success": True}
    return ids


def test_a_taken_port_is_a_one_line_error(project: Project, start_collector: StartCollector) -> None:
    first = start_collector(project)  # without reuse_port: nobody else may bind its port
    env = clean_environment(reuse_port="true")
    env["EVENTLAKE__LAKE__STATE_DIR"] = f'"{project.root / "second-state"}"'
    second = subprocess.run(
        [str(EVENTLAKE), "--config", str(project.config), "serve", "--port", str(first.port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert second.returncode == 2
    assert (
        second.stderr.strip().splitlines()[-1].startswith(f"error: cannot listen on 127.0.0.1:{first.port}")
    )
