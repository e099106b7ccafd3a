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
from collections.abc import Iterator

import pyarrow as pa


@contextlib.contextmanager
def memory_returned() -> Iterator[None]:
    """The block's garbage collected and freed memory returned to the system at its end (also on
    an error or when a generator holding it is closed)."""
    try:
        yield
    finally:
        gc.collect()
        pa.default_memory_pool().release_unused()
        _trim_c_heap()


def _trim_c_heap() -> None:
    """glibc's ``malloc_trim(0)``: freed pages of the C heap back to the system (elsewhere: nothing)."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):  # not glibc
        pass
