"""Real collectors for the tests: an `eventlake serve` subprocess on a free port of 127.0.0.1.

Self-contained (needs no tests/conftest.py). The subprocess never sees the developer's
``EVENTLAKE_CONFIG`` or ``EVENTLAKE__*`` environment; tests pass their own overrides.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from eventlake import state_layout
from eventlake.archive import list_archive_files, read_archive_lines
from eventlake.config import add_source, load_settings, write_initial_config
from eventlake.storage import LocalStorage, Location, Storage

EVENTLAKE = Path(sys.executable).parent / "eventlake"
WRITE_KEY = "wk_test_web"
START_TIMEOUT = 20.0


@dataclass(frozen=True)
class Project:
    """An `eventlake init` directory with one source, ``web``; its lake on ``storage``."""

    root: Path
    config: Path
    source_id: str
    write_key: str
    lake: Location  # a local path, or s3://bucket/prefix
    spool: Path
    storage: Storage = field(default_factory=LocalStorage)

    def archived(self) -> list[dict[str, Any]]:
        """Every message in the source's sealed archive files, in key order."""
        messages: list[dict[str, Any]] = []
        for archive_file in list_archive_files(self.storage, self.lake, self.source_id):
            lines = read_archive_lines(self.storage, archive_file.path)
            messages.extend(orjson.loads(line) for line in lines)
        return messages

    def spool_segments(self) -> list[Path]:
        return sorted(self.spool.glob(f"*/*{state_layout.SPOOL_SUFFIX}"))

    def wait_for_archive(self, message_ids: set[str], timeout: float = 7.0) -> list[dict[str, Any]]:
        """The archive once it holds every id of ``message_ids`` (fails after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            messages = self.archived()
            missing = message_ids - {m.get("messageId") for m in messages}
            if not missing:
                return messages
            if time.monotonic() > deadline:
                example = sorted(missing)[:3]
                pytest.fail(f"{len(missing)} messages not archived after {timeout} s, e.g. {example}")
            time.sleep(0.1)


def make_project(directory: Path, write_key: str = WRITE_KEY, slug: str = "web", **source: object) -> Project:
    """A project whose first source is ``slug``; ``source`` adds settings to its [[sources]] entry."""
    config = write_initial_config(directory)
    entry = add_source(config, slug, write_key=write_key)
    if source:
        config.write_text(config.read_text() + "".join(f"{k} = {toml_value(v)}\n" for k, v in source.items()))
    settings = load_settings(config, environ={})
    spool = state_layout.spool_dir(settings.lake.state_dir)
    return Project(directory, config, entry["id"], write_key, settings.lake.root, spool)


def make_object_store_project(directory: Path, lake_uri: str, endpoint_url: str) -> Project:
    """A project whose lake is on an S3-compatible store: ``[lake] root = lake_uri`` and
    ``endpoint_url``; credentials come from the environment (boto3's chain)."""
    from eventlake.storage.s3 import S3Storage

    project = make_project(directory)
    text = project.config.read_text()
    lake = f"root = {toml_value(lake_uri)}\nendpoint_url = {toml_value(endpoint_url)}\n"
    assert text.count('root = "lake"') == 1
    project.config.write_text(text.replace('root = "lake"', lake.rstrip("\n"), 1))
    settings = load_settings(project.config, environ={})
    assert str(settings.lake.root) == lake_uri
    return Project(
        project.root, project.config, project.source_id, project.write_key, settings.lake.root,
        project.spool, S3Storage(endpoint_url=endpoint_url),
    )  # fmt: skip


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


def add_source_with(project: Project, slug: str, write_key: str, **source: object) -> str:
    """Add another source with extra settings; its source id."""
    entry = add_source(project.config, slug, write_key=write_key)
    text = project.config.read_text() + "".join(f"{k} = {toml_value(v)}\n" for k, v in source.items())
    project.config.write_text(text)
    load_settings(project.config, environ={})  # still valid
    return entry["id"]


def toml_value(value: object) -> str:
    return orjson.dumps(value).decode()  # strings, numbers and booleans are the same in TOML


def metrics(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``GET /metrics`` parsed by Prometheus' own parser: (sample name, sorted labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    response = httpx.get(f"{url}/metrics", timeout=5)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_environment(**settings: object) -> dict[str, str]:
    """os.environ without eventlake's variables, plus ``EVENTLAKE__COLLECTOR__<KEY>`` overrides and a
    free port for the console."""
    env = {k: v for k, v in os.environ.items() if k != "EVENTLAKE_CONFIG" and not k.startswith("EVENTLAKE__")}
    for key, value in settings.items():
        env[f"EVENTLAKE__COLLECTOR__{key.upper()}"] = str(value)
    env["EVENTLAKE__CONSOLE__PORT"] = str(free_port())  # `eventlake up` serves the console too
    return env


@dataclass
class Collector:
    """One `eventlake serve` subprocess."""

    project: Project
    settings: dict[str, object]
    log: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    environment: dict[str, str] = field(default_factory=dict)  # more EVENTLAKE__* overrides

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Collector:
        self.port = self.port or free_port()
        command = [str(EVENTLAKE), "--config", str(self.project.config), "serve", "--port", str(self.port)]
        with open(self.log, "ab") as log:
            env = {**clean_environment(**self.settings), **self.environment}
            self.process = subprocess.Popen(command, env=env, stderr=log)
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                pytest.fail(f"collector exited with {self.process.returncode}: {self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        pytest.fail(f"collector not healthy after {START_TIMEOUT} s: {self.log.read_text()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        """Send ``sig`` and wait for the exit; the exit code."""
        assert self.process is not None
        self.process.send_signal(sig)
        return self.process.wait(timeout=timeout)

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


StartCollector = Callable[..., Collector]
NEVER = 3600  # a seal age no test waits for


def kill9_under_load(project: Project, start_collector: StartCollector) -> None:
    """Four clients post batches nonstop (segments sealing meanwhile) when the collector gets
    SIGKILL: after the restart every acknowledged message is in the archive exactly once, and
    nothing is archived twice (unacknowledged messages may or may not be there). For any lake."""
    collector = start_collector(project, seal_max_age_seconds=0.2, seal_max_bytes=16384)
    acknowledged: list[str] = []
    attempted: list[str] = []
    lock = threading.Lock()

    def client() -> None:
        with httpx.Client(base_url=collector.url, auth=(project.write_key, ""), timeout=5) as http:
            for _ in range(2000):  # bounded; the kill ends it much earlier
                batch = [
                    {"type": "track", "userId": "u1", "event": "E", "messageId": str(uuid.uuid4())}
                    for _ in range(10)
                ]
                ids = [m["messageId"] for m in batch]
                with lock:
                    attempted.extend(ids)
                try:
                    response = http.post("/v1/batch", json={"batch": batch})
                except httpx.TransportError:
                    return
                if response.status_code != 200:
                    return
                with lock:
                    acknowledged.extend(ids)

    threads = [threading.Thread(target=client) for _ in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 20
    while (
        len(list_archive_files(project.storage, project.lake, project.source_id)) < 2
        or len(acknowledged) < 500
    ):
        assert time.monotonic() < deadline, "the load did not get going"
        time.sleep(0.05)
    collector.kill()
    for thread in threads:
        thread.join(timeout=10)
    assert acknowledged and not any(thread.is_alive() for thread in threads)

    collector = start_collector(project, seal_max_age_seconds=NEVER)  # recovers before it listens
    counts = Counter(m["messageId"] for m in project.archived())
    assert [i for i in acknowledged if counts[i] != 1] == [], "acknowledged messages missing or doubled"
    assert max(counts.values()) == 1, "a message was archived twice"
    assert set(counts) <= set(attempted)
    assert collector.stop() == 0
    assert project.spool_segments() == []
