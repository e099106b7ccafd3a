"""``owned_session``: a caller's session is used and left running; otherwise one is built and stopped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eventlake.config import LakeSettings, Settings
from eventlake.jvm.session import DRIVER_OPTIONS, ONE_RUN_JIT, owned_session, spark_conf


@pytest.mark.spark
def test_a_given_session_is_used_and_left_running(spark: Any, tmp_path: Path) -> None:
    settings = Settings(path=None, lake=LakeSettings(tmp_path / "lake", tmp_path / "state"))
    said: list[str] = []
    with owned_session(settings, "eventlake-test", spark, said.append) as session:
        assert session is spark
    assert spark.sql("SELECT 1 AS one").collect()[0].one == 1  # not stopped
    assert said == []  # no "starting Spark ..."


def test_a_command_s_driver_compiles_with_c1_only_and_a_service_s_with_both_compilers(tmp_path: Path) -> None:
    """A command's driver lives for one run: C2's compiles never pay back there (bench/README.md
    "The driver's JIT"); a service's (up, the Thrift server) runs for hours and keeps C2."""
    settings = Settings(path=None, lake=LakeSettings(tmp_path / "lake", tmp_path / "state"))
    command = spark_conf(settings, "eventlake-sync", None, {}, one_run=True)[DRIVER_OPTIONS]
    service = spark_conf(settings, "eventlake-up", None, {})[DRIVER_OPTIONS]
    assert ONE_RUN_JIT in command and ONE_RUN_JIT not in service
    assert command.startswith(service)  # the same properties otherwise (Derby's home, logging)
