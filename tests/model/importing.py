"""``eventlake import`` (:func:`eventlake.archive.importer.import_segment_archive`, the product's
own) run a file at a time: it runs in a thread whose writes of archive files each wait for the
model's :meth:`Import.step`, so that syncs, clock changes and anything else can happen between two
files of one import, as they do during an import that takes hours."""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

from eventlake.archive.importer import ImportResult, import_segment_archive
from eventlake.storage import LocalStorage

STEP_TIMEOUT = 60.0


class _Gated:
    """The lake's storage, but each write of an archive file (not a reopen marker) waits for a
    step, and says its path once written."""

    def __init__(self, storage: Any, steps: threading.Semaphore, written: queue.Queue[Any]) -> None:
        self._storage, self._steps, self._written = storage, steps, written
        self.arrived = threading.Semaphore(0)  # a write waits at the gate

    def write(self, path: Any, data: bytes, **options: Any) -> None:
        if "segment-logs" not in str(path):
            self._storage.write(path, data, **options)
            return
        self.arrived.release()
        self._steps.acquire()
        try:
            self._storage.write(path, data, **options)
        except BaseException as exc:
            self._written.put(exc)
            raise
        self._written.put(path)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)


class Import:
    """One import of the Segment archive in ``folder`` into the world's source, started at once:
    it lists what to do and writes its reopen markers, then waits for :meth:`step` before each file."""

    def __init__(self, world: Any, folder: Path, files: int) -> None:
        self.files = files
        self.done = 0
        self._steps = threading.Semaphore(0)
        self._written: queue.Queue[Any] = queue.Queue()
        self._started = threading.Event()
        self.result: ImportResult | None = None
        self.error: BaseException | None = None
        gated = self._gated = _Gated(world.storage, self._steps, self._written)

        def run() -> None:
            try:
                self.result = import_segment_archive(
                    LocalStorage(), folder, gated, world.lake, world.source.id, segment_source="SegSrc"
                )
            except BaseException as exc:  # said by step()
                self.error = exc
                self._written.put(exc)

        self.thread = threading.Thread(target=run, name="model-import", daemon=True)
        self.thread.start()
        self._wait_at_gate()  # the import listed the lake and wrote its markers

    def _wait_at_gate(self) -> None:
        while not self._gated.arrived.acquire(timeout=0.01):
            if not self.thread.is_alive():
                if self.error is not None:
                    raise self.error
                raise AssertionError(f"the import ended before writing its files: {self.result}")
        self._gated.arrived.release()  # (taken again by step)

    def step(self) -> Any:
        """Let the import write its next file; the file's path once written."""
        self._wait_at_gate()
        self._gated.arrived.acquire()
        self._steps.release()
        got = self._written.get(timeout=STEP_TIMEOUT)
        if isinstance(got, BaseException):
            raise got
        self.done += 1
        if self.done == self.files:
            self.thread.join(STEP_TIMEOUT)
        return got

    @property
    def finished(self) -> bool:
        return self.done >= self.files

    def abandon(self) -> None:
        """Let the import run to its end (a test's teardown)."""
        while not self.finished and self.thread.is_alive():
            self.step()
