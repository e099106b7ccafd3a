"""A missing client tool skips its tests on a developer's machine and fails them in CI."""

from __future__ import annotations

import pytest

from .tools import missing


def test_a_missing_tool_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium missing"):
        missing("chromium missing")


def test_a_missing_tool_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="chromium missing"):
        missing("chromium missing")
