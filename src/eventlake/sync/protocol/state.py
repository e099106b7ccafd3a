"""Durable sync state under ``segment-data/_state``: the ledger (:mod:`.ledger`) and pending commit manifests.

Every write is atomic (whole or not at all, through :mod:`eventlake.storage`), so a sync killed
at any instant leaves either the old or the new state, never half of one.
"""

from __future__ import annotations

from eventlake import state_layout
from eventlake.schema.table_names import TableNames
from eventlake.storage import Location, Storage
from eventlake.sync.protocol.ledger import Ledger
from eventlake.sync.protocol.manifest import Manifest


class SyncState:
    """The ledger (which archive files are in the lake) and pending commits of one source."""

    def __init__(self, storage: Storage, lake: Location, source_id: str) -> None:
        self.storage, self.lake, self.source_id = storage, lake, source_id
        self.ledger = Ledger(storage, lake, source_id)
        self.pending_dir = state_layout.state_dir(lake, "pending", source_id)

    def synced_files(self) -> set[str]:
        """Every synced archive file's key (reads every closed day: for tools and tests)."""
        return self.ledger.synced_keys()

    def record_synced(self, run_id: str, files: list[str]) -> None:
        self.ledger.record(run_id, files)

    def table_names(self, table_prefix: str) -> TableNames:
        """Where the source's segment types live: the names an adoption recorded, else eventlake's
        (``table_prefix`` + segment type, folder = segment type)."""
        path = state_layout.table_names_file(self.lake, self.source_id)
        if not self.storage.exists(path):
            return TableNames(table_prefix)
        return TableNames.from_json(self.storage.read(path))

    def write_table_names(self, names: TableNames) -> None:
        self.storage.write(state_layout.table_names_file(self.lake, self.source_id), names.to_json())

    def pending(self) -> list[Manifest]:
        return [
            Manifest.from_json(self.storage.read(p.path))
            for p in self.storage.list(self.pending_dir, "*.json")
        ]

    def write_pending(self, manifest: Manifest) -> None:
        self.storage.write(
            state_layout.pending_file(self.lake, self.source_id, manifest.run_id), manifest.to_json()
        )

    def drop_pending(self, run_id: str) -> None:
        self.storage.delete(state_layout.pending_file(self.lake, self.source_id, run_id))
