"""`eventlake up` on the default embedded Derby: while it runs, a second `eventlake sync` and
`eventlake reports` from other processes work (through the project's metastore service that `up`
starts), `eventlake sql` goes through up's engine, and stopping `up` stops the service too."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from eventlake import state_layout
from eventlake.jvm.metastore.derby import running_service
from tests.collect.harness import EVENTLAKE, clean_environment, free_port, make_project
from tests.scheduler.harness import finish, start_up, wait_for

pytestmark = pytest.mark.integration


def eventlake(config: Path, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(EVENTLAKE), "--config", str(config), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_sql_reports_and_a_second_sync_work_while_up_runs(tmp_path: Path) -> None:
    project = make_project(tmp_path / "mylake")
    state = project.spool.parent
    port = free_port()
    env = clean_environment(seal_max_age_seconds=0.5)
    env["EVENTLAKE__SYNC__INTERVAL_SECONDS"] = "3600"  # one scheduled sync, at start
    log_path = tmp_path / "up.log"
    up = start_up(project, port, env, log_path)
    try:
        response = httpx.post(
            f"http://127.0.0.1:{port}/v1/track",
            auth=(project.write_key, ""),
            json={"userId": "u1", "event": "Signed Up", "messageId": "c1"},
        )
        assert response.status_code == 200
        project.wait_for_archive({"c1"})
        wait_for(lambda: running_service(state) is not None, "no metastore service", up, log_path)

        # up's own first sync starts now; a second sync and the reports run beside it
        sync = eventlake(project.config, "sync", "--format", "json", env=env)
        reports = eventlake(project.config, "reports", "--format", "json", env=env)
        _, sync_log = finish(sync)
        assert "using the project's metastore service" in sync_log
        finish(reports)

        out, sql_log = finish(
            eventlake(
                project.config,
                "sql",
                "--format",
                "json",
                "SELECT message_id FROM web.track_signed_up",
                env=env,
            )
        )
        assert json.loads(out) == [{"message_id": "c1"}]
        assert "through the running engine" in sql_log, "no JVM of its own: up's engine answers"
        assert up.poll() is None
    finally:
        up.send_signal(signal.SIGTERM)
        code = up.wait(timeout=60)
    assert code == 0, log_path.read_text()
    assert not state_layout.metastore_service_file(state).exists()
    assert running_service(state) is None
