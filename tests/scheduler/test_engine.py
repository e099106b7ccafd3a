"""`eventlake up`'s engine: one Spark session that syncs every interval, compacts the small files its
micro-batches leave, and answers `eventlake sql --engine spark` without a JVM of the query's own."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import signal
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import orjson
import pytest

from eventlake import layout, state_layout
from eventlake.archive.days import reopen_days
from eventlake.config import add_source, load_settings
from eventlake.spec import enrich
from eventlake.storage import LocalStorage
from eventlake.timestamps import day_start_ms, parse_timestamp
from tests.collect.harness import EVENTLAKE, clean_environment, free_port, make_project
from tests.conftest import Lake
from tests.scheduler.harness import finish, start_up, wait_for
from tests.sync.test_sync import track

pytestmark = pytest.mark.integration
CLOSED_HOUR = parse_timestamp("2026-11-20T07:30:00Z")  # a closed hour: compaction takes it at once


def archive(project, name: str, message_ids: list[str], received_at: datetime) -> None:
    """A sealed archive file of track calls, as the collector writes it."""
    lines = [
        orjson.dumps(
            enrich(
                {"type": "track", "userId": "u1", "event": "Signed Up", "messageId": m},
                received_at=received_at,
                source_id=project.source_id,
            )
        )
        for m in message_ids
    ]
    day = day_start_ms(received_at)
    reopen_days(LocalStorage(), project.lake, project.source_id, [day])  # as the sealer: an ended day
    path = layout.archive_file(project.lake, project.source_id, day, name)
    LocalStorage().write(path, gzip.compress(b"".join(line + b"\n" for line in lines)))


def test_the_engine_syncs_micro_batches_compacts_them_and_serves_sql(tmp_path: Path) -> None:
    project = make_project(tmp_path / "mylake")
    port = free_port()
    env = clean_environment()
    env |= {
        "EVENTLAKE__SYNC__INTERVAL_SECONDS": "2",
        "EVENTLAKE__COMPACT__INTERVAL_SECONDS": "1",
        "EVENTLAKE__COMPACT__OLDER_THAN_HOURS": "0",
        "EVENTLAKE__RETENTION__ARCHIVE_DAYS": "30",
        "EVENTLAKE__RETENTION__TABLE_DAYS": "30",
        "EVENTLAKE__QUERY__THRIFT_PORT": str(free_port()),
    }
    archive(project, "first", ["e1", "e2"], CLOSED_HOUR)
    archive(project, "ancient", ["e0"], CLOSED_HOUR - timedelta(days=60))  # past retention
    log_path = tmp_path / "up.log"
    up = start_up(project, port, env, log_path)
    try:
        synced = "web: Success, 3 rows"
        wait_for(lambda: synced in log_path.read_text(), "the first micro-batch not synced", up, log_path)
        retained = "web: retention Success, 1 archive days and 1 table partitions deleted"
        wait_for(lambda: retained in log_path.read_text(), "retention not applied", up, log_path)
        archive(project, "second", ["e3"], CLOSED_HOUR)  # a second file in the same partition
        compacted = re.compile(r"web: compaction Success, [1-9]")
        wait_for(lambda: compacted.search(log_path.read_text()), "never compacted", up, log_path)

        settings = load_settings(project.config, environ={})
        table = layout.table_dir(settings.lake.root, project.source_id, "track_signed_up")
        names = [p.name for p in (table / "day=2026-11-20" / "hr=07").iterdir()]
        assert len(layout.visible_data_files(names, lambda m: [])) == 1, names

        for engine in ("spark", "duckdb"):
            sql = "SELECT message_id FROM web.track_signed_up ORDER BY message_id"
            out, err = finish(
                subprocess.Popen(
                    [str(EVENTLAKE), "--config", str(project.config), "sql", "--engine", engine,
                     "--format", "json", sql],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                )
            )  # fmt: skip
            assert json.loads(out) == [{"message_id": m} for m in ("e1", "e2", "e3")], (engine, err)
            if engine == "spark":
                assert "through the running engine" in err, err
        assert up.poll() is None
    finally:
        up.send_signal(signal.SIGTERM)
        code = up.wait(timeout=120)
    assert code == 0, log_path.read_text()
    assert not list(state_layout.sql_service_dir(project.spool.parent).glob("*.json")), (
        "the engine's record is gone"
    )


def test_a_busy_source_is_skipped_and_retried_while_the_others_sync(lake: Lake, spark) -> None:
    """A replay (or set-type, or a user deletion) holds its source's lock: the engine's sync skips
    that source, says why, syncs the others, and takes it at the next interval."""
    from eventlake.catalog import load_catalog
    from eventlake.scheduler.engine import _sync_once
    from eventlake.sync.protocol.lock import source_lock

    other = f"{lake.slug}b"
    add_source(lake.config, other, write_key=f"wk_{other}")
    settings = load_settings(lake.config, environ={})
    settings = dataclasses.replace(
        settings, lake=dataclasses.replace(settings.lake, state_dir=lake.settings.lake.state_dir)
    )
    busy, free = (Lake(lake.root, lake.config, settings, slug) for slug in (lake.slug, other))
    busy.archive([track("b1")])
    free.archive([track("f1"), track("f2")])
    catalog = load_catalog(settings, spark)
    lines: list[str] = []

    def say(line: str) -> None:
        assert "waiting for it to finish" not in line, "the engine waited for a busy source"

    source = busy.source
    with source_lock(settings.lake.storage(), settings.lake.root, source.slug, source.id, False, say):
        assert _sync_once(settings, spark, catalog, say, lines.append)  # the lock of a replay, held
    assert f"{free.slug}: Success, 2 rows in 1 tables" in "\n".join(lines), lines
    [skipped] = [line for line in lines if line.startswith(f"{busy.slug}:")]
    assert "Skipped" in skipped and "holds its lock" in skipped and "next interval" in skipped, skipped

    lines.clear()
    assert _sync_once(settings, spark, catalog, say, lines.append)  # the next interval
    assert [line.split(",")[:2] for line in lines] == [[f"{busy.slug}: Success", " 1 rows in 1 tables"]]


def test_a_compaction_that_finds_a_source_busy_is_tried_again_after_the_next_sync(lake: Lake, spark) -> None:
    """bench/chaos.py's hour: every compaction found the source held (a replay, a user deletion, a
    second machine) and waited a whole interval for the next try; none ran. `_compact_once` says
    the round is not settled while a source was skipped, so the engine tries after its next sync."""
    from eventlake.catalog import load_catalog
    from eventlake.scheduler.engine import _compact_once
    from eventlake.sync.protocol.lock import source_lock

    catalog = load_catalog(lake.settings, spark)
    lines: list[str] = []
    source = lake.source
    storage = lake.settings.lake.storage()
    with source_lock(storage, lake.settings.lake.root, source.slug, source.id, False, lambda line: None):
        assert _compact_once(lake.settings, spark, catalog, lambda line: None, lines.append) is False
    assert _compact_once(lake.settings, spark, catalog, lambda line: None, lines.append) is True


def test_each_interval_syncs_the_sources_eventlake_toml_has_then(lake: Lake, spark) -> None:
    """A disabled source's archive waits (said once, `Skipped: disabled`) and is synced whole once it
    is enabled; a source added while the engine runs syncs at the next interval, a removed one no
    longer does. The engine's steps: SourcesWatch.check, then _sync_once."""
    from eventlake.catalog import load_catalog
    from eventlake.config import SourcesWatch, remove_source, set_source_enabled
    from eventlake.scheduler.engine import _sync_once
    from eventlake.sync import DISABLED, run_sync

    lines: list[str] = []
    watch = SourcesWatch(lake.settings, environ={}, say=lines.append)
    catalog = load_catalog(lake.settings, spark)
    said: set[str] = set()

    def interval() -> list[str]:
        lines.clear()
        watch.check(force=True)
        assert _sync_once(watch.settings, spark, catalog, lambda line: None, lines.append, said)
        return list(lines)

    lake.archive([track("d1"), track("d2")])
    set_source_enabled(lake.config, lake.slug, False)
    assert interval() == [
        f"sources reloaded from {lake.config}: disabled {lake.slug}",
        f"{lake.slug}: {DISABLED} (collected and archived; synced again once enabled)",
    ]
    lake.archive([track("d3")])  # archived while disabled
    assert interval() == []  # said once, not every interval
    [result] = run_sync(watch.settings, spark=spark, catalog=catalog)
    assert (result.status, result.rows) == (DISABLED, 0)
    data = layout.source_data_dir(lake.settings.lake.root, lake.source.id)
    assert not Path(data).exists(), "a disabled source was synced"

    other = f"{lake.slug}n"
    add_source(lake.config, other, write_key=f"wk_{other}")
    set_source_enabled(lake.config, lake.slug, True)
    watch.check(force=True)
    added = Lake(lake.root, lake.config, watch.settings, other)
    added.archive([track("n1")])
    synced = interval()
    assert f"{lake.slug}: Success, 3 rows in 1 tables" in "\n".join(synced), synced  # all it archived
    assert f"{other}: Success, 1 rows in 1 tables" in "\n".join(synced), synced

    remove_source(lake.config, other)
    added.archive([track("n2")])
    lake.archive([track("d4")])
    synced = interval()
    assert synced[0] == f"sources reloaded from {lake.config}: removed {other}"
    assert [line.split(",")[0] for line in synced[1:]] == [f"{lake.slug}: Success"], synced
