"""The columnar parse (sync.parser = "columnar", the default) against the per-message rules
("per-message", the specification) on the same archives: the same rows for Spark (validity, ids,
received times, segment types, tie-break hashes, column types, reasons, raw lines), the same dedupe
decisions, and the same files from the write pass (table rows and values, values that did not fit,
messages of blocked tables). The whole sync, through Spark and the catalog, at the end."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlake import layout
from eventlake.schema import evolve
from eventlake.storage import LocalStorage
from eventlake.sync.pipeline import columnar, write
from eventlake.sync.pipeline.pieces import pieces_by_type, read_all_pieces
from eventlake.sync.pipeline.transform import PARSED_ARROW, parse_files
from eventlake.sync.pipeline.write import cast_json_pieces, cast_typed_piece, write_segment_types, write_units
from eventlake.sync.protocol.stage import DEDUPE, TABLE, VALUES, RunStage

from .columnar_corpus import documented_messages, edge_lines, fuzz_lines, line, typed_lines

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import sync as bench_inputs  # noqa: E402 - bench/sync.py


def _archives(folder: Path, chunks: list[list[bytes]]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for number, lines in enumerate(chunks):
        path = folder / f"archive-{number:03d}.gz"
        path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
        paths.append(path)
    return paths


def _parse(files: list[Path], pieces: Path, columnar: bool, suppressed: frozenset[str]) -> pa.Table:
    """The parse pass over ``files`` as two Spark tasks would run it (the first half, the rest)."""
    batches: list[pa.RecordBatch] = []
    half = max(1, len(files) // 2)
    for task in (range(0, half), range(half, len(files))):
        if not len(task):
            continue
        frame = pa.RecordBatch.from_pydict(
            {"location": [str(files[n]) for n in task], "number": list(task), "size": [0] * len(task)}
        )
        batches += parse_files(
            [frame], storage=LocalStorage(), pieces=pieces, suppressed=suppressed, columnar=columnar
        )
    return pa.Table.from_batches(batches, PARSED_ARROW)


def _messages(parsed: pa.Table) -> dict[int, tuple[Any, ...]]:
    """Each message row by position, its shape resolved to its map of column types (order aside)."""
    others = parsed.filter(pc.is_null(parsed["ok"]))
    shapes = {
        name: dict(types)
        for name, types in zip(others["shape"].to_pylist(), others["types"].to_pylist(), strict=True)
        if name is not None
    }
    rows = parsed.filter(pc.is_valid(parsed["ok"])).to_pylist()
    found = {}
    for row in rows:
        types = shapes.get(row["shape"]) if row["shape"] is not None else None
        found[row["position"]] = (
            row["ok"], row["message_id"], row["received_at"], row["segment_type"], row["line_hash"],
            None if types is None else sorted(types.items()), row["collisions"], row["reason"], row["raw"],
        )  # fmt: skip
    damaged = sorted((r["raw"], r["reason"]) for r in others.to_pylist() if r["shape"] is None)
    return {**found, -1: tuple(damaged)}


def _dedupe(parsed: pa.Table) -> list[int]:
    """The positions the dedupe drops within a run (as the Spark job: every copy of an id but the
    first by received time, then the line's hash, then position)."""
    valid = parsed.filter(pc.fill_null(parsed["ok"], False))
    order = sorted(
        zip(
            *(valid[c].to_pylist() for c in ("message_id", "received_at", "line_hash", "position")),
            strict=True,
        )
    )
    return sorted(r[3] for i, r in enumerate(order) if i and order[i - 1][0] == r[0])


def _schemas(parsed: pa.Table, drop: list[int], blocked: frozenset[str]) -> dict[str, Any]:
    """Each segment type's columns, as the plan types them from the shapes of the rows kept."""
    valid = parsed.filter(pc.fill_null(parsed["ok"], False))
    kept = valid.filter(pc.invert(pc.is_in(valid["position"], pa.array(drop, pa.int64()))))
    others = parsed.filter(pc.is_null(parsed["ok"]))
    shapes = dict(zip(others["shape"].to_pylist(), others["types"].to_pylist(), strict=True))
    observed: dict[str, dict[str, set[str]]] = {}
    for segment_type, shape in zip(kept["segment_type"].to_pylist(), kept["shape"].to_pylist(), strict=True):
        for column, kind in dict(shapes[shape]).items():
            observed.setdefault(segment_type, {}).setdefault(column, set()).add(kind)
    return {
        segment_type: evolve(None, columns, sorted(columns)).columns
        for segment_type, columns in observed.items()
        if segment_type not in blocked
    }


def _written(parsed: pa.Table, pieces: Path, stage_root: Path, blocked: frozenset[str]) -> dict[str, Any]:
    """The write pass over the run's pieces: every staged file's rows (dedupe index files aside: the
    tasks they come from depend on the pieces' sizes; their rows are the tables' rows)."""
    drop = _dedupe(parsed)
    schemas = _schemas(parsed, drop, blocked)
    storage = LocalStorage()
    stage = RunStage(stage_root, "src1", "src1", "20261101T000000000Z-abcd", ("day", "hr"))
    staged = []
    for unit in write_units(storage, pieces, schemas, blocked, 2):
        staged += write_segment_types(
            unit, schemas=schemas, blocked=blocked, drop=pa.array(drop, pa.int64()), window=None,
            stage=stage, storage=storage, date_partition="day-hour",
        )  # fmt: skip
    files: dict[str, Any] = {"drop": drop, "schemas": schemas}
    for file in staged:
        if file.kind == DEDUPE:
            continue
        table = pq.read_table(stage.staged(file))
        key = f"{file.kind} {file.segment_type} {file.partition}"
        files.setdefault(key, []).extend(table.to_pylist())
        files[key + " schema"] = str(table.schema)
    return files


def assert_same_lake(
    tmp_path: Path, chunks: list[list[bytes]], suppressed: frozenset[str] = frozenset()
) -> float:
    """Both paths on the same archive files (``chunks``: each file's lines) give the same rows and
    the same files; returns the share of the messages the columnar path judged on columns."""
    files = _archives(tmp_path / "archive", chunks)
    results = {}
    for on_columns in (False, True):
        pieces = tmp_path / f"pieces-{on_columns}"
        parsed = _parse(files, pieces, on_columns, suppressed)
        blocked = frozenset(sorted(pieces_by_type(LocalStorage(), pieces))[:1])  # one table past the limit
        results[on_columns] = (
            _messages(parsed),
            _written(parsed, pieces, tmp_path / f"stage-{on_columns}", blocked),
            blocked,
        )
    (per_message, written, blocked), (judged, judged_written, judged_blocked) = results[False], results[True]
    assert blocked == judged_blocked
    assert sorted(per_message) == sorted(judged), "the same rows"
    different = [(p, per_message[p], judged[p]) for p in sorted(per_message) if per_message[p] != judged[p]]
    assert not different, different[:5]
    assert written.keys() == judged_written.keys()
    for key in written:
        assert written[key] == judged_written[key], key
    assert any(key.startswith("table") for key in written), "nothing written: the comparison proves nothing"
    typed = json_rows = 0
    for path in (tmp_path / "pieces-True").rglob("*.arrow"):
        table = pa.ipc.open_file(pa.py_buffer(path.read_bytes())).read_all()
        if "values" in table.schema.names:
            typed += table.num_rows
        else:
            json_rows += table.num_rows
    return typed / max(1, typed + json_rows)


@pytest.fixture
def single_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """A group that does not read is halved down to single lines (not 64): each edge line is
    judged on its own instead of going back with its neighbours."""
    monkeypatch.setattr(columnar, "LEAST_LINES", 1)


def test_the_edges_and_random_messages_give_the_same_lake_both_ways(
    tmp_path: Path, single_lines: None
) -> None:
    edges = edge_lines()
    fuzz = fuzz_lines(3000, seed=37)
    # the edges alone, mixed into the random messages, and backwards
    judged = assert_same_lake(
        tmp_path, [edges, fuzz[:1500] + edges + fuzz[1500:], edges[::-1]], suppressed=frozenset({"u3"})
    )
    assert judged > 0.3, judged


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_seeded_random_messages_give_the_same_lake_both_ways(
    tmp_path: Path, seed: int, single_lines: None
) -> None:
    fuzz = fuzz_lines(1000, seed=seed)
    typed = typed_lines(3000, seed=seed)
    judged = assert_same_lake(
        tmp_path, [fuzz[:300] + typed[:1500], typed[1500:] + fuzz[300:]], suppressed=frozenset({"u1"})
    )
    assert judged > 0.5, judged


@pytest.mark.parametrize("on_columns", [True, False])
@pytest.mark.parametrize("content", [b"", b"\n", b"\n\r\n  \n", b"\r"])
def test_an_archive_file_without_a_message_gives_no_row(
    tmp_path: Path, content: bytes, on_columns: bool
) -> None:
    """An empty archive file (the model's import of a day holding none of the source's messages
    failed a sync with an IndexError) and files of blank lines: no row, no piece, both ways."""
    path = tmp_path / "empty.gz"
    path.write_bytes(gzip.compress(content))
    parsed = _parse([path], tmp_path / "pieces", on_columns, frozenset())
    assert parsed.num_rows == 0
    assert not list((tmp_path / "pieces").rglob("*.arrow"))


def test_segments_documented_payloads_give_the_same_lake_both_ways(tmp_path: Path) -> None:
    lines = [line(message) for message in documented_messages()]
    assert assert_same_lake(tmp_path, [lines * 3, lines]) > 0.5


@pytest.mark.parametrize("kind", sorted(bench_inputs.INPUTS))
def test_the_benchmarks_inputs_give_the_same_lake_both_ways(tmp_path: Path, kind: str) -> None:
    bench_inputs.generate(tmp_path / "project", "src1", 6000, files=3, seed=11, kind=kind)
    chunks = [
        gzip.decompress(p.read_bytes()).splitlines() for p in sorted((tmp_path / "project").rglob("*.gz"))
    ]
    assert assert_same_lake(tmp_path, chunks, suppressed=frozenset({"user-1", "user-2"})) > 0.6


def test_most_lines_of_the_benchmarks_input_are_judged_on_columns(tmp_path: Path) -> None:
    """The columnar path is not the per-message path under another name: on the analytics input,
    at least 90 % of the messages are judged on columns (typed pieces), the rest fall back."""
    bench_inputs.generate(tmp_path / "project", "src1", 4000, files=1, seed=5, kind="analytics")
    files = sorted((tmp_path / "project").rglob("*.gz"))
    pieces = tmp_path / "pieces"
    _parse(files, pieces, True, frozenset())
    rows = {"typed": 0, "json": 0}
    for path in pieces.rglob("*.arrow"):
        table = pa.ipc.open_file(pa.py_buffer(path.read_bytes())).read_all()
        rows["typed" if "values" in table.schema.names else "json"] += table.num_rows
    assert rows["typed"] >= 0.9 * (rows["typed"] + rows["json"]), rows


@pytest.mark.spark
def test_a_sync_through_spark_and_the_catalog_is_the_same_both_ways(lake, spark, tmp_path: Path) -> None:
    """Both parsers on Spark (the SparkStager) and the embedded metastore: the same partitions,
    quarantine and ledger (test_standin's comparison; the dedupe index holds the same ids, in files
    the write tasks cut differently), the same tables' columns in the catalog and the same counts
    in the run's report."""
    from eventlake.catalog.hive import HiveCatalog
    from eventlake.sync import run_sync
    from tests.model.test_standin import lake_content, lake_copy

    lines = [line(m) for m in documented_messages()] + typed_lines(400, seed=9) + edge_lines()
    storage = lake.settings.lake.storage()
    day = lake.archive_lines(lines[:300])
    lake.archive_lines(lines[300:] + lines[:20])  # duplicates across files
    copy = tmp_path / "per-message"
    other = lake_copy(lake, copy, "permessage_", parser="per-message")
    assert lake.settings.sync.parser == "columnar" and storage.exists(day)
    [columnar_result] = run_sync(lake.settings, spark=spark, say=lambda line: None)
    [per_message_result] = run_sync(other, spark=spark, say=lambda line: None)
    columnar_side = lake_content(lake.settings.lake.root, lake.source.id)
    per_message_side = lake_content(copy / "lake", lake.source.id)
    assert columnar_side["partitions"]
    for part in ("partitions", "quarantine", "ledger"):  # (the index: the same ids, in other files)
        assert columnar_side[part] == per_message_side[part], part
    catalog = HiveCatalog(spark)
    assert catalog.table_schemas(lake.settings.database_name(lake.source)) == catalog.table_schemas(
        other.database_name(other.source(lake.slug))
    )
    counted = ("input_messages", "duplicates_dropped", "rejected_messages", "rejected_values", "suppressed")
    assert [getattr(columnar_result, c) for c in counted] == [getattr(per_message_result, c) for c in counted]
    assert [(t.table, t.rows, t.partitions, t.collisions) for t in columnar_result.tables] == [
        (t.table, t.rows, t.partitions, t.collisions) for t in per_message_result.tables
    ]


@pytest.mark.parametrize(
    "content",
    [b"", b"\n", b"a\nb", b"a\r\nb\r\n", b"a\r\r\n\n\nb\n", b"\r", b" \n{}\r", b'\xff\n{"x":1}\n'],
)
def test_the_parse_pass_splits_lines_as_the_archive_reader_does(content: bytes) -> None:
    """One rule for what a line is (:class:`eventlake.archive.FileLines`): the parse pass numbers
    every line, blank ones included; `archive_lines` (the user deletion, the sealer) gives the
    non-blank ones; both are the lines a split at ``\\n`` gives with their trailing ``\\r`` and
    ``\\n`` removed, as the reader before `FileLines` split them."""
    import gzip
    import io

    from eventlake.archive import FileLines, archive_lines

    expected = [line.rstrip(b"\r\n") for line in io.BytesIO(content)]
    lines = FileLines.of(content)
    assert [lines.line(n) for n in range(len(lines))] == expected
    assert list(archive_lines(gzip.compress(content))) == [line for line in expected if line]


# characters around the regexes' edges: dashes, digits, spaces and controls, wide characters
# (\x85 and \p{Z} ones, accents, emoji) that shift the fifth character past the fifth byte
_AROUND_INSTANTS = st.text(
    st.sampled_from(["a", "1", "2", "-", ":", "T", "Z", " ", "\t", "\x00", "\x1f", "\x7f", "\x85",
                     "\u00a0", "\u1680", "\u2003", "\u3000", "é", "😀"]),
    max_size=9,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_AROUND_INSTANTS, st.text(max_size=30)), max_size=40), st.integers(0, 5))
def test_the_prefilter_of_string_values_rules_out_no_text_either_regex_matches(
    texts: list[str], offset: int
) -> None:
    """The two regexes that type a string value run only on the texts `_may_be_instants` keeps
    from their first bytes: it must keep every text either regex matches (a slice too)."""
    values = pa.array(["x"] * offset + texts, pa.string()).slice(offset)
    kept = np.zeros(len(values), bool)
    kept[columnar._may_be_instants(values)] = True
    for pattern in (columnar._CANDIDATE, columnar.DATE_TIME):
        matched = pc.fill_null(pc.match_substring_regex(values, pattern), False)
        missed = matched.to_numpy(zero_copy_only=False) & ~kept
        assert not missed.any(), [text for text, out in zip(texts, missed, strict=True) if out]


@pytest.mark.parametrize(
    "content",
    [b"", b'":[{', b'a\n":[{\n', b'x":[{y":[{\r\n\n":[\n{\n', b'{"p":[{"a":1}]}\r\r\n{"p":[1]}', b'":[{":[{'],
)
def test_the_lines_holding_a_text_are_those_a_search_line_by_line_finds(content: bytes) -> None:
    from eventlake.archive import FileLines

    lines = FileLines.of(content)
    expected = [b'":[{' in lines.line(n) for n in range(len(lines))]
    assert lines.holding(b'":[{').tolist() == expected


def _whole_type_write(
    paths: list[str], columns: Any, drop: pa.Array, window: Any, date_partition: str
) -> tuple[dict[tuple[str, ...], list[dict[str, Any]]], list[tuple[Any, ...]], list[str]]:
    """The write pass of a segment type as it was before it went by chunks (3f06a08): every kept
    row cast at once, ordered by (hour received, position), each partition a slice of that; the
    partitions' rows, the values that did not fit (message id, column, raw value, reason) and the
    ids, in order. The reference the chunked write is held to."""
    table, typed = read_all_pieces(LocalStorage(), paths, drop, window)
    parts = [(table, *cast_json_pieces(table, columns))] if table.num_rows else []
    parts += [(piece, *cast_typed_piece(piece, columns)) for piece in typed if piece.num_rows]
    rows = []  # (hour, position, values, [(column, raw, reason)], message id)
    for piece, values, bad in parts:
        rejected: dict[int, list[tuple[str, str, str]]] = {}
        for row, column, _, raw, reason in bad:
            rejected.setdefault(row, []).append((column, raw, reason))
        for row, (position, message_id, received, value) in enumerate(
            zip(piece["position"].to_pylist(), piece["message_id"].to_pylist(),
                piece["received_at"].to_pylist(), values.to_pylist(), strict=True)
        ):  # fmt: skip
            hour = int(received.timestamp() // 3600)
            rows.append((hour, position, received, value, rejected.get(row, []), message_id))
    rows.sort(key=lambda r: (r[0], r[1]))
    partitions: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for _, _, received, value, _, _ in rows:
        partitions.setdefault(layout.received_partition(date_partition, received), []).append(value)
    quarantined = [(r[5], column, raw, reason) for r in rows for column, raw, reason in r[4]]
    return partitions, quarantined, [r[5] for r in rows]


@pytest.mark.parametrize(
    ("chunk_rows", "date_partition", "replay"),
    [
        (1, "day-hour", False),
        (7, "day", False),
        (7, "day-hour", True),
        (65_536, "year-month-day-hour", False),
    ],
)
def test_the_write_pass_by_chunks_writes_what_the_whole_type_write_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk_rows: int, date_partition: str, replay: bool
) -> None:
    """The write pass takes a segment type's rows from its pieces a chunk at a time (the pieces'
    order across files, JSON and typed pieces interleaved, rows dropped by the dedupe or a replay's
    window, values that do not fit): the same partitions, rows in the same order, the same values,
    quarantine rows and ids as the whole-type write it replaced."""
    bench_inputs.generate(tmp_path / "project", "src1", 1500, files=3, seed=13, kind="analytics")
    chunks = [
        gzip.decompress(p.read_bytes()).splitlines() for p in sorted((tmp_path / "project").rglob("*.gz"))
    ]
    chunks += [edge_lines() + fuzz_lines(600, seed=4), typed_lines(600, seed=5) + fuzz_lines(300, seed=6)]
    files = _archives(tmp_path / "archive", chunks)
    pieces = tmp_path / "pieces"
    parsed = _parse(files, pieces, True, frozenset())
    valid = parsed.filter(pc.fill_null(parsed["ok"], False))
    positions = valid["position"].to_pylist()
    drop = pa.array(sorted({*_dedupe(parsed), *positions[::13]}), pa.int64())  # and more than the dedupe's
    received = sorted(valid["received_at"].to_pylist())
    window = (received[len(received) // 4], received[3 * len(received) // 4]) if replay else None
    schemas = {  # every third column of a type older than its values: some do not fit (quarantine)
        segment_type: tuple(
            (
                name,
                {"string": "timestamp", "bigint": "boolean", "double": "bigint"}.get(kind, kind)
                if i % 3
                else kind,
            )
            for i, (name, kind) in enumerate(columns)
        )
        for segment_type, columns in _schemas(parsed, [], frozenset()).items()
    }
    monkeypatch.setattr(write, "CHUNK_ROWS", chunk_rows)
    stage = RunStage(
        tmp_path / "stage",
        "src1",
        "src1",
        "20261101T000000000Z-abcd",
        layout.partition_columns(date_partition),
    )
    found = pieces_by_type(LocalStorage(), pieces)
    quarantined_somewhere = False
    for number, (segment_type, (_, paths)) in enumerate(sorted(found.items())):
        columns = schemas[segment_type]
        staged, ids = write.write_segment_type(
            (number, segment_type, paths), schemas=schemas, blocked=(), drop=drop, window=window,
            stage=stage, storage=LocalStorage(), date_partition=date_partition,
        )  # fmt: skip
        partitions, quarantined, expected_ids = _whole_type_write(
            paths, columns, drop, window, date_partition
        )
        written = {f.partition: pq.read_table(stage.staged(f)).to_pylist() for f in staged if f.kind == TABLE}
        assert written == partitions, segment_type
        assert [f.rows for f in staged if f.kind == TABLE] == [len(rows) for rows in partitions.values()]
        bad = [pq.read_table(stage.staged(f)).to_pylist() for f in staged if f.kind == VALUES]
        assert [
            (q["message_id"], q["column_name"], q["raw_value"], q["reason"]) for q in sum(bad, [])
        ] == quarantined
        assert (ids["message_id"].to_pylist() if ids is not None else []) == expected_ids
        quarantined_somewhere |= bool(quarantined)
    assert quarantined_somewhere, "no value failed its column: the quarantine was not compared"
    assert len(found) > 10
