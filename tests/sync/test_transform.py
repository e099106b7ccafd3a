"""The per-message work of the Spark workers, as plain functions (no Spark session)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import orjson
import pytest

from eventlake.schema import cast_value
from eventlake.spec import enrich
from eventlake.storage import LocalStorage
from eventlake.sync.pipeline.transform import dumps, loads, parse_line
from eventlake.sync.pipeline.write import cast_rows
from eventlake.sync.protocol.stage import DEDUPE, TABLE, VALUES, RunStage, StagedFile
from eventlake.timestamps import parse_timestamp

RECEIVED = parse_timestamp("2026-11-22T10:47:00.123Z")


def archived(message: dict) -> str:
    return orjson.dumps(enrich(message, received_at=RECEIVED, source_id="src1")).decode()


def test_a_valid_message_is_flattened_and_typed() -> None:
    line = archived(
        {
            "type": "track",
            "userId": "u1",
            "event": "Order Completed",
            "messageId": "m1",
            "properties": {"revenue": 19.99, "items": 2, "tags": ["a"]},
            "context": {"ip": "1.2.3.4"},
        }
    )
    ok, message_id, received, segment_type, payload, types, collisions, reason, raw = parse_line(line)
    assert (ok, message_id, received, segment_type, reason, raw) == (
        True,
        "m1",
        RECEIVED,
        "track_order_completed",
        None,
        None,
    )
    values = loads(payload)
    assert values["properties_revenue"] == 19.99 and values["properties_tags"] == '["a"]'
    assert values["context_ip"] == "1.2.3.4" and values["project_id"] == "src1"
    assert types["properties_revenue"] == "decimal(38,6)" and types["properties_items"] == "bigint"
    assert types["received_at"] == "timestamp" and collisions == []


def test_invalid_lines_are_rejected_with_a_reason_and_kept_raw() -> None:
    rejected = parse_line("{nope")
    assert rejected[0] is False and rejected[7].startswith("invalid JSON") and rejected[8] == "{nope"
    no_user = archived({"type": "track", "event": "X", "messageId": "m2"})
    result = parse_line(no_user)
    assert result[0] is False and result[1] == "m2" and result[7] == "neither userId nor anonymousId"
    assert result[8] == no_user
    lone = archived({"type": "track", "event": "X", "userId": "u", "messageId": "m3"}).replace(
        '"userId":"u"', '"userId":"u\\udc00"'
    )  # valid JSON, but not text: kept raw, not failing the write pass's Arrow strings
    surrogate = parse_line(lone)
    assert surrogate[0] is False and surrogate[8] == lone and "lone UTF-16 surrogate" in surrogate[7]
    assert surrogate[7].startswith("invalid JSON")
    paired = parse_line(lone.replace("\\udc00", "\\ud83d\\ude00"))  # a pair is an emoji
    assert paired[0] is True and loads(paired[4])["user_id"] == "u\U0001f600"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999", "-1.5e400"])
def test_nan_and_infinity_are_invalid_json(constant: str) -> None:
    """Python's json (the fallback for what orjson refuses) reads them (1e999 as infinity); JSON
    has no such values. They made a valid message whose value was written as null."""
    line = archived({"type": "track", "event": "X", "userId": "u", "messageId": "m4", "properties": {"x": 1}})
    line = line.replace('"x":1', f'"x":{constant}')
    row = parse_line(line)
    assert row[0] is False and row[8] == line
    assert row[7].startswith("invalid JSON") and constant in row[7], row[7]


def test_top_level_keys_never_shadow_partition_columns() -> None:
    line = archived({"type": "identify", "userId": "u1", "messageId": "m3", "day": "monday", "hr": 5})
    values = loads(parse_line(line)[4])
    assert values["_day"] == "monday" and values["_hr"] == 5 and "day" not in values


def test_collisions_are_reported() -> None:
    line = archived(
        {
            "type": "identify",
            "userId": "u1",
            "messageId": "m4",
            "traits": {"firstName": "A", "first_name": "B"},
        }
    )
    assert parse_line(line)[6] == ["traits_first_name: traits.first_name won over traits.firstName"]


def test_cast_rows_widens_and_rejects() -> None:
    rows = [
        {"a": 12, "b": "twelve", "c": 1.5, "d": "2026-11-22T10:00:00Z", "e": None},
        {"a": 1.25, "b": 7, "c": "x", "d": "noon"},
    ]
    columns = [("a", "decimal(38,6)"), ("b", "bigint"), ("c", "string"), ("d", "timestamp"), ("e", "bigint")]
    table, rejected = cast_rows(rows, columns)
    assert table.to_pylist() == [
        {
            "a": Decimal("12.000000"),
            "b": None,
            "c": "1.5",
            "d": parse_timestamp("2026-11-22T10:00:00Z"),
            "e": None,
        },
        {"a": Decimal("1.250000"), "b": 7, "c": "x", "d": None, "e": None},
    ]
    assert rejected == [
        (0, "b", "bigint", "twelve", "not an integer"),
        (1, "d", "timestamp", "noon", "not an ISO-8601 date-time"),
    ]


# values that take each column type's fast path in cast_column, and the ones next to its edges
_EDGE_VALUES = {
    "bigint": [0, -(2**63), 2**63 - 1, 2**63, -(2**63) - 1, True, 3.0, 3.5, "4", " 5 ", "x", "1e3", []],
    "boolean": [True, False, 1, 0, "true", " FALSE ", "yes", 1.0],
    "string": ["", "x", 1, 2**70, 1.5, 1e20, True, float("nan"), [1, "a"], {"k": None}],
    "decimal(38,6)": [
        0.0,
        -0.0,
        19.99,
        0.1,
        0.0000005,
        0.0000015,
        0.0000125,
        1.0000005,
        123456.789012,
        999999999.999999,
        1e9,
        -1e9,
        1e9 + 0.5,
        1e-7,
        3.14159265358979,
        1e31,
        1e32,
        float("inf"),
        float("nan"),
        2**53 + 1,
        -(2**63),
        2**63 - 1,
        2**63,
        10**31,
        10**32,
        "2.5",
        "abc",
        True,
        7,
    ],
    "timestamp": [
        "2026-11-22T10:47:01Z",
        "2026-11-22T10:47:01.1Z",
        "2026-11-22T10:47:01.123456Z",
        "2026-11-22T10:47:01.1234567Z",
        "2026-11-22T10:47:01+02:00",
        "2026-11-22T10:47:01-23:59",
        "2026-11-22T10:47:01+24:00",
        "2026-11-22T10:47:01+0200",
        "2026-11-22 10:47:01Z",
        "2026-11-22t10:47:01z",
        "2026-02-30T00:00:00Z",
        "2026-11-22T24:00:00Z",
        "2026-11-22T23:59:60Z",
        "0999-01-01T00:00:00Z",
        "1000-01-01T00:00:00-01:00",
        "8999-12-31T23:59:59Z",
        "9999-12-31T23:59:59-01:00",
        "0000-01-01T00:00:00Z",
        "2026-11-22",
        "2026-11-22T10:47Z",
        " 2026-11-22T10:47:01Z",
        "noon",
        1700000000,
        True,
    ],
}


def _random_value(rng, kind: str, profile: tuple[str, int, int]):
    """A value of a column of ``kind`` whose ``profile`` is (mode, decimals, magnitude): mostly
    of the column's own type, or integers (mode "integers"), or integers and floats ("mixed"), so
    that whole columns take each fast path; sometimes an edge value (the column goes value by
    value)."""
    mode, decimals, magnitude = profile
    if rng.random() < 0.15:
        return None
    if rng.random() < 0.02:
        return rng.choice(_EDGE_VALUES[kind])
    if kind == "bigint" or (kind in ("decimal(38,6)", "string") and mode == "integers"):
        return rng.randrange(-(2**63), 2**63)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "string":
        return rng.choice(["a", "Berlin", "", "ü"]) * rng.randrange(3)
    if kind == "decimal(38,6)":
        if mode == "mixed" and rng.random() < 0.5:
            return rng.randrange(-(10 ** max(magnitude, 0)), 10 ** max(magnitude, 0) + 1)
        return round(rng.uniform(-1, 1) * 10**magnitude, decimals)
    moment = datetime(1000, 1, 2) + timedelta(microseconds=rng.randrange(2**58 - 2**54))  # to 9999
    offset = rng.choice(["Z", "+00:00", "+05:30", "-08:00", "+23:59"])
    return moment.isoformat(timespec=rng.choice(["seconds", "milliseconds", "microseconds"])) + offset


def _cast_by_value(rows, columns):
    """What :func:`cast_rows` must give, from :func:`cast_value` value by value."""
    expected_rows, expected_rejected = [], []
    for number, row in enumerate(rows):
        cast = {}
        for name, kind in columns:
            value, reason = cast_value(row.get(name), kind)
            cast[name] = value
            if reason is not None:
                raw = row[name] if isinstance(row[name], str) else dumps(row[name])
                expected_rejected.append((number, name, kind, raw, reason))
        expected_rows.append(cast)
    return expected_rows, expected_rejected


def test_cast_rows_gives_what_cast_value_gives_value_by_value() -> None:
    """The whole-column paths (Arrow casts) against the per-value rules, on seeded random columns:
    the same values, the same rejections with the same reasons."""
    import random

    rng = random.Random(10)
    kinds = list(_EDGE_VALUES)
    for trial in range(300):
        columns = [(f"c{i}", kinds[i % len(kinds)]) for i in range(len(kinds) * 2)]
        profiles = {
            name: (rng.choice(["own", "integers", "mixed"]), rng.randrange(0, 9), rng.randrange(-3, 16))
            for name, _ in columns
        }
        rows = [
            {name: _random_value(rng, kind, profiles[name]) for name, kind in columns}
            for _ in range(rng.randrange(1, 40))
        ]
        table, rejected = cast_rows(rows, columns)
        assert (table.to_pylist(), rejected) == _cast_by_value(rows, columns), trial
    # each edge value in a column otherwise of the column's own type (and of integers)
    for kind, edges in _EDGE_VALUES.items():
        for edge in edges:
            for others in ([None, 19.99, 0.5, 10], [7, None], ["x"], ["2026-11-22T10:47:01Z"], [True]):
                rows = [{"c": value} for value in [*others, edge, *others]]
                table, rejected = cast_rows(rows, [("c", kind)])
                assert (table.to_pylist(), rejected) == _cast_by_value(rows, [("c", kind)]), (kind, edge)


def test_a_segment_type_is_written_one_file_per_table_partition_in_received_order(tmp_path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from eventlake.sync.pipeline.write import write_segment_type

    columns = (("message_id", "string"), ("traits_age", "bigint"))
    ten = parse_timestamp("2026-11-22T10:00:00Z")
    pieces = pa.table(
        {
            "position": pa.array([7, 1, 3, 5], pa.int64()),
            "message_id": ["m3", "m1", "m2", "m4"],
            "received_at": pa.array([ten.replace(hour=11), ten, ten, ten], pa.timestamp("us", tz="UTC")),
            "payload": ['{"message_id": "m3"}', '{"message_id": "m1", "traits_age": 3}',
                        '{"message_id": "m2", "traits_age": "old"}', '{"message_id": "m4"}'],
        }
    )  # fmt: skip
    piece = tmp_path / "pieces" / "identify" / "00000-000.arrow"
    piece.parent.mkdir(parents=True)
    with pa.ipc.new_file(str(piece), pieces.schema) as writer:
        writer.write_table(pieces)
    stage = RunStage(tmp_path, "src1", "src1", "r1", ("day", "hr"))
    records, ids = write_segment_type(
        (0, "identify", [str(piece)]), schemas={"identify": columns}, blocked=(),
        drop=pa.array([5], pa.int64()), window=None, stage=stage, storage=LocalStorage(),
        date_partition="day-hour",
    )  # fmt: skip
    assert ids is not None and ids["message_id"].to_pylist() == ["m1", "m2", "m3"]  # m4: dropped
    name = "part-r1-00000.parquet"
    assert records == [
        StagedFile(TABLE, name, 2, "identify", ("2026-11-22", "10")),
        StagedFile(TABLE, name, 1, "identify", ("2026-11-22", "11")),
        StagedFile(VALUES, "values-" + name, 1),
    ]
    table = pq.read_table(stage.staged(records[0]))
    assert table.to_pydict() == {"message_id": ["m1", "m2"], "traits_age": [3, None]}
    assert stage.final(records[0]) == tmp_path / (
        "segment-data/data/src1/segment_type=identify/day=2026-11-22/hr=10/" + name
    )
    quarantined = pq.read_table(stage.staged(records[2])).to_pylist()
    assert [(q["message_id"], q["column_name"], q["raw_value"]) for q in quarantined] == [
        ("m2", "traits_age", "old")
    ]


def test_messages_name_their_shape_and_each_shape_comes_once() -> None:
    from eventlake.sync.pipeline.transform import Shapes

    shapes = Shapes(task=3)
    same = [archived({"type": "identify", "userId": f"u{i}", "messageId": f"m{i}"}) for i in range(2)]
    other = archived({"type": "identify", "userId": "u9", "messageId": "m9", "traits": {"age": 3}})
    results = [shapes.row(parse_line(line)) for line in [*same, other, "{nope"]]
    names = [row[-1] for row, _ in results]
    assert names == ["3-0", "3-0", "3-1", None]
    new = [shape for _, shape in results if shape is not None]
    assert [(s[0], s[-1], s[5]["traits_age"] if "traits_age" in s[5] else None) for s in new] == [
        (None, "3-0", None),
        (None, "3-1", "bigint"),
    ]
    assert all(row[5] is None for row, _ in results)  # messages carry the name, not the map


def _archive(tmp_path, lines: list[str]):
    import gzip

    path = tmp_path / "archive.gz"
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return path


def test_the_parse_pass_keeps_valid_messages_values_in_pieces_and_numbers_every_row(tmp_path) -> None:
    import pyarrow as pa

    from eventlake.sync.pipeline.pieces import pieces_by_type, read_pieces
    from eventlake.sync.pipeline.transform import PARSED_ARROW, line_hash, parse_files

    lines = [
        archived({"type": "identify", "userId": "u1", "messageId": "m1", "traits": {"age": 3}}),
        "{nope",
        archived({"type": "track", "event": "Signed Up", "userId": "u2", "messageId": "m2"}),
        archived({"type": "identify", "userId": "u3", "messageId": "m3", "traits": {"age": 4}}),
    ]
    archive = _archive(tmp_path, lines)
    folder = tmp_path / "pieces"
    batch = pa.RecordBatch.from_pydict({"location": [str(archive)], "number": [3]})
    out = pa.Table.from_batches(
        list(parse_files([batch], storage=LocalStorage(), pieces=folder, columnar=False)), schema=PARSED_ARROW
    ).to_pylist()
    positions = [row["position"] for row in out]
    assert len(set(positions)) == len(out) and all(p >> 33 == 3 for p in positions)  # from the file's number
    messages = [row for row in out if row["ok"] is not None]
    assert [m["position"] for m in messages] == [(3 << 33) + n for n in range(4)]  # line n: first + n
    assert [(m["ok"], m["message_id"]) for m in messages] == [
        (True, "m1"),
        (False, None),
        (True, "m2"),
        (True, "m3"),
    ]
    assert messages[1]["raw"] == "{nope" and messages[1]["line_hash"] is None
    found = pieces_by_type(LocalStorage(), folder)
    assert sorted(found) == ["identify", "track_signed_up"]
    identify = read_pieces(LocalStorage(), found["identify"][1], pa.array([], pa.int64()), None).to_pylist()
    assert [p["message_id"] for p in identify] == ["m1", "m3"]
    by_id = {m["message_id"]: m for m in messages if m["ok"]}
    assert [p["position"] for p in identify] == [by_id["m1"]["position"], by_id["m3"]["position"]]
    assert loads(identify[0]["payload"])["traits_age"] == 3
    assert by_id["m1"]["line_hash"] == line_hash(lines[0].encode())
    kept = read_pieces(LocalStorage(), found["identify"][1], pa.array([by_id["m1"]["position"]]), None)
    assert kept.column("message_id").to_pylist() == ["m3"]
    later = (RECEIVED.replace(minute=48), RECEIVED.replace(hour=11))
    assert read_pieces(LocalStorage(), found["identify"][1], pa.array([], pa.int64()), later).num_rows == 0


def test_a_failed_parse_task_leaves_no_piece(tmp_path) -> None:
    from eventlake.sync.pipeline.pieces import Pieces, pieces_by_type

    folder = tmp_path / "pieces"
    try:
        with Pieces(LocalStorage(), folder, 7) as pieces:
            for position in range(2500):  # past one flush: a file is open when the task fails
                pieces.add("identify", position, f"m{position}", RECEIVED, "{}")
            raise RuntimeError("the task died")
    except RuntimeError:
        pass
    assert pieces_by_type(LocalStorage(), folder) == {}


def test_a_task_with_many_segment_types_keeps_few_files_open(tmp_path, monkeypatch) -> None:
    import pyarrow as pa

    from eventlake.sync.pipeline import pieces as module
    from eventlake.sync.pipeline.pieces import Pieces, pieces_by_type, read_pieces

    monkeypatch.setattr(module, "_OPEN_FILES", 2)
    monkeypatch.setattr(module, "_FLUSH_ROWS", 1)
    folder = tmp_path / "pieces"
    with Pieces(LocalStorage(), folder, 0) as pieces:
        for position, segment_type in enumerate(["a", "b", "c", "a", "b", "a"]):
            pieces.add(segment_type, position, f"m{position}", RECEIVED, "{}")
            assert len(pieces.open) <= 2
    found = pieces_by_type(LocalStorage(), folder)
    assert {t: [p.rsplit("/", 1)[1] for p in paths] for t, (_, paths) in found.items()} == {
        "a": ["00000-000.arrow", "00000-001.arrow"],  # a, b open; c closes a; a closes b; ...
        "b": ["00000-000.arrow", "00000-001.arrow"],
        "c": ["00000-000.arrow"],
    }
    rows = read_pieces(LocalStorage(), found["a"][1], pa.array([], pa.int64()), None)
    assert rows.column("position").to_pylist() == [0, 3, 5]


def test_a_run_whose_write_pass_lost_rows_fails() -> None:
    import pytest

    from eventlake.sync.pipeline.job import _check_written
    from eventlake.sync.protocol.stage import MESSAGES

    staged = [
        StagedFile(TABLE, "p0", 2, "identify", ("2026-11-22", "10")),
        StagedFile(TABLE, "p0", 1, "identify", ("2026-11-22", "11")),
        StagedFile(MESSAGES, "blocked-p1", 4, "page"),
    ]
    _check_written(staged, {"identify": 3, "page": 4}, ["identify", "page"])
    with pytest.raises(RuntimeError, match="staged 3 messages of 'identify', expected 5"):
        _check_written(staged, {"identify": 5, "page": 4}, ["identify", "page"])


def test_a_segment_type_is_written_from_its_pieces_sorted_by_partition(tmp_path) -> None:
    from pathlib import Path

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from eventlake import layout
    from eventlake.sync.index.index_keys import RECORD, TRAILER, keys, sort_unique
    from eventlake.sync.pipeline.pieces import Pieces, pieces_by_type
    from eventlake.sync.pipeline.write import write_segment_type, write_segment_types

    folder = tmp_path / "pieces"
    ten, eleven = RECEIVED, RECEIVED.replace(hour=11)
    with Pieces(LocalStorage(), folder, 0) as pieces:
        pieces.add("identify", 5, "m5", eleven, '{"message_id": "m5"}')
        pieces.add("identify", 3, "m3", ten, '{"message_id": "m3", "traits_age": "old"}')
        pieces.add("identify", 1, "m1", ten, '{"message_id": "m1", "traits_age": 3}')
    with Pieces(LocalStorage(), folder, 1) as pieces:
        pieces.add("identify", 2, "m2", ten, '{"message_id": "m2"}')  # dropped: a duplicate
    paths = pieces_by_type(LocalStorage(), folder)["identify"][1]
    stage = RunStage(tmp_path, "src1", "src1", "r1", ("day", "hr"))
    common = {
        "schemas": {"identify": (("message_id", "string"), ("traits_age", "bigint"))},
        "drop": pa.array([2], pa.int64()), "window": None, "stage": stage, "storage": LocalStorage(),
        "date_partition": "day-hour",
    }  # fmt: skip
    records, ids = write_segment_type((4, "identify", paths), blocked=(), **common)
    name = "part-r1-00004.parquet"
    assert ids is not None and ids.column("message_id").to_pylist() == ["m1", "m3", "m5"]
    assert records == [
        StagedFile(TABLE, name, 2, "identify", ("2026-11-22", "10")),
        StagedFile(TABLE, name, 1, "identify", ("2026-11-22", "11")),
        StagedFile(VALUES, "values-" + name, 1),
    ]
    assert pq.read_table(stage.staged(records[0])).to_pydict() == {
        "message_id": ["m1", "m3"], "traits_age": [3, None]
    }  # fmt: skip
    day_stage = RunStage(tmp_path / "by-day", "src1", "src1", "r1", ("day",))
    by_day, _ = write_segment_type(
        (4, "identify", paths), blocked=(), **{**common, "stage": day_stage, "date_partition": "day"}
    )  # the 10:00 and 11:00 rows: one daily partition, one file
    assert by_day[0] == StagedFile(TABLE, name, 3, "identify", ("2026-11-22",))
    assert pq.read_table(day_stage.staged(by_day[0])).column("message_id").to_pylist() == ["m1", "m3", "m5"]
    blocked, no_ids = write_segment_type((4, "identify", paths), blocked=("identify",), **common)
    assert no_ids is None  # a blocked table's messages are not in the dedupe index
    assert [(f.kind, f.name, f.rows) for f in blocked] == [("messages", "blocked-" + name, 3)]
    rows = pq.read_table(stage.staged(blocked[0])).to_pylist()
    assert [(r["kind"], r["reason"], r["message_id"], r["table_name"]) for r in rows] == [
        ("message", "table limit reached", m, "identify") for m in ("m1", "m3", "m5")
    ]
    both = write_segment_types(
        [(4, "identify", paths), (5, "page", [])], blocked=("page",), **common
    )  # one task's types: one slice of the dedupe index
    assert both[-1] == StagedFile(DEDUPE, layout.index_file_name("r1", 4), 3)
    data = Path(stage.staged(both[-1])).read_bytes()  # a key file (sync/index/index_keys.py)
    count = TRAILER.unpack(data[-TRAILER.size :])[2]
    records = np.frombuffer(data[: count * RECORD.itemsize], RECORD)
    expected = sort_unique(keys(pa.array(["m1", "m3", "m5"])))
    assert (records["hi"].tolist(), records["lo"].tolist()) == (
        expected["hi"].tolist(),
        expected["lo"].tolist(),
    )


def test_partition_values_of_an_hour_match_spark_date_patterns() -> None:
    from eventlake.sync.pipeline.write import _partition_values

    def hour(*when: int) -> int:
        return int(datetime(*when, tzinfo=timezone.utc).timestamp()) // 3600

    assert _partition_values(hour(2026, 11, 22, 7), "day-hour") == (
        "2026-11-22",
        "07",
    )
    assert _partition_values(hour(2026, 1, 2, 23), "year-month-day-hour") == (
        "2026", "01", "02", "23"
    )  # fmt: skip
    assert _partition_values(hour(999, 3, 4, 0), "day") == ("0999-03-04",)  # as yyyy
    assert _partition_values(hour(1969, 12, 31, 23), "day-hour") == (
        "1969-12-31",
        "23",
    )


def test_a_damaged_archive_file_is_one_row_naming_it_and_gives_no_line_nor_piece(tmp_path) -> None:
    import pyarrow as pa

    from eventlake.sync.pipeline.pieces import pieces_by_type, read_all_pieces
    from eventlake.sync.pipeline.transform import PARSED_ARROW, parse_files

    good = _archive(tmp_path, [archived({"type": "track", "event": "A", "userId": "u", "messageId": "g"})])
    many = [
        archived({"type": "track", "event": "A", "userId": "u", "messageId": f"d{n}"}) for n in range(500)
    ]
    (tmp_path / "t").mkdir()
    whole = _archive(tmp_path / "t", many)
    truncated = tmp_path / "truncated.gz"
    truncated.write_bytes(whole.read_bytes()[: whole.stat().st_size * 3 // 4])  # the start decompresses
    plain = tmp_path / "plain.gz"
    plain.write_text(many[0] + "\n")
    folder = tmp_path / "pieces"
    batch = pa.RecordBatch.from_pydict(
        {"location": [str(truncated), str(good), str(plain)], "number": [0, 1, 2]}
    )
    out = pa.Table.from_batches(
        list(parse_files([batch], storage=LocalStorage(), pieces=folder)), schema=PARSED_ARROW
    ).to_pylist()
    damaged = [(r["raw"], r["reason"]) for r in out if r["ok"] is None and r["shape"] is None]
    assert damaged == [
        (str(truncated), "Compressed file ended before the end-of-stream marker was reached"),
        (str(plain), "Not a gzipped file (b'{\"')"),
    ]
    assert [r["message_id"] for r in out if r["ok"] is not None] == ["g"]  # all or nothing per file
    [(_, (_, files))] = pieces_by_type(LocalStorage(), folder).items()
    json_rows, typed = read_all_pieces(LocalStorage(), files, pa.array([], pa.int64()), None)
    kept = [
        *json_rows.column("message_id").to_pylist(),
        *(m for t in typed for m in t["message_id"].to_pylist()),
    ]
    assert kept == ["g"]  # nothing of the damaged files' lines
