"""`eventlake suppress`: a running collector blocks suppressed userIds (not archived, counted)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from eventlake.archive import SuppressionList
from eventlake.storage import LocalStorage

from .harness import (
    EVENTLAKE,
    NEVER,
    Collector,
    Project,
    StartCollector,
    add_source_with,
    clean_environment,
    make_project,
)
from .harness import metrics as read_metrics

pytestmark = pytest.mark.integration


def eventlake(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EVENTLAKE), "--config", str(project.config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_environment(),
    )


def suppressed_count(collector: Collector, slug: str = "web") -> float:
    return read_metrics(collector.url)[("eventlake_messages_suppressed_total", (("source", slug),))]


def wait_until_blocked(collector: Collector, user_id: str, blocked: bool) -> None:
    """Send probes of ``user_id`` until the collector (re-reading the list ~1/s) treats it as wanted."""
    deadline = time.monotonic() + 10
    with httpx.Client(base_url=collector.url, auth=(collector.project.write_key, "")) as http:
        while True:
            before = suppressed_count(collector)
            assert http.post("/v1/track", json={"userId": user_id, "event": "Probe"}).is_success
            if (suppressed_count(collector) > before) == blocked:
                return
            assert time.monotonic() < deadline, f"{user_id} not {'blocked' if blocked else 'unblocked'}"
            time.sleep(0.1)


def test_a_running_collector_picks_up_suppressions(project: Project, start_collector: StartCollector) -> None:
    collector = start_collector(project, seal_max_age_seconds=0.2)
    added = eventlake(project, "suppress", "add", "u-gone", "u-also-gone")
    assert added.returncode == 0, added.stderr
    assert "u-gone suppressed" in added.stderr
    wait_until_blocked(collector, "u-gone", blocked=True)

    before = suppressed_count(collector)
    ids = {user: f"sup-{user}-{uuid.uuid4()}" for user in ("u-gone", "u-kept", "u-also-gone")}
    batch = [{"type": "track", "userId": user, "event": "E", "messageId": ids[user]} for user in ids]
    batch.append({"type": "page", "anonymousId": "a1", "messageId": "sup-anonymous-" + str(uuid.uuid4())})
    response = httpx.post(f"{collector.url}/v1/batch", json={"batch": batch}, auth=(project.write_key, ""))
    assert response.json() == {"success": True}
    archived = project.wait_for_archive({ids["u-kept"], batch[-1]["messageId"]})
    archived_ids = {m.get("messageId") for m in archived}  # (probes sent before the list was read are there)
    assert ids["u-gone"] not in archived_ids and ids["u-also-gone"] not in archived_ids
    assert suppressed_count(collector) - before == 2

    listed = eventlake(project, "suppress", "list", "--format", "json")
    rows = json.loads(listed.stdout)
    assert [r["user_id"] for r in rows] == ["u-also-gone", "u-gone"]
    assert all(r["source"] == "web" and r["added_at"] for r in rows)

    removed = eventlake(project, "suppress", "remove", "u-gone", "u-unknown")
    assert removed.returncode == 0 and "u-unknown was not suppressed" in removed.stderr
    wait_until_blocked(collector, "u-gone", blocked=False)
    message_id = f"sup-back-{uuid.uuid4()}"
    body = {"userId": "u-gone", "event": "Back", "messageId": message_id}
    assert httpx.post(f"{collector.url}/v1/track", json=body, auth=(project.write_key, "")).is_success
    project.wait_for_archive({message_id})


def test_source_choice_with_several_sources(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    other_id = add_source_with(project, "app", "wk_app")
    ambiguous = eventlake(project, "suppress", "add", "u1")
    assert ambiguous.returncode == 2
    assert (
        ambiguous.stderr.count("\n") == 1
        and "--source" in ambiguous.stderr
        and "web, app" in ambiguous.stderr
    )
    assert eventlake(project, "suppress", "add", "u1", "--source", "app").returncode == 0
    assert SuppressionList(LocalStorage(), project.lake, other_id).user_ids() == {"u1"}
    assert SuppressionList(LocalStorage(), project.lake, project.source_id).user_ids() == frozenset()
    unknown = eventlake(project, "suppress", "list", "--source", "nope")
    assert unknown.returncode == 2 and "unknown source 'nope'" in unknown.stderr
    listed = eventlake(project, "suppress", "list", "--source", "app", "--format", "csv")
    assert listed.stdout.splitlines()[0] == "source,user_id,added_at"
    assert listed.stdout.splitlines()[1].startswith("app,u1,")
    empty = eventlake(project, "suppress", "add", "", "--source", "app")
    assert empty.returncode != 0 and "non-empty" in empty.stderr


def test_a_message_acknowledged_before_its_user_was_suppressed_is_not_sealed(
    project: Project, start_collector: StartCollector
) -> None:
    """Issue 36's chaos run: a message acknowledged (fsynced in the spool) before its user was
    suppressed, and sealed after (the spool held back), reached the raw archive after `users
    delete` had read it. The sealer reads the list and drops the user's lines."""
    collector = start_collector(project, seal_max_age_seconds=NEVER)  # sealed at the stop only
    ids = {user: f"late-{user}-{uuid.uuid4()}" for user in ("u-late", "u-kept")}
    batch = [{"type": "track", "userId": user, "event": "E", "messageId": ids[user]} for user in ids]
    response = httpx.post(f"{collector.url}/v1/batch", json={"batch": batch}, auth=(project.write_key, ""))
    assert response.json() == {"success": True}  # acknowledged: in the spool, not sealed yet
    assert project.spool_segments() and not project.archived()

    added = eventlake(project, "suppress", "add", "u-late")
    assert added.returncode == 0, added.stderr
    assert collector.stop() == 0  # SIGTERM: the spool is sealed on the way out

    archived_ids = {m.get("messageId") for m in project.archived()}
    assert ids["u-kept"] in archived_ids
    assert ids["u-late"] not in archived_ids
    assert "1 message of suppressed users dropped before sealing" in collector.log.read_text()
