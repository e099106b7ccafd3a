"""A Python worker's freed memory goes back to the system at a task's end when it holds much."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from eventlake.sync.pipeline.worker_memory import memory_returned, resident_bytes

def task(above):
    with memory_returned(above):
        numbers = pa.array(np.arange(2_000_000))  # numpy's memory
        buffers = [pc.add(numbers, i) for i in range(10)]  # 160 MB in Arrow's pool
        del buffers

start = resident_bytes()
task({above})
print(resident_bytes() - start)
"""


def grown_by(above: int) -> int:
    """How much a fresh process's resident memory grew over a task that freed 160 MB of Arrow."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(above=above)], check=True, capture_output=True, text=True
    )
    return int(done.stdout.split()[-1])


def test_a_worker_holding_much_returns_it_and_one_holding_little_keeps_it() -> None:
    kept = grown_by(1 << 62)  # never above: nothing returned
    returned = grown_by(0)  # always above
    assert kept > 100e6  # Arrow's pool kept the freed 160 MB
    assert returned < kept - 100e6
