"""Where the client tests find Node.js, Chromium and the npm packages (skipping when they are
missing; in CI, where ``CI`` is set, failing instead, as the catalog tests' servers do).

The JavaScript libraries and the Chromium driver are npm packages installed into
``tests/clients/node_modules`` by ``scripts/ensure-node-deps.sh``; Chromium itself is Debian's
``chromium`` (``scripts/ensure-chromium.sh``). ``make setup`` runs both.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

HERE = Path(__file__).resolve().parent
NODE_MODULES = HERE / "node_modules"


def missing(message: str) -> NoReturn:
    """Skip the test for a missing tool; in CI (``CI`` set), where setup installs it, fail."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def node() -> str:
    found = shutil.which("node")
    if found is None or not (NODE_MODULES / "@segment" / "analytics-node").is_dir():
        missing("Node.js client libraries missing: run scripts/ensure-node-deps.sh (make setup does)")
    return found


def chromium() -> str:
    found = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        missing("chromium missing: run scripts/ensure-chromium.sh (make setup does)")
    return found
