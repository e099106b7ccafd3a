"""Every ``>>>`` example in ``src/eventlake`` runs, and shows what the code returns.

The modules are found on disk (no import at collection); each is imported in its own test, those
that import pyspark included (importing it starts no JVM, and no example starts a session).
"""

from __future__ import annotations

import doctest
import importlib
import io
import re
from pathlib import Path

import pytest

import eventlake

PACKAGE = Path(eventlake.__file__).parent
EXAMPLE = re.compile(r"^\s*>>> ", re.MULTILINE)


def modules_with_examples() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__main__.py" or not EXAMPLE.search(path.read_text(encoding="utf-8")):
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


@pytest.mark.parametrize("name", modules_with_examples())
def test_examples_run_and_hold(name: str) -> None:
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder().find(module)
    written = len(EXAMPLE.findall(Path(module.__file__).read_text(encoding="utf-8")))
    found = sum(len(test.examples) for test in tests)
    # an example outside a docstring doctest collects (a nested function's, a comment's) never runs
    assert found == written, f"{name}: {written} examples written, {found} found by doctest"
    runner, report = doctest.DocTestRunner(), io.StringIO()
    for test in tests:
        runner.run(test, out=report.write)
    assert runner.failures == 0, report.getvalue()


def test_the_examples_are_found() -> None:
    assert {"eventlake.layout", "eventlake.schema.naming", "eventlake.sync.maintenance.compact"} <= set(
        modules_with_examples()
    )
