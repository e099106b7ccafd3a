"""``eventlake import`` (:func:`eventlake.archive.importer.import_segment_archive`, the product's
own) run a file at a time: it runs in a thread whose writes of archive files each wait for the
model's :meth:`Import.step`, so that syncs, clock changes and anything else can happen between two
files of one import, as they do during an import that takes hours. The files are let through in
the import's own order (it copies a few at once: the order they are read in is the model's)."""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

from eventlake.archive.importer import ImportResult, import_segment_archive
from eventlake.storage import LocalStorage

STEP_TIMEOUT = 60.0


class _Gate:
    """The Segment archive's storage as the import reads it, but each read of a file waits until
    :meth:`let` names it: an import between two files is where a step ends (its reopen markers and
    its copy of one file are one step, as they are ms apart in production)."""

    def __init__(self, storage: Any) -> None:
        self._storage = storage
        self._arrived = threading.Condition()
        self._waiting: dict[str, threading.Event] = {}

    def read(self, path: Any) -> bytes:
        go = threading.Event()
        with self._arrived:
            self._waiting[str(path)] = go
            self._arrived.notify_all()
        go.wait()
        return bytes(self._storage.read(path))

    def arrived(self, timeout: float) -> list[str]:
        """The files waiting to be read, once one is (at most ``timeout`` seconds)."""
        with self._arrived:
            self._arrived.wait_for(lambda: bool(self._waiting), timeout)
            return sorted(self._waiting)

    def let(self, path: str, timeout: float) -> None:
        with self._arrived:
            if not self._arrived.wait_for(lambda: path in self._waiting, timeout):
                raise AssertionError(
                    f"the import never came to read {path}; waiting: {sorted(self._waiting)}"
                )
            self._waiting.pop(path).set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)


class _Told:
    """The lake's storage, saying the path of each archive file the import wrote."""

    def __init__(self, storage: Any, written: queue.Queue[Any]) -> None:
        self._storage, self._written = storage, written

    def write(self, path: Any, data: bytes, **options: Any) -> None:
        self._storage.write(path, data, **options)
        if "segment-logs" in str(path):
            self._written.put(path)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)


class Import:
    """One import of the Segment archive in ``folder`` into the world's source, started at once: it
    lists what to do (and, as it does, writes reopen markers), then waits for :meth:`step` before
    reading each of the ``sources`` (the Segment files, in its order)."""

    def __init__(self, world: Any, folder: Path, sources: list[str]) -> None:
        self.sources = sources
        self.done = 0
        self._written: queue.Queue[Any] = queue.Queue()
        self._gated = _Gate(LocalStorage())
        self.result: ImportResult | None = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.result = import_segment_archive(
                    self._gated,
                    folder,
                    _Told(world.storage, self._written),
                    world.lake,
                    world.source.id,
                    segment_source="SegSrc",
                )
            except BaseException as exc:  # said by step()
                self.error = exc
                self._written.put(exc)

        self.thread = threading.Thread(target=run, name="model-import", daemon=True)
        self.thread.start()
        if not self._gated.arrived(STEP_TIMEOUT):  # the import listed the lake and wrote its markers
            raise AssertionError(f"the import wrote no file: {self.error or self.result}")

    def step(self) -> Any:
        """Let the import write its next file; the file's path once written."""
        self._gated.let(self.sources[self.done], STEP_TIMEOUT)
        got = self._written.get(timeout=STEP_TIMEOUT)
        if isinstance(got, BaseException):
            raise got
        self.done += 1
        if self.finished:
            self.thread.join(STEP_TIMEOUT)
        return got

    @property
    def finished(self) -> bool:
        return self.done >= len(self.sources)

    def abandon(self) -> None:
        """Let the import run to its end (a test's teardown)."""
        while not self.finished and self.thread.is_alive():
            self.step()
