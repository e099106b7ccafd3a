"""What the dbt tests share: a lake's archive written from messages, a command that must succeed,
`dbt <command>` on a project, and `eventlake thrift` running for dbt-spark."""

from __future__ import annotations

import gzip
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import orjson

from eventlake import layout
from eventlake.spec import enrich
from eventlake.storage import LocalStorage
from eventlake.timestamps import day_start_ms
from tests.collect.harness import EVENTLAKE, Project, clean_environment, free_port

DBT = Path(sys.executable).parent / "dbt"


def dbt_environment() -> dict[str, str]:
    """A clean environment (no developer settings) where dbt sends nothing home."""
    return clean_environment() | {"DO_NOT_TRACK": "1", "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}


def archive(project: Project, messages: Sequence[dict], received: datetime, name: str) -> None:
    """``messages`` as one sealed archive file ``name`` of ``received``'s day, as the collector writes."""
    lines = [orjson.dumps(enrich(m, received_at=received, source_id=project.source_id)) for m in messages]
    path = layout.archive_file(project.lake, project.source_id, day_start_ms(received), name)
    LocalStorage().write(path, gzip.compress(b"".join(line + b"\n" for line in lines)))


def run(args: Sequence[str], env: dict[str, str], cwd: Path, timeout: float = 600) -> str:
    """The standard output of ``args``, which must exit 0."""
    done = subprocess.run(list(args), env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def eventlake(project: Project, *args: str, env: dict[str, str]) -> str:
    return run([str(EVENTLAKE), "--config", str(project.config), *args], env, project.root)


def dbt(
    command: str, project_dir: Path, profiles_dir: Path, env: dict[str, str], work: Path, *args: str
) -> str:
    """``dbt command`` on ``project_dir``, its target and log folders under ``work`` (per target)."""
    target = args[args.index("--target") + 1] if "--target" in args else "default"
    folders = ["--log-path", str(work / f"dbt-{target}-logs")]
    if command != "deps":  # deps writes no target folder
        folders += ["--target-path", str(work / f"dbt-{target}")]
    out = run(
        [str(DBT), command, "--project-dir", str(project_dir), "--profiles-dir", str(profiles_dir),
         *folders, *args],
        env, work,
    )  # fmt: skip
    if command == "build":
        assert "Completed successfully" in out and "ERROR=0" in out, out
    return out


@contextmanager
def thrift_server(project: Project, env: dict[str, str]) -> Iterator[int]:
    """`eventlake thrift` on a free port, ready for dbt-spark and PyHive; stopped on exit."""
    port = free_port()
    thrift = subprocess.Popen(
        [str(EVENTLAKE), "--config", str(project.config), "thrift", "--port", str(port)],
        env=env, cwd=project.root, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        for line in thrift.stderr:
            if "Thrift server ready" in line or time.monotonic() > deadline:
                break
        assert thrift.poll() is None, "eventlake thrift exited"
        yield port
    finally:
        thrift.send_signal(signal.SIGTERM)
        thrift.wait(timeout=120)
