"""Columnar readers for the parse pass (issue 37, item 1): measure and choose.

On archive files made by ``bench/sync.py``'s generator, one file at a time, one core, one process:

- (a) the baseline: the parse pass as a Spark worker runs it on one file
  (``transform._parse_files``: gunzip, ``parse_line``, shapes, Arrow batches, the pieces written),
  and ``parse_line`` + ``Shapes.row`` alone over the decompressed lines;
- (b) ``pyarrow.json.read_json`` of the decompressed file (default and larger ``block_size``), then
  :func:`judge`: what a vectorised parse would do with Arrow compute (flatten the structs, name each
  column path once, value types per column, per-row type signatures as shape ids, segment types
  once per distinct (type, event), validation), and which rows it cannot judge (they fall back to
  the per-message rules);
- (c) DuckDB's ``read_ndjson`` inside the process on the same gzip file, into Arrow, then the same
  :func:`judge`;
- (b') the chosen design: the file's lines routed by (type, event) (:func:`route`), each group
  read by pyarrow and judged on its own, a failed read halved (:func:`judge_routed`).

Every judged row is compared with ``parse_line``'s (validity, id, received time, segment type,
column types): a "DIFFERS" line in the output is a defect of the judgement. Then the write pass
on the same rows: ``write.cast_rows`` on ``loads(payload)`` of the baseline's pieces against
:func:`cast_arrow` of the typed Arrow columns a vectorised parse would keep.

    PYTHONPATH=src .venv/bin/python bench/parse_readers.py                  # 100,000 messages, 2 files
    PYTHONPATH=src .venv/bin/python bench/parse_readers.py --repeat 3 --suppress 500
    PYTHONPATH=src .venv/bin/python bench/parse_readers.py --messages 10000 --files 1 --edges

A benchmark and a prototype, not product code: the rules stay in ``eventlake.spec`` and
``eventlake.schema``; :func:`judge` only decides where it can prove the per-message rules' answer.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import gzip
import math
import os
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sync as generator  # noqa: E402  (bench/sync.py: the archive generator)
from eventlake.message_types import MESSAGE_TYPES  # noqa: E402
from eventlake.schema import BIGINT, BOOLEAN, DECIMAL, STRING, TIMESTAMP, evolve, segment_type  # noqa: E402
from eventlake.schema.arrow import arrow_schema  # noqa: E402
from eventlake.schema.naming import MAX_COLUMN_NAME_LENGTH, column_name, snake_case  # noqa: E402
from eventlake.schema.types import json_text  # noqa: E402
from eventlake.spec.message import MAX_MESSAGE_ID  # noqa: E402
from eventlake.storage.local import LocalStorage  # noqa: E402
from eventlake.sync.pipeline import transform, write  # noqa: E402
from eventlake.sync.pipeline.pieces import Pieces, pieces_by_type, position_base, read_pieces  # noqa: E402
from eventlake.timestamps import parse_timestamp  # noqa: E402

CODES = {1: BIGINT, 2: DECIMAL, 3: BOOLEAN, 4: STRING, 5: TIMESTAMP}  # 0: null or absent
_DROPPED_KEYS = frozenset({"writeKey"})
# the date-times Arrow's cast reads as parse_timestamp does (write.py's _DATE_TIME: _CANONICAL's form,
# ASCII digits, years 1000-8999); any other candidate goes value by value
_DATE_TIME = write._DATE_TIME
# Python's str.isspace() characters (str.strip() removes them); approximated, wider is safe
_VISIBLE = r"[^\t\n\x{0b}\x{0c}\r\x{1c}-\x{1f}\x{85}\p{Z}]"
_TIMESTAMP_FIELDS = ("timestamp", "originalTimestamp", "sentAt")
_TOP_TIMESTAMPS = frozenset({*_TIMESTAMP_FIELDS, "receivedAt"})
_REQUIRED = {"track": ("event",), "group": ("groupId",), "alias": ("previousId", "userId")}
_SIMPLE_LIST_ITEMS = (pa.types.is_string, pa.types.is_int64, pa.types.is_boolean, pa.types.is_null)


# ---------------------------------------------------------------- readers


def read_arrow(content: bytes, block_size: int | None = None) -> tuple[pa.Table, bool]:
    """The decompressed file through pyarrow's JSON reader, one thread; a second read with an
    explicit schema when the first inferred a timestamp anywhere (pyarrow turns ``"2026-11-01"``,
    ``"... 10:00:00"`` and ``"...T10:00:00+02:00"`` into ``timestamp[s]``: the text is lost, and
    date-only text is a string to eventlake). Returns the table and whether it was read twice."""
    options = pj.ReadOptions(use_threads=False, **({"block_size": block_size} if block_size else {}))
    table = pj.read_json(pa.BufferReader(content), read_options=options)
    if not _has_timestamp(table.schema):
        return table, False
    schema = pa.schema([f.with_type(_no_timestamps(f.type)) for f in table.schema])
    table = pj.read_json(
        pa.BufferReader(content), read_options=options,
        parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"),
    )  # fmt: skip
    return table, True


def _has_timestamp(schema: Any) -> bool:
    return any(_no_timestamps(f.type) != f.type for f in schema)


def _no_timestamps(kind: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(kind):
        return pa.string()
    if pa.types.is_struct(kind):
        return pa.struct([f.with_type(_no_timestamps(f.type)) for f in kind])
    if pa.types.is_list(kind):
        return pa.list_(_no_timestamps(kind.value_type))
    return kind


def line_chunks(content: bytes, size: int = 1 << 20) -> list[bytes]:
    """The decompressed file in pieces of about ``size`` bytes, cut at line ends."""
    chunks, start = [], 0
    while start < len(content):
        end = content.find(b"\n", min(start + size, len(content)) - 1)
        end = len(content) if end < 0 else end + 1
        chunks.append(content[start:end])
        start = end
    return chunks


def read_duckdb(connection: Any, path: Path) -> pa.Table:
    """The gzip file through DuckDB's NDJSON reader (one thread, the whole file sampled for types,
    no map inference, no date/time detection: text stays text) as an Arrow table."""
    relation = connection.sql(
        f"SELECT * FROM read_ndjson('{path}', sample_size=-1, maximum_depth=-1, map_inference_threshold=-1,"
        " dateformat='%%', timestampformat='%%')"
    )
    result = relation.arrow()
    table = result.read_all() if hasattr(result, "read_all") else result
    # DuckDB hands its JSON columns (mixed types, {}) to Arrow as plain strings: marked as binary
    # here from its own types, or a judgement would take '"s"' or '{}' for text (nested JSON
    # fields inside structs are not marked: a gap of this prototype)
    for index, kind in enumerate(relation.types):
        if str(kind) == "JSON":
            table = table.set_column(
                index, table.field(index).name, table.column(index).cast(pa.large_binary())
            )
    return table


# ---------------------------------------------------------------- the vectorised judgement


@dataclass
class Judged:
    rows: int
    fallback: np.ndarray  # bool per row: the per-message rules decide it
    reasons: Counter = field(default_factory=Counter)  # reason -> rows (a row may have several)
    segment_types: list[str] = field(default_factory=list)
    segment_ids: np.ndarray | None = None
    shape_ids: np.ndarray | None = None
    shapes: list[dict[str, str]] = field(default_factory=list)
    columns: dict[str, pa.Array] = field(default_factory=dict)  # column name -> typed values (all rows)
    received: pa.Array | None = None
    dropped: np.ndarray | None = None  # bool per row: a valid message of a suppressed userId
    per_value: int = 0  # values judged one by one in Python (odd timestamp candidates, list texts)
    file_failed: str | None = None


def _leaves(
    path: tuple[str, ...], array: pa.Array, parent: pa.Array | None
) -> Iterator[tuple[tuple[str, ...], pa.Array, pa.Array | None]]:
    """Leaf columns of a (struct) column: path, values with the parents' nulls merged, and the
    validity of the direct parent (None at the top: the row is always there)."""
    if pa.types.is_struct(array.type):
        valid = array.is_valid()
        for struct_field, child in zip(array.type, array.flatten(), strict=True):
            yield from _leaves((*path, struct_field.name), child, valid)
        return
    yield path, array, parent


def _mark(judged: Judged, mask: Any, reason: str) -> None:
    mask = np.asarray(mask.to_numpy(zero_copy_only=False) if hasattr(mask, "to_numpy") else mask, bool)
    count = int(mask.sum())
    if count:
        judged.reasons[reason] += count
        judged.fallback |= mask


def _fill(mask: pa.Array) -> pa.Array:
    return pc.fill_null(mask, False)


def string_codes(values: pa.Array, judged: Judged) -> tuple[np.ndarray, pa.Array]:
    """Type codes of a string column (4 string, 5 timestamp, 0 null) and the instants of the
    timestamps (null elsewhere), as value_type and parse_timestamp decide."""
    length = pc.utf8_length(values)
    first = pc.utf8_slice_codeunits(values, 0, 1)
    candidate = _fill(
        pc.and_(
            pc.and_(pc.greater_equal(length, 16), pc.less_equal(length, 40)),
            pc.or_(
                pc.equal(pc.utf8_slice_codeunits(values, 4, 5), "-"),
                pc.or_(pc.less_equal(first, " "), pc.utf8_is_space(first)),  # wider than isspace()
            ),
        )
    )
    codes = np.where(values.is_valid().to_numpy(zero_copy_only=False), 4, 0).astype(np.uint8)
    where = np.flatnonzero(candidate.to_numpy(zero_copy_only=False))
    moments = np.full(len(values), -1, np.int64)  # an index into the candidates' instants, or none
    if not len(where):
        return codes, pa.nulls(len(values), pa.timestamp("us", tz="UTC"))
    texts = values.take(pa.array(where))
    narrow = _fill(pc.match_substring_regex(texts, _DATE_TIME))
    found = pa.nulls(len(texts), pa.timestamp("us", tz="UTC"))
    exact = np.zeros(len(texts), bool)
    try:
        found = pc.if_else(narrow, texts, pa.scalar(None, pa.string())).cast(pa.timestamp("us", tz="UTC"))
        exact = narrow.to_numpy(zero_copy_only=False)
    except pa.ArrowInvalid:  # an impossible date among them: all of them one by one
        pass
    codes[where[exact]] = 5
    slow = np.flatnonzero(~exact)
    if len(slow):
        judged.per_value += len(slow)
        instants = found.to_pylist()
        for row in slow:
            moment = parse_timestamp(texts[int(row)].as_py())
            if moment is not None:
                codes[where[row]] = 5
                instants[row] = moment
        found = pa.array(instants, pa.timestamp("us", tz="UTC"))
    moments[where] = np.arange(len(where))
    instants = found.take(pa.array(moments, mask=moments < 0))
    return codes, instants


def list_texts(values: pa.Array, judged: Judged) -> pa.Array:
    """A list column as the JSON text json_text gives: in C for lists of integers, booleans and
    strings that need no escaping (orjson escapes only quotes, backslashes and control characters),
    with no null item; value by value otherwise."""
    item = values.type.value_type
    if pa.types.is_int64(item) or pa.types.is_boolean(item) or pa.types.is_string(item):
        items = pc.list_flatten(values)
        simple = not pc.any(pc.is_null(items)).as_py() if len(items) else True
        if simple and pa.types.is_string(item) and len(items):
            simple = not pc.any(pc.match_substring_regex(items, r'["\\\x00-\x1f]')).as_py()
        if simple:
            texts = values.cast(pa.list_(pa.string()))
            quote = '"' if pa.types.is_string(item) else ""
            joined = pc.binary_join(texts, quote + "," + quote)
            whole = pc.binary_join_element_wise("[" + quote, joined, quote + "]", "")
            return pc.if_else(pc.equal(pc.list_value_length(values), 0), pa.scalar("[]"), whole)
    judged.per_value += len(values) - values.null_count
    return pa.array([None if v is None else json_text(v) for v in values.to_pylist()], pa.string())


def _simple_list(kind: pa.DataType) -> bool:
    if pa.types.is_list(kind):
        return _simple_list(kind.value_type)
    return any(test(kind) for test in _SIMPLE_LIST_ITEMS)


def judge(table: pa.Table, suppressed: frozenset[str] = frozenset(), lines: pa.Array | None = None) -> Judged:
    """What a vectorised parse decides for a block's rows, and which rows it leaves to the
    per-message rules (``fallback``), with why (``reasons``); ``lines``: the rows' lines (text),
    when the reader keeps them."""
    rows = table.num_rows
    judged = Judged(rows, np.zeros(rows, bool))
    top = {name: table.column(name).combine_chunks() for name in table.column_names}
    leaves: list[tuple[tuple[str, ...], pa.Array, pa.Array | None]] = []
    for name, array in top.items():
        if name in _DROPPED_KEYS or name.startswith("_eventlake"):
            continue
        leaves += _leaves((name,), array, None)

    # value types per column, per row
    names: dict[str, list[int]] = {}
    codes: list[np.ndarray] = []
    typed: list[pa.Array] = []
    string_instants: dict[tuple[str, ...], pa.Array] = {}
    strings: list[tuple[int, tuple[str, ...], pa.Array, np.ndarray]] = []
    doubles: list[pa.Array] = []
    for path, values, _ in leaves:
        kind = values.type
        valid = values.is_valid().to_numpy(zero_copy_only=False)
        if pa.types.is_null(kind):
            code = np.zeros(rows, np.uint8)
        elif pa.types.is_int64(kind):
            code = np.where(valid, 1, 0).astype(np.uint8)
        elif pa.types.is_floating(kind):
            code = np.where(valid, 2, 0).astype(np.uint8)
            doubles.append(values)
        elif pa.types.is_boolean(kind):
            code = np.where(valid, 3, 0).astype(np.uint8)
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
            code = None  # below, all string columns in one go (a compute call costs ~10 µs)
            strings.append((len(codes), path, values.cast(pa.string()).drop_null(), np.flatnonzero(valid)))
        elif pa.types.is_large_binary(kind):  # DuckDB's JSON: {} is nothing, the rest falls back
            code = np.zeros(rows, np.uint8)
            _mark(
                judged, _fill(pc.not_equal(values, pa.scalar(b"{}", pa.large_binary()))), "DuckDB JSON values"
            )
        elif pa.types.is_map(kind):  # DuckDB reads {} as an empty map: nothing to flatten
            code = np.zeros(rows, np.uint8)
            _mark(judged, _fill(pc.greater(pc.list_value_length(values), 0)), f"{kind} values")
        elif _simple_list(kind):  # compact sorted-key JSON text, as flatten does
            code = np.where(valid, 4, 0).astype(np.uint8)
            values = list_texts(values, judged)
        else:  # lists of doubles (1 or 1.0?), of objects (null or absent?), maps, JSON, ...
            code = np.zeros(rows, np.uint8)
            _mark(judged, valid, f"{kind} values")
        column = "_".join(part for part in map(snake_case, path) if part)
        if not column or len(column) > MAX_COLUMN_NAME_LENGTH:
            column = column_name(path)
        if column in transform.PARTITION_NAMES:
            column = transform.SHADOWED_PREFIX + column
        names.setdefault(column, []).append(len(codes))
        codes.append(code)
        typed.append(values)

    if strings:  # the non-null values of all string columns in one array: one call per step
        every, instants = string_codes(pa.concat_arrays([values for _, _, values, _ in strings]), judged)
        start = 0
        for index, path, _, where in strings:
            code = np.zeros(rows, np.uint8)
            code[where] = every[start : start + len(where)]
            codes[index] = code
            if path[0] in _TOP_TIMESTAMPS and len(path) == 1:  # received_at, validation
                spread = np.full(rows, -1, np.int64)
                spread[where] = np.arange(start, start + len(where))
                string_instants[path] = instants.take(pa.array(spread, mask=spread < 0))
            start += len(where)
    if doubles:
        every = pa.concat_arrays(doubles)
        for mask, reason in (
            (pc.equal(pc.floor(every), every), "integral double (1 or 1.0?)"),
            (pc.invert(pc.is_finite(every)), "NaN or infinity (not JSON)"),
            (pc.greater_equal(pc.abs(every), 1e31), "double of 1e31 or more"),
        ):
            _mark(judged, _fill(mask).to_numpy(zero_copy_only=False).reshape(-1, rows).any(axis=0), reason)

    # key collisions: rows where two of the paths may be present (a null and an absent key look
    # alike in Arrow: a path counts as present where its value is not null, or where its parent is
    # and the row's line holds the key's JSON text; without the lines, wherever its parent is)
    for indexes in names.values():
        if len(indexes) < 2:
            continue
        present = np.zeros(rows, np.int32)
        for index in indexes:
            path, values, parent = leaves[index]
            maybe = np.ones(rows, bool) if parent is None else _fill(parent).to_numpy(zero_copy_only=False)
            if lines is not None:
                key = orjson.dumps(path[-1]).decode()
                mentioned = _fill(pc.match_substring(lines, key)).to_numpy(zero_copy_only=False)
                maybe &= mentioned | values.is_valid().to_numpy(zero_copy_only=False)
            present += maybe
        _mark(judged, present >= 2, "key collision after snake_case")

    # validation, as spec.validate (any invalid row falls back: its reason text and raw line)
    def text(name: str) -> pa.Array:
        array = top.get(name)
        if array is None:
            return pa.nulls(rows, pa.string())
        if not (pa.types.is_string(array.type) or pa.types.is_null(array.type)):
            _mark(judged, array.is_valid(), f"{name} not text")
            return pa.nulls(rows, pa.string())
        return array.cast(pa.string())

    def present(name: str) -> pa.Array:
        return _fill(pc.match_substring_regex(text(name), _VISIBLE))

    kinds = text("type")
    valid = _fill(pc.is_in(kinds, pa.array(MESSAGE_TYPES)))
    valid = pc.and_(valid, pc.or_(present("userId"), present("anonymousId")))
    for kind, keys in _REQUIRED.items():
        for key in keys:
            valid = pc.and_(valid, pc.or_(pc.not_equal(kinds, kind), present(key)))
    message_ids = text("messageId")
    length = pc.utf8_length(message_ids)
    valid = pc.and_(valid, _fill(pc.and_(pc.greater(length, 0), pc.less_equal(length, MAX_MESSAGE_ID))))
    for name in (*_TIMESTAMP_FIELDS, "receivedAt"):
        column = top.get(name)
        if column is None:
            if name == "receivedAt":
                valid = pa.array(np.zeros(rows, bool))
            continue
        if not pa.types.is_string(column.type):
            _mark(judged, column.is_valid(), f"{name} not text")
            continue
        code = codes[names[snake_case(name)][0]]
        ok = code == 5 if name == "receivedAt" else (code != 4)
        valid = pc.and_(valid, pa.array(ok))
    _mark(judged, pc.invert(_fill(valid)), "invalid message (quarantined with its line)")
    if suppressed:  # valid messages of a suppressed userId: dropped and counted, no values kept
        dropped = _fill(pc.is_in(text("userId"), pa.array(sorted(suppressed)))).to_numpy(zero_copy_only=False)
        judged.dropped = dropped & _fill(valid).to_numpy(zero_copy_only=False)
    judged.received = string_instants.get(("receivedAt",))
    judged.message_ids = message_ids  # type: ignore[attr-defined]

    # segment types: once per distinct (type, event)
    events = text("event")
    key = pc.binary_join_element_wise(
        pc.fill_null(kinds, ""), pc.if_else(pc.equal(kinds, "track"), pc.fill_null(events, ""), ""), "\x00"
    )
    encoded = key.dictionary_encode()
    distinct = encoded.dictionary.to_pylist()
    judged.segment_types = [
        segment_type(*k.split("\x00", 1)) if k.split("\x00", 1)[0] in MESSAGE_TYPES else "" for k in distinct
    ]
    judged.segment_ids = encoded.indices.to_numpy(zero_copy_only=False)

    # shapes: the rows' type signatures, one id per distinct signature
    matrix = np.ascontiguousarray(np.stack(codes, axis=1)) if codes else np.zeros((rows, 1), np.uint8)
    signatures = pa.Array.from_buffers(pa.binary(matrix.shape[1]), rows, [None, pa.py_buffer(matrix)])
    encoded_shapes = signatures.dictionary_encode()  # a hash table in C: one id per distinct row
    judged.shape_ids = encoded_shapes.indices.to_numpy(zero_copy_only=False)
    first = np.unique(judged.shape_ids, return_index=True)[1]
    for row in first:
        types: dict[str, str] = {}
        for column, indexes in names.items():
            kind = next((CODES[int(matrix[row, i])] for i in indexes if matrix[row, i]), None)
            if kind is not None:
                types[column] = kind
        judged.shapes.append(types)
    judged.columns = {column: typed[indexes[-1]] for column, indexes in names.items()}
    return judged


def line_array(content: bytes, rows: int | None = None) -> pa.Array | None:
    """The file's non-blank lines as an Arrow string array (no copy), when the reader's rows are
    those lines, one object each (pyarrow reads ``{..} {..}`` on one line as two rows and an
    object split over two lines as one); else None."""
    buffer = np.frombuffer(content, np.uint8)
    breaks = np.flatnonzero(buffer == 10)
    starts = np.concatenate(([0], breaks + 1))
    ends = np.concatenate((breaks, [len(buffer)]))
    ends = ends - ((ends > starts) & (buffer[np.maximum(ends - 1, 0)] == 13))
    filled = ends > starts
    if rows is not None and int(filled.sum()) != rows:
        return None
    starts, ends = starts[filled], ends[filled]
    if rows is not None and not (np.all(buffer[starts] == ord("{")) and np.all(buffer[ends - 1] == ord("}"))):
        return None
    rows = len(starts)
    # line i as content[start i : start i+1] (its line end and any blank lines after it included:
    # harmless for a search of key texts), as Arrow's offsets: no copy of the text
    offsets = np.concatenate((starts, [len(buffer)])).astype(np.int64)
    return pa.Array.from_buffers(
        pa.large_string(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(content)]
    )


def vectorised(table_reader: Any, content: bytes | None, suppressed: frozenset[str] = frozenset()) -> Judged:
    """Read (``table_reader()``), check the lines, judge; a failed read leaves the file to the
    per-message path."""
    try:
        table = table_reader()
    except (pa.ArrowInvalid, duckdb.Error, UnicodeDecodeError) as exc:
        failed = Judged(0, np.zeros(0, bool))
        failed.file_failed = str(exc)[:120]
        return failed
    if isinstance(table, tuple):  # read_arrow: (table, read twice)
        table = table[0]
    lines = None if content is None else line_array(content, table.num_rows)
    if content is not None and lines is None:
        failed = Judged(table.num_rows, np.ones(table.num_rows, bool))
        failed.file_failed = "rows are not the lines"
        return failed
    return judge(table, suppressed, lines=lines)


# ---------------------------------------------------------------- the write pass on typed columns


def cast_arrow(values: pa.Array, kind: str, arrow_type: pa.DataType) -> tuple[pa.Array, list[Any]]:
    """A typed column of a piece (what the vectorised parse keeps) cast to its table column: in C
    where Arrow's cast gives what :func:`write.cast_column` gives, else value by value through it."""
    source = values.type
    if pa.types.is_null(source):
        return pa.nulls(len(values), arrow_type), []
    if source == arrow_type:
        return values, []
    if kind == DECIMAL and pa.types.is_int64(source):
        return values.cast(arrow_type), []
    if kind == DECIMAL and pa.types.is_floating(source):
        decimals = write._decimals(values.to_numpy(zero_copy_only=False), True, arrow_type)
        if decimals is not None:
            return decimals, []
    if kind == TIMESTAMP and pa.types.is_string(source):
        if pc.all(pc.or_(pc.is_null(values), _fill(pc.match_substring_regex(values, _DATE_TIME)))).as_py():
            try:
                return values.cast(arrow_type), []
            except pa.ArrowInvalid:
                pass
    if kind == STRING and (pa.types.is_int64(source) or pa.types.is_boolean(source)):
        return values.cast(pa.string()), []
    return write.cast_column(values.to_pylist(), kind, arrow_type)


# ---------------------------------------------------------------- timing


def cpu() -> float:
    return time.process_time()


def baseline(path: Path, scratch: Path, number: int, suppressed: frozenset[str]) -> tuple[float, Path]:
    """(a): the parse pass on one file as a worker runs it; CPU seconds, and the pieces' folder."""
    storage = LocalStorage()
    pieces = scratch / f"pieces-{number}"
    started = cpu()
    with transform.without_cycle_collection(), Pieces(storage, pieces, number) as kept:
        for _ in transform._parse_files(
            [(number, str(path), path.stat().st_size)], transform.Shapes(number), kept,
            position_base(number), storage, suppressed,
        ):  # fmt: skip
            pass
    return cpu() - started, pieces


def lines_only(content: bytes, suppressed: frozenset[str]) -> tuple[float, list[tuple[Any, ...]]]:
    """(a'): parse_line + Shapes.row over the decompressed lines (no gunzip, no batches, no
    pieces); the parse_line rows, for :func:`differences`."""
    shapes = transform.Shapes(0)
    rows = []
    started = cpu()
    with transform.without_cycle_collection():
        for line in content.split(b"\n"):
            if line.strip():
                parsed = transform.parse_line(line.decode("utf-8", "replace"), suppressed)
                shapes.row(parsed)
                rows.append(parsed)
    return cpu() - started, rows


def differences(judged: Judged, rows: list[tuple[Any, ...]]) -> Counter:
    """Where the judged rows disagree with parse_line's: validity, message id, received time,
    segment type, the map of column types (order aside)."""
    found: Counter = Counter()
    if judged.file_failed:  # all of it goes to the per-message rules: nothing judged
        return found
    if len(rows) != judged.rows:
        found["row count"] += len(rows)
        return found
    ids = judged.message_ids.to_pylist()  # type: ignore[attr-defined]
    received = judged.received.to_pylist() if judged.received is not None else [None] * len(rows)
    for number, row in enumerate(rows):
        if judged.fallback[number]:
            continue
        if judged.dropped is not None and judged.dropped[number]:
            found["judged suppressed, per-message not"] += row[7] != transform.SUPPRESSED
            continue
        if not row[0]:
            found["judged valid, per-message invalid"] += 1
            continue
        found["message id"] += row[1] != ids[number]
        found["received_at"] += row[2] != received[number]
        found["segment type"] += row[3] != judged.segment_types[judged.segment_ids[number]]
        found["column types"] += row[5] != judged.shapes[judged.shape_ids[number]]
    return +found


def route(content: bytes) -> list[tuple[bytes, np.ndarray]]:
    """The file's lines grouped by their (type, event) as the raw text shows them (a regex over
    each line in C, only a hint: the judgement reads both from the parsed columns), each group's
    lines as one piece of NDJSON with their numbers among the file's non-blank lines. One group is
    one table's messages: a narrow schema (pyarrow's reader appends a null for every absent field
    of a wide, sparse struct: reading the whole file costs three times as much)."""
    lines = line_array(content)
    kinds = pc.fill_null(pc.extract_regex(lines, r'"type":"(?P<t>[a-z]+)"').field("t"), "")
    events = pc.fill_null(pc.extract_regex(lines, r'"event":"(?P<e>[^"\\]*)"').field("e"), "")
    key = pc.binary_join_element_wise(kinds, events, pa.scalar("\x00", pa.large_string()))
    groups = key.dictionary_encode().indices.to_numpy(zero_copy_only=False)
    order = np.argsort(groups, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(groups))))
    routed = []
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        taken = lines.take(pa.array(order[start:end]))
        data, offsets = taken.buffers()[2], np.frombuffer(taken.buffers()[1], np.int64)
        first, last = offsets[taken.offset], offsets[taken.offset + len(taken)]
        routed.append((data.to_pybytes()[first:last], order[start:end]))
    return routed


def judge_routed(content: bytes, least: int = 64, suppressed: frozenset[str] = frozenset()) -> Judged:
    """(b'): the file's lines routed by (type, event), each group read and judged on its own; a
    group whose read fails (a type conflict, a lone surrogate, ...) is halved until the halves read
    (a conflict between them then reads as two schemas), down to 64 lines, which fall back."""
    parts = [
        part for group, numbers in route(content) for part in _bisected(group, numbers, least, suppressed)
    ]
    whole = Judged(0, np.zeros(0, bool))
    for part, _ in parts:
        whole.rows += part.rows
        whole.reasons.update(part.reasons)
        whole.per_value += part.per_value
    whole.fallback = np.zeros(whole.rows, bool)
    for part, numbers in parts:
        whole.fallback[numbers] = part.fallback
    whole.parts = parts  # type: ignore[attr-defined]
    return whole


def _bisected(
    chunk: bytes, numbers: np.ndarray, least: int = 64, suppressed: frozenset[str] = frozenset()
) -> list[tuple[Judged, np.ndarray]]:
    """A chunk of lines judged whole, or, when its read fails, each half on its own."""
    part = vectorised(functools.partial(read_arrow, chunk), chunk, suppressed)
    if not part.file_failed or part.rows:  # read (a line check failure falls back whole)
        return [(part, numbers)]
    if len(numbers) > least:
        middle = 0
        for _ in range(len(numbers) // 2):
            middle = chunk.index(b"\n", middle) + 1
        half = len(numbers) // 2
        return _bisected(chunk[:middle], numbers[:half], least, suppressed) + _bisected(
            chunk[middle:], numbers[half:], least, suppressed
        )
    part.rows = len(numbers)
    part.fallback = np.ones(part.rows, bool)
    problem = re.sub(r"Column\(.*?\) ", "Column(…) ", re.sub(r" in row \d+", "", part.file_failed or ""))
    part.reasons[f"lines left to the per-message path: {problem[:70]}"] += part.rows
    return [(part, numbers)]


def edge_lines() -> list[bytes]:
    """Messages with every edge the type rules know, as archive lines (some are not valid JSON)."""
    base = (
        '{"type":"track","event":"Edge Case","userId":"u1","messageId":"edge-%d",'
        '"receivedAt":"2026-11-01T10:00:00.000Z","properties":%s}'
    )
    properties = [
        '{"n":1}', '{"n":1.0}', '{"n":2.5}', '{"big":100000000000000000000000000000000000000001}',
        '{"big":18446744073709551615}', '{"s":"\\ud800"}', '{"t":"2026-11-01T10:00:00Z"}',
        '{"t":"2026-11-01"}', '{"t":"2026-11-01 10:00:00+0200"}', '{"t":" 2026-11-01T10:00:00Z"}',
        '{"t":"2026-02-30T10:00:00Z"}',
        '{"a":[[1,2],[3]]}', '{"a":[{"b":1,"a":null}]}', '{"a":[1.5,2]}', '{"a":["x\\"y"]}',
        '{"itemCount":1,"item_count":2}', '{"$$":1}', '{"%s":1}' % ("k" * 300), '{"v":NaN}',
        '{"c":"x"}', '{"c":5}', '{"d":-0.0}', '{"e":{}}', '{"f":"\\u00e9\\ud83d\\ude00"}',
    ]  # fmt: skip
    lines = [(base % (n, p)).encode() for n, p in enumerate(properties)]
    lines[5] = lines[5].replace(b"Edge Case", b"Edge Surrogate")  # its own group: the others read
    lines.append(
        b'{"type":"track","event":"Edge Case","userId":"u1","messageId":"edge-y","year":2026,'
        b'"hr":"x","writeKey":"k","_eventlakeX":1,"receivedAt":"2026-11-01T10:00:00.000Z"}'
    )
    lines.append(
        b'{"type":"bogus","userId":"u1","messageId":"edge-b","receivedAt":"2026-11-01T10:00:00.000Z"}'
    )
    lines.append(b'{"type":"page","messageId":"edge-p","receivedAt":"2026-11-01T10:00:00.000Z"}')
    lines.append(b'{"type":"page","userId":"u1","messageId":"edge-q","receivedAt":"yesterday"}')
    return lines


def fuzz_lines(count: int, seed: int = 37) -> list[bytes]:
    """Seeded random track messages whose properties mix the edges of the type rules: keys that
    collide after snake_case, numbers at the edges of bigint and decimal(38,6), timestamps of
    every form, lists, nested and empty objects."""
    import json
    import random

    rng = random.Random(seed)
    keys = ["a", "A", "a_b", "aB", "ab", "AB", "$$", "a.b", "Año", "x1", "X1", "_a", "year", "hr"]
    values: list[Any] = [
        0, -1, 2**63 - 1, -(2**63), 2**63, 2**64, 10**40, 0.5, 1.0, -0.0, 1e20, 1e31, 1e-7, 19.99,
        123456.1234567, True, False, None, "x", "", "é", "\U0001f600", "2026-11-01T10:00:00.123456789Z",
        "2026-11-01T10:00", " 2026-11-01T10:00:00Z ", "2026-13-01T00:00:00Z",
        "\u0662\u0660\u0662\u0666-11-01T10:00:00Z",
        "0000-01-01T00:00:00Z", "9999-12-31T23:59:59-01:00", "2026-11-01T10:00:00+05:30", "2026-11-01",
        [], [1, "a"], [1.0], [[1]], ["a", "b"], [True], [None], [{"a": 1}], {}, {"b": {"c": 1}},
    ]  # fmt: skip
    lines = []
    for number in range(count):
        properties: dict[str, Any] = {}
        for _ in range(rng.randrange(1, 6)):
            value = rng.choice(values)
            if rng.random() < 0.2:
                value = {rng.choice(keys): rng.choice(values)}
            properties[rng.choice(keys)] = value
        message = {
            "type": "track", "event": rng.choice(["Fuzz A", "Fuzz B"]), "userId": "u1",
            "messageId": f"fuzz-{number}", "receivedAt": "2026-11-01T10:00:00.000Z", "properties": properties,
        }  # fmt: skip
        lines.append(json.dumps(message, ensure_ascii=False).encode())
    return lines


def timed_judge(
    reader: Any, content: bytes | None, suppressed: frozenset[str] = frozenset()
) -> tuple[float, float, Judged]:
    gc.collect()
    started = cpu()
    try:
        table = reader()
    except (pa.ArrowInvalid, duckdb.Error) as exc:  # the whole file goes to the per-message path
        read = cpu() - started
        failed = Judged(0, np.zeros(0, bool))
        failed.file_failed = str(exc)[:100]
        return read, read, failed
    if isinstance(table, tuple):  # read_arrow: (table, read twice)
        table = table[0]
    read = cpu() - started
    judged = vectorised(lambda: table, content, suppressed)
    return read, cpu() - started, judged


def write_costs(pieces: Path, judged: Judged) -> list[tuple[str, int, float, float, int]]:
    """Per segment type (judged rows only, the same rows both ways): cast_rows on loads(payload)
    against cast_arrow of the typed columns; (type, rows, µs/row loads+cast_rows, µs/row
    cast_arrow, mismatching values)."""
    storage = LocalStorage()
    results = []
    found = pieces_by_type(storage, pieces)
    for index, name in enumerate(judged.segment_types):
        if name not in found:
            continue
        table = read_pieces(storage, found[name][1], pa.array([], pa.int64()), None).sort_by("position")
        kept = judged.segment_ids == index
        if judged.dropped is not None:
            kept &= ~judged.dropped
        of_type = np.flatnonzero(kept)  # file order, as the piece's positions
        if len(of_type) != table.num_rows:
            continue
        keep = ~judged.fallback[of_type]
        rows = of_type[keep]
        if len(rows) < 500:
            continue
        same = table.filter(pa.array(keep))
        ids = pc.take(judged.message_ids, pa.array(rows))  # type: ignore[attr-defined]
        assert same["message_id"].combine_chunks().equals(ids), name
        payloads = same["payload"].to_pylist()
        observed: dict[str, set[str]] = {}
        shapes = np.unique(judged.shape_ids[rows])
        for shape in shapes:
            for column, kind in judged.shapes[shape].items():
                observed.setdefault(column, set()).add(kind)
        columns = evolve(None, observed, sorted(observed)).columns
        gc.collect()
        started = cpu()
        expected, _ = write.cast_rows([transform.loads(p) for p in payloads], columns)
        slow = cpu() - started
        typed = {c: judged.columns[c].take(pa.array(rows)) for c, _ in columns}
        schema = arrow_schema(columns)
        started = cpu()
        arrays = [cast_arrow(typed[c], k, f.type)[0] for (c, k), f in zip(columns, schema, strict=True)]
        got = pa.Table.from_arrays(arrays, schema=schema)
        fast = cpu() - started
        mismatches = sum(
            a != b for column in schema.names
            for a, b in zip(got[column].to_pylist(), expected[column].to_pylist(), strict=True)
        )  # fmt: skip
        results.append((name, len(rows), slow / len(rows) * 1e6, fast / len(rows) * 1e6, mismatches))
    return results


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=1, help="each timing's least of N runs")
    parser.add_argument(
        "--suppress", type=int, default=0, help="suppress the userIds user-0 .. user-<N-1> (of 50,000)"
    )
    parser.add_argument(
        "--edges",
        action="store_true",
        help="the first file with edge messages mixed in (pyarrow readers only)",
    )
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="eventlake-readers-"))
    project = work / "project"
    if not any(project.rglob("*.gz")):
        generator.generate(project, "bench", args.messages, args.files)
    files = sorted(project.rglob("*.gz"))
    if args.edges:  # the first file with the edge lines spread over it, alone
        lines = gzip.decompress(files[0].read_bytes()).split(b"\n")
        edges = edge_lines() + fuzz_lines(2000)
        step = max(1, len(lines) // (len(edges) + 1))
        for n, edge in enumerate(edges):
            lines.insert((n + 1) * step, edge)
        files = [work / "edges.gz"]
        files[0].write_bytes(gzip.compress(b"\n".join(lines), 1))
    suppressed = frozenset(f"user-{n}" for n in range(args.suppress))
    connection = duckdb.connect()
    connection.execute("SET threads = 1")
    totals: dict[str, float] = Counter()
    judged_rows: dict[str, int] = Counter()
    reasons: dict[str, Counter] = {}
    messages = 0
    write_rows: list[tuple[str, int, float, float, int]] = []
    warm = gzip.decompress(files[0].read_bytes())[:200_000]
    judge_routed(warm[: warm.rindex(b"\n") + 1])  # compute kernels and regexes: once per process
    print(f"load average before: {load()}", flush=True)
    for number, path in enumerate(files):
        data = path.read_bytes()
        content = gzip.decompress(data)
        seconds, pieces = min(baseline(path, work, number, suppressed) for _ in range(args.repeat))
        totals["(a) _parse_files: gunzip, parse_line, shapes, batches, pieces"] += seconds
        seconds, parsed = lines_only(content, suppressed)
        for _ in range(args.repeat - 1):
            seconds = min(seconds, lines_only(content, suppressed)[0])
        totals["(a') parse_line + Shapes.row only"] += seconds
        gunzip = math.inf
        for _ in range(args.repeat):
            started = cpu()
            gzip.decompress(data)
            gunzip = min(gunzip, cpu() - started)
        for label, reader, lines in (
            ("(b) pyarrow read_json, 1 MiB blocks", functools.partial(read_arrow, content), content),
            (
                "(b) pyarrow read_json, 16 MiB blocks",
                functools.partial(read_arrow, content, 16 << 20),
                content,
            ),
            ("(c) duckdb read_ndjson (gzip file)", functools.partial(read_duckdb, connection, path), None),
        ):
            if args.edges and lines is None:
                continue
            read, whole, judged = timed_judge(reader, lines, suppressed)
            for _ in range(args.repeat - 1):
                again = timed_judge(reader, lines, suppressed)
                read, whole = min(read, again[0]), min(whole, again[1])
            extra = 0.0 if lines is None else gunzip
            totals[label + ": read"] += read + extra
            totals[label + ": read + judge"] += whole + extra
            judged_rows[label] += judged.rows - int(judged.fallback.sum())
            reasons.setdefault(label, Counter()).update(judged.reasons)
            if judged.dropped is not None:
                reasons[label]["(judged, not a fallback) suppressed userId, dropped"] += int(
                    judged.dropped.sum()
                )
            for difference, count in differences(judged, parsed).items():
                reasons[label][f"DIFFERS from parse_line: {difference}"] += count
            if judged.file_failed:
                reasons[label][f"file left to the per-message path: {judged.file_failed}"] += len(parsed)
            if label.startswith("(b) pyarrow read_json, 1 MiB"):
                messages += len(parsed)
                write_rows += write_costs(pieces, judged)
        label = "(b') pyarrow per (type, event) group of lines"
        seconds = routed = read = math.inf
        for _ in range(args.repeat):
            gc.collect()
            started = cpu()
            groups = route(content)
            routed = min(routed, cpu() - started)
            for group, _ in groups:
                with contextlib.suppress(pa.ArrowInvalid):  # the halving is in the judged timing
                    read_arrow(group)
            read = min(read, cpu() - started)
            started = cpu()
            judged = judge_routed(content, 1 if args.edges else 64, suppressed)  # edges: down to single lines
            seconds = min(seconds, cpu() - started)
        totals[label + ": route (gunzip included)"] += routed + gunzip
        totals[label + ": route + read"] += read + gunzip
        totals[label + ": route + read + judge"] += seconds + gunzip
        judged_rows[label] += judged.rows - int(judged.fallback.sum())
        reasons.setdefault(label, Counter()).update(judged.reasons)
        for part, numbers in judged.parts:  # type: ignore[attr-defined]
            for difference, count in differences(part, [parsed[n] for n in numbers]).items():
                reasons[label][f"DIFFERS from parse_line: {difference}"] += count
            if part.dropped is not None:
                reasons[label]["(judged, not a fallback) suppressed userId, dropped"] += int(
                    part.dropped.sum()
                )
        print(f"file {number}: done, load {load()}", flush=True)
    base = totals["(a) _parse_files: gunzip, parse_line, shapes, batches, pieces"]
    print(f"\n{messages:,} messages in {len(files)} files; load average after: {load()}")
    print(f"{'reader':<70} {'µs/msg':>8} {'vs (a)':>7} {'judged':>7}")
    for label, seconds in totals.items():
        reader = label.split(":")[0]
        share = f"{judged_rows[reader] / messages:.4f}" if reader in judged_rows else ""
        print(f"{label:<70} {seconds / messages * 1e6:8.2f} {base / seconds:7.2f}x {share:>7}")
    for label, counter in reasons.items():
        print(f"\nleft to the per-message rules by {label}:")
        for reason, count in counter.most_common():
            print(f"  {count:>7,} rows ({count / messages:.2%}): {reason}")
    print("\nwrite pass per row, judged rows: loads + cast_rows  vs  cast_arrow of typed columns")
    summary: dict[str, list[float]] = {}
    for name, rows, slow, fast, mismatches in write_rows:
        entry = summary.setdefault(name, [0, 0.0, 0.0, 0])
        entry[0] += rows
        entry[1] += slow * rows
        entry[2] += fast * rows
        entry[3] += mismatches
    all_rows = sum(e[0] for e in summary.values())
    for name, (rows, slow, fast, mismatches) in sorted(summary.items(), key=lambda kv: -kv[1][0])[:6]:
        print(f"  {name:<32} {int(rows):>7,} rows {slow / rows:6.2f} µs  {fast / rows:6.2f} µs", end="")
        print(f"  mismatches {int(mismatches)}")
    if all_rows:
        slow = sum(e[1] for e in summary.values()) / all_rows
        fast = sum(e[2] for e in summary.values()) / all_rows
        print(
            f"  {'all types (row-weighted)':<32} {all_rows:>7,} rows {slow:6.2f} µs  {fast:6.2f} µs", end=""
        )
        print(f"  ({slow / fast:.1f}x)")


if __name__ == "__main__":
    main()
