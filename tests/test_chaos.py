"""A bad day in production, three minutes of it (issue 36): ``eventlake up`` on S3 (moto) with Glue,
fed by Segment's Python library, under a fixed seed's faults (bench/chaos.py, ``--short``): one of
each kind (kill -9, S3 and Glue unreachable, a second ``up``, the spool's disk full, the clock
stepped) and a ``users delete``, a ``replay --table`` and a ``schema set-type`` while two readers
poll. Nothing the collector acknowledged is lost or doubled, no reader sees a partition shrink or
go above its final count, and the erased user is nowhere.

Needs root (the spool's tmpfs) and the PyPI ``libfaketime`` (the clock); without them those two
faults are skipped and the run says so."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import chaos  # noqa: E402 - bench/chaos.py

SEED = 36
MINUTES = 3
RATE = 100.0  # messages/s: the suite shares two cores


def test_up_under_faults_loses_and_doubles_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = chaos.run(MINUTES * 60, RATE, SEED, per_kind=1, work=tmp_path / "chaos", short=True)
    chaos.report(outcome)
    printed = capsys.readouterr().out
    with capsys.disabled():
        print(printed)
    assert outcome.acked > 0.9 * MINUTES * 60 * RATE, printed
    assert outcome.final_sync == "exit 0", printed
    assert not outcome.lost, printed
    assert not outcome.doubled, printed
    assert not outcome.never_acked_doubled, printed
    assert not any(outcome.anomalies.values()), printed
    assert not outcome.readers_disagree, printed
    assert outcome.erased_in_tables == 0 and outcome.erased_in_archive == 0, printed
