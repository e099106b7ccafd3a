"""Atomic, durable writes: the old content or the new one, never a mix, and no temp file left."""

from __future__ import annotations

import stat

from eventlake.durable import write_atomic


def test_write_atomic_replaces_whole_and_cleans_up(tmp_path):
    path = tmp_path / "state.json"
    write_atomic(path, b"old")
    write_atomic(path, b"new content")
    assert path.read_bytes() == b"new content"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_write_atomic_can_keep_a_file_private(tmp_path):
    path = tmp_path / "hive-site.xml"
    write_atomic(path, b"<password/>", mode=0o600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
