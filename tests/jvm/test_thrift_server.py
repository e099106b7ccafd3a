"""`eventlake thrift`: Spark's Thrift server over the project's catalog, queried with a real
HiveServer2 client (PyHive), while an `eventlake sync` from another process writes to the same
catalog (on embedded Derby, through the metastore service `eventlake thrift` starts)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pyhive import hive

from eventlake.config import load_settings
from eventlake.jvm.metastore.derby import running_service
from eventlake.timestamps import now_utc
from tests.catalog.conftest import clean_env, write_archive
from tests.catalog.servers import free_port, port_open, stop_process, wait_until
from tests.collect.harness import make_project

pytestmark = pytest.mark.integration
EVENTLAKE = Path(sys.executable).parent / "eventlake"


def test_thrift_server_answers_a_hive_client_beside_a_sync(tmp_path: Path) -> None:
    project = make_project(tmp_path / "mylake")
    settings = load_settings(project.config, environ={})
    write_archive(
        project.lake,
        project.source_id,
        [
            {"type": "track", "userId": "u1", "event": "Signed Up", "messageId": "t1"},
            {"type": "track", "userId": "u2", "event": "Signed Up", "messageId": "t2"},
        ],
        now_utc(),
    )
    port = free_port()
    log = tmp_path / "thrift.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [str(EVENTLAKE), "--config", str(project.config), "thrift", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=clean_env(),
        )
    try:
        wait_until(lambda: port_open(port), "eventlake thrift", server, log)
        assert running_service(settings.lake.state_dir) is not None  # started by `eventlake thrift`
        sync = subprocess.run(
            [str(EVENTLAKE), "--config", str(project.config), "sync"],
            capture_output=True,
            text=True,
            timeout=600,
            env=clean_env(),
        )
        assert sync.returncode == 0, sync.stderr

        connection = hive.Connection(host="127.0.0.1", port=port, username="analyst", auth="NONE")
        try:
            cursor = connection.cursor()
            cursor.execute("SHOW TABLES IN web")
            assert "track_signed_up" in {row[1] for row in cursor.fetchall()}
            cursor.execute("SELECT user_id, hr FROM web.track_signed_up ORDER BY user_id")
            rows = cursor.fetchall()
            assert [row[0] for row in rows] == ["u1", "u2"] and len(rows[0][1]) == 2
        finally:
            connection.close()
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(60)
        finally:
            stop_process(server)
    assert code == 0, log.read_text()
    assert running_service(settings.lake.state_dir) is None
