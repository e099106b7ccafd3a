"""The collector with its lake on S3 (a real moto server on 127.0.0.1): acknowledged means in the
spool, and from there in the bucket exactly once, through a ``kill -9`` and through an outage of
the store (429 past the spool's bound, never a loss). Suppression lists live in the bucket too."""

from __future__ import annotations

import gzip
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from eventlake import state_layout
from eventlake.storage import ObjectPath

from ..catalog.servers import Moto
from .harness import (
    Project,
    StartCollector,
    kill9_under_load,
    make_object_store_project,
    metrics,
    send,
)
from .s3 import ENVIRONMENT, create_bucket, objects
from .test_suppression import eventlake, wait_until_blocked

pytestmark = pytest.mark.integration

ARCHIVE_KEY = r"ev/segment-logs/{source}/\d{{13}}/\d{{13}}-\d{{13}}-[0-9a-f]{{8}}-\d{{6}}\.gz"


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    server = Moto.start(tmp_path_factory.mktemp("moto") / "moto.log")
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def aws(monkeypatch: pytest.MonkeyPatch) -> str:
    """moto's fake credentials in the environment (the collector's and the CLI's too); the secret
    is unique, so that a test can check it is nowhere in a log."""
    secret = f"secret-{uuid.uuid4().hex}"
    for key, value in {**ENVIRONMENT, "AWS_SECRET_ACCESS_KEY": secret}.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(key, raising=False)
    return secret


def s3_project(directory: Path, server: Moto) -> Project:
    """A project whose lake is ``s3://<a new bucket>/ev`` on ``server``."""
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    create_bucket(server.endpoint, bucket)
    return make_object_store_project(directory, f"s3://{bucket}/ev", server.endpoint)


def bucket_of(project: Project) -> str:
    assert isinstance(project.lake, ObjectPath)
    return project.lake.authority


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not after {timeout} s"
        time.sleep(0.1)


def assert_archived_exactly_once(project: Project, ids: list[str]) -> None:
    counts = Counter(m["messageId"] for m in project.archived())
    assert {i for i in ids if counts[i] != 1} == set(), "messages missing or archived twice"
    assert sum(counts.values()) == len(ids)


def test_batches_become_archive_objects_holding_exactly_the_messages(
    tmp_path: Path, moto: Moto, start_collector: StartCollector
) -> None:
    project = s3_project(tmp_path / "project", moto)
    collector = start_collector(project, seal_max_age_seconds=0.2)
    ids = send(collector, 60, batch=10)
    project.wait_for_archive(set(ids))
    assert collector.stop() == 0
    assert project.spool_segments() == []
    assert list(project.spool.glob("*/.*")) == [], "no staged file left in the spool"

    stored = objects(moto.endpoint, bucket_of(project), "ev")  # read with boto3 itself
    pattern = re.compile(ARCHIVE_KEY.format(source=project.source_id))
    assert stored and [key for key in stored if not pattern.fullmatch(key)] == []  # no temporaries
    messages = [orjson.loads(line) for data in stored.values() for line in gzip.decompress(data).splitlines()]
    assert sorted(m["messageId"] for m in messages) == sorted(ids)
    assert {(m["type"], m["event"], m["userId"]) for m in messages} == {("track", "E", "u1")}
    assert all(m["receivedAt"] for m in messages)


def test_kill9_under_load_loses_and_doubles_nothing(
    tmp_path: Path, moto: Moto, start_collector: StartCollector
) -> None:
    """Four clients post batches nonstop (segments being uploaded meanwhile) when the collector gets
    SIGKILL: after the restart every acknowledged message is in the bucket exactly once."""
    kill9_under_load(s3_project(tmp_path / "project", moto), start_collector)


def test_an_outage_of_the_store_turns_into_429_never_into_a_loss(
    tmp_path: Path, start_collector: StartCollector, aws: str
) -> None:
    server = Moto.start(tmp_path / "moto.log")
    try:
        project = s3_project(tmp_path / "project", server)
        collector = start_collector(
            project, seal_max_bytes=1024, seal_max_age_seconds=0.1, max_spool_bytes=8192
        )
        acknowledged = send(collector, 3)
        project.wait_for_archive(set(acknowledged))
        server.stop()  # the store goes down

        with httpx.Client(base_url=collector.url, auth=(project.write_key, ""), timeout=10) as http:
            for _ in range(100):  # ~20 of these fill the spool
                message_id = str(uuid.uuid4())
                message = {
                    "userId": "u1",
                    "event": "E",
                    "messageId": message_id,
                    "properties": {"p": "x" * 400},
                }
                response = http.post("/v1/track", json=message)
                if response.status_code != 200:
                    break
                acknowledged.append(message_id)
            assert response.status_code == 429, response.text
            assert response.json()["code"] == "overloaded" and int(response.headers["Retry-After"]) > 0
            assert len(acknowledged) > 3, "the spool took requests while the store was down"
            wait_until(
                lambda: metrics(collector.url)[("eventlake_archive_upload_failures_total", ())] > 0,
                "no upload failure counted",
            )
            during = metrics(collector.url)
            assert during[("eventlake_spool_size_bytes", ())] > 0
            assert during[("eventlake_spool_segments", ())] > 0
            assert (
                during[("eventlake_requests_rejected_total", (("code", "overloaded"), ("status", "429")))]
                >= 1
            )

            server = Moto.start(tmp_path / "moto-again.log", port=server.port)  # the store is back ...
            create_bucket(server.endpoint, bucket_of(project))  # ... empty: moto kept it in memory
            deadline = time.monotonic() + 60  # the sealer's backoff is at most 30 s
            while True:
                message_id = str(uuid.uuid4())
                response = http.post(
                    "/v1/track", json={"userId": "u1", "event": "Back", "messageId": message_id}
                )
                if response.status_code == 200:
                    acknowledged.append(message_id)
                    break
                assert response.status_code == 429 and time.monotonic() < deadline, response.text
                time.sleep(0.2)
        wait_until(
            lambda: metrics(collector.url)[("eventlake_spool_size_bytes", ())] == 0, "spool not drained"
        )
        assert collector.stop() == 0
        assert project.spool_segments() == []
        # the first three were uploaded before the outage into the bucket moto lost: the rest is there
        assert_archived_exactly_once(project, acknowledged[3:])

        log = collector.log.read_text()
        failures = [line for line in log.splitlines() if "cannot write spool segment" in line]
        assert len(failures) == 1, "one line per failure streak"
        assert f"s3://{bucket_of(project)}/ev/segment-logs/" in failures[0]
        assert "works again" in log
        assert aws not in log and "Traceback" not in log
    finally:
        server.stop()


def test_suppression_lists_live_in_the_bucket(
    tmp_path: Path, moto: Moto, start_collector: StartCollector
) -> None:
    project = s3_project(tmp_path / "project", moto)
    collector = start_collector(project, seal_max_age_seconds=0.2)
    added = eventlake(project, "suppress", "add", "u-gone")
    assert added.returncode == 0 and "u-gone suppressed" in added.stderr, added.stderr
    wait_until_blocked(collector, "u-gone", blocked=True)

    stored = objects(moto.endpoint, bucket_of(project), "ev/segment-data")
    key = state_layout.suppression_file(project.lake, project.source_id)
    assert isinstance(key, ObjectPath)
    lock = state_layout.suppression_lock_file(project.lake, project.source_id)
    assert isinstance(lock, ObjectPath)
    # the list, and its writer lock's lease, released (kept: lease numbers are never reused)
    assert sorted(stored) == sorted([key.key, f"{lock.key}/lease-000000000001.json"])
    assert orjson.loads(stored[f"{lock.key}/lease-000000000001.json"])["released"] is True
    assert list(orjson.loads(stored[key.key])["users"]) == ["u-gone"]

    message_id = f"kept-{uuid.uuid4()}"
    batch = [
        {"type": "track", "userId": "u-gone", "event": "E", "messageId": f"gone-{uuid.uuid4()}"},
        {"type": "track", "userId": "u-kept", "event": "E", "messageId": message_id},
    ]
    response = httpx.post(f"{collector.url}/v1/batch", json={"batch": batch}, auth=(project.write_key, ""))
    assert response.json() == {"success": True}
    archived = {m["messageId"] for m in project.wait_for_archive({message_id})}
    assert batch[0]["messageId"] not in archived

    listed = eventlake(project, "suppress", "list", "--format", "json")
    assert [row["user_id"] for row in orjson.loads(listed.stdout)] == ["u-gone"]
    assert eventlake(project, "suppress", "remove", "u-gone").returncode == 0
    wait_until_blocked(collector, "u-gone", blocked=False)
    assert collector.stop() == 0


def test_concurrent_suppress_commands_lose_no_update(tmp_path: Path, moto: Moto) -> None:
    """Writers on an object store hold a lease (no flock there): none overwrites another's update."""
    project = s3_project(tmp_path / "project", moto)
    results: list[int] = []
    users = [f"u{n}" for n in range(4)]
    threads = [
        threading.Thread(
            target=lambda u=u: results.append(eventlake(project, "suppress", "add", u).returncode)
        )
        for u in users
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert results == [0] * len(users)
    listed = eventlake(project, "suppress", "list", "--format", "json")
    assert sorted(row["user_id"] for row in orjson.loads(listed.stdout)) == users
