"""The model (machine.py) run for a fixed budget on a local lake and on S3, both with Glue (moto)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from .machine import machine

EXAMPLES = int(os.environ.get("MODEL_EXAMPLES", "8"))
STEPS = int(os.environ.get("MODEL_STEPS", "30"))
BUDGET = settings(
    max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, derandomize=True,
    suppress_health_check=list(HealthCheck), database=None,
)  # fmt: skip


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_the_lake_keeps_its_promises(kind: str, model_moto, tmp_path: Path) -> None:
    run_state_machine_as_test(machine(kind, tmp_path, model_moto.endpoint), settings=BUDGET)
