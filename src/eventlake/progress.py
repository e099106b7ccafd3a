"""Progress lines on stderr: the one ``Say`` helper every long-running command uses."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

Say = Callable[[str], None]

_STARTED = time.monotonic()


def say(line: str) -> None:
    """A progress line on stderr, with the seconds since the process started."""
    print(f"[{time.monotonic() - _STARTED:6.1f}s] {line}", file=sys.stderr, flush=True)


def prefixed(say: Say, prefix: str) -> Say:
    """``say`` with every line starting ``<prefix>: `` (a source's lines: its slug).

    >>> prefixed(print, "web")("3 rows")
    web: 3 rows
    """
    return lambda line: say(f"{prefix}: {line}")


def quiet(line: str) -> None:
    """A ``Say`` that drops its lines (tests, callers that render their own progress)."""
