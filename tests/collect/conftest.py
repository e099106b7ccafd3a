"""Fixtures: a fresh project, collectors started on demand, and one shared collector."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .harness import Collector, Project, StartCollector, make_project


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path / "project")


@pytest.fixture
def start_collector(tmp_path: Path) -> Iterator[StartCollector]:
    """``start_collector(project, seal_max_age_seconds=...)``: a running collector, killed at teardown."""
    started: list[Collector] = []

    def start(project: Project, **settings: object) -> Collector:
        collector = Collector(project, settings, tmp_path / f"collector-{len(started)}.log")
        started.append(collector)
        return collector.start()

    yield start
    for collector in started:
        if collector.running:
            collector.kill()


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    """One collector shared by the API tests, sealing after 0.3 s."""
    root = tmp_path_factory.mktemp("served")
    settings: dict[str, object] = {"seal_max_age_seconds": 0.3}
    collector = Collector(make_project(root / "project"), settings, root / "collector.log")
    collector.start()
    yield collector
    if collector.running:
        collector.stop()


@pytest.fixture
def client(served: Collector) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, auth=(served.project.write_key, ""), timeout=10) as http:
        yield http
