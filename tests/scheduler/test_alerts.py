"""Sync failure alerts as Segment Data Lakes sent them (the 1st, 5th and 20th failure in a row, and
the recovery), to a real SMTP server and a real HTTP receiver on 127.0.0.1. Results are real
``SyncResult``s with their reports written by the sync's own writer; one test runs a real Spark
sync that fails and then recovers."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import orjson
import pytest

from eventlake import state_layout
from eventlake.config import AlertsSettings, Secret, Settings, add_source, load_settings, write_initial_config
from eventlake.console.lake import LakeWatch
from eventlake.console.metrics import render
from eventlake.scheduler.alerts import FAILED, RECOVERED, failed_results, notify_results
from eventlake.storage import LocalStorage
from eventlake.sync.maintenance.health import read_health
from eventlake.sync.protocol.report import (
    SyncResult,
    TableResult,
    report_path,
    report_rows,
    write_report_rows,
)
from eventlake.timestamps import now_utc
from tests.collect.harness import free_port
from tests.scheduler.receivers import smtp_server, webhook_receiver

ALERTS = """
[alerts]
webhook_url = "{url}"
email_to = ["data@example.com", "oncall@example.com"]
email_from = "eventlake@example.com"
smtp_host = "127.0.0.1"
smtp_port = {port}
starttls = false
"""


def project(tmp_path: Path, alerts: str = "") -> Settings:
    config = write_initial_config(tmp_path / "project")
    add_source(config, "web", write_key="wk_web")
    config.write_text(config.read_text() + alerts)
    return load_settings(config, environ={})


def failed(settings: Settings, n: int, at: datetime) -> SyncResult:
    """A run that failed, its report written as the sync writes it."""
    source = settings.source("web")
    result = SyncResult.failure(
        source.slug, source.id, RuntimeError(f"disk on fire {n}"), run_id=f"run-f{n}", start=at
    )
    _report(settings, result)
    return result


def succeeded(settings: Settings, run_id: str, at: datetime, rows: int = 3) -> SyncResult:
    source = settings.source("web")
    table = TableResult("web", "pages", rows, False, (), ({"day": at.strftime("%Y-%m-%d"), "hr": "00"},))
    result = SyncResult(source.slug, source.id, run_id, "Success", at, at + timedelta(seconds=2), (table,))
    _report(settings, result)
    return result


def _report(settings: Settings, result: SyncResult) -> None:
    lake = settings.lake.root
    write_report_rows(LocalStorage(), report_path(result, lake), report_rows(result, lake))


def metrics(settings: Settings) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    watch = LakeWatch(settings, collector_url=None)
    watch.refresh()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(render(watch).decode())
        for s in family.samples
    }


def test_failing_six_times_then_succeeding_alerts_on_the_1st_and_5th_and_the_recovery(tmp_path: Path) -> None:
    with webhook_receiver() as (url, hook), smtp_server() as (port, mailbox):
        settings = project(tmp_path, ALERTS.format(url=url, port=port))
        said: list[str] = []
        start = now_utc() - timedelta(hours=1)
        posts_after = []
        for n in range(1, 7):
            if n == 5:  # a restart: another process counts the 5th failure from the health file
                _notify_in_another_process(settings, failed(settings, n, start + timedelta(minutes=n)))
            else:
                notify_results(settings, [failed(settings, n, start + timedelta(minutes=n))], said.append)
            posts_after.append(len(hook.posts))
        assert posts_after == [1, 1, 1, 1, 2, 2]
        assert (
            read_health(LocalStorage(), settings.lake.root, settings.source("web").id).failures_in_a_row == 6
        )
        sample = metrics(settings)
        assert sample[("eventlake_sync_failures_in_a_row", (("source", "web"),))] == 6
        assert sample[("eventlake_sync_runs_total", (("source", "web"), ("status", "failed")))] == 6

        alerts = notify_results(
            settings, [succeeded(settings, "run-ok", start + timedelta(minutes=7))], said.append
        )
        assert [a.event for a in alerts] == [RECOVERED]

        assert [(b["event"], b["failures_in_a_row"], b["run_id"]) for b in hook.bodies] == [
            (FAILED, 1, "run-f1"),
            (FAILED, 5, "run-f5"),
            (RECOVERED, 6, "run-ok"),
        ]
        first = hook.bodies[0]
        assert first["source"] == "web" and first["status"] == "Failed"
        assert first["error"] == "RuntimeError: disk on fire 1" and first["error_code"] == "internal_error"
        assert "web" in first["text"] and "1st failure in a row" in first["text"]
        assert first["time"].endswith("Z") and hook.bodies[2]["first_failure"] == first["time"]
        assert "recovered" in hook.bodies[2]["text"] and "after 6 failures in a row" in hook.bodies[2]["text"]
        path, headers, _ = hook.posts[0]
        assert path == "/services/T000/B000/secretpart" and headers["Content-Type"] == "application/json"

        assert mailbox.subjects == [
            "eventlake sync failed: web (1st failure in a row)",
            "eventlake sync failed: web (5th failure in a row)",
            "eventlake sync recovered: web",
        ]
        sender, recipients, message = mailbox.messages[1]
        assert sender == "eventlake@example.com"
        assert recipients == ["data@example.com", "oncall@example.com"]
        body = message.get_content()
        assert "RuntimeError: disk on fire 5" in body and "run-f5" in body and "failures in a row: 5" in body

    assert read_health(LocalStorage(), settings.lake.root, settings.source("web").id).failures_in_a_row == 0
    sample = metrics(settings)
    assert sample[("eventlake_sync_failures_in_a_row", (("source", "web"),))] == 0
    assert sample[("eventlake_sync_rows_total", (("source", "web"),))] == 3
    assert not any("not sent" in line for line in said)


def _notify_in_another_process(settings: Settings, result: SyncResult) -> None:
    """notify_results in a new Python process (as after a restart of `up`), from the same config."""
    code = (
        "import sys; from datetime import datetime\n"
        "from eventlake.config import load_settings\n"
        "from eventlake.progress import quiet\n"
        "from eventlake.scheduler.alerts import notify_results\n"
        "from eventlake.sync.protocol.report import SyncResult\n"
        "settings = load_settings(sys.argv[1], environ={})\n"
        "s = settings.source('web')\n"
        "start = datetime.fromisoformat(sys.argv[3])\n"
        "error = RuntimeError(sys.argv[4])\n"
        "result = SyncResult.failure(s.slug, s.id, error, run_id=sys.argv[2], start=start)\n"
        "print(len(notify_results(settings, [result], quiet)))\n"
    )
    error = result.error.split(": ", 1)[1]
    out = subprocess.run(
        [sys.executable, "-c", code, str(settings.path), result.run_id, result.start_time.isoformat(), error],
        capture_output=True, text=True, check=True, env={"PYTHONPATH": ":".join(sys.path)},
    )  # fmt: skip
    assert out.stdout.strip() == "1", out.stderr


def test_the_20th_failure_alerts_and_then_none_until_the_recovery(tmp_path: Path) -> None:
    with webhook_receiver() as (url, hook):
        settings = project(tmp_path, f'[alerts]\nwebhook_url = "{url}"\n')
        start = now_utc() - timedelta(hours=2)
        for n in range(1, 25):
            notify_results(settings, [failed(settings, n, start + timedelta(minutes=n))], lambda _: None)
        assert [b["failures_in_a_row"] for b in hook.bodies] == [1, 5, 20]
        source = settings.source("web")
        skipped = SyncResult.failure(
            "web", source.id, RuntimeError("busy"), status="Skipped: already running"
        )
        nothing = SyncResult("web", source.id, "run-n", "Nothing to do", now_utc(), now_utc())
        assert notify_results(settings, [skipped], lambda _: None) == []  # a skipped sync changes nothing
        assert (
            notify_results(settings, [failed(settings, 24, now_utc())], lambda _: None) == []
        )  # counted once
        assert [a.failures_in_a_row for a in notify_results(settings, [nothing], lambda _: None)] == [24]
        assert hook.bodies[-1]["event"] == RECOVERED and hook.bodies[-1]["status"] == "Nothing to do"
        assert len(hook.posts) == 4


def test_a_failing_channel_is_logged_and_never_fails_the_sync(tmp_path: Path) -> None:
    closed_port = free_port()  # nothing listens there
    with webhook_receiver(status=500) as (url, hook):
        settings = project(tmp_path, ALERTS.format(url=url, port=closed_port))
        said: list[str] = []
        alerts = notify_results(settings, [failed(settings, 1, now_utc())], said.append)
        assert [a.event for a in alerts] == [FAILED] and len(hook.posts) == 1
    assert len(said) == 2
    assert "web: the webhook alert was not sent: HTTPError: HTTP Error 500" in said[0]
    assert "web: the email alert was not sent: ConnectionRefusedError" in said[1]
    assert not any("secretpart" in line for line in said)  # the webhook URL is a credential
    # the failure is counted all the same: the next one is the 2nd
    assert read_health(LocalStorage(), settings.lake.root, settings.source("web").id).failures_in_a_row == 1


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
def test_email_through_an_smtp_server_that_needs_a_login(tmp_path: Path) -> None:
    with smtp_server(user="alerts", password="s3cret") as (port, mailbox):
        alerts = (
            '[alerts]\nemail_to = "data@example.com"\nemail_from = "eventlake@example.com"\n'
            f'smtp_host = "127.0.0.1"\nsmtp_port = {port}\nstarttls = false\n'
            'smtp_user = "alerts"\nsmtp_password = "s3cret"\n'
        )
        settings = project(tmp_path, alerts)
        notify_results(settings, [failed(settings, 1, now_utc())], lambda _: None)
        assert mailbox.logins == ["alerts"] and len(mailbox.messages) == 1
        wrong = dataclasses.replace(settings.alerts, smtp_password=Secret("nope"))
        said: list[str] = []
        notify_results(
            dataclasses.replace(settings, alerts=wrong), [failed(settings, 2, now_utc())], said.append
        )  # 2nd failure: no alert due
        notify_results(
            dataclasses.replace(settings, alerts=dataclasses.replace(wrong, on_failures=(3,))),
            [failed(settings, 3, now_utc())], said.append,
        )  # fmt: skip
        assert len(mailbox.messages) == 1 and "SMTPAuthenticationError" in said[0]


def test_a_sync_that_fails_as_a_whole_counts_for_every_source(tmp_path: Path) -> None:
    with webhook_receiver() as (url, hook):
        settings = project(tmp_path, f'[alerts]\nwebhook_url = "{url}"\n')
        results = failed_results(settings, RuntimeError("the metastore is unreachable"))
        assert [r.source for r in results] == ["web"] and results[0].run_id == ""
        notify_results(settings, results, lambda _: None)
        assert hook.bodies[0]["run_id"] == "" and "unreachable" in hook.bodies[0]["error"]
        assert failed_results(settings, RuntimeError("x"), ["other"]) == []


def test_no_channel_set_still_counts_for_the_metrics(tmp_path: Path) -> None:
    settings = project(tmp_path)
    assert not settings.alerts.enabled and settings.alerts == AlertsSettings()
    notify_results(settings, [failed(settings, 1, now_utc())], lambda _: None)
    assert metrics(settings)[("eventlake_sync_failures_in_a_row", (("source", "web"),))] == 1


@pytest.mark.spark
def test_a_real_sync_that_fails_alerts_and_its_recovery_too(lake, spark) -> None:
    from eventlake.sync import run_sync

    with webhook_receiver() as (url, hook):
        settings = dataclasses.replace(lake.settings, alerts=AlertsSettings(webhook_url=Secret(url)))
        lake.archive([{"type": "track", "event": "Signed Up", "userId": "u1", "messageId": "m1"}])
        # a suppression list that is not JSON: the run reading it fails (a damaged archive file no
        # longer fails a run: it is quarantined, see tests/sync/test_damaged.py)
        broken = state_layout.suppression_file(settings.lake.root, lake.source.id)
        LocalStorage().write(broken, b"not json")
        results = run_sync(settings, spark=spark)
        assert [r.status for r in results] == ["Failed"]
        notify_results(settings, results, lambda _: None)
        assert [(b["event"], b["failures_in_a_row"]) for b in hook.bodies] == [(FAILED, 1)]
        assert hook.bodies[0]["run_id"] == results[0].run_id and hook.bodies[0]["error"]
        report = Path(str(report_path(results[0], settings.lake.root)))
        assert orjson.loads(report.read_bytes().splitlines()[0])["status"] == "failed"

        LocalStorage().delete(broken)  # the operator removes it: the next run syncs the rest
        results = run_sync(settings, spark=spark)
        assert [(r.status, r.rows) for r in results] == [("Success", 1)]
        notify_results(settings, results, lambda _: None)
        assert [(b["event"], b["failures_in_a_row"]) for b in hook.bodies] == [(FAILED, 1), (RECOVERED, 1)]


@pytest.mark.integration
def test_eventlake_sync_alerts_and_a_later_process_sends_the_recovery(tmp_path: Path) -> None:
    from tests.collect.harness import EVENTLAKE, clean_environment, make_project
    from tests.scheduler.test_engine import archive

    project = make_project(tmp_path / "mylake")
    broken = state_layout.suppression_file(project.lake, project.source_id)  # not JSON: the sync fails
    LocalStorage().write(broken, b"not json")
    archive(project, "first", ["m0"], now_utc())
    with webhook_receiver() as (url, hook), smtp_server() as (port, mailbox):
        env = clean_environment() | {
            "EVENTLAKE__ALERTS__WEBHOOK_URL": url,
            "EVENTLAKE__ALERTS__EMAIL_TO": "data@example.com",
            "EVENTLAKE__ALERTS__EMAIL_FROM": "eventlake@example.com",
            "EVENTLAKE__ALERTS__SMTP_HOST": "127.0.0.1",
            "EVENTLAKE__ALERTS__SMTP_PORT": str(port),
            "EVENTLAKE__ALERTS__STARTTLS": "false",
        }
        command = [str(EVENTLAKE), "--config", str(project.config), "sync"]
        failed = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        assert failed.returncode == 1, failed.stderr
        assert "alerts: web: sync_failed alert (1 in a row) sent by webhook, email" in failed.stderr
        assert [(b["event"], b["failures_in_a_row"]) for b in hook.bodies] == [(FAILED, 1)]

        LocalStorage().delete(broken)
        archive(project, "good", ["m1", "m2"], now_utc())
        synced = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        assert synced.returncode == 0, synced.stderr
        assert [(b["event"], b["failures_in_a_row"]) for b in hook.bodies] == [(FAILED, 1), (RECOVERED, 1)]
        assert mailbox.subjects == [
            "eventlake sync failed: web (1st failure in a row)",
            "eventlake sync recovered: web",
        ]


def test_a_sync_that_found_damaged_archive_files_alerts_naming_them_without_a_failure(tmp_path: Path) -> None:
    from eventlake.sync.protocol.damaged import DamagedFile

    key = "segment-logs/S1/1795564800000/seg-1.gz"
    with webhook_receiver() as (url, hook), smtp_server() as (port, mailbox):
        settings = project(tmp_path, ALERTS.format(url=url, port=port))
        at = now_utc() - timedelta(minutes=5)
        found = DamagedFile(key, "Compressed file ended before the end-of-stream marker was reached")
        result = dataclasses.replace(
            succeeded(settings, "run-d", at), status="Partial Success", damaged=(found,)
        )
        alerts = notify_results(settings, [result], lambda line: None)
    assert [a.event for a in alerts] == ["archive_file_damaged"]
    [body] = hook.bodies
    assert body["files"] == [key] and body["run_id"] == "run-d" and body["status"] == "Partial Success"
    assert (
        key in body["text"] and "end-of-stream" in body["text"] and "eventlake sync --rescan" in body["text"]
    )
    assert mailbox.subjects == ["eventlake: damaged archive files in web (1)"]
    assert f"damaged file:      {key}" in mailbox.messages[0][2].get_content()
    assert read_health(LocalStorage(), settings.lake.root, settings.source("web").id).failures_in_a_row == 0
