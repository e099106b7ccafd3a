"""A real `eventlake sync` process killed with SIGKILL (Spark's JVM and workers included), then
rerun: every message is in the lake exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from eventlake.config import load_settings
from tests.collect.harness import EVENTLAKE, clean_environment, make_project
from tests.conftest import Lake

pytestmark = pytest.mark.integration


def eventlake(project, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(EVENTLAKE), "--config", str(project.config), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=clean_environment())


def kill_when(project, marker: str, log: Path) -> None:
    """Start a sync and SIGKILL its whole process group once stderr shows ``marker``."""
    with open(log, "wb") as err:
        command = [str(EVENTLAKE), "--config", str(project.config), "sync"]
        sync = subprocess.Popen(
            command, stderr=err, stdout=subprocess.DEVNULL, env=clean_environment(), start_new_session=True
        )
        deadline = time.monotonic() + 240
        while marker not in log.read_text():
            assert sync.poll() is None, f"the sync ended before {marker!r}: {log.read_text()}"
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        os.killpg(sync.pid, signal.SIGKILL)
        sync.wait()


@pytest.mark.parametrize("marker", ["duplicates dropped", "track_signed_up:"])
def test_sync_killed_then_rerun_keeps_every_message_once(tmp_path: Path, marker: str) -> None:
    project = make_project(tmp_path / "p")
    settings = load_settings(project.config, environ={})
    lake = Lake(project.root, project.config, settings, "web")
    messages = [{"type": "track", "userId": f"u{i}", "event": "Signed Up", "messageId": f"m{i}",
                 "properties": {"n": i}} for i in range(300)]  # fmt: skip
    lake.archive(messages[:200])
    lake.archive(messages[150:])  # 50 retried messages

    kill_when(project, marker, tmp_path / "killed.log")
    rerun = eventlake(project, "sync", "--format", "json")
    assert rerun.returncode == 0, rerun.stderr
    again = eventlake(project, "sync")
    assert again.returncode == 0 and "Nothing to do" in again.stderr
    query = "SELECT count(*) AS n, count(DISTINCT message_id) AS ids FROM web.track_signed_up"
    counted = eventlake(project, "sql", "--format", "json", query)
    assert json.loads(counted.stdout) == [{"n": 300, "ids": 300}], counted.stderr
