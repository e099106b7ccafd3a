"""The write pass: Spark tasks, each given whole segment types, read each type's :mod:`pieces
<.pieces>` (the run's valid messages, kept by the parse pass), cast the rows to their table's
columns and write one Parquet file per partition with pyarrow.

A segment type's rows are sorted by the hour they were received in, and each partition (an hour,
or a day of hours with a daily ``date_partition``) is a slice of them, cast a batch at a time.
Besides the table files, each task writes the values that did not fit their column (quarantine)
and its slice of the dedupe index.
Everything goes to the run's stage; each task returns a :class:`~eventlake.sync.protocol.stage.StagedFile`
per file, which the driver collects.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from eventlake import layout
from eventlake.schema import BIGINT, BOOLEAN, DECIMAL, DOUBLE, STRING, TIMESTAMP, cast_value
from eventlake.schema.arrow import arrow_schema
from eventlake.storage import Location, Storage
from eventlake.sync.index.index_keys import records_of, write_keys
from eventlake.sync.pipeline.pieces import pieces_by_type, read_pieces
from eventlake.sync.pipeline.quarantine import TABLE_LIMIT_REASON, message_row, rows_table, value_row
from eventlake.sync.pipeline.transform import dumps, loads
from eventlake.sync.protocol.stage import DEDUPE, MESSAGES, TABLE, VALUES, RunStage, StagedFile

_HOUR_US = 3_600_000_000
BATCH_ROWS = 10_000  # rows whose payloads a write task holds as Python objects at a time


# the Python type whose values a column of each type takes unchanged (bool is not an int here: type())
_SAME: dict[str, type] = {STRING: str, BIGINT: int, BOOLEAN: bool, DOUBLE: float}
# the date-times Arrow's cast reads exactly as parse_timestamp does (years 1000 to 8999, at most
# microseconds, an offset); any other text, or an impossible date in it, goes value by value
_DATE_TIME = (
    r"^[1-8][0-9]{3}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?"
    r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
)
_EXACT_FLOAT = 1e9  # floats below this, with at most six decimals, go to decimal through Arrow


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


def write_partition(
    index: int,
    segment_type: str,
    partitions: Iterable[tuple[tuple[str, ...], pa.Table]],
    *,
    columns: Sequence[tuple[str, str]],
    stage: RunStage,
    storage: Storage,
) -> Iterator[StagedFile]:
    """Write one segment type's ``partitions`` (``index``: the type's number in the run, which
    names its files): a table file of ``columns`` per partition, and the values that did not fit
    their column. Each partition comes as its values and its rows (``message_id``,
    ``received_at``, ``payload``)."""
    name = layout.part_file_name(stage.run_id, index)
    rejected: list[tuple[Any, ...]] = []
    for values, rows in partitions:
        tables = []
        for batch in rows.to_batches(BATCH_ROWS):  # a batch's payloads as Python objects at a time
            table, bad = cast_rows([loads(payload) for payload in batch["payload"].to_pylist()], columns)
            tables.append(table)
            if bad:
                ids, received = batch["message_id"].to_pylist(), batch["received_at"].to_pylist()
                for number, column_name, kind, raw, reason in bad:
                    rejected.append(
                        value_row(reason, ids[number], segment_type, column_name, kind, raw, received[number])
                    )
        table = pa.concat_tables(tables)
        written = StagedFile(TABLE, name, table.num_rows, segment_type, values)
        stage.write_parquet(storage, written, table)
        yield written
    if rejected:
        written = StagedFile(VALUES, layout.part_file_name(stage.run_id, index, "values-"), len(rejected))
        stage.write_parquet(storage, written, rows_table(rejected))
        yield written


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
        write_segment_types, schemas=schemas, blocked=frozenset(blocked), window=window, stage=stage,
        drop=drop, storage=storage, date_partition=date_partition,
    )  # fmt: skip
    staged: list[StagedFile] = spark.sparkContext.parallelize(tasks, len(tasks)).flatMap(write).collect()
    return staged


def write_units(
    storage: Storage, pieces: Location, schemas: Mapping[str, Sequence[tuple[str, str]]],
    blocked: Collection[str], slots: int,
) -> list[list[tuple[int, str, Sequence[str]]]]:  # fmt: skip
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
    tasks: list[list[tuple[int, str, Sequence[str]]]] = [[] for _ in range(min(len(types), slots))]
    sizes = [0] * len(tasks)
    for index, (size, segment_type, paths) in enumerate(types):
        least = sizes.index(min(sizes))
        tasks[least].append((index, segment_type, paths))  # the index names the type's files
        sizes[least] += size
    return tasks


def write_segment_types(
    units: Sequence[tuple[int, str, Sequence[str]]], *, stage: RunStage, storage: Storage, **options: Any
) -> list[StagedFile]:
    """One write task: :func:`write_segment_type` for each of its segment types, then the task's
    slice of the dedupe index (the ids and received times of the rows its tables got), one file."""
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
        with storage.open_write(stage.staged(keys)) as handle:  # a key file (see index_keys)
            write_keys(handle, records_of(table.column(0).combine_chunks(), table.column(1).combine_chunks()))
        files.append(keys)
    return files


def _partition_values(hour: int, date_partition: str) -> tuple[str, ...]:
    """The partition values of the messages received in ``hour`` (hours since 1970, UTC)."""
    return layout.received_partition(date_partition, datetime.fromtimestamp(hour * 3600, timezone.utc))


def write_segment_type(
    unit: tuple[int, str, Sequence[str]], *, schemas: Mapping[str, Sequence[tuple[str, str]]],
    blocked: Collection[str], drop: pa.Array, window: tuple[datetime, datetime] | None, stage: RunStage,
    storage: Storage, date_partition: str,
) -> tuple[list[StagedFile], pa.Table | None]:  # fmt: skip
    """The pieces of one segment type into its table's staged files (see :func:`write_partition`),
    with the ids and received times of the table's rows (for the dedupe index); or, for a
    ``blocked`` type, into the quarantine as whole messages (no ids)."""
    index, segment_type, paths = unit
    table = read_pieces(storage, paths, drop, window)
    if not table.num_rows:
        return [], None
    if segment_type in blocked:
        table = table.sort_by("position")
        rows = [
            message_row(TABLE_LIMIT_REASON, message_id, segment_type, payload, received)
            for message_id, payload, received in zip(
                *(table[c].to_pylist() for c in ("message_id", "payload", "received_at")), strict=True
            )
        ]
        name = layout.part_file_name(stage.run_id, index, "blocked-")
        written = StagedFile(MESSAGES, name, len(rows), segment_type)
        stage.write_parquet(storage, written, rows_table(rows))
        return [written], None
    # partition keys from the hour each row was received in (a handful of hours: formatted once)
    micros = table["received_at"].cast(pa.int64())
    hours = (
        pc.divide(micros, _HOUR_US)  # truncates: right from 1970 on, floored by hand before
        if pc.min(micros).as_py() >= 0
        else pa.array([m // _HOUR_US for m in micros.to_pylist()], pa.int64())
    )
    table = table.append_column("_hour", hours).sort_by([("_hour", "ascending"), ("position", "ascending")])
    counts = pc.value_counts(table["_hour"])
    spans: dict[tuple[str, ...], list[int]] = {}  # partition values -> [first row, rows]
    start = 0
    for hour, count in sorted(
        zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True)
    ):
        span = spans.setdefault(_partition_values(hour, date_partition), [start, 0])  # a day: its hours
        span[1] += count
        start += count
    partitions = [(values, table.slice(first, rows)) for values, (first, rows) in spans.items()]
    files = list(
        write_partition(
            index, segment_type, partitions, columns=schemas[segment_type], stage=stage, storage=storage
        )
    )
    return files, table.select(["message_id", "received_at"])
