"""The commit manifest: everything a run publishes, written (atomically) before it publishes.

A run stages its files under ``segment-stage/``, then writes its :class:`Manifest` to
``segment-data/_state/pending/<source-id>/<run-id>.json``. :func:`eventlake.sync.protocol.commit.apply`
publishes it; a run killed at any point after its manifest exists is completed by the next run.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import orjson

from eventlake.catalog import TableSpec


class TableChange(str, Enum):  # enum.StrEnum once Python 3.10 is dropped
    """What applying a manifest does to a table in the catalog (its value: the manifest's text)."""

    CREATE = "create"  # the run's plan found it missing: create it (IF NOT EXISTS)
    ADD_COLUMNS = "add_columns"  # it exists and gains columns: append what the catalog lacks
    CHECK = "check"  # the run did not look: create it or append what it lacks (reports, quarantine)
    NONE = "none"  # it exists with every column: only register partitions
    RETYPE = "retype"  # `schema set-type` changed column types on purpose: the catalog takes the spec's

    def __str__(self) -> str:
        return self.value


CREATE = TableChange.CREATE
ADD_COLUMNS = TableChange.ADD_COLUMNS
CHECK = TableChange.CHECK
NONE = TableChange.NONE
RETYPE = TableChange.RETYPE
CHANGES = tuple(TableChange)


@dataclass(frozen=True)
class TableEntry:
    """A table to register, with the partitions the run wrote."""

    spec: TableSpec
    partitions: tuple[tuple[str, ...], ...]
    change: TableChange  # a manifest's text is turned into its member

    def to_dict(self) -> dict[str, Any]:
        spec = self.spec
        return {
            "database": spec.database,
            "name": spec.name,
            "columns": [list(c) for c in spec.columns],
            "partition_keys": list(spec.partition_keys),
            "location": spec.location,
            "format": spec.format,
            "partition_path": spec.partition_path,
            "partitions": [list(p) for p in self.partitions],
            "change": self.change,
        }

    def __post_init__(self) -> None:
        if self.change not in CHANGES:
            raise ValueError(f"unknown table change {self.change!r}: one of {', '.join(CHANGES)}")
        object.__setattr__(self, "change", TableChange(self.change))

    @classmethod
    def from_dict(cls, entry: dict[str, Any]) -> TableEntry:
        spec = TableSpec(
            entry["database"],
            entry["name"],
            tuple((name, kind) for name, kind in entry["columns"]),
            tuple(entry["partition_keys"]),
            entry["location"],
            entry["format"],
            entry["partition_path"],
        )
        change = entry["change"] if "change" in entry else _legacy_change(entry)
        return cls(spec, tuple(tuple(p) for p in entry["partitions"]), change)


def _legacy_change(entry: dict[str, Any]) -> TableChange:
    """The change of a manifest written before ``change`` existed (``is_new``: None when the run
    did not look; ``new_columns``): a run killed on the old version completes on the new one."""
    if entry.get("is_new") is None or entry.get("new_columns"):
        return CHECK
    return CREATE if entry["is_new"] else NONE


@dataclass(frozen=True)
class PartitionRewrite:
    """A partition folder whose data files a rewrite (compaction, replay, user deletion, set-type)
    replaces. ``staged`` is a folder holding the new content: the new ``files`` and the commit
    ``marker``; ``replaced`` are the names in ``folder`` they supersede (data files and older
    markers), ``kept`` the data files that stay. Switched by
    :func:`eventlake.sync.protocol.rewrite.apply_rewrite`: on a local disk the folder is swapped with the
    staged one; elsewhere the new content goes to the version folder ``version`` inside ``folder``
    (``kept`` copied there) and the catalog's partition (``database``, ``table``, ``keys``,
    ``values``; none: not in the catalog) is moved to it; ``retired`` are the names in ``folder``
    that are then deleted after the grace period (see :mod:`eventlake.sync.protocol.rewrite`). ``sources``:
    where each of ``files`` is staged when not in ``staged`` (a replay's table files on an object
    store stay where the run's workers wrote them: one copy fewer each); none: ``staged/<name>``."""

    folder: str
    staged: str
    files: tuple[str, ...]
    replaced: tuple[str, ...]
    marker: str
    version: str = ""
    kept: tuple[str, ...] = ()
    retired: tuple[str, ...] = ()
    database: str = ""
    table: str = ""
    keys: tuple[str, ...] = ()
    values: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "folder": self.folder,
            "staged": self.staged,
            "files": list(self.files),
            "replaced": list(self.replaced),
            "marker": self.marker,
            "version": self.version,
            "kept": list(self.kept),
            "retired": list(self.retired),
            "database": self.database,
            "table": self.table,
            "keys": list(self.keys),
            "values": list(self.values),
            "sources": list(self.sources),
        }

    @classmethod
    def from_dict(cls, entry: dict[str, Any]) -> PartitionRewrite:
        return cls(
            entry["folder"], entry["staged"], tuple(entry["files"]), tuple(entry["replaced"]),
            entry["marker"],
            entry.get("version", ""), tuple(entry.get("kept", ())), tuple(entry.get("retired", ())),
            entry.get("database", ""), entry.get("table", ""), tuple(entry.get("keys", ())),
            tuple(entry.get("values", ())), tuple(entry.get("sources", ())),
        )  # fmt: skip


@dataclass(frozen=True)
class Manifest:
    """One run's commit: the archive files it covers, the staged files to publish (``(staged,
    final)`` paths), the tables to register, its report, the staging folder to drop, and the
    partitions it rewrites (a compaction's only content). ``lease``: the number of the source's
    lease it was written under (0: a local lake, whose ``flock`` cannot be lost, or a manifest of a
    version before the commit fence); see :mod:`eventlake.storage.lease` for when a manifest of
    an older lease is applied and when it is dropped."""

    run_id: str
    source_id: str
    files: tuple[str, ...]  # archive keys, recorded in the ledger last
    moves: tuple[tuple[str, str], ...]
    tables: tuple[TableEntry, ...]
    report_path: str
    report: tuple[dict[str, Any], ...]
    stage: str
    rewrites: tuple[PartitionRewrite, ...] = ()
    lease: int = 0
    # archive files found damaged (key, problem), and the keys that leave the damaged list (read
    # again by a retry, or gone): see eventlake.sync.protocol.damaged
    damaged: tuple[tuple[str, str], ...] = ()
    cleared: tuple[str, ...] = ()

    def to_json(self) -> bytes:
        document = {
            "run_id": self.run_id,
            "source_id": self.source_id,
            "files": list(self.files),
            "moves": [list(m) for m in self.moves],
            "tables": [t.to_dict() for t in self.tables],
            "report_path": self.report_path,
            "report": list(self.report),
            "stage": self.stage,
            "rewrites": [r.to_dict() for r in self.rewrites],
            "lease": self.lease,
            "damaged": [list(d) for d in self.damaged],
            "cleared": list(self.cleared),
        }
        return orjson.dumps(document, option=orjson.OPT_INDENT_2)

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        document = orjson.loads(data)
        return cls(
            document["run_id"],
            document["source_id"],
            tuple(document["files"]),
            tuple((staged, final) for staged, final in document["moves"]),
            tuple(TableEntry.from_dict(t) for t in document["tables"]),
            document["report_path"],
            tuple(document["report"]),
            document["stage"],
            tuple(PartitionRewrite.from_dict(r) for r in document.get("rewrites", ())),
            int(document.get("lease", 0)),
            tuple((key, problem) for key, problem in document.get("damaged", ())),
            tuple(document.get("cleared", ())),
        )
