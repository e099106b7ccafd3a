"""Exclusive flock locks: refused or waited for while another holder has them, released at the end."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from eventlake.flock import LockFile, exclusive


def test_a_lock_is_exclusive_until_released(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "job.lock"  # the folder is created
    with exclusive(path, claim=True) as held:
        assert held is not None
        with LockFile(path) as other:
            assert not other.try_lock()  # a second open file: as another process would see it
            assert other.holder() == str(os.getpid())
    with LockFile(path) as other:
        assert other.try_lock()


def test_without_waiting_a_busy_lock_yields_none(tmp_path: Path) -> None:
    path = tmp_path / "job.lock"
    with LockFile(path) as holder:
        assert holder.try_lock()
        said: list[str] = []
        with exclusive(path, wait=False, say=said.append, waiting="waiting ...") as held:
            assert held is None
        assert said == []
        with LockFile(path) as other:
            assert not other.try_lock()  # still the holder's


def test_waiting_says_so_and_blocks_until_the_holder_releases(tmp_path: Path) -> None:
    path = tmp_path / "job.lock"
    holder = LockFile(path)
    assert holder.try_lock()
    released = threading.Event()

    def release() -> None:
        released.set()  # before the unlock: a waiter that got the lock finds it set
        holder.close()

    timer = threading.Timer(0.3, release)
    timer.start()
    said: list[str] = []
    with exclusive(path, say=said.append, waiting="waiting for the other job") as held:
        assert held is not None and released.is_set()
    timer.join()
    assert said == ["waiting for the other job"]


def test_close_is_idempotent_and_releases(tmp_path: Path) -> None:
    lock = LockFile(tmp_path / "job.lock", mode=0o600)
    assert lock.try_lock()
    lock.close()
    lock.close()
    assert (tmp_path / "job.lock").stat().st_mode & 0o777 == 0o600
    with LockFile(tmp_path / "job.lock") as again:
        assert again.try_lock() and again.holder() == ""
