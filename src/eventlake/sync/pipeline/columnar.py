"""The parse pass on columns: an archive file's lines judged with Arrow, a group of lines at a time.

The per-message rules (:func:`.transform.parse_line`: ``spec.validate``, ``flatten``, ``value_type``)
stay the specification. This module decides, for each line, either what those rules would say
(validity, id, received time, segment type, the column types and the values) with Arrow compute over
whole columns, or that it cannot prove it: the line goes back to the per-message rules
(:attr:`Group.fallback`). ``tests/sync/test_columnar.py`` runs both on the same archives and
requires the same lake.

How a file is read (see bench/README.md, "Columnar readers for the parse pass", for the measurements):

1. The lines (:class:`eventlake.archive.FileLines`: what a line of an archive file is, for every
   reader) that start with ``{`` and end with ``}`` are routed by a regex over their text for
   ``"type"`` and ``"event"`` (only a hint: the judgement reads both from the parsed columns), so
   each group is one table's messages: a narrow schema (pyarrow's reader appends a null to every
   absent field of a wide struct; the whole file at once is three times slower).
2. Each group is read by ``pyarrow.json.read_json`` (one thread). A read that fails (a type
   conflict, a lone surrogate, a duplicate key, invalid JSON) is halved until the halves read; at
   :data:`LEAST_LINES` lines or fewer, its lines go back. A read whose rows are not its lines
   (``{..} {..}`` on one line) goes back whole.
3. :func:`judge` names each column path once (``snake_case``, long names, shadowed partition
   names, ``writeKey`` and ``_eventlake…`` dropped), types each column's values (int64 is bigint,
   double decimal, bool boolean, a string a timestamp where ``parse_timestamp`` reads it, lists as
   ``json_text``), settles two key paths of one column as flatten does, validates as
   ``spec.validate`` does and names each row's map of types (its shape). What it sends back:
   invalid messages (their reason and line go to the quarantine), integral doubles, also inside
   lists (JSON ``1`` and ``1.0`` differ to eventlake, not to Arrow), NaN and infinities, doubles of
   1e31 or more (integers beyond 64 bits arrive so), a list of objects in a line holding a null (an
   object's null and absent keys look alike), two key paths of one column where one may be a null
   or their types differ, non-text values of the fields validation reads.

The lines holding a list of objects are routed apart (``":[{``): a key holding strings in one
message and objects in another fails the read of a whole group.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from eventlake.archive import FileLines
from eventlake.message_types import MESSAGE_TYPES
from eventlake.schema import BIGINT, BOOLEAN, DECIMAL, STRING, TIMESTAMP, segment_type
from eventlake.schema.flatten import DROPPED_KEYS, INTERNAL_PREFIX
from eventlake.schema.naming import (
    MAX_COLUMN_NAME_LENGTH,
    PARTITION_NAMES,
    SHADOWED_PREFIX,
    column_name,
    snake_case,
)
from eventlake.schema.types import json_text
from eventlake.spec.message import MAX_MESSAGE_ID, REQUIRED_BY_TYPE, TIMESTAMP_FIELDS
from eventlake.timestamps import parse_timestamp

LEAST_LINES = 64  # a group that does not read is halved down to this many lines, which go back
UTC_MICROS = pa.timestamp("us", tz="UTC")
# the date-times Arrow's cast reads exactly as parse_timestamp does (years 1000 to 8999, at most
# microseconds, an offset): the parse and the write pass cast them in C, any other text one by one
DATE_TIME = (
    r"^[1-8][0-9]{3}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?"
    r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
)
_CODES = {1: BIGINT, 2: DECIMAL, 3: BOOLEAN, 4: STRING, 5: TIMESTAMP}  # 0: null or absent
_TOP_TIMESTAMPS = frozenset({*TIMESTAMP_FIELDS, "receivedAt"})
# a character str.strip() keeps (Python's isspace() characters, approximated wider: a value of only
# such characters counts as blank, which sends a valid message back to the per-message rules)
_VISIBLE = r"[^\t\n\x{0b}\x{0c}\r\x{1c}-\x{1f}\x{85}\p{Z}]"
_TYPE = r'"type":"(?P<t>[a-z]+)"'
_EVENT = r'"event":"(?P<e>[^"\\]*)"'
_LIST_OF_OBJECTS = b'":[{'  # (compact JSON, as every Segment library sends it)
# text value_type may read as a date-time: "-" at index 4 or a leading space (wider than isspace())
_CANDIDATE = r"(?s)^(?:.{4}-|[\x00-\x20\x{85}\p{Z}])"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


@dataclass
class Group:
    """The judgement of one group of a file's lines: per row (``lines``: the rows' line numbers in
    the file), whether the per-message rules decide it (``fallback``) and, for the others, what they
    would say."""

    lines: np.ndarray
    fallback: np.ndarray  # bool per row
    dropped: np.ndarray  # bool per row: a valid message of a suppressed userId
    message_ids: pa.Array
    received: pa.Array  # UTC_MICROS
    segment_types: list[str]  # the distinct segment types; ``segment_ids`` index them per row
    segment_ids: np.ndarray
    shapes: list[dict[str, str]]  # the distinct maps of column types; ``shape_ids`` index them per row
    shape_ids: np.ndarray
    columns: dict[str, pa.Array]  # column name -> the rows' values (JSON's types: not yet cast)
    reasons: Counter[str] = field(default_factory=Counter)  # why rows went back (for the bench)
    collisions: dict[int, list[str]] = field(default_factory=dict)  # row -> flatten's collision records

    @property
    def judged(self) -> np.ndarray:
        """Rows this group decided: valid messages (kept or ``dropped``)."""
        return ~self.fallback


def judge_file(lines: FileLines, suppressed: frozenset[str] = frozenset()) -> tuple[list[Group], np.ndarray]:
    """The file's groups, judged, and the numbers of the lines left to the per-message rules
    besides their rows marked ``fallback`` (lines that are not one object, groups that did not
    read). Every non-blank line is in exactly one of them."""
    filled = np.flatnonzero(lines.ends > lines.starts)
    candidates = _utf8(lines, lines.objects())  # other lines: the per-message rules say what they are
    groups: list[Group] = []
    left = [np.setdiff1d(filled, candidates, assume_unique=True)]
    if not len(candidates):
        return groups, np.sort(np.concatenate(left))
    text = _text_array(lines, candidates)
    for indexes in _route(text, lines.holding(_LIST_OF_OBJECTS)[candidates]):
        _read_groups(text, indexes, candidates, suppressed, groups, left)
    return groups, np.sort(np.concatenate(left))


def _text_array(lines: FileLines, numbers: np.ndarray) -> pa.Array:
    """Each line ``numbers[i]`` (UTF-8) as text, its line end included, without a copy."""
    content = lines.content if lines.content.endswith(b"\n") else lines.content + b"\n"
    offsets = np.concatenate((lines.starts, [len(content)])).astype(np.int64)
    every = pa.Array.from_buffers(
        pa.large_string(), len(lines.starts), [None, pa.py_buffer(offsets), pa.py_buffer(content)]
    )
    return every if len(numbers) == len(every) else every.take(pa.array(numbers))


def _utf8(lines: FileLines, numbers: np.ndarray) -> np.ndarray:
    """Those of the lines ``numbers`` that are UTF-8 (checked in C; line by line only in a file
    that is not all UTF-8: the per-message rules read the others with replacement characters)."""
    try:
        lines.content.decode("utf-8")
        return numbers
    except UnicodeDecodeError:
        pass
    good = np.ones(len(numbers), bool)
    for index, number in enumerate(numbers.tolist()):
        try:
            lines.line(number).decode("utf-8")
        except UnicodeDecodeError:
            good[index] = False
    return numbers[good]


def _route(text: pa.Array, lists: np.ndarray) -> Iterator[np.ndarray]:
    """The indexes of ``text``'s lines, grouped by the (type, event) their text shows and whether
    they hold a list of objects (``lists``): the same key holding strings in one message and
    objects in another fails the read of a whole group (halved down to LEAST_LINES)."""
    kinds = pc.fill_null(pc.extract_regex(text, _TYPE).field("t"), "")
    events = pc.fill_null(pc.extract_regex(text, _EVENT).field("e"), "")
    objects = pc.if_else(pa.array(lists), "o", "").cast(pa.large_string())
    key = pc.binary_join_element_wise(kinds, events, objects, pa.scalar("\x00", pa.large_string()))
    groups = key.dictionary_encode().indices.to_numpy(zero_copy_only=False)
    order = np.argsort(groups, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(groups))))
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        yield order[start:end]


def _chunk(text: pa.Array, indexes: np.ndarray) -> pa.Buffer:
    """The lines ``text[indexes]`` as NDJSON (each holds its line end), in one buffer."""
    taken = text.take(pa.array(indexes))
    offsets = np.frombuffer(taken.buffers()[1], np.int64)[taken.offset : taken.offset + len(taken) + 1]
    return taken.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


def _read_groups(
    text: pa.Array, indexes: np.ndarray, numbers: np.ndarray, suppressed: frozenset[str],
    groups: list[Group], left: list[np.ndarray],
) -> None:  # fmt: skip
    """Read and judge the lines ``text[indexes]`` (the file's lines ``numbers[indexes]``) as one
    group, halved while they do not read."""
    chunk = _chunk(text, indexes)
    try:
        table = read_json(chunk)
    except (pa.ArrowInvalid, UnicodeDecodeError):
        if len(indexes) <= LEAST_LINES:
            left.append(numbers[indexes])
            return
        half = len(indexes) // 2
        _read_groups(text, indexes[:half], numbers, suppressed, groups, left)
        _read_groups(text, indexes[half:], numbers, suppressed, groups, left)
        return
    if table.num_rows != len(indexes):  # not one object a line: the per-message rules say what it is
        left.append(numbers[indexes])
        return
    groups.append(judge(table, numbers[indexes], chunk, suppressed))


def read_json(chunk: bytes | pa.Buffer) -> pa.Table:
    """NDJSON through pyarrow's reader, one thread. A second read with an explicit schema when the
    first inferred a timestamp anywhere: pyarrow turns ``"2026-11-01"``, ``"... 10:00:00"`` and
    ``"...T10:00:00+02:00"`` into ``timestamp[s]`` (the text lost, the offset applied) and no
    option stops it."""
    size = chunk.size if isinstance(chunk, pa.Buffer) else len(chunk)
    options = pj.ReadOptions(use_threads=False, block_size=max(1 << 20, size + 1))
    table = pj.read_json(pa.BufferReader(chunk), read_options=options)
    if not any(_no_timestamps(f.type) != f.type for f in table.schema):
        return table
    schema = pa.schema([f.with_type(_no_timestamps(f.type)) for f in table.schema])
    return pj.read_json(
        pa.BufferReader(chunk), read_options=options,
        parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"),
    )  # fmt: skip


def _no_timestamps(kind: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(kind):
        return pa.string()
    if pa.types.is_struct(kind):
        return pa.struct([f.with_type(_no_timestamps(f.type)) for f in kind])
    if pa.types.is_list(kind):
        return pa.list_(_no_timestamps(kind.value_type))
    return kind


# ---------------------------------------------------------------- the judgement


class _Marks:
    """The rows sent back, and why."""

    def __init__(self, rows: int) -> None:
        self.fallback = np.zeros(rows, bool)
        self.reasons: Counter[str] = Counter()

    def mark(self, mask: Any, reason: str) -> None:
        if hasattr(mask, "to_numpy"):
            mask = pc.fill_null(mask, False).to_numpy(zero_copy_only=False)
        mask = np.asarray(mask, bool)
        count = int(mask.sum())
        if count:
            self.reasons[reason] += count
            self.fallback |= mask


_Path = tuple[tuple[str, ...], pa.Array, "pa.Array | None"]  # path, values, the parent's validity


def _leaves(
    path: tuple[str, ...], array: pa.Array, parent: pa.Array | None, objects: list[_Path]
) -> Iterator[_Path]:
    """The leaf columns of a (struct) column: path, values (the parents' nulls merged) and the
    validity of the direct parent (None at the top: the row is always there); the struct columns
    themselves go to ``objects`` (a row's null in place of an object is a null value of the
    object's own column to flatten)."""
    if pa.types.is_struct(array.type):
        objects.append((path, array, parent))
        valid = array.is_valid()
        for struct_field, child in zip(array.type, array.flatten(), strict=True):
            yield from _leaves((*path, struct_field.name), child, valid, objects)
        return
    yield path, array, parent


def judge(table: pa.Table, lines: np.ndarray, chunk: bytes | pa.Buffer, suppressed: frozenset[str]) -> Group:
    """What the per-message rules would say of each row of ``table`` (read from ``chunk``, the
    file's lines ``lines``), or that they must say it (``fallback``)."""
    rows = table.num_rows
    marks = _Marks(rows)
    top = {name: table.column(name).combine_chunks() for name in table.column_names}
    leaves: list[_Path] = []
    objects: list[_Path] = []
    for name, array in top.items():
        if name in DROPPED_KEYS or name.startswith(INTERNAL_PREFIX):
            continue
        leaves += _leaves((name,), array, None, objects)

    # each column path's name and its values' type codes, per row
    texts = None  # the rows' lines, when needed
    names: dict[str, list[int]] = {}
    top_codes: dict[str, int] = {}  # a top-level key -> its index in codes
    codes: list[np.ndarray] = []
    typed: list[pa.Array] = []
    strings: list[tuple[int, tuple[str, ...], pa.Array, np.ndarray]] = []
    doubles: list[pa.Array] = []
    for path, values, _ in leaves:
        kind = values.type
        valid = values.is_valid().to_numpy(zero_copy_only=False)
        code = np.zeros(rows, np.uint8)
        if pa.types.is_int64(kind):
            code[valid] = 1
        elif pa.types.is_floating(kind):
            code[valid] = 2
            doubles.append(values)
        elif pa.types.is_boolean(kind):
            code[valid] = 3
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
            values = values.cast(pa.string())  # codes below: all string columns in one go
            strings.append((len(codes), path, values.drop_null(), np.flatnonzero(valid)))
        elif pa.types.is_list(kind) and _simple_list(kind):  # compact sorted-key JSON text, as flatten does
            code[valid] = 4
            values = _list_texts(values)
        elif pa.types.is_list(kind):  # of doubles, of objects: value by value, where Arrow is exact
            code[valid] = 4
            unsure = np.zeros(rows, bool)
            _unsure_doubles(values, np.arange(rows), unsure)  # 1 or 1.0?
            marks.mark(unsure, "a list holding an integral double (1 or 1.0?)")
            if _has_struct(kind):  # an object's null and absent keys look alike: lines without null
                if texts is None:
                    texts = _row_texts(chunk)
                marks.mark(
                    valid
                    & pc.fill_null(pc.match_substring(texts, "null"), False).to_numpy(zero_copy_only=False),
                    "a list of objects and a null",
                )
            values = pa.array(
                [None if v is None else json_text(_without_nulls(v)) for v in values.to_pylist()], pa.string()
            )
        elif not pa.types.is_null(kind):  # maps, unions: not from JSON
            marks.mark(valid, f"{kind} values")
        column = _column(path)
        if len(path) == 1:
            top_codes[path[0]] = len(codes)
        names.setdefault(column, []).append(len(codes))
        codes.append(code)
        typed.append(values)

    instants: dict[str, pa.Array] = {}  # top-level timestamp fields -> their instants per row
    if strings:  # the non-null values of every string column in one array: one call per step
        every_code, every_instant = _string_codes(pa.concat_arrays([v for _, _, v, _ in strings]))
        start = 0
        for index, path, _, where in strings:
            codes[index][where] = every_code[start : start + len(where)]
            if len(path) == 1 and path[0] in _TOP_TIMESTAMPS:
                spread = np.full(rows, -1, np.int64)
                spread[where] = np.arange(start, start + len(where))
                instants[path[0]] = every_instant.take(pa.array(spread, mask=spread < 0))
            start += len(where)
    if doubles:
        every = pa.concat_arrays(doubles)
        for mask, reason in (
            (pc.equal(pc.floor(every), every), "integral double (1 or 1.0?)"),
            (pc.invert(pc.is_finite(every)), "NaN or infinity (not JSON)"),
            (pc.greater_equal(pc.abs(every), 1e31), "double of 1e31 or more"),
        ):
            found = pc.fill_null(mask, False).to_numpy(zero_copy_only=False).reshape(-1, rows).any(axis=0)
            marks.mark(found, reason)

    # two key paths of one column (flatten records the collision and picks the winner). A null and
    # an absent key look alike in Arrow: a path is there where its value is not null, and may be
    # there where its parent is and the line may hold the key with a null (an object's path: where
    # the object is null). Rows where two or more paths hold values (and none may be a null) are
    # judged as flatten settles them: the path whose dotted form sorts last wins; other rows where
    # two or more may be there go back.
    collisions: dict[int, list[str]] = {}
    values_of: dict[str, pa.Array] = {}
    candidates: dict[str, list[tuple[_Path, bool]]] = {}
    for column, indexes in names.items():
        candidates[column] = [(leaves[index], False) for index in indexes]
    for found in objects:
        candidates.setdefault(_column(found[0]), []).append((found, True))
    for column in sorted(candidates):
        paths = candidates[column]
        if len(paths) < 2:
            if column in names:
                values_of[column] = typed[names[column][0]]
            continue
        if texts is None:
            texts = _row_texts(chunk)
        held = np.zeros(rows, np.int32)  # paths holding a value
        unsure = np.zeros(rows, np.int32)  # paths that may be there with a null
        for (path, values, parent), is_object in paths:
            maybe = (
                np.ones(rows, bool)
                if parent is None
                else pc.fill_null(parent, False).to_numpy(zero_copy_only=False)
            )
            nulled = pc.fill_null(pc.match_substring_regex(texts, _null_key(path[-1])), False).to_numpy(
                zero_copy_only=False
            )
            valid = values.is_valid().to_numpy(zero_copy_only=False)
            unsure += maybe & nulled & ~valid
            if not is_object:  # (an object there holds its keys' columns, not its own)
                held += valid
        marks.mark((held + unsure >= 2) & (unsure > 0), "two key paths of one column, one maybe null")
        indexes = names.get(column, [])
        if not indexes:
            continue
        # the leaves, the winner first (flatten's rank: the dotted path, then the path)
        ranked = sorted(
            indexes, key=lambda index: (".".join(leaves[index][0]), leaves[index][0]), reverse=True
        )
        arrays = [typed[index] for index in ranked]
        contested = held >= 2
        if len({a.type for a in arrays}) > 1:
            marks.mark(contested, "two key paths of one column, of different types")
            others = [a.is_valid().to_numpy(zero_copy_only=False) for a in arrays[1:]]
            marks.mark(np.any(others, axis=0), "two key paths of one column, of different types")
            values_of[column] = arrays[0]
            continue
        values_of[column] = pc.coalesce(*arrays)
        if not contested.any():
            continue
        taken = np.zeros(rows, bool)  # rows where a higher ranked path holds a value
        winners: dict[int, str] = {}
        for index in ranked:
            valid = typed[index].is_valid().to_numpy(zero_copy_only=False)
            dotted = ".".join(leaves[index][0])
            for row in np.flatnonzero(valid & taken & contested).tolist():
                collisions.setdefault(row, []).append(f"{column}: {winners[row]} won over {dotted}")
            for row in np.flatnonzero(valid & ~taken & contested).tolist():
                winners[row] = dotted
            codes[index][valid & taken] = 0  # a loser's value is not the row's
            taken |= valid

    valid = _validate(top, {key: codes[index] for key, index in top_codes.items()}, rows, marks)
    message_ids = _text(top, "messageId", rows, marks)
    dropped = np.zeros(rows, bool)
    if suppressed:  # dropped and counted, no values kept
        user = _text(top, "userId", rows, marks)
        dropped = pc.fill_null(pc.is_in(user, pa.array(sorted(suppressed))), False).to_numpy(
            zero_copy_only=False
        )
        dropped &= valid & ~marks.fallback

    segment_types, segment_ids = _segment_types(top, rows, marks)
    shapes, shape_ids = _shapes(codes, names, rows)
    return Group(
        lines=lines, fallback=marks.fallback, dropped=dropped, message_ids=message_ids,
        received=instants.get("receivedAt", pa.nulls(rows, UTC_MICROS)),
        segment_types=segment_types, segment_ids=segment_ids, shapes=shapes, shape_ids=shape_ids,
        columns=values_of, reasons=marks.reasons, collisions=collisions,
    )  # fmt: skip


def _column(path: tuple[str, ...]) -> str:
    """A key path's column, as flatten names it."""
    column = "_".join(part for part in map(snake_case, path) if part)
    if not column or len(column) > MAX_COLUMN_NAME_LENGTH:
        column = column_name(path)
    if len(path) and column in PARTITION_NAMES:
        column = SHADOWED_PREFIX + column
    return column


def _row_texts(chunk: bytes | pa.Buffer) -> pa.Array:
    """The lines of ``chunk`` (one row each) as text, without a copy."""
    ends = np.flatnonzero(np.frombuffer(chunk, np.uint8) == 10) + 1
    offsets = np.concatenate(([0], ends)).astype(np.int64)
    data = chunk if isinstance(chunk, pa.Buffer) else pa.py_buffer(chunk)
    return pa.Array.from_buffers(pa.large_string(), len(ends), [None, pa.py_buffer(offsets), data])


def _null_key(key: str) -> str:
    """A regex finding the lines where ``key`` may be there with a null value (``"key":null``), or
    where it cannot tell (a line escaping a character with ``\\u``: ``"\\u0061b"`` is ``"ab"``; a
    key JSON would escape or of other characters than letters, digits, ``_``, ``-``, ``$``, space)."""
    if not key or any(not (c.isascii() and (c.isalnum() or c in "_-$ ")) for c in key):
        return "null"
    escaped = "".join(f"\\{c}" if c in "$" else c for c in key)
    return f'"{escaped}"\\s*:\\s*null|\\\\u.*null|null.*\\\\u'


def _text(top: dict[str, pa.Array], name: str, rows: int, marks: _Marks) -> pa.Array:
    """A top-level field as text per row (null where absent); rows where it is not text go back."""
    array = top.get(name)
    if array is None or pa.types.is_null(array.type):
        return pa.nulls(rows, pa.string())
    if not pa.types.is_string(array.type):
        marks.mark(array.is_valid(), f"{name} not text")
        return pa.nulls(rows, pa.string())
    return array


def _validate(top: dict[str, pa.Array], codes: dict[str, np.ndarray], rows: int, marks: _Marks) -> np.ndarray:
    """``spec.validate`` on columns: the valid rows; invalid ones go back (the quarantine wants
    their reason and their line)."""

    def present(name: str) -> pa.Array:
        return pc.fill_null(pc.match_substring_regex(_text(top, name, rows, marks), _VISIBLE), False)

    kinds = _text(top, "type", rows, marks)
    valid = pc.fill_null(pc.is_in(kinds, pa.array(MESSAGE_TYPES)), False)
    valid = pc.and_(valid, pc.or_(present("userId"), present("anonymousId")))
    for kind, keys in REQUIRED_BY_TYPE.items():
        for key in keys:
            valid = pc.and_(valid, pc.or_(pc.fill_null(pc.not_equal(kinds, kind), True), present(key)))
    length = pc.utf8_length(_text(top, "messageId", rows, marks))
    valid = pc.and_(
        valid, pc.fill_null(pc.and_(pc.greater(length, 0), pc.less_equal(length, MAX_MESSAGE_ID)), False)
    )
    ok = pc.fill_null(valid, False).to_numpy(zero_copy_only=False).copy()
    for name in (*TIMESTAMP_FIELDS, "receivedAt"):
        array = top.get(name)
        if array is None or pa.types.is_null(array.type):
            if name == "receivedAt":
                ok[:] = False
            continue
        if not pa.types.is_string(array.type):
            marks.mark(array.is_valid(), f"{name} not text")
            continue
        ok &= codes[name] == 5 if name == "receivedAt" else codes[name] != 4
    marks.mark(~ok, "invalid message (quarantined with its line)")
    judged: np.ndarray = ok
    return judged


def _segment_types(top: dict[str, pa.Array], rows: int, marks: _Marks) -> tuple[list[str], np.ndarray]:
    """Each row's segment type, computed once per distinct (type, event)."""
    kinds = pc.fill_null(_text(top, "type", rows, marks), "")
    events = pc.fill_null(_text(top, "event", rows, marks), "")
    marks.mark(pc.match_substring(events, "\x00"), "event holding a NUL")
    track = pc.fill_null(pc.equal(kinds, "track"), False)
    key = pc.binary_join_element_wise(kinds, pc.if_else(track, events, ""), "\x00")
    encoded = key.dictionary_encode()
    names = []
    for distinct in encoded.dictionary.to_pylist():
        kind, event = distinct.split("\x00", 1)
        names.append(segment_type(kind, event) if kind in MESSAGE_TYPES else "")
    return names, encoded.indices.to_numpy(zero_copy_only=False)


def _shapes(
    codes: list[np.ndarray], names: dict[str, list[int]], rows: int
) -> tuple[list[dict[str, str]], np.ndarray]:
    """The rows' maps of column types: the distinct ones and each row's index among them."""
    matrix = np.ascontiguousarray(np.stack(codes, axis=1)) if codes else np.zeros((rows, 1), np.uint8)
    signatures = pa.Array.from_buffers(pa.binary(matrix.shape[1]), rows, [None, pa.py_buffer(matrix)])
    encoded = signatures.dictionary_encode()  # a hash table in C: one id per distinct row
    ids = encoded.indices.to_numpy(zero_copy_only=False)
    shapes: list[dict[str, str]] = [{} for _ in range(len(encoded.dictionary))]
    _, first = np.unique(ids, return_index=True)
    for shape, row in enumerate(first):
        for column, indexes in names.items():
            kind = next((_CODES[int(matrix[row, i])] for i in indexes if matrix[row, i]), None)
            if kind is not None:
                shapes[shape][column] = kind
    return shapes, ids


def _string_codes(values: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Type codes of non-null strings (4 string, 5 timestamp) and the instants of the timestamps
    (null elsewhere), as ``value_type`` and ``parse_timestamp`` decide. Text in :data:`DATE_TIME`'s
    form is cast by Arrow; the other candidates (16 to 40 characters with ``-`` at index 4 or a
    leading space) are parsed one by one. Both searches are anchored regexes, run only on the text
    :func:`_may_be_instants` does not rule out from its first bytes."""
    codes = np.full(len(values), 4, np.uint8)
    micros = np.zeros(len(values), np.int64)
    narrow, wide = np.zeros(len(values), bool), np.zeros(len(values), bool)
    maybe = _may_be_instants(values)
    if len(maybe):
        some = values.take(pa.array(maybe))
        for found, pattern in ((narrow, DATE_TIME), (wide, _CANDIDATE)):
            matched = pc.match_substring_regex(some, pattern)
            found[maybe] = pc.fill_null(matched, False).to_numpy(zero_copy_only=False)
    slow = np.flatnonzero(wide & ~narrow)
    where = np.flatnonzero(narrow)
    if len(where):
        try:
            cast = values.take(pa.array(where)).cast(UTC_MICROS).cast(pa.int64())
            micros[where] = cast.to_numpy(zero_copy_only=False)
            codes[where] = 5
        except pa.ArrowInvalid:  # an impossible date among them (February 30): one by one
            slow = np.union1d(slow, where)
    if len(slow):
        texts = values.take(pa.array(slow)).to_pylist()
        for row, text in zip(slow.tolist(), texts, strict=True):
            moment = parse_timestamp(text) if 16 <= len(text) <= 40 else None
            if moment is not None:
                codes[row] = 5
                micros[row] = (moment - _EPOCH) // _MICROSECOND
    return codes, pa.array(micros, pa.int64(), mask=codes != 5).cast(UTC_MICROS)


def _may_be_instants(values: pa.Array) -> np.ndarray:
    """The indexes of the texts (non-null strings) that :data:`_CANDIDATE` may match, judged from
    their first five bytes (a superset: it matches only text whose fifth character is ``-`` or
    whose first is a space or a control character, and a byte above 127 may start either)."""
    offsets = np.frombuffer(values.buffers()[1], np.int32)[values.offset : values.offset + len(values) + 1]
    data = values.buffers()[2]
    if data is None or not data.size:
        return np.zeros(0, np.int64)
    content = np.frombuffer(data, np.uint8)
    starts, lengths = offsets[:-1].astype(np.int64), np.diff(offsets)

    def byte(k: int) -> np.ndarray:  # each text's byte k (0 where it is shorter)
        return np.where(lengths > k, content[np.minimum(starts + k, len(content) - 1)], 0)

    first = byte(0)
    wide = (lengths > 0) & ((first <= 0x20) | (first >= 0x80))
    wider = np.maximum.reduce([byte(k) for k in range(1, 4)]) >= 0x80  # the fifth character further on
    dash = (lengths > 4) & ((byte(4) == ord("-")) | wider)
    return np.flatnonzero(wide | dash)


def _unsure_doubles(values: pa.Array, rows_of: np.ndarray, unsure: np.ndarray) -> None:
    """Mark in ``unsure`` the rows (``rows_of``: each value's row) holding, anywhere inside
    ``values``, a double JSON may have spelled as an integer (Arrow reads ``[1.5, 2]`` as doubles),
    a non-finite one or one of 1e31 or more (an integer beyond 64 bits)."""
    kind = values.type
    if pa.types.is_list(kind):
        parents = pc.list_parent_indices(values).to_numpy(zero_copy_only=False)
        _unsure_doubles(pc.list_flatten(values), rows_of[parents], unsure)
    elif pa.types.is_struct(kind):
        for child in values.flatten():
            _unsure_doubles(child, rows_of, unsure)
    elif pa.types.is_floating(kind) and len(values):
        doubt = pc.or_(
            pc.or_(pc.equal(pc.floor(values), values), pc.invert(pc.is_finite(values))),
            pc.greater_equal(pc.abs(values), 1e31),
        )
        unsure[rows_of[pc.fill_null(doubt, False).to_numpy(zero_copy_only=False)]] = True


def _has_struct(kind: pa.DataType) -> bool:
    if pa.types.is_list(kind):
        return _has_struct(kind.value_type)
    return bool(pa.types.is_struct(kind))


def _without_nulls(value: Any) -> Any:
    """A value of a list column as flatten saw it: Arrow gives an object every key of its column,
    null where the object had none (lines holding a null go back: see judge)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


_SIMPLE_ITEMS = (pa.types.is_string, pa.types.is_int64, pa.types.is_boolean, pa.types.is_null)


def _simple_list(kind: pa.DataType) -> bool:
    """A list (of lists) of strings, integers, booleans or nulls: its text is exact from Arrow."""
    if pa.types.is_list(kind):
        return _simple_list(kind.value_type)
    return any(test(kind) for test in _SIMPLE_ITEMS)


def _list_texts(values: pa.Array) -> pa.Array:
    """A list column as ``json_text`` gives it: in C for lists of integers, booleans and strings
    that need no escaping (orjson escapes only quotes, backslashes and control characters) with no
    null item; value by value otherwise."""
    item = values.type.value_type
    if pa.types.is_int64(item) or pa.types.is_boolean(item) or pa.types.is_string(item):
        items = pc.list_flatten(values)
        simple = not len(items) or not pc.any(pc.is_null(items)).as_py()
        if simple and pa.types.is_string(item) and len(items):
            simple = not pc.any(pc.match_substring_regex(items, r'["\\\x00-\x1f\x7f]')).as_py()
        if simple:
            texts = values.cast(pa.list_(pa.string()))
            quote = '"' if pa.types.is_string(item) else ""
            joined = pc.binary_join(texts, quote + "," + quote)
            whole = pc.binary_join_element_wise("[" + quote, joined, quote + "]", "")
            return pc.if_else(pc.equal(pc.list_value_length(values), 0), pa.scalar("[]"), whole)
    return pa.array([None if v is None else json_text(v) for v in values.to_pylist()], pa.string())
