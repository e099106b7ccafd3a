"""``owned_session``: a caller's session is used and left running; otherwise one is built and stopped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eventlake.config import LakeSettings, Settings
from eventlake.jvm.session import DRIVER_OPTIONS, ONE_RUN_JIT, owned_session, return_driver_heap, spark_conf


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


@pytest.mark.spark
def test_the_driver_returns_the_heap_a_big_run_grew(spark: Any) -> None:
    """A big run's parse and dedupe grow the driver's heap and G1 keeps it: before the write pass
    the driver gives it back down to what is live (bench/README.md "Peak memory")."""
    heap = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getMemoryMXBean()
    ids = spark.range(0, 3_000_000, 1, 2).selectExpr("uuid() AS message_id")  # as the dedupe's count
    assert ids.groupBy("message_id").count().filter("count > 1").count() == 0
    committed = heap.getHeapMemoryUsage().getCommitted()
    return_driver_heap(spark)
    assert heap.getHeapMemoryUsage().getCommitted() < committed - 100e6
