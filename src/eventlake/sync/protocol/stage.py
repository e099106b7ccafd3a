"""A run's staging area: every file a run writes waits in ``segment-stage/<source>/<run>/`` until
the commit publishes it. :class:`RunStage` owns both ends: where each staged file is, and where
it goes in the lake. Workers describe what they wrote with a :class:`StagedFile`; nobody derives
a destination from a path.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any, BinaryIO

from eventlake import layout, state_layout
from eventlake.schema.table_names import TableNames
from eventlake.storage import Location, Storage


class FileKind(str, Enum):  # enum.StrEnum once Python 3.10 is dropped
    """What a staged file holds, and so where it is published (its value: its staging folder)."""

    TABLE = "table"  # a lake table's Parquet file -> segment-data/data/.../segment_type=/day=/hr=/
    DEDUPE = "dedupe"  # a write task's slice of the dedupe index -> _state/dedupe/<source>/run_id=<run>/
    VALUES = "values"  # values that did not fit their column -> quarantine/<source>/run_id=<run>/
    MESSAGES = "messages"  # rejected messages -> quarantine/<source>/run_id=<run>/
    REPLACE = "replace"  # a new version of a file already in the lake (name: its path in the lake)

    def __str__(self) -> str:
        return self.value


TABLE = FileKind.TABLE
DEDUPE = FileKind.DEDUPE
VALUES = FileKind.VALUES
MESSAGES = FileKind.MESSAGES
REPLACE = FileKind.REPLACE
KINDS = tuple(FileKind)
# not a staged file's kind: a compaction's new content of a partition folder (RunStage.rewrite_folder)
REWRITE = "rewrite"
_RUN_ID = re.compile(r"(.*?)(\d{8}T\d{6})(\d{3})Z")  # a prefix, then new_run_id's stamp


def new_run_id(start: datetime, prefix: str = "", token_bytes: int = 2) -> str:
    """Sortable and unique: ``20261122T104700123Z-1a2b`` (``token_bytes`` random bytes at the end;
    a rewrite's id has 8: :class:`eventlake.sync.protocol.rewrite.RewriteRun`). :func:`run_started` reads
    the start back."""
    stamp = start.strftime("%Y%m%dT%H%M%S") + f"{start.microsecond // 1000:03d}Z"
    return f"{prefix}{stamp}-{secrets.token_hex(token_bytes)}"


def run_started(run_id: str, prefix: str | None = None) -> datetime | None:
    """When the run that :func:`new_run_id` named ``run_id`` started (UTC); None for another name,
    or with ``prefix``, for an id minted with another prefix (``""``: none).

    >>> run_started("20261122T104700123Z-1a2b")
    datetime.datetime(2026, 11, 22, 10, 47, 0, 123000, tzinfo=datetime.timezone.utc)
    >>> compacted = "compact-20261122T104700123Z-1a2b"
    >>> run_started(compacted).day, run_started(compacted, prefix=""), run_started("notes")
    (22, None, None)
    """
    found = _RUN_ID.match(run_id)
    if found is None or (prefix is not None and found.group(1) != prefix):
        return None
    try:
        started = datetime.strptime(found.group(2), "%Y%m%dT%H%M%S").replace(tzinfo=timezone.utc)
    except ValueError:  # digits that are no date
        return None
    return started + timedelta(milliseconds=int(found.group(3)))


@dataclass(frozen=True)
class StagedFile:
    """One file a run staged: what it holds, not where it is (:class:`RunStage` knows that)."""

    kind: FileKind
    name: str  # the file name, unique within the run and kind (REPLACE: the path under the lake root)
    rows: int = 0
    segment_type: str = ""  # TABLE: the table's segment type
    partition: tuple[str, ...] = ()  # TABLE: the partition values, in the run's key order


@dataclass(frozen=True)
class RunStage:
    """The staging of one run of one source. Plain data: it is pickled to Spark's workers."""

    lake: Location
    source_id: str
    source_dir: str  # the source's folder under segment-data/data (its id, or slug)
    run_id: str
    keys: tuple[str, ...]  # the partition keys of the source's tables
    # each segment type's segment_type= folder (the segment type itself, but in a lake adopted
    # from Segment Data Lakes: see eventlake.schema.table_names)
    names: TableNames = field(default_factory=TableNames)

    @property
    def root(self) -> Location:
        return layout.stage_dir(self.lake, self.source_id, self.run_id)

    def scratch(self, name: str) -> Location:
        """A folder for a run's intermediate output (the parse workers' ``parsed`` rows and
        ``pieces``), never published: written without a sync, read by this run only."""
        return self.root / "scratch" / name

    def drop_scratch(self, storage: Storage) -> None:
        """Delete the run's scratch once its passes are done: before the stage is made durable
        (:meth:`open_write`), whose sync then has none of its pages to write. A failure is left
        to the commit, which deletes the whole stage at its end."""
        with contextlib.suppress(Exception):
            storage.delete_tree(self.root / "scratch")

    def folder(self, kind: str) -> Location:
        """Where the staged files of one kind (or of :data:`REWRITE`) are."""
        return self.root / kind

    def staged(self, file: StagedFile) -> Location:
        if file.kind == TABLE:
            return self.folder(file.kind) / file.segment_type / self._relative(file)
        return self.folder(file.kind) / file.name

    def final(self, file: StagedFile) -> Location:
        if file.kind == TABLE:
            folder = self.names.folder(file.segment_type)
            return layout.table_dir(self.lake, self.source_dir, folder) / self._relative(file)
        if file.kind == DEDUPE:
            return (
                state_layout.dedupe_index_dir(self.lake, self.source_id)
                / layout.run_folder(self.run_id)
                / file.name
            )
        if file.kind == REPLACE:
            return self.lake / file.name
        if file.kind in (VALUES, MESSAGES):
            return (
                layout.quarantine_dir(self.lake, self.source_id) / layout.run_folder(self.run_id) / file.name
            )
        raise ValueError(f"unknown kind of staged file: {file.kind!r}")

    def rewrite_folder(self, folder: Location) -> Location:
        """Where a compaction stages the new content of the lake folder ``folder`` (its new files
        and commit marker), which then takes the folder's place: ``<stage>/rewrite/<folder's path
        under the lake>``."""
        return self.folder(REWRITE) / layout.lake_relative(self.lake, folder)

    def _relative(self, file: StagedFile) -> str:
        return f"{layout.partition_subdir(self.keys, file.partition)}/{file.name}"

    def open_write(self, storage: Storage, file: StagedFile) -> contextlib.AbstractContextManager[BinaryIO]:
        """A handle to stage ``file`` through: whole when the block ends, durable with the rest of
        the stage once :func:`~eventlake.sync.protocol.runner.publish` makes the stage durable,
        before the manifest that names the file is written (one ``syncfs`` on a local disk where
        each file's ``fsync`` cost 1-2 ms)."""
        return storage.open_write(self.staged(file), durable=False)

    def write_parquet(self, storage: Storage, file: StagedFile, table: Any) -> None:
        """Stage ``file`` with the rows of the Arrow ``table`` (:meth:`open_write`)."""
        with self.parquet_writer(storage, file, table.schema) as writer:
            writer.write_table(table)

    @contextlib.contextmanager
    def parquet_writer(self, storage: Storage, file: StagedFile, schema: Any) -> Iterator[Any]:
        """Stage ``file`` as :meth:`write_parquet` does, its rows written a table at a time (each a
        row group) to the ``pyarrow.parquet.ParquetWriter`` given; whole at the block's end."""
        import pyarrow.parquet as pq

        with (
            self.open_write(storage, file) as handle,
            pq.ParquetWriter(handle, schema, compression="snappy") as writer,
        ):
            yield writer

    def moves(self, files: list[StagedFile]) -> list[tuple[str, str]]:
        """``(staged, final)`` pairs, the manifest's moves."""
        return [(str(self.staged(f)), str(self.final(f))) for f in files]
