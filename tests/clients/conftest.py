"""Fixtures for the tests with Segment's official client libraries (Python, Node, analytics.js)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.collect.harness import Collector, make_project

collect_ignore_glob = ["node_modules/*"]


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    """A collector for one test module, sealing after 0.2 s."""
    root = tmp_path_factory.mktemp("clients")
    running = Collector(make_project(root / "project"), {"seal_max_age_seconds": 0.2}, root / "collector.log")
    running.start()
    yield running
    if running.running:
        running.stop()
