"""Sync history and health from report files (no Spark: the files are what the sync writes)."""

from __future__ import annotations

from datetime import timedelta

from eventlake.config import add_source, load_settings, write_initial_config
from eventlake.reports import daily_health, run_history
from eventlake.storage import LocalStorage
from eventlake.sync.protocol.report import (
    BlockedTable,
    SyncResult,
    TableResult,
    report_path,
    report_rows,
    write_report_rows,
)
from eventlake.timestamps import now_utc


def write_run(settings, slug, start, status="Success", rows=3, error="", blocked=()):
    source = settings.source(slug)
    table = TableResult(source.database, "identify", rows, True, (("user_id", "string"),), ({"day": "d"},))
    result = SyncResult(
        slug, source.id, f"run-{start:%Y%m%d%H%M%S}-{slug}", status, start, start + timedelta(seconds=90),
        tables=() if status == "Failed" else (table,), duplicates_dropped=1, rejected_values=2, error=error,
        blocked=blocked,
    )  # fmt: skip
    path = report_path(result, settings.lake.root)
    write_report_rows(LocalStorage(), path, report_rows(result, settings.lake.root))
    return result


def test_history_and_health(tmp_path):
    config = write_initial_config(tmp_path / "p")
    add_source(config, "web")
    add_source(config, "app")
    settings = load_settings(config, environ={})
    now = now_utc()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    earlier_today = midnight + (now - midnight) / 2  # today whatever the hour (also just past midnight)
    write_run(settings, "web", now - timedelta(days=40))  # outside the 30-day health window
    write_run(settings, "web", now - timedelta(days=1))
    write_run(settings, "web", earlier_today)
    write_run(
        settings, "app", midnight + (now - midnight) * 3 / 4, status="Failed", error="OSError: disk full"
    )

    history = run_history(settings)
    assert [(r["source"], r["status"]) for r in history] == [
        ("app", "Failed"),
        ("web", "Success"),
        ("web", "Success"),
        ("web", "Success"),
    ]
    assert history[0]["error"] == "OSError: disk full"
    assert history[1]["rows"] == 3 and history[1]["new_columns"] == 1 and history[1]["duration_s"] == 90.0
    assert {h["kind"] for h in history} == {"sync"}
    assert [r["source"] for r in run_history(settings, "web", limit=2)] == ["web", "web"]

    health = daily_health(settings)
    today, yesterday = now.strftime("%Y-%m-%d"), (now - timedelta(days=1)).strftime("%Y-%m-%d")
    by_key = {(h["day"], h["source"]): h for h in health}
    assert len(health) == 3
    assert by_key[(yesterday, "web")]["rows"] == 3
    assert by_key[(today, "app")]["failed_runs"] == 1 and by_key[(today, "app")]["rows"] == 0
    assert by_key[(today, "web")]["rejected"] == 2 and by_key[(today, "web")]["duplicates_dropped"] == 1


def test_reports_command_renders_history_and_health(tmp_path):
    import json

    from click.testing import CliRunner

    from eventlake.cli import cli

    config = write_initial_config(tmp_path / "p")
    add_source(config, "web")
    settings = load_settings(config, environ={})
    write_run(settings, "web", now_utc() - timedelta(hours=2))
    runner = CliRunner()
    runs = json.loads(runner.invoke(cli, ["--config", str(config), "reports", "--format", "json"]).output)
    assert [r["rows"] for r in runs] == [3]
    result = runner.invoke(cli, ["--config", str(config), "reports", "--health", "--format", "json"])
    assert [(h["source"], h["rows"], h["runs"]) for h in json.loads(result.output)] == [("web", 3, 1)]


def test_an_unreadable_report_is_skipped_with_a_warning(tmp_path, capsys):
    config = write_initial_config(tmp_path / "p")
    add_source(config, "web")
    settings = load_settings(config, environ={})
    good = write_run(settings, "web", now_utc() - timedelta(hours=2))
    broken = write_run(settings, "web", now_utc() - timedelta(hours=1))
    report_path(broken, settings.lake.root).write_bytes(b'{"type": "source", "run_')
    assert [r["run_id"] for r in run_history(settings)] == [good.run_id]
    assert "skipping unreadable report" in capsys.readouterr().err


def test_a_run_whose_new_tables_passed_the_limit_is_a_partial_success(tmp_path):
    config = write_initial_config(tmp_path / "p")
    add_source(config, "web")
    settings = load_settings(config, environ={})
    blocked = (BlockedTable("web", "track_c", "table limit reached: ..."),)
    write_run(settings, "web", now_utc() - timedelta(hours=1), blocked=blocked)
    [run] = run_history(settings)
    assert (run["status"], run["tables"], run["rows"]) == ("Partial Success", 1, 3)


def _indexed(settings, result) -> None:
    from eventlake.sync.protocol.report import note_report_day

    note_report_day(LocalStorage(), settings.lake.root, result.start_time.strftime("%Y-%m-%d"))


def test_the_newest_runs_come_from_the_newest_days_only(tmp_path, capsys):
    config = write_initial_config(tmp_path / "p")
    add_source(config, "web")
    settings = load_settings(config, environ={})
    now = now_utc()
    old = write_run(settings, "web", now - timedelta(days=200))
    _indexed(settings, old)
    for hours in (49, 25, 2, 1):
        _indexed(settings, write_run(settings, "web", now - timedelta(hours=hours)))
    report_path(old, settings.lake.root).write_bytes(b'{"type": "source", "run_')  # damaged, 200 days old

    newest = run_history(settings, limit=2)
    assert [r["run_id"] for r in newest] == [
        f"run-{now - timedelta(hours=h):%Y%m%d%H%M%S}-web" for h in (1, 2)
    ]
    assert "skipping unreadable report" not in capsys.readouterr().err  # the old day was not read
    assert len(daily_health(settings)) in (3, 4)  # the last 30 days (a run 1-2 h ago may be yesterday)
    assert "skipping unreadable report" not in capsys.readouterr().err
    assert len(run_history(settings)) == 4  # all of them: back to the first day, the damaged one named
    assert "skipping unreadable report" in capsys.readouterr().err


def test_a_lake_with_reports_older_than_the_index_gets_it_from_one_listing(tmp_path):
    from eventlake.sync.protocol.report import first_report_day, report_files_by_day

    config = write_initial_config(tmp_path / "p")
    add_source(config, "web")
    settings = load_settings(config, environ={})
    now = now_utc()
    for days in (300, 40, 2):  # written before the index existed
        write_run(settings, "web", now - timedelta(days=days))
    storage, lake = LocalStorage(), settings.lake.root
    listed = [(day, paths) for day, paths in report_files_by_day(storage, lake) if paths]
    assert first_report_day(storage, lake) is None and len(listed) == 3
    _indexed(settings, write_run(settings, "web", now))  # the first sync after the upgrade
    assert first_report_day(storage, lake) == (now - timedelta(days=300)).strftime("%Y-%m-%d")
    walked = [(day, paths) for day, paths in report_files_by_day(storage, lake) if paths]
    assert [d for d, _ in walked] == [now.strftime("%Y-%m-%d")] + [d for d, _ in listed]
    assert [r["start_time"][:10] for r in run_history(settings)][-1] == walked[-1][0]
