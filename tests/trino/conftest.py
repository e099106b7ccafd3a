"""The Trino tier: one Trino server for every test of the tier (they stay on one xdist worker: the
``trino`` group of ``tests/conftest.py``), and the catalogs it reads lakes through."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.objectstore.conftest import moto  # noqa: F401 - the tier's S3 and Glue (moto's server)
from tests.trino.server import Trino


@pytest.fixture(scope="session")
def trino(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trino]:
    server = Trino.start(tmp_path_factory.mktemp("trino"))
    print(f"\nTrino 476 started in {server.started_seconds:.1f} s on 127.0.0.1:{server.port}")
    yield server
    server.stop()
