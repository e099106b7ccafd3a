"""Reading the next few files while the current one is worked on, with the bytes held bounded.

A worker that reads files one at a time waits a whole round trip per file: on an object store a
GET of a small archive file costs more than parsing it. :func:`prefetched` runs ``work`` (a read,
or a read and a write) on the next few items in a small thread pool and hands the results back
in the items' order, holding at most ``ahead`` items in work or waiting to be taken, and at most
``max_bytes`` of them by their known size (one item is always let through, however big): the
bytes in memory are at most ``max_bytes`` plus the item the caller holds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

PREFETCH_FILES = 4  # files read ahead of the one being worked on
PREFETCH_BYTES = 64 * 1024 * 1024  # their sizes, at most (one file is always read, however big)


def prefetched(
    work: Callable[[Item], Result], items: Iterable[Item], *, size: Callable[[Item], int] = lambda _: 0,
    ahead: int | None = None, max_bytes: int | None = None,
) -> Iterator[tuple[Item, Result]]:  # fmt: skip
    """``(item, work(item))`` for each item, in order, ``work`` running in up to ``ahead`` threads
    on the items after the one the caller holds. ``size(item)``: its bytes, for the ``max_bytes``
    bound (known sizes: a listing's). An exception of ``work`` is raised when its item's turn comes
    (the items after it are not waited for). ``ahead`` 1: one item at a time. Defaults:
    :data:`PREFETCH_FILES` and :data:`PREFETCH_BYTES` (read when called: a benchmark can set them)."""
    ahead = PREFETCH_FILES if ahead is None else ahead
    max_bytes = PREFETCH_BYTES if max_bytes is None else max_bytes
    if ahead < 1:
        raise ValueError(f"ahead must be at least 1, not {ahead}")
    pending = iter(items)
    upcoming: object = next(pending, _END)
    window: deque[tuple[Item, int, Future[Result]]] = deque()
    held = 0  # the sizes of the items in the window
    with ThreadPoolExecutor(max_workers=ahead, thread_name_prefix="eventlake-prefetch") as pool:
        try:
            while True:
                while upcoming is not _END and len(window) < ahead:
                    item: Item = upcoming  # type: ignore[assignment]
                    bytes_ = max(0, size(item))
                    if window and held + bytes_ > max_bytes:
                        break
                    window.append((item, bytes_, pool.submit(work, item)))
                    held += bytes_
                    upcoming = next(pending, _END)
                if not window:
                    return
                item, bytes_, future = window.popleft()
                result = future.result()
                held -= bytes_
                yield item, result
        finally:
            for _, _, future in window:  # a caller that stopped early: nothing more is started
                future.cancel()


_END = object()
