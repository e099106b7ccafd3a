"""The console's view of the lake (:class:`LakeWatch`) over files the sync's own writers make:
report files, the ledger, archive and spool files. No server, no Spark."""

from __future__ import annotations

import gzip
from datetime import datetime, timedelta, timezone
from pathlib import Path

from eventlake import layout
from eventlake.config import LakeSettings, Settings, SourceSettings
from eventlake.config.settings import Secret
from eventlake.console.lake import LakeWatch
from eventlake.storage import LocalStorage
from eventlake.sync.report import (
    BlockedTable,
    SyncResult,
    TableResult,
    report_path,
    report_rows,
    write_report_rows,
)
from eventlake.sync.state import SyncState
from eventlake.timestamps import day_start_ms, now_utc


def _settings(tmp_path: Path) -> Settings:
    sources = (
        SourceSettings("web", "SRC1", Secret("wk1"), "web"),
        SourceSettings("ios", "SRC2", Secret("wk2"), "ios"),
    )
    return Settings(
        path=None, lake=LakeSettings(root=tmp_path / "lake", state_dir=tmp_path / "state"), sources=sources
    )


def _write(settings: Settings, result: SyncResult) -> None:
    lake = settings.lake.root
    write_report_rows(LocalStorage(), report_path(result, lake), report_rows(result, lake))


def _run(source: str, source_id: str, run_id: str, start: datetime, tables=(), **fields) -> SyncResult:
    return SyncResult(
        source, source_id, run_id, "Success", start, start + timedelta(seconds=3), tables=tables, **fields
    )


def test_runs_statuses_filters_pages_and_columns(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    now = now_utc()
    created = TableResult(
        "web", "page", 5, True, (("name", "string"), ("url", "string")), ({"day": "d", "hr": "1"},)
    )
    grown = TableResult("web", "page", 2, False, (("referrer", "string"),), ())
    _write(settings, _run("web", "SRC1", "r1", now - timedelta(days=2), (created,)))
    _write(settings, _run("web", "SRC1", "r2", now - timedelta(hours=1), (grown,), rejected_values=3,
                          blocked=(BlockedTable("web", "track_x", "table limit reached"),),
                          notices=("table limit reached: 1 table not created",)))  # fmt: skip
    _write(settings, SyncResult.failure("ios", "SRC2", RuntimeError("boom"), run_id="r3", start=now))
    for n in range(60):  # a page's worth more
        _write(settings, _run("ios", "SRC2", f"s{n:02d}", now - timedelta(days=40, minutes=n)))
    watch = LakeWatch(settings, collector_url=None)
    watch.refresh()

    first, total = watch.runs(limit=50)
    assert total == 63 and len(first) == 50 and first[0].run_id == "r3"
    assert watch.runs(offset=50, limit=50)[0][-1].run_id == "s59"
    assert {r.run_id: r.status for r in watch.runs(source="web")[0]} == {
        "r2": "Partial Success",
        "r1": "Success",
    }
    assert [r.run_id for r in watch.runs(status="Failed")[0]] == ["r3"]
    assert [r.run_id for r in watch.runs(day=(now - timedelta(days=2)).strftime("%Y-%m-%d"))[0]] == ["r1"]
    failed = watch.run("r3")
    assert (
        failed is not None and failed.error == "RuntimeError: boom" and failed.error_code == "internal_error"
    )
    assert watch.last_run("SRC1").run_id == "r2" and watch.last_run("SRC1").new_columns == 1
    assert watch.column_runs("web", "page") == {"name": "r1", "url": "r1", "referrer": "r2"}
    assert watch.quarantined_recently("SRC1") == 3 and watch.quarantined_recently("SRC2") == 0
    per_day = watch.rows_per_day(30)
    assert (
        sum(n for _, n in per_day["web"]) == 7 and sum(n for _, n in per_day["ios"]) == 0
    )  # ios: 40 days ago
    generation = watch.generation
    watch.refresh()  # nothing new: nothing re-read, pages' caches stay
    assert watch.generation == generation


def test_the_oldest_message_not_yet_queryable(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    lake, storage = settings.lake.root, LocalStorage()
    received = datetime(2026, 11, 20, 7, 30, tzinfo=timezone.utc)
    day = day_start_ms(received)
    opened = int(received.timestamp() * 1000)

    def archive(name: str) -> str:
        path = layout.archive_file(lake, "SRC1", day, name)
        storage.write(path, gzip.compress(b'{"type":"track"}\n'))
        return layout.lake_relative(lake, path)

    synced = archive(f"{day}-{opened}-aaaa-000001.gz")
    archive(f"{day}-{opened + 60_000}-aaaa-000002.gz")  # a minute later, not synced
    SyncState(storage, lake, "SRC1").record_synced("r1", [synced])
    watch = LakeWatch(settings, collector_url=None)
    watch.refresh()
    health = {h.source.slug: h for h in watch.health()}
    assert health["web"].oldest_unqueryable == received + timedelta(minutes=1)
    assert health["web"].unsynced_files == 1
    assert health["ios"].oldest_unqueryable is None and health["ios"].lag_seconds(now_utc()) == 0

    spool = layout.spool_source_dir(layout.spool_dir(settings.lake.state_dir), "SRC2")
    spool.mkdir(parents=True)
    (spool / f"{layout.spool_segment_name(day, opened - 5000, 'bbbb', 1)}.ndjson").write_text("{}\n")
    watch.refresh()
    ios = next(h for h in watch.health() if h.source.slug == "ios")
    assert ios.oldest_unqueryable == received - timedelta(seconds=5)
    assert ios.lag_seconds(received) == 5


def test_an_unreachable_collector_is_said_not_hidden(tmp_path: Path) -> None:
    watch = LakeWatch(_settings(tmp_path), collector_url="http://127.0.0.1:1")
    watch.refresh()
    assert "does not answer" in watch.collector_error
    assert all(h.accepted_per_minute is None for h in watch.health())


def test_with_the_reports_index_the_watch_walks_days_and_refreshes_from_the_newest(tmp_path: Path) -> None:
    from eventlake.sync.report import note_report_day

    settings = _settings(tmp_path)
    lake, now = settings.lake.root, now_utc()
    for n, start in enumerate(
        [now - timedelta(days=90), now - timedelta(days=3), now - timedelta(minutes=5)]
    ):
        _write(settings, _run("web", "SRC1", f"r{n}", start))
        note_report_day(LocalStorage(), lake, start.strftime("%Y-%m-%d"))
    watch = LakeWatch(settings, collector_url=None)
    watch.refresh()
    assert [r.run_id for r in watch.runs()[0]] == ["r2", "r1", "r0"]
    _write(settings, _run("ios", "SRC2", "r3", now))
    watch.refresh()  # lists the newest day seen and the days after it
    assert [r.run_id for r in watch.runs()[0]] == ["r3", "r2", "r1", "r0"]
