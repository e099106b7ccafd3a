"""The console's view of the lake (:class:`LakeWatch`) over files the sync's own writers make:
report files, the ledger, archive and spool files. No server, no Spark."""

from __future__ import annotations

import gzip
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson
import pytest

from eventlake import layout, state_layout
from eventlake.archive.days import reopen_days
from eventlake.config import LakeSettings, Settings, SourceSettings
from eventlake.config.settings import Secret
from eventlake.console.lake import LakeWatch
from eventlake.storage import LocalStorage
from eventlake.sync.protocol import ledger
from eventlake.sync.protocol.report import (
    BlockedTable,
    SyncResult,
    TableResult,
    report_path,
    report_rows,
    write_report_rows,
)
from eventlake.sync.protocol.state import SyncState
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

    spool = state_layout.spool_source_dir(state_layout.spool_dir(settings.lake.state_dir), "SRC2")
    spool.mkdir(parents=True)
    (spool / f"{state_layout.spool_segment_name(day, opened - 5000, 'bbbb', 1)}.ndjson").write_text("{}\n")
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
    from eventlake.sync.protocol.report import note_report_day

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


def _history(settings: Settings, now: datetime) -> None:
    """Runs of both sources over ten days (replays, failures, new columns among them), ids named as
    the sync names them (their start)."""
    from eventlake.sync.protocol.stage import new_run_id

    for n in range(120):
        start = now - timedelta(hours=2 * n + 1, minutes=n % 7)
        source, source_id = ("web", "SRC1") if n % 3 else ("ios", "SRC2")
        table = TableResult(
            source, "page", n, n == 119, ((f"c{n % 11}", "string"),) if n % 5 == 0 else (), ()
        )
        if n % 13 == 0:
            result = SyncResult.failure(
                source, source_id, RuntimeError("boom"), run_id=new_run_id(start), start=start
            )
        else:
            replay = {"replay_from": start - timedelta(days=1), "replay_to": start} if n % 17 == 0 else {}
            result = _run(source, source_id, new_run_id(start), start, (table,), rejected_values=n % 4,
                          duplicates_dropped=n % 3, **replay)  # fmt: skip
        _write(settings, result)


def _pages(watch: LakeWatch) -> list[object]:
    days = sorted({r.day for r in watch.runs(limit=10_000)[0]})
    seen = []
    for source in ("", "web", "ios"):
        for status in ("", "Success", "Failed", "Partial Success"):
            for day in ("", *days):
                for offset, limit in ((0, 7), (5, 7), (30, 25), (60, 50), (0, 1000)):
                    runs, total = watch.runs(source, status, day, offset, limit)
                    seen.append((source, status, day, offset, [r.run_id for r in runs], total))
    return seen


def test_older_days_are_summaries_and_answer_as_the_runs_did(tmp_path: Path, monkeypatch) -> None:
    import eventlake.console.lake as lake_module

    settings, now = _settings(tmp_path), now_utc()
    _history(settings, now)
    monkeypatch.setattr(lake_module, "RECENT_DAYS", 100_000)  # every run held: the reference
    held = LakeWatch(settings, collector_url=None)
    held.refresh()
    monkeypatch.setattr(lake_module, "RECENT_DAYS", 2)
    watch = LakeWatch(settings, collector_url=None)
    watch.refresh()

    assert len(watch._runs) < 40 < len(held._runs) == 120  # the older days are summaries
    assert _pages(watch) == _pages(held)
    assert watch.totals() == held.totals()
    assert watch.rows_per_day(30) == held.rows_per_day(30)
    assert watch.column_runs("web", "page") == held.column_runs("web", "page") != {}
    assert watch.column_runs("ios", "page") == held.column_runs("ios", "page") != {}
    for run in held.runs(limit=1000)[0][::7]:
        assert watch.run(run.run_id) == run
    assert watch.run("20200101T000000000Z-0000") is None
    for source_id in ("SRC1", "SRC2"):
        assert watch.last_run(source_id) == held.last_run(source_id)
        assert watch.quarantined_recently(source_id) == held.quarantined_recently(source_id)


def test_a_restarted_console_reads_only_the_older_days_whose_files_changed(
    tmp_path: Path, monkeypatch
) -> None:
    settings, now = _settings(tmp_path), now_utc()
    _history(settings, now)
    first = LakeWatch(settings, collector_url=None)
    first.refresh()

    read: list[str] = []
    original = LocalStorage.read_lines

    def counting(self, path):
        read.append(str(path))
        return original(self, path)

    monkeypatch.setattr(LocalStorage, "read_lines", counting)
    second = LakeWatch(settings, collector_url=None)
    second.refresh()
    written = {(now - timedelta(hours=2 * n + 1, minutes=n % 7)).strftime("%Y-%m-%d") for n in range(120)}
    # the last two days that hold reports (none today before 01:00: the latest run starts an hour ago)
    recent = {(now - timedelta(days=n)).strftime("%Y-%m-%d") for n in (0, 1)} & written
    assert read and all(layout.report_day(Path(p), settings.lake.root) in recent for p in read)
    assert second.totals() == first.totals() and _pages(second) == _pages(first)

    late_day = (now - timedelta(days=6)).strftime("%Y-%m-%d")  # a late report into an older day
    start = now - timedelta(days=6)  # halfway to that day's end (an hour later crosses midnight after 23:00)
    late = start + (start.replace(hour=23, minute=59, second=59, microsecond=0) - start) / 2
    _write(settings, _run("ios", "SRC2", "20200101T000000000Z-late", late, rejected_values=5))
    read.clear()
    third = LakeWatch(settings, collector_url=None)
    third.refresh()
    assert {layout.report_day(Path(p), settings.lake.root) for p in read} == recent | {late_day}
    assert third.totals()["SRC2"].rejected_values == first.totals()["SRC2"].rejected_values + 5
    assert third.runs(source="ios", day=late_day)[1] == first.runs(source="ios", day=late_day)[1] + 1


def test_at_midnight_a_day_s_runs_become_its_summary(tmp_path: Path, monkeypatch) -> None:
    import eventlake.console.lake as lake_module

    settings, now = _settings(tmp_path), now_utc()
    _history(settings, now)
    watch = LakeWatch(settings, collector_url=None)
    watch.refresh()
    before = (watch.totals(), _pages(watch), watch.column_runs("web", "page"))
    held = len(watch._runs)
    monkeypatch.setattr(lake_module, "now_utc", lambda: now + timedelta(days=1))
    watch.refresh()
    assert len(watch._runs) < held
    assert (watch.totals(), _pages(watch), watch.column_runs("web", "page")) == before
    yesterday = (now - timedelta(days=1)).strftime("%Y-%m-%d")
    assert state_layout.console_day_summary(settings.lake.state_dir, "SRC1", yesterday).is_file()


def test_the_pending_files_of_a_source_far_behind_cost_a_few_listings_a_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source whose checkpoint is 30 days behind and a disabled source never synced: the ledger
    lists their whole archive for each look at their pending files; the console's refresh (every
    5 s) lists it once, then only the days that may have changed."""
    web = SourceSettings("web", "SRC1", Secret("wk1"), "web")
    ios = SourceSettings("ios", "SRC2", Secret("wk2"), "ios", enabled=False)
    settings = Settings(
        path=None, lake=LakeSettings(root=tmp_path / "lake", state_dir=tmp_path / "state"), sources=(web, ios)
    )
    lake, storage = settings.lake.root, LocalStorage()
    today = day_start_ms(now_utc())

    def archive(source_id: str, day: int, n: int) -> str:
        path = layout.archive_file(lake, source_id, day, f"{day}-{day + 3_600_000 + n}-aaaa-{n:06d}.gz")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(b'{"type":"track"}\n'))  # (as sealed; no fsync needed here)
        return layout.lake_relative(lake, path)

    for days_ago in range(2, 32):  # 30 days, 100 files each: nothing synced since the checkpoint
        for n in range(100):
            archive("SRC1", today - days_ago * layout.DAY_MS, n)
    for days_ago in range(2, 22):  # the disabled source: 20 days, never synced
        for n in range(100):
            archive("SRC2", today - days_ago * layout.DAY_MS, n)
    checkpoint = {"format": ledger.FORMAT, "closed_through": today - 32 * layout.DAY_MS, "open": {}}
    storage.write(state_layout.ledger_checkpoint_file(lake, "SRC1"), orjson.dumps(checkpoint))

    listed: list[tuple[str, int]] = []  # the archive's listings: (folder, keys)
    real_list = LocalStorage.list

    def counted(self: LocalStorage, folder: Path, pattern: str = "*") -> list:
        found = real_list(self, folder, pattern)
        if layout.archive_root(lake) in Path(folder).parents:
            listed.append((str(folder), len(found)))
        return found

    monkeypatch.setattr(LocalStorage, "list", counted)
    watch = LakeWatch(settings, collector_url=None)

    def refresh() -> dict[str, int]:
        listed.clear()
        watch.refresh()
        return {h.source.slug: h.unsynced_files for h in watch.health()}

    assert refresh() == {"web": 3000, "ios": 2000}
    assert sum(keys for _, keys in listed) == 5000  # the whole archive, once
    for _ in range(3):
        assert refresh() == {"web": 3000, "ios": 2000}
        assert len(listed) <= 6 and sum(keys for _, keys in listed) == 0  # today, yesterday, tomorrow

    # what changes the pending files is seen: a new file today, a late file with its marker in an
    # old day, a sync of some files
    archive("SRC1", today, 1)
    old_day = today - 10 * layout.DAY_MS
    reopen_days(storage, lake, "SRC2", [old_day])
    archive("SRC2", old_day, 999)
    synced = [archive("SRC1", today - 5 * layout.DAY_MS, n) for n in range(40)]
    SyncState(storage, lake, "SRC1").record_synced("r1", synced)
    assert refresh() == {"web": 3000 + 1 - 40, "ios": 2000 + 1}
    assert sum(keys for _, keys in listed) == 1 + 101  # today's new file, and the reopened day
    assert refresh() == {"web": 2961, "ios": 2001}
