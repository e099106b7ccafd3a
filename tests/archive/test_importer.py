"""Importing a Segment archive (the S3 destination's gzip files) from a local folder: which files
are found, where they land, reruns, broken files and clear errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest

from eventlake import layout
from eventlake.archive import list_archive_files
from eventlake.archive.importer import import_segment_archive
from eventlake.errors import UsageError
from eventlake.storage import LocalStorage

DAY_1, DAY_2 = 1566086400000, 1566172800000


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
