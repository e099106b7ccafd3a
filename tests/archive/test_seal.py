"""Sealing one segment through a store, and how a store's error is told (never a credential)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from eventlake import layout
from eventlake.archive import ArchiveUploadError
from eventlake.archive.errors import describe_store_error
from eventlake.archive.seal import Segment, seal_segment
from eventlake.storage import LocalStorage

DAY = 1_795_305_600_000


def segment(spool: Path, content: bytes) -> Segment:
    path = layout.spool_segment_file(spool, "src", layout.spool_segment_name(DAY, DAY + 1, "0badf00d", 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    found = Segment.from_path(path)
    assert found is not None
    return found


def test_seals_the_complete_lines_then_drops_the_segment(tmp_path: Path) -> None:
    seg = segment(tmp_path / "spool", b'{"n":1}\n{"n":2}\n{"torn')
    result = seal_segment(seg, LocalStorage(), tmp_path / "lake")
    assert result.archive_path == layout.archive_file(tmp_path / "lake", "src", DAY, seg.name)
    assert gzip.decompress(result.archive_path.read_bytes()) == b'{"n":1}\n{"n":2}\n'
    assert list(seg.path.parent.iterdir()) == []  # segment and staged file gone
    assert sorted(p.name for p in result.archive_path.parent.iterdir()) == [result.archive_path.name]


class Refusing(LocalStorage):
    def open_write(self, path, mode=0o644):  # type: ignore[no-untyped-def, override]
        raise SlowDown()


class SlowDown(Exception):
    """Shaped as botocore's ClientError."""

    response = {"Error": {"Code": "SlowDown", "Message": "Please reduce your request rate."},
                "ResponseMetadata": {"HTTPStatusCode": 503}}  # fmt: skip


def test_a_refused_upload_keeps_the_segment_and_its_staged_file(tmp_path: Path) -> None:
    seg = segment(tmp_path / "spool", b'{"n":1}\n')
    with pytest.raises(ArchiveUploadError) as caught:
        seal_segment(seg, Refusing(), tmp_path / "lake")
    assert "SlowDown (HTTP 503): Please reduce your request rate." in str(caught.value)
    assert str(layout.archive_file(tmp_path / "lake", "src", DAY, seg.name)) in str(caught.value)
    assert seg.path.exists() and seg.staged_path.exists()
    staged = seg.staged_path.read_bytes()
    seal_segment(seg, LocalStorage(), tmp_path / "lake")  # the retry uploads the staged file as it is
    assert layout.archive_file(tmp_path / "lake", "src", DAY, seg.name).read_bytes() == staged
    assert not seg.path.exists() and not seg.staged_path.exists()


def test_store_errors_never_show_a_credential(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG")
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", "AccountKey=abc123456789")
    error = RuntimeError("signature of wJalrXUtnFEMI/K7MDENG with AccountKey=abc123456789 does not match")
    text = describe_store_error(error)
    assert "wJalrXUtnFEMI" not in text and "abc123456789" not in text
    assert text == "RuntimeError: signature of *** with *** does not match"
    assert len(describe_store_error(RuntimeError("x" * 5000))) == 300
