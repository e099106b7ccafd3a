"""The lease's races, made deterministic on a local store (the same code runs on S3 and Azure)."""

from __future__ import annotations

from eventlake.storage.lease import Lease, lease_name
from eventlake.storage.local import LocalStorage


def test_a_lease_released_between_listing_and_reading_is_looked_up_again(tmp_path):
    """A contender lists lease-5, its holder releases it, another takes lease-1 in the emptied
    folder: the contender must see lease-1 held, not take lease-6 beside it (two holders)."""
    storage = LocalStorage()
    holder, contender = Lease(storage, tmp_path, 60), Lease(storage, tmp_path, 60)
    storage.write(tmp_path / lease_name(5), b'{"expires": 0}')
    real_read = storage.read

    def read_after_a_release(path):
        if path.name == lease_name(5):
            storage.delete(path)  # released
            assert holder.try_acquire()  # and taken again, as number 1
        return real_read(path)

    storage.read = read_after_a_release
    try:
        assert not contender.try_acquire()
    finally:
        storage.read = real_read
    assert [p.path.name for p in storage.list(tmp_path, "*.json")] == [lease_name(1)]
    holder.check()
    holder.release()


def test_a_contender_that_took_a_lower_number_backs_off(tmp_path):
    """A stale contender creates lease-1 while lease-2 is held: it holds nothing, and leaves nothing."""
    storage = LocalStorage()
    holder, stale = Lease(storage, tmp_path, 60), Lease(storage, tmp_path, 60)
    storage.write(tmp_path / lease_name(1), b'{"expires": 0}')
    assert holder.try_acquire() and holder.number == 2  # lease-1 (expired) is deleted
    stale._newest = lambda: (0, None)  # what it saw before holder took over
    assert not stale.try_acquire()
    assert [p.path.name for p in storage.list(tmp_path, "*.json")] == [lease_name(2)]
    holder.check()
    holder.release()
