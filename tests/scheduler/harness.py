"""`eventlake up` in a test: started with its log in a file, waited on, and the commands run beside it."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.collect.harness import EVENTLAKE, Project

WAITING = "waiting for another eventlake process"


def start_up(
    project: Project, port: int, env: dict[str, str], log: Path, *args: str
) -> subprocess.Popen[bytes]:
    """``eventlake up --port <port> <args>`` with its stderr in ``log``, once its collector answers
    ``/health`` (killed if it never does)."""
    with open(log, "wb") as stderr:
        up = subprocess.Popen(
            [str(EVENTLAKE), "--config", str(project.config), "up", "--port", str(port), *args],
            env=env,
            stderr=stderr,
        )
    try:
        wait_for(lambda: healthy(port), "collector not healthy", up, log)
    except BaseException:
        up.kill()
        up.wait()
        raise
    return up


def healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def wait_for(
    check: Callable[[], Any], what: str, up: subprocess.Popen[bytes], log: Path, timeout: float = 300
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert up.poll() is None, f"up exited: {log.read_text()}"
        assert time.monotonic() < deadline, f"{what} after {timeout} s: {log.read_text()}"
        time.sleep(0.2)


def finish(process: subprocess.Popen[str]) -> tuple[str, str]:
    """The output of a command run beside ``up``, which must not have waited for it."""
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    assert WAITING not in err and "XSDB6" not in err, err
    return out, err
