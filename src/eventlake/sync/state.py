"""Durable sync state under ``segment-data/_state``: the ledger and pending commit manifests.

Every write is atomic (whole or not at all, through :mod:`eventlake.storage`), so a sync killed
at any instant leaves either the old or the new state, never half of one.
"""

from __future__ import annotations

import orjson

from eventlake import layout
from eventlake.storage import Location, Storage
from eventlake.sync.manifest import Manifest


class SyncState:
    """The ledger (which archive files are in the lake) and pending commits of one source."""

    def __init__(self, storage: Storage, lake: Location, source_id: str) -> None:
        self.storage, self.lake, self.source_id = storage, lake, source_id
        self.ledger_dir = layout.state_dir(lake, "ledger", source_id)
        self.pending_dir = layout.state_dir(lake, "pending", source_id)

    def synced_files(self) -> set[str]:
        files: set[str] = set()
        for entry in self.ledger_entries():
            files.update(self.ledger_files(entry))
        return files

    def ledger_entries(self) -> list[Location]:
        """The ledger's files, one per run that recorded archive files (they never change)."""
        return [entry.path for entry in self.storage.list(self.ledger_dir, "*.json")]

    def ledger_files(self, entry: Location) -> list[str]:
        """The archive files (keys) one ledger file records as synced."""
        return list(orjson.loads(self.storage.read(entry))["files"])

    def record_synced(self, run_id: str, files: list[str]) -> None:
        document = {"run_id": run_id, "files": sorted(files)}
        path = layout.ledger_file(self.lake, self.source_id, run_id)
        self.storage.write(path, orjson.dumps(document, option=orjson.OPT_INDENT_2))

    def pending(self) -> list[Manifest]:
        return [
            Manifest.from_json(self.storage.read(p.path))
            for p in self.storage.list(self.pending_dir, "*.json")
        ]

    def write_pending(self, manifest: Manifest) -> None:
        self.storage.write(
            layout.pending_file(self.lake, self.source_id, manifest.run_id), manifest.to_json()
        )

    def drop_pending(self, run_id: str) -> None:
        self.storage.delete(layout.pending_file(self.lake, self.source_id, run_id))
