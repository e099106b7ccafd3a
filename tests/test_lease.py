"""The lease's races, made deterministic on a local store (the same code runs on S3 and Azure,
whose conditional puts the storage contract tests check): each holder's steps are driven by the
test, on a clock the test moves, with no renewer thread and no sleeping."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest

from eventlake.storage.lease import Lease, LeaseLostError, Sighting, lease_name
from eventlake.storage.local import LocalStorage


class Clock:
    """The time of day the leases see; the test moves it."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Stalling(LocalStorage):
    """A store whose first write (a create, or a compare-and-swap) runs ``meanwhile`` first: the
    process using it stalled after reading, while other machines went on."""

    def __init__(self, meanwhile: Callable[[], None]) -> None:
        self.meanwhile: Callable[[], None] | None = meanwhile

    def _stall(self) -> None:
        meanwhile, self.meanwhile = self.meanwhile, None
        if meanwhile is not None:
            meanwhile()

    def write_new(self, path, data):
        self._stall()
        return super().write_new(path, data)

    def write_if_match(self, path, data, tag):
        self._stall()
        return super().write_if_match(path, data, tag)


def leases(storage, folder) -> list[str]:
    return [p.path.name for p in storage.list(folder, "*.json")]


def test_a_stalled_contender_never_takes_the_lease_beside_a_newer_holder(tmp_path):
    """Issue 34, defect 4: A reads lease 7 expired and stalls; B takes 8, runs, releases; C takes
    the lease; A goes on to create 8. Before, numbers restarted at 1 once B released, so A's 8 was
    the highest: A held the lease beside C, and deleted C's. Now B's release keeps 8 (C takes 9),
    and A's takeover is conditional on the version of 7 it read, which B changed."""
    storage = LocalStorage()
    storage.write(tmp_path / lease_name(7), orjson.dumps({"host": "gone", "pid": 1, "expires": 0}))
    taken = {}

    def b_runs_then_c_takes_over() -> None:
        b = Lease(storage, tmp_path, 60)
        assert b.try_acquire() and b.number == 8
        b.release()
        c = taken["c"] = Lease(storage, tmp_path, 60)
        assert c.try_acquire()

    a = Lease(Stalling(b_runs_then_c_takes_over), tmp_path, 60)
    assert not a.try_acquire(), "the stalled contender took the lease beside C"
    assert a.number == 0
    c = taken["c"]
    c.check()  # C still holds it
    assert leases(storage, tmp_path) == [lease_name(c.number)] == [lease_name(9)]
    c.release()


def test_numbers_are_never_reused_after_a_release(tmp_path):
    storage, clock = LocalStorage(), Clock()
    numbers = []
    for _ in range(3):
        lease = Lease(storage, tmp_path, 60, clock=clock, background=False)
        assert lease.try_acquire()
        numbers.append(lease.number)
        lease.release()
    assert numbers == [1, 2, 3]
    assert leases(storage, tmp_path) == [lease_name(3)]  # released, kept: the next takes 4
    assert orjson.loads(storage.read(tmp_path / lease_name(3)))["released"] is True


def test_a_late_renewal_does_not_bring_back_a_lease_taken_over(tmp_path):
    """Issue 34, defect 4: A stalls past its expiry, B takes the lease over, then A's renewer
    wakes. Before, its unconditional PUT wrote A's lease back with a fresh expiry: once B released,
    A held the lease again (its check passed) and C had to wait for A. Now the renewal is
    conditional on the version A wrote last, which B's takeover changed: it writes nothing."""
    storage, clock = LocalStorage(), Clock()
    a = Lease(storage, tmp_path, 60, clock=clock, background=False)
    assert a.try_acquire() and a.number == 1
    assert a.renew()  # on time: renewed
    clock.now += 61  # A stalls past its expiry
    b = Lease(storage, tmp_path, 60, clock=clock, background=False)
    assert b.try_acquire() and b.number == 2
    assert not a.renew(), "the late renewal wrote A's lease back"
    assert "took the lease over" in a.lost
    assert leases(storage, tmp_path) == [lease_name(2)]
    b.release()
    with pytest.raises(LeaseLostError, match="took the lease over"):
        a.check()
    c = Lease(storage, tmp_path, 60, clock=clock, background=False)
    assert c.try_acquire() and c.number == 3  # not blocked by a lease brought back
    a.release()  # gives back nothing: it holds nothing
    c.check()
    c.release()


def test_a_renewal_and_a_takeover_of_one_version_cannot_both_succeed(tmp_path):
    """B saw A's lease expired (A's clock was behind); A renews before B takes it: B's takeover,
    conditional on the version it saw, fails; A holds on."""
    storage, clock = LocalStorage(), Clock()
    a = Lease(storage, tmp_path, 60, clock=clock, background=False)
    assert a.try_acquire()
    clock.now += 61
    b = Lease(storage, tmp_path, 60, clock=clock, background=False)
    seen = b.look()
    assert a.renew()
    assert not b.take(seen)
    a.check()
    assert leases(storage, tmp_path) == [lease_name(1)]
    a.release()


def test_a_lease_released_between_listing_and_reading_is_looked_up_again(tmp_path):
    """A folder left by a version that deleted released leases: a contender lists lease-5, its
    holder releases it (deleted) and another takes lease-1 in the emptied folder: the contender
    must see lease-1 held, not take lease-6 beside it (two holders)."""
    storage = LocalStorage()
    holder, contender = Lease(storage, tmp_path, 60), Lease(storage, tmp_path, 60)
    storage.write(tmp_path / lease_name(5), b'{"expires": 0}')
    real_read = storage.read_tagged

    def read_after_a_release(path):
        if path.name == lease_name(5):
            storage.delete(path)  # released
            assert holder.try_acquire()  # and taken again, as number 1
        return real_read(path)

    storage.read_tagged = read_after_a_release
    try:
        assert not contender.try_acquire()
    finally:
        storage.read_tagged = real_read
    assert leases(storage, tmp_path) == [lease_name(1)]
    holder.check()
    holder.release()


def test_a_contender_that_took_a_lower_number_backs_off(tmp_path):
    """A stale contender saw an empty folder and creates lease-1 after the newer holder of lease-2
    deleted it: it holds nothing, and leaves nothing."""
    storage = LocalStorage()
    holder, stale = Lease(storage, tmp_path, 60), Lease(storage, tmp_path, 60)
    storage.write(tmp_path / lease_name(1), b'{"expires": 0}')
    assert holder.try_acquire() and holder.number == 2  # lease-1 (expired) is deleted
    assert not stale.take(Sighting(0, None))  # what it saw before holder took over
    assert leases(storage, tmp_path) == [lease_name(2)]
    holder.check()
    holder.release()


def test_confirmed_runs_pass_to_the_next_holder_and_unconfirmed_ones_do_not(tmp_path):
    """The commit fence's record: a run confirmed under a lease is inherited by whoever takes the
    lease next (also after a release, and over a holder that died), until a roll-forward settles
    it; a holder that lost its lease cannot confirm."""
    storage, clock = LocalStorage(), Clock()
    a = Lease(storage, tmp_path, 60, clock=clock, background=False)
    assert a.try_acquire()
    a.confirm("run-a")
    clock.now += 61  # A dies holding it
    b = Lease(storage, tmp_path, 60, clock=clock, background=False)
    assert b.try_acquire() and b.inherited == ("run-a",)
    with pytest.raises(LeaseLostError):
        a.confirm("run-a2")  # written after B took over: never confirmed
    b.confirm("run-b")
    b.release()
    c = Lease(storage, tmp_path, 60, clock=clock, background=False)
    assert c.try_acquire() and c.inherited == ("run-a", "run-b")
    c.settle()
    assert (
        c.inherited == () and orjson.loads(storage.read(tmp_path / lease_name(c.number)))["inherited"] == []
    )
    c.release()
