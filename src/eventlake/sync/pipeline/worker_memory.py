"""A Python worker's memory handed back to the system when a task ends.

PySpark keeps its workers for later tasks, and an idle worker holds the largest heap its tasks
grew: Arrow's allocator (mimalloc) and the C heap keep freed memory for reuse. In a
1,000,000-message sync the two workers of the parse pass held 0.65 GiB idle through the whole
write pass, beside the write pass's own workers (bench/README.md, "Peak memory").
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
from collections.abc import Iterator

import pyarrow as pa

RETURN_ABOVE = 256 * 2**20  # a worker's resident memory past which a task's end returns what it can


@contextlib.contextmanager
def memory_returned(above: int = RETURN_ABOVE) -> Iterator[None]:
    """At the block's end (also on an error or when a generator holding it is closed), when the
    process holds more than ``above`` bytes: its garbage collected and its freed memory returned
    to the system."""
    try:
        yield
    finally:
        if resident_bytes() > above:
            gc.collect()
            pa.default_memory_pool().release_unused()
            _trim_c_heap()


def resident_bytes() -> int:
    """The process's resident memory (Linux's ``/proc/self/statm``; elsewhere unknown: a
    number larger than any threshold)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 1 << 62


def _trim_c_heap() -> None:
    """glibc's ``malloc_trim(0)``: freed pages of the C heap back to the system (elsewhere: nothing)."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):  # not glibc
        pass
