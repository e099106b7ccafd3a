"""The write pass: Spark tasks, each given whole segment types, read each type's :mod:`pieces
<.pieces>` (the run's valid messages, kept by the parse pass), cast the rows to their table's
columns and write one Parquet file per partition with pyarrow.

Each piece of a segment type is cast once, without the rows the dedupe drops; the rows are then
ordered by the hour they were received in (then by position), and each partition (an hour, or a
day of hours with a daily ``date_partition``) is written a chunk of rows at a time, taken from the
cast pieces (slices where the rows follow each other): a task never holds a sorted copy of a type.
Besides the table files, each task writes the values that did not fit their column (quarantine)
and its slice of the dedupe index.
Everything goes to the run's stage; each task returns a :class:`~eventlake.sync.protocol.stage.StagedFile`
per file, which the driver collects.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Collection, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eventlake import layout
from eventlake.archive import archive_content
from eventlake.schema import BIGINT, BOOLEAN, DECIMAL, DOUBLE, STRING, TIMESTAMP, cast_value
from eventlake.schema.arrow import arrow_schema
from eventlake.storage import Location, Storage, to_location
from eventlake.sync.index.index_keys import records_of, write_keys
from eventlake.sync.pipeline.columnar import DATE_TIME as _DATE_TIME
from eventlake.sync.pipeline.pieces import kept, pieces_by_type, read_all_pieces, read_piece_files
from eventlake.sync.pipeline.quarantine import TABLE_LIMIT_REASON, message_row, rows_table, value_row
from eventlake.sync.pipeline.transform import dumps, loads, parse_line
from eventlake.sync.pipeline.worker_memory import memory_returned
from eventlake.sync.protocol.stage import DEDUPE, MESSAGES, TABLE, VALUES, RunStage, StagedFile

_HOUR_US = 3_600_000_000
BATCH_ROWS = 10_000  # rows whose payloads a write task holds as Python objects at a time
CHUNK_ROWS = 65_536  # rows a write task takes from its cast pieces and writes at a time (a row group)


# the Python type whose values a column of each type takes unchanged (bool is not an int here: type())
_SAME: dict[str, type] = {STRING: str, BIGINT: int, BOOLEAN: bool, DOUBLE: float}
_EXACT_FLOAT = 1e9  # floats below this, with at most six decimals, go to decimal through Arrow
_STAGED = pa.schema([("staged", pa.binary())])  # a write task's staged files, pickled
Unit = tuple[int, str, Sequence[str]]  # a segment type of a write task: its number, name and pieces


def cast_column(
    values: Sequence[Any], kind: str, arrow_type: pa.DataType
) -> tuple[pa.Array, list[tuple[int, str, str]]]:
    """One column's values (None where a row has none) as an Arrow array of the column's type, and
    ``(row, raw value, reason)`` of each value that could not be cast (it becomes null).

    A column whose values all have the column's own type (the common case) goes to Arrow whole, as
    do a string column of integers, a decimal column of integers or of floats with at most six
    decimals and a timestamp column of ISO date-time texts (Arrow casts them in C). Anything else
    goes value by value through :func:`~eventlake.schema.cast_value`, which has the last word on
    every rule; a seeded test holds both ways to the same results."""
    kinds = set(map(type, values))
    kinds.discard(type(None))
    if not kinds or kinds == {_SAME.get(kind)}:
        try:
            return pa.array(values, arrow_type), []
        except OverflowError:  # an integer beyond 64 bits: value by value names it
            pass
    elif kind == STRING and kinds == {int}:  # Segment's "version": 2
        try:
            return pa.array(values, pa.int64()).cast(arrow_type), []
        except OverflowError:  # an integer beyond 64 bits: value by value
            pass
    elif kind == DECIMAL and kinds <= {int, float}:  # 10 and 19.99 in one column are common
        decimals = _decimals(values, float in kinds, arrow_type)
        if decimals is not None:
            return decimals, []
    elif kind == TIMESTAMP and kinds == {str}:
        text = pa.array(values, pa.string())
        if pc.all(pc.match_substring_regex(text, _DATE_TIME)).as_py():
            try:
                return text.cast(arrow_type), []
            except pa.ArrowInvalid:  # an impossible date (February 30): value by value names it
                pass
    cast: list[Any] = []
    rejected: list[tuple[int, str, str]] = []
    for row, value in enumerate(values):
        result, reason = cast_value(value, kind)
        if reason is not None:
            rejected.append((row, value if isinstance(value, str) else dumps(value), reason))
        cast.append(result)
    return pa.array(cast, arrow_type), rejected


def _decimals(values: Sequence[Any], floats: bool, arrow_type: pa.DataType) -> pa.Array | None:
    """Integers, or ``floats`` (with or without integers), as decimals when Arrow's cast gives what
    :func:`cast_value` would: every 64-bit integer; with floats, when each value is below a billion
    (integers there are exact doubles) and is the double nearest to a number of millionths
    (``round(x * 1e6) / 1e6 == x``), so that its shortest text (what ``cast_value`` reads) has at
    most six decimals and scaling it by a million is off by less than a quarter, which Arrow's
    rounding removes. None when a value falls outside."""
    try:
        numbers = pa.array(values, pa.float64() if floats else pa.int64())
    except (OverflowError, pa.ArrowInvalid):  # an integer beyond 64 bits, or not exact as a double
        return None
    if floats:
        exact = pc.and_(
            pc.less(pc.abs(numbers), _EXACT_FLOAT),
            pc.equal(pc.divide(pc.round(pc.multiply(numbers, 1e6)), 1e6), numbers),
        )
        if not pc.all(exact).as_py():  # NaN and infinities are not below a billion
            return None
    return numbers.cast(arrow_type)


def cast_rows(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]]
) -> tuple[pa.Table, list[tuple[int, str, str, str, str]]]:
    """Rows of flattened values as a table of ``columns`` (name, type), and ``(row, column, type,
    raw value, reason)`` of each value that could not be cast, row by row in column order."""
    schema = arrow_schema(columns)
    arrays = []
    rejected: list[tuple[int, str, str, str, str]] = []
    for (name, kind), field in zip(columns, schema, strict=True):
        array, bad = cast_column([row.get(name) for row in rows], kind, field.type)
        arrays.append(array)
        rejected += [(row, name, kind, raw, reason) for row, raw, reason in bad]
    rejected.sort(key=lambda entry: entry[0])  # stable: column order within a row
    return pa.Table.from_arrays(arrays, schema=schema), rejected


def cast_json_pieces(
    table: pa.Table, columns: Sequence[tuple[str, str]]
) -> tuple[pa.Table, list[tuple[int, str, str, str, str]]]:
    """The rows of JSON pieces (their ``payload``) cast to ``columns``, :data:`BATCH_ROWS` rows
    as Python objects at a time; the values that did not fit, as :func:`cast_rows` gives them."""
    tables: list[pa.Table] = []
    rejected: list[tuple[int, str, str, str, str]] = []
    start = 0
    for batch in table.to_batches(BATCH_ROWS):
        cast, bad = cast_rows([loads(payload) for payload in batch["payload"].to_pylist()], columns)
        tables.append(cast)
        rejected += [(start + row, column, kind, raw, reason) for row, column, kind, raw, reason in bad]
        start += batch.num_rows
    return (pa.concat_tables(tables) if tables else arrow_schema(columns).empty_table()), rejected


def cast_typed_piece(
    piece: pa.Table, columns: Sequence[tuple[str, str]]
) -> tuple[pa.Table, list[tuple[int, str, str, str, str]]]:
    """A typed piece's values (see :mod:`.pieces`) cast to ``columns``, whole columns at a time
    (:func:`cast_typed`); the values that did not fit, as :func:`cast_rows` gives them."""
    schema = arrow_schema(columns)
    values = piece.column("values").combine_chunks()
    present = {f.name: i for i, f in enumerate(values.type)}
    arrays = []
    rejected: list[tuple[int, str, str, str, str]] = []
    for (name, kind), field in zip(columns, schema, strict=True):
        if name not in present:
            arrays.append(pa.nulls(piece.num_rows, field.type))
            continue
        array, bad = cast_typed(values.field(present[name]), kind, field.type)
        arrays.append(array)
        rejected += [(row, name, kind, raw, reason) for row, raw, reason in bad]
    rejected.sort(key=lambda entry: entry[0])  # stable: column order within a row
    return pa.Table.from_arrays(arrays, schema=schema), rejected


def cast_typed(
    values: pa.Array, kind: str, arrow_type: pa.DataType
) -> tuple[pa.Array, list[tuple[int, str, str]]]:
    """A typed piece's column (JSON's types: int64, double, bool, string) cast to a table column:
    in C where Arrow's cast gives what :func:`cast_column` gives, else value by value through it."""
    source = values.type
    if pa.types.is_null(source):
        return pa.nulls(len(values), arrow_type), []
    if source == arrow_type:
        return values, []
    if kind == DECIMAL and pa.types.is_int64(source):
        return values.cast(arrow_type), []
    if kind == DECIMAL and pa.types.is_floating(source):
        decimals = _decimals(values.to_numpy(zero_copy_only=False), True, arrow_type)
        if decimals is not None:
            return decimals, []
    if kind == TIMESTAMP and pa.types.is_string(source):
        if pc.all(
            pc.or_(pc.is_null(values), pc.fill_null(pc.match_substring_regex(values, _DATE_TIME), False))
        ).as_py():
            try:
                return values.cast(arrow_type), []
            except pa.ArrowInvalid:  # an impossible date: value by value names it
                pass
    if kind == STRING and (pa.types.is_int64(source) or pa.types.is_boolean(source)):
        return values.cast(pa.string()), []
    return cast_column(values.to_pylist(), kind, arrow_type)


class CastPiece(NamedTuple):
    """A piece's kept rows (see :func:`.pieces.kept`): their ``position``, ``message_id`` and
    ``received_at``, their values cast to the table's columns, and the values that did not fit."""

    rows: pa.Table
    values: pa.Table
    rejected: dict[int, list[tuple[str, str, str, str]]]  # row -> (column, type, raw value, reason)


def cast_piece(
    piece: pa.Table,
    columns: Sequence[tuple[str, str]],
    drop: pa.Array,
    window: tuple[datetime, datetime] | None,
) -> CastPiece:
    """A piece (JSON or typed, see :mod:`.pieces`) without the rows the write pass drops, cast
    whole: the columns of a typed piece that have their table's type already stay as they are."""
    keep = kept(piece, drop, window)
    piece = piece if keep is None else piece.filter(keep)
    cast, bad = (cast_typed_piece if "values" in piece.schema.names else cast_json_pieces)(piece, columns)
    rejected: dict[int, list[tuple[str, str, str, str]]] = {}
    for row, column, kind, raw, reason in bad:
        rejected.setdefault(row, []).append((column, kind, raw, reason))
    return CastPiece(piece.select(["position", "message_id", "received_at"]), cast.combine_chunks(), rejected)


def received_order(pieces: Sequence[CastPiece]) -> pa.Table:
    """The rows of a segment type's ``pieces`` ordered by the hour they were received in, then by
    position (the order of the archive): for each, its ``piece`` (number in ``pieces``), ``row``
    (in the piece), ``hour`` (hours since 1970, UTC), ``message_id`` and ``received_at``. The
    values stay in the pieces until a chunk of rows is written (:func:`take_rows`)."""
    parts = [
        piece.rows.append_column(
            "piece", pa.array(np.full(piece.rows.num_rows, number, np.int64))
        ).append_column("row", pa.array(np.arange(piece.rows.num_rows)))
        for number, piece in enumerate(pieces)
    ]
    if not parts:
        return _ORDER.empty_table()
    rows = pa.concat_tables(parts).combine_chunks()
    rows = rows.append_column("hour", _hours(rows))
    order = pc.sort_indices(rows, sort_keys=[("hour", "ascending"), ("position", "ascending")])
    return rows.take(order).select(_ORDER.names)


_ORDER = pa.schema(
    [
        ("piece", pa.int64()), ("row", pa.int64()), ("hour", pa.int64()), ("message_id", pa.string()),
        ("received_at", pa.timestamp("us", tz="UTC")),
    ]
)  # fmt: skip


def take_rows(
    pieces: Sequence[CastPiece], chunk: pa.Table
) -> tuple[pa.Table, list[tuple[int, str, str, str, str]]]:
    """The values of the rows of ``chunk`` (a slice of :func:`received_order`) in the chunk's
    order, from their pieces (a slice, no copy, where a piece's rows follow each other, as an
    hour's rows of an archive file do); the values that did not fit, as :func:`cast_rows` gives
    them (rows numbered in the chunk)."""
    numbers, rows = chunk["piece"].to_numpy(), chunk["row"].to_numpy()
    tables: list[pa.Table] = []
    at: list[np.ndarray] = []  # the chunk's row of each row of ``tables``, piece by piece
    rejected: list[tuple[int, str, str, str, str]] = []
    for number in np.unique(numbers):
        mine = np.flatnonzero(numbers == number)
        theirs = rows[mine]
        piece = pieces[number]
        if bool(np.all(np.diff(theirs) == 1)):  # rows that follow each other: a slice, no copy
            tables.append(piece.values.slice(int(theirs[0]), len(theirs)))
        else:
            tables.append(piece.values.take(theirs))
        at.append(mine)
        if piece.rejected:
            for at_row, row in zip(mine.tolist(), theirs.tolist(), strict=True):
                rejected += [(at_row, *bad) for bad in piece.rejected.get(row, ())]
    rejected.sort(key=lambda entry: entry[0])  # stable: a row's values stay in column order
    if len(tables) == 1:
        return tables[0], rejected
    return pa.concat_tables(tables).take(np.argsort(np.concatenate(at), kind="stable")), rejected


def _hours(rows: pa.Table) -> pa.Array:
    """The hour each row was received in (hours since 1970, UTC)."""
    micros = rows["received_at"].combine_chunks().cast(pa.int64())
    if not len(micros) or pc.min(micros).as_py() >= 0:
        return pc.divide(micros, _HOUR_US)  # truncates: right from 1970 on, floored by hand before
    return pa.array([m // _HOUR_US for m in micros.to_pylist()], pa.int64())


def partition_spans(hours: pa.Array, date_partition: str) -> dict[tuple[str, ...], tuple[int, int]]:
    """The partitions of rows ordered by ``hours`` (an hour, or a day of hours with a daily
    ``date_partition``), each as its first row and its count of rows."""
    counts = pc.value_counts(hours)
    spans: dict[tuple[str, ...], tuple[int, int]] = {}
    start = 0
    for hour, count in sorted(
        zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True)
    ):
        partition = _partition_values(hour, date_partition)
        first, rows = spans.get(partition, (start, 0))  # a day: its hours
        spans[partition] = (first, rows + count)
        start += count
    return spans


def write_tables(
    spark: Any, pieces: Location, schemas: Mapping[str, Sequence[tuple[str, str]]], blocked: Collection[str],
    drop: pa.Array, window: tuple[datetime, datetime] | None, stage: RunStage, date_partition: str,
    storage: Storage,
) -> list[StagedFile]:  # fmt: skip
    """Stage every planned table's files, and the messages of the ``blocked`` segment types, from
    the run's ``pieces``, without the rows at the positions in ``drop`` (and, for a replay, those
    received outside ``window``). The segment types are dealt to twice as many Spark tasks as the
    cluster has cores, the largest first, each to the task with the least to read: a big sync's
    cores stay equally busy and a micro-batch of many tables runs a few tasks, not one a table.
    Returns the files written, as the workers report them."""
    tasks = write_units(storage, pieces, schemas, blocked, 2 * spark.sparkContext.defaultParallelism)
    if not tasks:
        return []
    write = functools.partial(
        write_tasks, tasks=tasks, schemas=schemas, blocked=frozenset(blocked), window=window, stage=stage,
        drop=drop, storage=storage, date_partition=date_partition,
    )  # fmt: skip
    # a range of task numbers through mapInArrow, as the parse pass: the tasks run in the parse
    # pass's Python workers, not in a second pool beside them (an RDD job's workers are another
    # pool: two more processes holding 0.4 GiB through the write pass); a range, not a frame of the
    # tasks, costs no Python pass to build (a micro-batch's write job: 0.32 -> 0.22 s)
    frame = spark.range(0, len(tasks), 1, len(tasks))
    staged = frame.mapInArrow(write, "staged binary").collect()
    return [file for row in staged for file in pickle.loads(row[0])]


def write_tasks(
    batches: Iterator[pa.RecordBatch], tasks: Sequence[Sequence[Unit]], **options: Any
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` over the range of :func:`write_tables`: each task number's units through
    :func:`write_segment_types`, its staged files back (pickled), a row a task."""
    for batch in batches:
        for number in batch.column(0).to_pylist():
            files = write_segment_types(tasks[number], **options)
            yield pa.RecordBatch.from_pydict({"staged": [pickle.dumps(files)]}, schema=_STAGED)


def write_units(
    storage: Storage, pieces: Location, schemas: Mapping[str, Sequence[tuple[str, str]]],
    blocked: Collection[str], slots: int,
) -> list[list[Unit]]:  # fmt: skip
    """The write pass's tasks (at most ``slots``): the segment types with pieces that are planned
    or ``blocked``, the largest first, each dealt to the task with the least to read, as
    :func:`write_segment_types` takes them; each type numbered (its number names its files)."""
    found = pieces_by_type(storage, pieces)
    types = sorted(
        ((size, segment_type, paths) for segment_type, (size, paths) in found.items()
         if segment_type in schemas or segment_type in blocked),
        reverse=True,
    )  # fmt: skip
    if not types:
        return []
    tasks: list[list[Unit]] = [[] for _ in range(min(len(types), slots))]
    sizes = [0] * len(tasks)
    for index, (size, segment_type, paths) in enumerate(types):
        least = sizes.index(min(sizes))
        tasks[least].append((index, segment_type, paths))  # the index names the type's files
        sizes[least] += size
    return tasks


def write_segment_types(
    units: Sequence[Unit], *, stage: RunStage, storage: Storage, **options: Any
) -> list[StagedFile]:
    """One write task: :func:`write_segment_type` for each of its segment types, then the task's
    slice of the dedupe index (the ids and received times of the rows its tables got), one file;
    then the worker's memory returned to the system (:mod:`.worker_memory`)."""
    with memory_returned():
        return _write_task(units, stage=stage, storage=storage, **options)


def _write_task(
    units: Sequence[Unit], *, stage: RunStage, storage: Storage, **options: Any
) -> list[StagedFile]:
    files: list[StagedFile] = []
    index: list[pa.Table] = []
    for unit in units:
        written, ids = write_segment_type(unit, stage=stage, storage=storage, **options)
        files += written
        if ids is not None:
            index.append(ids)
    if index:
        table = pa.concat_tables(index).combine_chunks()
        keys = StagedFile(DEDUPE, layout.index_file_name(stage.run_id, units[0][0]), table.num_rows)
        with stage.open_write(storage, keys) as handle:  # a key file (see index_keys)
            write_keys(handle, records_of(table.column(0).combine_chunks(), table.column(1).combine_chunks()))
        files.append(keys)
    return files


def _partition_values(hour: int, date_partition: str) -> tuple[str, ...]:
    """The partition values of the messages received in ``hour`` (hours since 1970, UTC)."""
    return layout.received_partition(date_partition, datetime.fromtimestamp(hour * 3600, timezone.utc))


def write_segment_type(
    unit: Unit, *, schemas: Mapping[str, Sequence[tuple[str, str]]],
    blocked: Collection[str], drop: pa.Array, window: tuple[datetime, datetime] | None, stage: RunStage,
    storage: Storage, date_partition: str,
) -> tuple[list[StagedFile], pa.Table | None]:  # fmt: skip
    """The pieces of one segment type into its table's staged files, with the ids and received
    times of the table's rows (for the dedupe index); or, for a ``blocked`` type, into the
    quarantine as whole messages (no ids).

    A table file per partition (an hour, or a day of hours with a daily ``date_partition``), its
    rows in :func:`received_order`, taken from the cast pieces and written :data:`CHUNK_ROWS` at a
    time (a row group each): the task holds the cast pieces and one chunk, not a sorted copy of the
    type besides (a million messages over 3 days: the largest write task's peak 529 -> 316 MiB).
    The values that did not fit go to the quarantine, in the same order."""
    index, segment_type, paths = unit
    if segment_type in blocked:
        table, typed = read_all_pieces(storage, paths, drop, window)
        typed = [piece for piece in typed if piece.num_rows]
        if not table.num_rows and not typed:
            return [], None
        return [_write_blocked(index, segment_type, table, typed, stage, storage)], None
    columns = schemas[segment_type]
    pieces = [cast_piece(piece, columns, drop, window) for piece in read_piece_files(storage, paths)]
    order = received_order(pieces)
    if not order.num_rows:
        return [], None
    schema = arrow_schema(columns)
    name = layout.part_file_name(stage.run_id, index)
    files: list[StagedFile] = []
    quarantined: list[tuple[Any, ...]] = []
    for partition, (first, count) in partition_spans(order["hour"], date_partition).items():
        written = StagedFile(TABLE, name, count, segment_type, partition)
        with stage.parquet_writer(storage, written, schema) as writer:
            for start in range(first, first + count, CHUNK_ROWS):
                chunk = order.slice(start, min(CHUNK_ROWS, first + count - start))
                values, rejected = take_rows(pieces, chunk)
                writer.write_table(values)
                if rejected:
                    ids, received = chunk["message_id"].to_pylist(), chunk["received_at"].to_pylist()
                    quarantined += [
                        value_row(reason, ids[row], segment_type, column, kind, raw, received[row])
                        for row, column, kind, raw, reason in rejected
                    ]
        files.append(written)
    if quarantined:
        bad = StagedFile(VALUES, layout.part_file_name(stage.run_id, index, "values-"), len(quarantined))
        stage.write_parquet(storage, bad, rows_table(quarantined))
        files.append(bad)
    return files, order.select(["message_id", "received_at"])


def _write_blocked(
    index: int, segment_type: str, table: pa.Table, typed: list[pa.Table], stage: RunStage, storage: Storage
) -> StagedFile:
    """A blocked type's messages into the quarantine, whole, in the order of their rows: the JSON
    pieces' payloads, and a typed piece's from its lines in the archive (parsed again: the
    payload is the per-message rules' own)."""
    entries = list(
        zip(
            *(table[c].to_pylist() for c in ("position", "message_id", "payload", "received_at")), strict=True
        )
    )
    for piece in typed:
        content = archive_content(storage.read(to_location(piece.schema.metadata[b"archive"].decode())))
        for position, message_id, start, end, received in zip(
            *(
                piece[c].to_pylist()
                for c in ("position", "message_id", "line_start", "line_end", "received_at")
            ),
            strict=True,
        ):
            payload = parse_line(content[start:end].decode("utf-8", "replace"))[4]
            entries.append((position, message_id, payload, received))
    entries.sort(key=lambda entry: entry[0])
    rows = [
        message_row(TABLE_LIMIT_REASON, message_id, segment_type, payload, received)
        for _, message_id, payload, received in entries
    ]
    written = StagedFile(
        MESSAGES, layout.part_file_name(stage.run_id, index, "blocked-"), len(rows), segment_type
    )
    stage.write_parquet(storage, written, rows_table(rows))
    return written
