"""Run ``eventlake compact``'s library call in this process and ``kill -9`` it at one step.

    python -m tests.sync.compact_crash CONFIG MODULE ATTRIBUTE NUMBER [publish]

Call ``NUMBER`` of ``MODULE.ATTRIBUTE`` (a module's function or a class's method, as in
``tests.sync.test_sync.kill_on_call``) sends SIGKILL to this process instead of running: no
``finally``, no cleanup, as when the machine or the OOM killer stops it. ``publish``: the local
disk cannot exchange folders (the object-store way of switching a partition). Exits 3 when the
step was never reached.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from typing import Any


def kill_at(module_path: str, attribute: str, number: int) -> None:
    try:
        target: Any = importlib.import_module(module_path)
    except ImportError:
        module, _, cls = module_path.rpartition(".")
        target = getattr(importlib.import_module(module), cls)
    original = getattr(target, attribute)
    calls = []

    def kill(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == number:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(target, attribute, kill)


def main(argv: list[str]) -> int:
    config, module_path, attribute, number, *mode = argv
    from eventlake.config import load_settings
    from eventlake.sync.maintenance.compact import compact_sources
    from eventlake.sync.protocol import rewrite

    if mode == ["publish"]:
        rewrite.exchange_folders = lambda first, second: False  # type: ignore[assignment]
    kill_at(module_path, attribute, int(number))
    compact_sources(load_settings(config, environ={}), say=lambda line: None)
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
