"""Where the client tests find Node.js, Chromium and the npm packages (skipping when they are missing).

The JavaScript libraries and the Chromium driver are npm packages installed into
``tests/clients/node_modules`` by ``scripts/ensure-node-deps.sh``; Chromium itself is Debian's
``chromium`` (``scripts/ensure-chromium.sh``). ``make setup`` runs both.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
NODE_MODULES = HERE / "node_modules"


def node() -> str:
    found = shutil.which("node")
    if found is None or not (NODE_MODULES / "@segment" / "analytics-node").is_dir():
        pytest.skip("Node.js client libraries missing: run scripts/ensure-node-deps.sh (make setup does)")
    return found


def chromium() -> str:
    found = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium missing: run scripts/ensure-chromium.sh (make setup does)")
    return found
