"""``owned_session``: a caller's session is used and left running; otherwise one is built and stopped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eventlake.config import LakeSettings, Settings
from eventlake.jvm.session import owned_session


@pytest.mark.spark
def test_a_given_session_is_used_and_left_running(spark: Any, tmp_path: Path) -> None:
    settings = Settings(path=None, lake=LakeSettings(tmp_path / "lake", tmp_path / "state"))
    said: list[str] = []
    with owned_session(settings, "eventlake-test", spark, said.append) as session:
        assert session is spark
    assert spark.sql("SELECT 1 AS one").collect()[0].one == 1  # not stopped
    assert said == []  # no "starting Spark ..."
