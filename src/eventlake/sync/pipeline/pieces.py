"""A run's valid messages, kept by the parse pass for the write pass without passing through Spark.

The parse workers hand Spark only what the dedupe and the plan need (ids, times, shapes); each
message's flattened values go into the run's scratch as Arrow files per (parse task, segment
type): *pieces*. Once the plan has typed every table, the write pass reads each segment type's
pieces (one task reads all of a type's), drops the rows the dedupe named (by ``position``) and
writes the table's files. So the payloads never enter the JVM and are never shuffled.

A piece's rows: ``position`` (the row's number in the run, see :func:`position_base`),
``message_id``, ``received_at``, ``payload`` (the flattened values as JSON). A *typed* piece
(:meth:`Pieces.add_typed`: the rows the columnar parse judged, see :mod:`.columnar`) holds the
values as Arrow columns instead, in the struct ``values`` (column name -> the values as JSON typed
them: int64, double, bool, string), and where each row's line is in its archive file (``line_start``,
``line_end`` in the decompressed file named by the schema's ``archive`` metadata: a blocked type's
quarantine rows are that line's message).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from eventlake.storage import Location, Storage, to_location
from eventlake.timestamps import as_utc

PIECE_SCHEMA = pa.schema(
    [
        ("position", pa.int64()),
        ("message_id", pa.string()),
        ("received_at", pa.timestamp("us", tz="UTC")),
        ("payload", pa.string()),
    ]
)
TYPED_FIELDS = [
    ("position", pa.int64()),
    ("message_id", pa.string()),
    ("received_at", pa.timestamp("us", tz="UTC")),
    ("line_start", pa.int64()),
    ("line_end", pa.int64()),
]
PIECE_SUFFIX = ".arrow"
_FLUSH_ROWS = 2000  # rows buffered per segment type before they are written
_OPEN_FILES = 32  # piece files a task keeps open at most (a source may have thousands of events)


def position_base(task: int) -> int:
    """The first row number of parse task ``task`` (the number of its first archive file): rows
    are numbered ``task << 33`` upwards, so every row of a run has its own number."""
    return task << 33


def piece_path(folder: Location, segment_type: str, task: int, part: int) -> Location:
    """``<folder>/<segment type>/<task>-<part>.arrow``."""
    return folder / segment_type / f"{task:05d}-{part:03d}{PIECE_SUFFIX}"


class Pieces:
    """One parse task's pieces: rows are buffered per segment type and streamed into that type's
    Arrow file. Past :data:`_OPEN_FILES` open files, the least recently written one is finished
    and the type's next rows start a new part (a source may have thousands of event names). Use as
    a context manager: the open files appear whole when the task ends without an error, and not at
    all otherwise; parts finished before an error stay, and the task's retry (same files, same
    rows) writes them again."""

    def __init__(self, storage: Storage, folder: Location, task: int) -> None:
        self.storage, self.folder, self.task = storage, folder, task
        self.buffers: dict[str, list[tuple[Any, ...]]] = {}
        self.open: dict[str, tuple[Any, contextlib.ExitStack]] = {}  # writer, file; least recent first
        self.parts: dict[str, int] = {}  # segment type -> parts started
        self.typed = 0  # typed pieces written

    def __enter__(self) -> Pieces:
        return self

    def add(
        self, segment_type: str, position: int, message_id: str, received: datetime, payload: str
    ) -> None:
        buffer = self.buffers.get(segment_type)
        if buffer is None:
            buffer = self.buffers[segment_type] = []
        buffer.append((position, message_id, received, payload))
        if len(buffer) >= _FLUSH_ROWS:
            self._flush(segment_type, buffer)

    def add_typed(
        self, segment_type: str, archive: str, positions: pa.Array, message_ids: pa.Array, received: pa.Array,
        line_starts: pa.Array, line_ends: pa.Array, values: dict[str, pa.Array],
    ) -> None:  # fmt: skip
        """Rows of ``segment_type`` judged on columns, as one typed piece (written at once: whole)."""
        struct = (
            pa.StructArray.from_arrays(list(values.values()), list(values))
            if values
            else pa.array([{}] * len(positions), pa.struct([]))
        )
        table = pa.Table.from_arrays(
            [positions, message_ids, received, line_starts, line_ends, struct],
            schema=pa.schema([*TYPED_FIELDS, ("values", struct.type)], metadata={"archive": archive}),
        )
        location = self.folder / segment_type / f"{self.task:05d}-typed-{self.typed:05d}{PIECE_SUFFIX}"
        self.typed += 1
        with (
            self.storage.open_write(location, durable=False) as handle,  # scratch: never published
            pa.ipc.new_file(handle, table.schema) as writer,
        ):
            writer.write_table(table)

    def _flush(self, segment_type: str, rows: list[tuple[Any, ...]]) -> None:
        found = self.open.pop(segment_type, None)
        if found is None:
            if len(self.open) >= _OPEN_FILES:
                writer, file = self.open.pop(next(iter(self.open)))
                writer.close()
                file.close()  # the part is finished: whole
            part = self.parts[segment_type] = self.parts.get(segment_type, -1) + 1
            file = contextlib.ExitStack()
            handle = file.enter_context(
                self.storage.open_write(piece_path(self.folder, segment_type, self.task, part), durable=False)
            )
            found = (pa.ipc.new_file(handle, PIECE_SCHEMA), file)
        self.open[segment_type] = found  # now the most recent
        columns = list(zip(*rows, strict=True))
        found[0].write_batch(
            pa.RecordBatch.from_arrays(
                [pa.array(c, f.type) for c, f in zip(columns, PIECE_SCHEMA, strict=True)], schema=PIECE_SCHEMA
            )
        )
        rows.clear()

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        try:
            if error is None:
                for segment_type, rows in self.buffers.items():
                    if rows:
                        self._flush(segment_type, rows)
                for writer, _ in self.open.values():
                    writer.close()
        except BaseException as failure:
            kind, error, trace = type(failure), failure, failure.__traceback__
            raise
        finally:
            for _, file in self.open.values():  # kept whole on success, discarded on an error
                file.__exit__(kind, error, trace)


def pieces_by_type(storage: Storage, folder: Location) -> dict[str, tuple[int, list[str]]]:
    """The pieces in ``folder`` by segment type: their total size and their locations."""
    found: dict[str, tuple[int, list[str]]] = {}
    for info in storage.list(folder, f"*/*{PIECE_SUFFIX}"):
        size, paths = found.get(info.path.parent.name, (0, []))
        found[info.path.parent.name] = (size + info.size, [*paths, str(info.path)])
    return found


def read_pieces(
    storage: Storage, locations: Sequence[str], drop: pa.Array, window: tuple[datetime, datetime] | None
) -> pa.Table:
    """The rows of these pieces (the JSON ones: see :func:`read_all_pieces`) but those whose
    position is in ``drop`` and, for a replay, those received outside ``window`` (``[start, end)``)."""
    return read_all_pieces(storage, locations, drop, window)[0]


def read_all_pieces(
    storage: Storage, locations: Sequence[str], drop: pa.Array, window: tuple[datetime, datetime] | None
) -> tuple[pa.Table, list[pa.Table]]:
    """The rows of these pieces, as :func:`read_pieces` keeps them: those of the JSON pieces in one
    table, and each typed piece's (with its ``archive`` metadata)."""
    tables: list[pa.Table] = []
    typed: list[pa.Table] = []
    for table in read_piece_files(storage, locations):
        keep = kept(table, drop, window)
        table = table if keep is None else table.filter(keep)
        (typed if "values" in table.schema.names else tables).append(table)
    return (pa.concat_tables(tables) if tables else PIECE_SCHEMA.empty_table()), typed


def read_piece_files(storage: Storage, locations: Sequence[str]) -> Iterator[pa.Table]:
    """Each piece as it was written, its rows in one chunk (the dedupe's rows too: see :func:`kept`),
    one at a time."""
    for location in locations:
        yield pa.ipc.open_file(pa.py_buffer(storage.read(to_location(location)))).read_all().combine_chunks()


def kept(table: pa.Table, drop: pa.Array, window: tuple[datetime, datetime] | None) -> Any:
    """Which rows of a piece the write pass keeps, as a boolean mask (None: all of them): not
    those whose position is in ``drop`` nor, for a replay, those received outside ``window``."""
    conditions = []
    if len(drop):
        conditions.append(pc.invert(pc.is_in(table["position"], value_set=drop)))
    if window is not None:
        received = table["received_at"]
        start, end = (pa.scalar(as_utc(t), received.type) for t in window)
        conditions += [pc.greater_equal(received, start), pc.less(received, end)]
    keep = None
    for condition in conditions:
        keep = condition if keep is None else pc.and_(keep, condition)
    return keep
