"""The engine's compaction schedule survives its restarts (:class:`eventlake.scheduler.engine.Interval`).

bench/chaos.py found the defect: the schedule lived in memory, so an `up` restarted five times in an
hour (kills, as a crash loop or frequent deploys would) compacted once, and one restarted more
often than `[compact] interval_seconds` never would. Each test below starts "a new engine" by
making a new Interval over the same file, as a restarted `up` does.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from eventlake import state_layout
from eventlake.scheduler.engine import Interval

HOUR = 3600.0


@pytest.fixture
def clock(tmp_path: Path) -> Path:
    return state_layout.compaction_clock_file(tmp_path / "state")


def _recorded(clock: Path, seconds_ago: float) -> None:
    clock.parent.mkdir(parents=True, exist_ok=True)
    clock.write_text(f"{time.time() - seconds_ago:.3f}\n")


def test_the_first_start_begins_the_schedule_and_records_it(clock: Path) -> None:
    interval = Interval(clock, HOUR)
    assert not interval.due()
    assert abs(float(clock.read_text()) - time.time()) < 60
    assert not Interval(clock, HOUR).due()  # restarted at once: still an hour to go


def test_an_engine_restarted_after_the_interval_compacts_at_once(clock: Path) -> None:
    _recorded(clock, HOUR + 60)  # the last compaction (or first start) over an hour ago
    assert Interval(clock, HOUR).due()


def test_restarts_within_the_interval_count_on_from_the_last_compaction(clock: Path) -> None:
    _recorded(clock, 0.75 * HOUR)
    interval = Interval(clock, HOUR)
    assert not interval.due()
    assert 0.74 * HOUR < time.monotonic() - interval.last < 0.76 * HOUR  # a quarter of an hour to go
    interval.every = 0.5 * HOUR  # eventlake.toml changed the interval: due on the recorded clock
    assert interval.due()


def test_done_records_the_moment_for_the_next_engine(clock: Path) -> None:
    _recorded(clock, HOUR + 60)
    interval = Interval(clock, HOUR)
    assert interval.due()
    interval.done()
    assert not interval.due()
    assert abs(float(clock.read_text()) - time.time()) < 60
    assert not Interval(clock, HOUR).due()


@pytest.mark.parametrize("seconds_ago", [-10 * HOUR, 10 * 24 * HOUR])
def test_a_stepped_clock_moves_the_next_compaction_by_at_most_one_interval(
    clock: Path, seconds_ago: float
) -> None:
    _recorded(clock, seconds_ago)  # a clock stepped back (a record in the future) or a long stop
    interval = Interval(clock, HOUR)
    waited = time.monotonic() - interval.last
    assert 0 <= waited <= HOUR + 1
    assert interval.due() == (seconds_ago > 0)


def test_a_damaged_record_begins_the_schedule_again(clock: Path) -> None:
    clock.parent.mkdir(parents=True)
    clock.write_text("not a time")
    assert not Interval(clock, HOUR).due()
    float(clock.read_text())  # recorded again


def test_no_compaction_interval_is_never_due(clock: Path) -> None:
    _recorded(clock, 10 * HOUR)
    assert not Interval(clock, 0).due()
