"""Durable sync state under ``segment-data/_state``: the ledger and pending commit manifests.

Every write is atomic (temp file, fsync, rename), so a sync killed at any instant leaves either
the old or the new state, never half of one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from eventlake import layout
from eventlake.durable import write_atomic


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, orjson.dumps(data, option=orjson.OPT_INDENT_2))


class SyncState:
    """The ledger (which archive files are in the lake) and pending commits of one source."""

    def __init__(self, lake: Path, source_id: str) -> None:
        self.ledger_dir = layout.state_dir(lake, "ledger", source_id)
        self.pending_dir = layout.state_dir(lake, "pending", source_id)

    def synced_files(self) -> set[str]:
        files: set[str] = set()
        for entry in sorted(self.ledger_dir.glob("*.json")):
            files.update(orjson.loads(entry.read_bytes())["files"])
        return files

    def record_synced(self, run_id: str, files: list[str]) -> None:
        write_json_atomic(self.ledger_dir / f"{run_id}.json", {"run_id": run_id, "files": sorted(files)})

    def pending(self) -> list[dict[str, Any]]:
        return [orjson.loads(p.read_bytes()) for p in sorted(self.pending_dir.glob("*.json"))]

    def write_pending(self, manifest: dict[str, Any]) -> None:
        write_json_atomic(self.pending_dir / f"{manifest['run_id']}.json", manifest)

    def drop_pending(self, run_id: str) -> None:
        (self.pending_dir / f"{run_id}.json").unlink(missing_ok=True)
