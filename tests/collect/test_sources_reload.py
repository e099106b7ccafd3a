"""Sources without restarts: a running `eventlake serve` follows `eventlake sources add`, `disable`,
`remove` and hand edits of eventlake.toml; an edit that does not load does not take it down."""

from __future__ import annotations

import subprocess
import time
import uuid

import httpx
import pytest

from eventlake.config import load_settings

from .harness import EVENTLAKE, Collector, Project, StartCollector, clean_environment

pytestmark = pytest.mark.integration
WAIT_SECONDS = 10.0  # the collector looks at the file about once a second


def eventlake(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EVENTLAKE), "--config", str(project.config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_environment(),
        stdin=subprocess.DEVNULL,
    )


def post(collector: Collector, write_key: str) -> tuple[int, str]:
    """One track call with ``write_key``: the status and the message's id."""
    message_id = f"reload-{uuid.uuid4()}"
    response = httpx.post(
        f"{collector.url}/v1/track",
        auth=(write_key, ""),
        json={"userId": "u1", "event": "Probe", "messageId": message_id},
        timeout=5,
    )
    return response.status_code, message_id


def wait_for_status(collector: Collector, write_key: str, status: int) -> str:
    """Post until the collector answers ``status`` for ``write_key``; the id of that request's message."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        got, message_id = post(collector, write_key)
        if got == status:
            return message_id
        assert time.monotonic() < deadline, f"{write_key} still gets {got}: {collector.log.read_text()}"
        time.sleep(0.1)


def wait_for_log(collector: Collector, text: str) -> str:
    deadline = time.monotonic() + WAIT_SECONDS
    while text not in (log := collector.log.read_text()):
        assert time.monotonic() < deadline, f"{text!r} not logged: {log}"
        time.sleep(0.1)
    return log


def archived_ids(project: Project, source_id: str) -> set[str]:
    other = Project(project.root, project.config, source_id, "", project.lake, project.spool)
    return {m["messageId"] for m in other.archived()}


def wait_archived(project: Project, source_id: str, message_id: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while message_id not in archived_ids(project, source_id):
        assert time.monotonic() < deadline, f"{message_id} not archived under {source_id}"
        time.sleep(0.1)


def test_sources_added_disabled_and_removed_apply_without_a_restart(
    project: Project, start_collector: StartCollector
) -> None:
    collector = start_collector(project, seal_max_age_seconds=0.2)
    assert post(collector, "wk_ios")[0] == 401

    added = eventlake(project, "sources", "add", "ios", "--write-key", "wk_ios")
    assert added.returncode == 0, added.stderr
    assert "added source ios" in added.stdout
    assert "a running `eventlake serve` or `eventlake up` takes this up within a second" in added.stderr
    ios = load_settings(project.config, environ={}).source("ios")
    first = wait_for_status(collector, "wk_ios", 200)
    wait_archived(project, ios.id, first)
    assert "sources reloaded from" in wait_for_log(collector, "added ios")

    disabled = eventlake(project, "sources", "disable", "ios")
    assert disabled.returncode == 0, disabled.stderr
    assert disabled.stdout.startswith("disabled source ios: its events are still collected and archived")
    wait_for_log(collector, "disabled ios")
    status, kept = post(collector, "wk_ios")  # a disabled source is still collected
    assert status == 200
    wait_archived(project, ios.id, kept)

    removed = eventlake(project, "sources", "remove", "ios", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.startswith('[[sources]]\nslug = "ios"') and "enabled = false" in removed.stdout
    assert f"its raw archive in {project.lake / 'segment-logs' / ios.id}" in removed.stderr
    wait_for_status(collector, "wk_ios", 401)
    assert post(collector, project.write_key)[0] == 200  # the other source goes on
    assert archived_ids(project, ios.id) >= {first, kept}  # nothing of it was deleted
    assert collector.stop() == 0


def test_a_broken_edit_keeps_the_running_sources(project: Project, start_collector: StartCollector) -> None:
    collector = start_collector(project, seal_max_age_seconds=0.2)
    good = project.config.read_text()
    tv = '[[sources]]\nslug = "tv"\nid = "tvsource01"\nwrite_key = "wk_tv"\n'

    project.config.write_text(good + "\n" + tv + "fill_ip = 'sometimes'\n")  # invalid: not applied
    log = wait_for_log(collector, "changed but was not loaded")
    assert "invalid setting sources.tv.fill_ip: 'sometimes' (use one of auto, always, never)" in log
    assert "the 1 sources loaded before stay in use until the file is fixed" in log
    project.config.write_text(good + "\n[[sources]\n")  # not even TOML
    wait_for_log(collector, "not valid TOML")
    assert post(collector, project.write_key)[0] == 200
    assert post(collector, "wk_tv")[0] == 401
    assert httpx.get(f"{collector.url}/health", timeout=5).status_code == 200

    project.config.write_text(good + "\n" + tv)  # fixed by hand
    wait_for_status(collector, "wk_tv", 200)
    assert "loads again" in collector.log.read_text()
    assert collector.running and collector.stop() == 0
