"""``eventlake import`` (:func:`eventlake.archive.importer.import_segment_archive`, the product's
own) run a file at a time: it runs in a thread whose writes of archive files each wait for the
model's :meth:`Import.step`, so that syncs, clock changes and anything else can happen between two
files of one import, as they do during an import that takes hours. The files are let through in
the import's own order (it copies a few at once: the order they are written in is the model's)."""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

from eventlake.archive.importer import ImportResult, import_segment_archive
from eventlake.storage import LocalStorage

STEP_TIMEOUT = 60.0


class _Gated:
    """The lake's storage, but each write of an archive file (not a reopen marker) waits until
    :meth:`let` names it, and says its path once written."""

    def __init__(self, storage: Any, written: queue.Queue[Any]) -> None:
        self._storage, self._written = storage, written
        self._arrived = threading.Condition()
        self._waiting: dict[str, threading.Event] = {}

    def write(self, path: Any, data: bytes, **options: Any) -> None:
        if "segment-logs" not in str(path):
            self._storage.write(path, data, **options)
            return
        go = threading.Event()
        with self._arrived:
            self._waiting[str(path)] = go
            self._arrived.notify_all()
        go.wait()
        try:
            self._storage.write(path, data, **options)
        except BaseException as exc:
            self._written.put(exc)
            raise
        self._written.put(path)

    def arrived(self, timeout: float) -> list[str]:
        """The paths waiting to be written, once one is (at most ``timeout`` seconds)."""
        with self._arrived:
            self._arrived.wait_for(lambda: bool(self._waiting), timeout)
            return sorted(self._waiting)

    def let(self, path: str, timeout: float) -> None:
        with self._arrived:
            if not self._arrived.wait_for(lambda: path in self._waiting, timeout):
                raise AssertionError(
                    f"the import never came to write {path}; waiting: {sorted(self._waiting)}"
                )
            self._waiting.pop(path).set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)


class Import:
    """One import of the Segment archive in ``folder`` into the world's source, started at once: it
    lists what to do and writes its reopen markers, then waits for :meth:`step` before each of the
    ``targets`` (the archive paths it writes, in its order)."""

    def __init__(self, world: Any, folder: Path, targets: list[str]) -> None:
        self.targets = targets
        self.done = 0
        self._written: queue.Queue[Any] = queue.Queue()
        self._gated = _Gated(world.storage, self._written)
        self.result: ImportResult | None = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.result = import_segment_archive(
                    LocalStorage(), folder, self._gated, world.lake, world.source.id, segment_source="SegSrc"
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
        self._gated.let(self.targets[self.done], STEP_TIMEOUT)
        got = self._written.get(timeout=STEP_TIMEOUT)
        if isinstance(got, BaseException):
            raise got
        self.done += 1
        if self.finished:
            self.thread.join(STEP_TIMEOUT)
        return got

    @property
    def finished(self) -> bool:
        return self.done >= len(self.targets)

    def abandon(self) -> None:
        """Let the import run to its end (a test's teardown)."""
        while not self.finished and self.thread.is_alive():
            self.step()
