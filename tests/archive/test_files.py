"""Listing and reading sealed archive files (including ones written by Segment's S3 destination)."""

from __future__ import annotations

import gzip
from pathlib import Path

from eventlake import layout
from eventlake.archive import ArchiveFile, list_archive_files, read_archive_lines
from eventlake.storage import LocalStorage

DAY = 1_566_086_400_000  # 2019-08-18, Segment's docs example
NEXT = DAY + 86_400_000


def write_gz(path: Path, content: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(content))
    return path


def test_lists_sealed_files_sorted_by_key(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    later = write_gz(layout.archive_file(lake, "src", NEXT, "b"), b'{"n":3}\n')
    first = write_gz(layout.archive_file(lake, "src", DAY, "a"), b'{"n":1}\n{"n":2}\n')
    temp = layout.archive_file(lake, "src", DAY, "c").with_name(".c.gz.1234.tmp")  # a writer's temp file
    write_gz(temp, b"partial")
    write_gz(layout.archive_file(lake, "other", DAY, "z"), b'{"n":9}\n')
    (layout.archive_source_dir(lake, "src") / "not-a-day").mkdir()

    files = list_archive_files(LocalStorage(), lake, "src")

    assert files == [
        ArchiveFile(first, f"segment-logs/src/{DAY}/a.gz", first.stat().st_size, DAY),
        ArchiveFile(later, f"segment-logs/src/{NEXT}/b.gz", later.stat().st_size, NEXT),
    ]
    assert files[0].key == layout.lake_relative(lake, first)


def test_unknown_source_has_no_files(tmp_path: Path) -> None:
    assert list_archive_files(LocalStorage(), tmp_path, "nothing") == []


def test_reads_lines_without_newlines_across_gzip_members(tmp_path: Path) -> None:
    path = tmp_path / "multi.gz"
    path.write_bytes(gzip.compress(b'{"n":1}\n{"n":2}\n') + gzip.compress(b'\n{"n":3}\r\n'))
    assert list(read_archive_lines(LocalStorage(), path)) == [b'{"n":1}', b'{"n":2}', b'{"n":3}']
