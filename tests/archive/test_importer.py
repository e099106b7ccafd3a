"""Importing a Segment archive (the S3 destination's gzip files) from a local folder: which files
are found, where they land, reruns, broken files and clear errors."""

from __future__ import annotations

import dataclasses
import gzip
import types
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson
import pytest

from eventlake import layout, state_layout
from eventlake.archive import list_archive_files
from eventlake.archive.importer import import_segment_archive
from eventlake.config import RetentionSettings
from eventlake.errors import UsageError
from eventlake.storage import LocalStorage
from eventlake.sync.maintenance.retention import apply_retention
from eventlake.sync.protocol.ledger import Ledger
from tests.conftest import Lake

DAY_1, DAY_2 = 1566086400000, 1566172800000
MINUTE, HOUR = 60_000, 3_600_000


def segment_file(root: Path, source: str, day_ms: int, name: str, messages: list[dict]) -> Path:
    path = root / "segment-logs" / source / str(day_ms) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(b"".join(orjson.dumps(m) + b"\n" for m in messages)))
    return path


@pytest.fixture
def export(tmp_path: Path) -> Path:
    root = tmp_path / "segment-bucket"
    segment_file(root, "AbC123", DAY_1, "1566126000000.a1b2.gz", [{"messageId": "m1"}])
    segment_file(root, "AbC123", DAY_2, "1566212400000.c3d4.gz", [{"messageId": "m2"}, {"messageId": "m3"}])
    (root / "segment-logs" / "AbC123" / "README.txt").write_text("not an archive file")
    return root


def imported(lake: Path, source_id: str = "ours") -> list[tuple[int, str]]:
    return [(f.day_ms, f.path.name) for f in list_archive_files(LocalStorage(), lake, source_id)]


@pytest.mark.parametrize("level", ["", "segment-logs", "segment-logs/AbC123"])
def test_files_land_in_the_sources_archive_by_day_from_any_level(
    export: Path, tmp_path: Path, level: str
) -> None:
    lake = tmp_path / "lake"
    result = import_segment_archive(LocalStorage(), export / level, LocalStorage(), lake, "ours")
    assert (result.files, result.skipped, result.days, result.broken) == (2, 0, {DAY_1, DAY_2}, [])
    assert imported(lake) == [
        (DAY_1, "segment-AbC123-1566126000000.a1b2.gz"),
        (DAY_2, "segment-AbC123-1566212400000.c3d4.gz"),
    ]
    copied = layout.archive_file(lake, "ours", DAY_2, "segment-AbC123-1566212400000.c3d4")
    assert (
        copied.read_bytes()
        == (export / "segment-logs/AbC123" / str(DAY_2) / "1566212400000.c3d4.gz").read_bytes()
    )


def test_a_data_lakes_bucket_gives_its_gzip_archive_not_its_parquet(export: Path, tmp_path: Path) -> None:
    """What docs/cli.md says `eventlake import` reads: the S3 destination's gzip files, beside which a
    Data Lakes bucket holds its Parquet (``segment-data/``); the tables are rebuilt by the sync."""
    parquet = export / "segment-data/data/AbC123/segment_type=track/day=2019-08-18/hr=10/part-0.parquet"
    parquet.parent.mkdir(parents=True)
    parquet.write_bytes(b"PAR1 Data Lakes' table file PAR1")
    lake = tmp_path / "lake"
    result = import_segment_archive(LocalStorage(), export, LocalStorage(), lake, "ours")
    assert result.files == 2 and [name for _, name in imported(lake)] == [
        "segment-AbC123-1566126000000.a1b2.gz",
        "segment-AbC123-1566212400000.c3d4.gz",
    ]
    assert sorted(p.suffix for p in (lake / "segment-logs").rglob("*") if p.is_file()) == [".gz", ".gz"]
    assert not (lake / "segment-data/data").exists()  # nothing of Data Lakes' tables is copied


def test_a_rerun_skips_what_is_there_and_finishes_an_interrupted_import(export: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    import_segment_archive(LocalStorage(), export, LocalStorage(), lake, "ours")
    first = layout.archive_file(lake, "ours", DAY_1, "segment-AbC123-1566126000000.a1b2")
    first.unlink()  # as if killed before writing it
    again = import_segment_archive(LocalStorage(), export, LocalStorage(), lake, "ours")
    assert (again.files, again.skipped) == (1, 1)
    assert len(imported(lake)) == 2


def test_a_broken_file_is_left_out_and_named(export: Path, tmp_path: Path) -> None:
    broken = export / "segment-logs/AbC123" / str(DAY_1) / "truncated.gz"
    broken.write_bytes(gzip.compress(b'{"messageId": "x"}\n' * 100)[:-20])
    lines: list[str] = []
    result = import_segment_archive(
        LocalStorage(), export, LocalStorage(), tmp_path / "lake", "ours", say=lines.append
    )
    assert result.files == 2 and len(result.broken) == 1 and "truncated.gz" in result.broken[0]
    assert any("left out" in line and "truncated.gz" in line for line in lines)
    assert all("truncated" not in name for _, name in imported(tmp_path / "lake"))


def test_several_segment_sources_need_a_choice(export: Path, tmp_path: Path) -> None:
    segment_file(export, "XyZ789", DAY_1, "1.gz", [{"messageId": "other"}])
    with pytest.raises(UsageError, match=r"2 Segment sources \(AbC123, XyZ789\).*--segment-source"):
        import_segment_archive(LocalStorage(), export, LocalStorage(), tmp_path / "lake", "ours")
    result = import_segment_archive(
        LocalStorage(), export, LocalStorage(), tmp_path / "lake", "ours", segment_source="XyZ789"
    )
    assert imported(tmp_path / "lake") == [(DAY_1, "segment-XyZ789-1.gz")] and result.files == 1
    with pytest.raises(UsageError, match="no files of Segment source 'nope'"):
        import_segment_archive(
            LocalStorage(), export, LocalStorage(), tmp_path / "lake", "ours", segment_source="nope"
        )


def test_a_folder_without_segment_files_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "empty" / "misc").mkdir(parents=True)
    (tmp_path / "empty" / "misc" / "x.gz").write_bytes(gzip.compress(b"{}"))  # not in a day folder
    with pytest.raises(
        UsageError, match=r"no Segment archive files under .*<segment-source-id>/<day-ms>/<file>.gz"
    ):
        import_segment_archive(LocalStorage(), tmp_path / "empty", LocalStorage(), tmp_path / "lake", "ours")


def test_importing_again_after_retention_brings_no_expired_day_back(
    export: Path, lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34, defect 7: retention deleted the archive days (and their ledger day files) past
    ``archive_days``; importing the same Segment archive again wrote them back and the next sync
    synced their messages again. The import now skips the days retention deleted, and says so."""
    from tests.sync.test_ledger import WallClock, sync

    settings = dataclasses.replace(lake.settings, retention=RetentionSettings(archive_days=7, table_days=0))
    storage, root, source_id = settings.lake.storage(), settings.lake.root, lake.source.id
    ledger = Ledger(storage, root, source_id)
    start = datetime(2019, 9, 30, 12, tzinfo=timezone.utc)
    now = int(start.timestamp() * 1000)
    wall = WallClock(now)  # the import's clock (its reopen markers' times)
    monkeypatch.setattr("eventlake.archive.days.time", types.SimpleNamespace(time=wall.time))
    first = import_segment_archive(LocalStorage(), export, storage, root, source_id)
    assert first.files == 2
    assert len(sync(ledger, now + MINUTE, "run1")) == 2
    sync(ledger, now + 3 * HOUR, "run2")  # both days closed again, the markers consumed
    assert not list(storage.list(state_layout.reopened_days_dir(root, source_id), "*"))
    retention_at = start + timedelta(hours=3)
    [retained] = apply_retention(settings, [lake.slug], now=retention_at, say=lambda line: None)
    assert [(e.kind, e.what) for e in retained.expired] == [
        ("archive", "2019-08-18"),
        ("archive", "2019-08-19"),
    ]
    assert list_archive_files(storage, root, source_id) == []

    lines: list[str] = []
    wall.ms = now + 4 * HOUR
    again = import_segment_archive(LocalStorage(), export, storage, root, source_id, say=lines.append)
    assert sync(ledger, wall.ms + MINUTE, "run3") == []  # nothing synced again: no message comes back
    assert list_archive_files(storage, root, source_id) == []
    assert (again.files, again.expired, again.expired_through) == (0, 2, DAY_2)
    assert any("skipped 2 files of 2 days up to 2019-08-19" in line and "retention" in line for line in lines)

    # a day after the retention's horizon is imported as ever
    segment_file(export, "AbC123", DAY_2 + 86_400_000, "1566300000000.e5f6.gz", [{"messageId": "m4"}])
    newer = import_segment_archive(LocalStorage(), export, storage, root, source_id)
    assert (newer.files, newer.expired) == (1, 2)
    assert len(sync(ledger, wall.ms + 2 * MINUTE, "run4")) == 1


def test_retention_keeps_a_damaged_archive_file_past_its_horizon(lake: Lake) -> None:
    """A damaged file counts as read for the ledger (its day closes), but none of its messages is in
    a table: retention keeps it (and says so) instead of deleting the only copy of them."""
    from eventlake.sync.protocol.damaged import DamagedFile, read_damaged, record_run
    from tests.sync.test_ledger import sync

    settings = dataclasses.replace(lake.settings, retention=RetentionSettings(archive_days=7, table_days=0))
    storage, root, source_id = settings.lake.storage(), settings.lake.root, lake.source.id
    good = layout.archive_file(root, source_id, DAY_1, "good")
    broken = layout.archive_file(root, source_id, DAY_1, "broken")
    storage.write(good, gzip.compress(b'{"messageId": "m1"}\n'))
    storage.write(broken, gzip.compress(b'{"messageId": "m2"}\n')[:-8])
    start = datetime(2019, 9, 30, 12, tzinfo=timezone.utc)
    now = int(start.timestamp() * 1000)
    synced = sync(Ledger(storage, root, source_id), now, "run1")  # the run read both, one damaged
    broken_key = layout.lake_relative(root, broken)
    assert broken_key in synced
    record_run(storage, root, source_id, synced, [DamagedFile(broken_key, "truncated", "run1")])

    lines: list[str] = []
    [retained] = apply_retention(settings, [lake.slug], now=start, say=lines.append)
    assert (retained.damaged_files, retained.unsynced_files) == (1, 0)
    assert [f.path.name for f in list_archive_files(storage, root, source_id)] == ["broken.gz"]
    assert broken_key in read_damaged(storage, root, source_id)
    assert any("1 damaged archive files past retention are kept" in line for line in lines)
