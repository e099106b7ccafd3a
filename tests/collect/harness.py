"""Real collectors for the tests: an `eventlake serve` subprocess on a free port of 127.0.0.1.

Self-contained (needs no tests/conftest.py). The subprocess never sees the developer's
``EVENTLAKE_CONFIG`` or ``EVENTLAKE__*`` environment; tests pass their own overrides.
"""

from __future__ import annotations

import gzip
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from eventlake import layout
from eventlake.archive import list_archive_files
from eventlake.config import add_source, load_settings, write_initial_config

EVENTLAKE = Path(sys.executable).parent / "eventlake"
WRITE_KEY = "wk_test_web"
START_TIMEOUT = 20.0


@dataclass(frozen=True)
class Project:
    """An `eventlake init` directory with one source, ``web``."""

    root: Path
    config: Path
    source_id: str
    write_key: str
    lake: Path
    spool: Path

    def archived(self) -> list[dict[str, Any]]:
        """Every message in the source's sealed archive files, in key order."""
        messages: list[dict[str, Any]] = []
        for archive_file in list_archive_files(self.lake, self.source_id):
            with gzip.open(archive_file.path, "rb") as lines:
                messages.extend(orjson.loads(line) for line in lines if line.strip())
        return messages

    def spool_segments(self) -> list[Path]:
        return sorted(self.spool.glob(f"*/*{layout.SPOOL_SUFFIX}"))

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


def make_project(directory: Path, write_key: str = WRITE_KEY) -> Project:
    config = write_initial_config(directory)
    entry = add_source(config, "web", write_key=write_key)
    settings = load_settings(config, environ={})
    spool = layout.spool_dir(settings.lake.state_dir)
    return Project(directory, config, entry["id"], write_key, settings.lake.root, spool)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_environment(**settings: object) -> dict[str, str]:
    """os.environ without eventlake's variables, plus ``EVENTLAKE__COLLECTOR__<KEY>`` overrides."""
    env = {k: v for k, v in os.environ.items() if k != "EVENTLAKE_CONFIG" and not k.startswith("EVENTLAKE__")}
    for key, value in settings.items():
        env[f"EVENTLAKE__COLLECTOR__{key.upper()}"] = str(value)
    return env


@dataclass
class Collector:
    """One `eventlake serve` subprocess."""

    project: Project
    settings: dict[str, object]
    log: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Collector:
        self.port = free_port()
        command = [str(EVENTLAKE), "--config", str(self.project.config), "serve", "--port", str(self.port)]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, env=clean_environment(**self.settings), stderr=log)
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
