"""Sealing one segment through a store, and how a store's error is told (never a credential)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from eventlake import layout, state_layout
from eventlake.archive import ArchiveUploadError, SuppressionList
from eventlake.archive.errors import describe_store_error
from eventlake.archive.seal import SealResult, Segment, seal_segment
from eventlake.storage import LocalStorage

DAY = 1_795_305_600_000


def segment(spool: Path, content: bytes) -> Segment:
    path = state_layout.spool_segment_file(
        spool, "src", state_layout.spool_segment_name(DAY, DAY + 1, "0badf00d", 1)
    )
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


LATE = b'{"userId":"u-late","messageId":"m1"}\n'
KEPT = b'{"userId":"u-kept","messageId":"m2"}\n{"anonymousId":"a","messageId":"m3"}\n'


def archived_lines(lake: Path, seg: Segment) -> bytes:
    return gzip.decompress(layout.archive_file(lake, "src", DAY, seg.name).read_bytes())


def test_the_lines_of_a_user_suppressed_after_they_were_acknowledged_are_not_sealed(tmp_path: Path) -> None:
    seg = segment(tmp_path / "spool", LATE + KEPT)
    SuppressionList(LocalStorage(), tmp_path / "lake", "src").add(["u-late"])
    result = seal_segment(seg, LocalStorage(), tmp_path / "lake")
    assert archived_lines(tmp_path / "lake", seg) == KEPT
    assert result.suppressed == 1
    SuppressionList(LocalStorage(), tmp_path / "lake2", "src").add(["u-late"])
    only_late = segment(tmp_path / "spool2", LATE)  # nothing left: no archive file at all
    assert seal_segment(only_late, LocalStorage(), tmp_path / "lake2") == SealResult(only_late, None, 1)
    assert not only_late.path.exists() and not list((tmp_path / "lake2").rglob("*.gz"))


class SuppressingDuringUpload(LocalStorage):
    """A `users delete` suppresses u-late while the archive object is being written: the deletion
    may list the archive before the object appears, so the sealer must see the suppression."""

    def __init__(self, lake: Path) -> None:
        super().__init__()
        self.lake = lake
        self.uploads = 0

    def open_write(self, path, mode=0o644):  # type: ignore[no-untyped-def, override]
        if not str(path).endswith(".gz"):  # the day's reopen marker
            return super().open_write(path, mode)
        self.uploads += 1
        if self.uploads == 1:
            SuppressionList(LocalStorage(), self.lake, "src").add(["u-late"])
        return super().open_write(path, mode)


def test_a_user_suppressed_during_the_upload_is_sealed_again_without_their_lines(tmp_path: Path) -> None:
    seg = segment(tmp_path / "spool", LATE + KEPT)
    store = SuppressingDuringUpload(tmp_path / "lake")
    result = seal_segment(seg, store, tmp_path / "lake")
    assert store.uploads == 2  # the object was written again, without u-late's line
    assert archived_lines(tmp_path / "lake", seg) == KEPT
    assert result.suppressed == 1 and not seg.path.exists() and not seg.staged_path.exists()


def test_an_object_uploaded_before_a_suppression_by_a_stopped_attempt_is_rewritten(tmp_path: Path) -> None:
    seg = segment(tmp_path / "spool", LATE + KEPT)
    final = layout.archive_file(tmp_path / "lake", "src", DAY, seg.name)
    final.parent.mkdir(parents=True)
    final.write_bytes(gzip.compress(LATE + KEPT))  # uploaded; the process was killed before dropping
    SuppressionList(LocalStorage(), tmp_path / "lake", "src").add(["u-late"])
    assert seal_segment(seg, LocalStorage(), tmp_path / "lake").suppressed == 1
    assert archived_lines(tmp_path / "lake", seg) == KEPT and not seg.path.exists()


def test_a_staged_file_of_an_earlier_attempt_is_filtered_with_the_list_of_now(tmp_path: Path) -> None:
    seg = segment(tmp_path / "spool", LATE + KEPT)
    with pytest.raises(ArchiveUploadError):
        seal_segment(seg, Refusing(), tmp_path / "lake")  # staged with u-late's line, not uploaded
    SuppressionList(LocalStorage(), tmp_path / "lake", "src").add(["u-late"])
    assert seal_segment(seg, LocalStorage(), tmp_path / "lake").suppressed == 1
    assert archived_lines(tmp_path / "lake", seg) == KEPT


def test_an_unreadable_suppression_list_keeps_the_segment_for_the_next_try(tmp_path: Path) -> None:
    seg = segment(tmp_path / "spool", LATE + KEPT)
    listed = state_layout.suppression_file(tmp_path / "lake", "src")
    listed.parent.mkdir(parents=True)
    listed.write_bytes(b"{not json")
    with pytest.raises(ArchiveUploadError, match="not valid JSON"):  # the seal fails as the store
        seal_segment(seg, LocalStorage(), tmp_path / "lake")
    assert seg.path.exists()
    assert not layout.archive_file(tmp_path / "lake", "src", DAY, seg.name).exists()
