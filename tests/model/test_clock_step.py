"""A run's duration is taken on the monotonic clock: the machine's clock stepped back during a sync
(NTP, an operator; issue 36's chaos run logged "Failed, ... -444.4 s") leaves it right."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from eventlake.sync import Status, run_sync
from eventlake.sync.protocol.report import completed_result, report_rows

from .standin import InProcessStager
from .world import Clock, World, quiet

pytestmark = pytest.mark.integration

START = datetime(2026, 11, 20, 10, tzinfo=timezone.utc)
PAUSE = 0.3  # seconds the run spends after the step


def test_a_sync_across_a_clock_step_back_reports_the_time_it_took(model_moto: Any, tmp_path: Path) -> None:
    world = World.create(tmp_path, "local", model_moto.endpoint)
    clock = Clock(START)
    stager = InProcessStager()
    parse = stager.parse

    def stepped_back(*args: Any, **kwargs: Any) -> Any:
        clock.advance(-444)  # the wall clock jumps back 444 s while the run parses
        time.sleep(PAUSE)
        return parse(*args, **kwargs)

    stager.parse = stepped_back  # type: ignore[method-assign]
    with clock.installed():
        world.seal([world.message("m1", "u1", "track", clock.utc())], clock.utc(), clock, 1)
        began = time.monotonic()
        [result] = run_sync(world.settings, [world.slug], catalog=world.catalog, say=quiet, wait=False,
                            stager=stager)  # fmt: skip
        elapsed = time.monotonic() - began
    assert result.status == Status.SUCCESS, result.error
    assert result.start_time == START  # the wall clock when it started ...
    assert PAUSE <= result.duration_seconds <= elapsed  # ... and the time it took, not -444 s
    assert result.finish_time == result.start_time + timedelta(seconds=result.duration_seconds)
    [row] = [r for r in report_rows(result, world.lake) if r["type"] == "source"]
    assert row["duration_mins"] >= PAUSE / 60


def test_runs_completed_together_span_from_the_first_start_to_the_last_finish() -> None:
    """A rerun reports the interrupted runs it completed as one; the second started on a clock
    stepped back since the first: their span is still not negative."""
    from eventlake.sync.protocol.report import SyncResult

    first = SyncResult("web", "S1", "r1", Status.SUCCESS, START, START + timedelta(seconds=30))
    second = SyncResult(
        "web", "S1", "r2", Status.SUCCESS, START - timedelta(minutes=7), START - timedelta(minutes=6)
    )
    merged = completed_result([report_rows(first, Path("/lake")), report_rows(second, Path("/lake"))])
    assert merged is not None
    assert merged.start_time == START - timedelta(minutes=7)
    assert merged.finish_time == START + timedelta(seconds=30)
    assert merged.duration_seconds == 7 * 60 + 30
