"""The parse task per message against the columnar parse (issue 37), on ``bench/sync.py``'s input.

Everything measured is product code (:mod:`eventlake.sync.pipeline.columnar`, ``transform`` and
``write``); this script only times it, one archive file at a time, on one core, in one process, in
CPU seconds (``time.process_time``, each figure the least of ``--repeat`` runs):

1. The parse task: (a) ``transform.parse_files(columnar=False)`` (``parse_line`` on every line, the
   specification) against (b) ``parse_files(columnar=True)`` (``judge_file``, then ``parse_line``
   on what it leaves), in µs per message, and (a)/(b).
2. Where (b)'s time goes: the product functions it calls timed by wrappers set on their modules
   for one more run (gunzip, line split, route, group chunks, reads, judge, the per-message
   fallback, the rows for Spark, the typed pieces; each phase without the phases inside it), and
   the share of messages judged on columns, with the reasons the others went back
   (``Group.reasons``, and the lines ``judge_file`` left).
3. The readers that led to (b)'s design, each with ``columnar.judge``: pyarrow's ``read_json`` of
   the whole decompressed file, the routed ``judge_file`` (a group per (type, event)), and DuckDB's
   ``read_ndjson`` of the gzip file. Each judged row is compared with (a)'s row for its line
   (validity, id, received time, segment type, column types): "differs" must be 0.
4. The write pass on the same rows both ways: per segment type, ``write.cast_json_pieces`` on (a)'s
   JSON pieces against ``write.cast_typed_piece`` on (b)'s typed pieces (the rows judged on
   columns), with the table columns (a)'s shapes give, and the values that differ between them.

    PYTHONPATH=src .venv/bin/python bench/parse_readers.py                  # 100,000 messages, 2 files
    PYTHONPATH=src .venv/bin/python bench/parse_readers.py --repeat 3 --suppress 500 --kind basic
    PYTHONPATH=src .venv/bin/python bench/parse_readers.py --messages 5000 --files 1 --edges

``--edges`` mixes every edge the type rules know and seeded random messages
(``tests/sync/columnar_corpus.py``) into the first file, and halves a group that does not read down
to single lines (``columnar.LEAST_LINES`` = 1, as the differential test does).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import gzip
import inspect
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
from tests.sync.columnar_corpus import edge_lines, fuzz_lines, typed_lines  # noqa: E402

import sync as generator  # noqa: E402  (bench/sync.py: the archive generator)
from eventlake.archive import FileLines  # noqa: E402
from eventlake.schema import evolve  # noqa: E402
from eventlake.storage.local import LocalStorage  # noqa: E402
from eventlake.sync.pipeline import columnar, pieces, transform, write  # noqa: E402
from eventlake.sync.pipeline.columnar import Group  # noqa: E402

STORAGE = LocalStorage()
NO_POSITIONS = pa.array([], pa.int64())
# (owner, attribute, phase): the product functions (b)'s run is split by, in the order they first
# run (judge_file holds route .. judge, _Task._judged holds add_typed); a generator is run to its
# end inside its timing
PHASES = (
    (transform, "archive_content", "gunzip (archive_content)"),
    (FileLines, "of", "line split (FileLines.of)"),
    (columnar, "_route", "route by (type, event) (columnar._route)"),
    (columnar, "_chunk", "group NDJSON chunks (columnar._chunk)"),
    (columnar, "read_json", "reads (columnar.read_json)"),
    (columnar, "judge", "judge (columnar.judge)"),
    (transform, "judge_file", "judge_file, the rest (UTF-8, line texts, halving)"),
    (transform._Task, "per_message", "per-message fallback (_Task.per_message)"),
    (pieces.Pieces, "add_typed", "typed pieces (Pieces.add_typed)"),
    (transform._Task, "_judged", "judged rows for Spark (_Task._judged)"),
)


def cpu() -> float:
    return time.process_time()


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def least(repeat: int, run: Callable[[], Any]) -> tuple[float, Any]:
    """The least CPU seconds of ``repeat`` calls of ``run``, and the last call's result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        started = cpu()
        result = run()
        best = min(best, cpu() - started)
    return best, result


# ---------------------------------------------------------------- 1. the parse task both ways


def parse(path: Path, number: int, folder: Path, suppressed: frozenset[str], columnar: bool) -> pa.Table:
    """One file as one parse task (number ``number``): its rows for Spark, its pieces in ``folder``."""
    shutil.rmtree(folder, ignore_errors=True)
    frame = pa.RecordBatch.from_pydict(
        {"location": [str(path)], "number": [number], "size": [path.stat().st_size]}
    )
    batches = transform.parse_files(
        [frame], storage=STORAGE, pieces=folder, suppressed=suppressed, columnar=columnar
    )
    return pa.Table.from_batches(list(batches), transform.PARSED_ARROW)


# ---------------------------------------------------------------- 2. where (b)'s time goes


class Phases:
    """CPU seconds per phase, each without the phases timed inside it; the groups and left lines
    of every ``judge_file`` call."""

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()
        self.inner: list[float] = []  # per open phase: the seconds of the phases inside it
        self.judged: list[tuple[list[Group], np.ndarray]] = []

    @contextlib.contextmanager
    def phase(self, label: str) -> Iterator[None]:
        self.inner.append(0.0)
        started = cpu()
        try:
            yield
        finally:
            elapsed = cpu() - started
            self.seconds[label] += elapsed - self.inner.pop()
            if self.inner:
                self.inner[-1] += elapsed

    def timed(self, function: Callable[..., Any], label: str) -> Callable[..., Any]:
        if inspect.isgeneratorfunction(function):

            def generator(*args: Any, **kwargs: Any) -> Iterator[Any]:
                with self.phase(label):
                    items = list(function(*args, **kwargs))
                yield from items

            return generator

        def plain(*args: Any, **kwargs: Any) -> Any:
            with self.phase(label):
                result = function(*args, **kwargs)
            if function is columnar.judge_file:
                self.judged.append(result)
            return result

        return plain

    @contextlib.contextmanager
    def installed(self) -> Iterator[list[str]]:
        """The wrappers set on the product's modules (and taken off again); yields the phases not
        found (renamed since: their time is in "the rest")."""
        missing = []
        with contextlib.ExitStack() as undo:
            for owner, name, label in PHASES:
                if not hasattr(owner, name):
                    missing.append(label)
                    continue
                original = inspect.getattr_static(owner, name)
                function = getattr(owner, name)  # a classmethod bound to its class
                wrapped = self.timed(function, label)
                setattr(owner, name, staticmethod(wrapped) if isinstance(original, classmethod) else wrapped)
                undo.callback(setattr, owner, name, original)
            yield missing


# ---------------------------------------------------------------- 3. the readers


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
    # fields inside structs are not marked: a gap of this reader)
    for index, kind in enumerate(relation.types):
        if str(kind) == "JSON":
            table = table.set_column(
                index, table.field(index).name, table.column(index).cast(pa.large_binary())
            )
    return table


def judged_whole(table: pa.Table, content: bytes, suppressed: frozenset[str]) -> tuple[list[Group], str]:
    """``columnar.judge`` of a table read from the whole file, when its rows are the file's lines
    (else nothing is judged: the per-message rules take the file)."""
    lines = FileLines.of(content)
    if not (table.num_rows == len(lines) == len(lines.objects())):
        return [], f"{table.num_rows:,} rows are not the file's {len(lines):,} lines"
    chunk = content if content.endswith(b"\n") else content + b"\n"
    return [columnar.judge(table, np.arange(table.num_rows), chunk, suppressed)], ""


def readers(
    path: Path, repeat: int, suppressed: frozenset[str], connection: Any
) -> Iterator[tuple[str, float, float | None, list[Group] | None, str]]:
    """(label, read seconds, read + judge seconds, groups, note) per reader; groups None: the row
    is dropped (the note says why)."""
    data = path.read_bytes()
    content = gzip.decompress(data)

    def pyarrow_read() -> pa.Table:
        return columnar.read_json(gzip.decompress(data))

    def pyarrow_judged() -> tuple[list[Group], str]:
        whole = gzip.decompress(data)
        return judged_whole(columnar.read_json(whole), whole, suppressed)

    def routed() -> tuple[list[Group], str]:
        groups, left = columnar.judge_file(FileLines.of(gzip.decompress(data)), suppressed)
        return groups, f"{len(left):,} lines left by judge_file"

    def duckdb_judged() -> tuple[list[Group], str]:
        return judged_whole(read_duckdb(connection, path), content, suppressed)

    for label, read, judged in (
        ("pyarrow read_json, whole file", pyarrow_read, pyarrow_judged),
        ("duckdb read_ndjson, gzip file", functools.partial(read_duckdb, connection, path), duckdb_judged),
    ):
        try:
            read_seconds, _ = least(repeat, read)
        except (pa.ArrowInvalid, duckdb.Error) as exc:
            yield label, 0.0, None, None, f"the whole file does not read: {str(exc)[:90]}"
            continue
        try:
            seconds, (groups, note) = least(repeat, judged)
        except Exception as exc:  # the table is not one judge takes
            yield label, read_seconds, None, None, f"columnar.judge refuses its table: {exc!r}"[:120]
            continue
        yield label, read_seconds, seconds, groups, note
    seconds, (groups, note) = least(repeat, routed)
    yield "routed: FileLines.of + judge_file (b's read)", 0.0, seconds, groups, note


def expected_rows(parsed: pa.Table) -> dict[int, tuple[Any, ...]]:
    """(a)'s message rows by position: (ok, id, received time, segment type, column types, reason)."""
    shapes = shape_types(parsed)
    rows = parsed.filter(pc.is_valid(parsed["ok"]))
    columns = ("position", "ok", "message_id", "received_at", "segment_type", "shape", "reason")
    return {
        position: (ok, message_id, received, segment, shapes.get(shape), reason)
        for position, ok, message_id, received, segment, shape, reason in zip(
            *(rows[c].to_pylist() for c in columns), strict=True
        )
    }


def shape_types(parsed: pa.Table) -> dict[str, dict[str, str]]:
    """The shapes named in parse rows: name -> map of column types."""
    shapes = parsed.filter(pc.is_null(parsed["ok"]))
    names, types = shapes["shape"].to_pylist(), shapes["types"].to_pylist()
    return {name: dict(kinds) for name, kinds in zip(names, types, strict=True) if name is not None}


def differences(groups: list[Group], expected: dict[int, tuple[Any, ...]], base: int) -> Counter[str]:
    """Where the rows the groups judged disagree with (a)'s rows for the same lines."""
    found: Counter[str] = Counter()
    for group in groups:
        ids, received = group.message_ids.to_pylist(), group.received.to_pylist()
        for row in np.flatnonzero(group.judged).tolist():
            want = expected.get(base + int(group.lines[row]))
            if want is None:
                found["no per-message row"] += 1
                continue
            ok, message_id, moment, segment, types, reason = want
            if group.dropped[row]:
                found["dropped, not per message"] += reason != transform.SUPPRESSED
            elif not ok:
                found["judged valid, per-message invalid"] += 1
            else:
                found["message id"] += message_id != ids[row]
                found["received_at"] += moment != received[row]
                found["segment type"] += segment != group.segment_types[group.segment_ids[row]]
                found["column types"] += types != group.shapes[group.shape_ids[row]]
    return +found


# ---------------------------------------------------------------- 4. the write pass


def table_columns(parsed: pa.Table) -> dict[str, list[tuple[str, str]]]:
    """Each segment type's table columns, as the plan types them from (a)'s shapes."""
    shapes = shape_types(parsed)
    valid = parsed.filter(pc.fill_null(parsed["ok"], False))
    observed: dict[str, dict[str, set[str]]] = {}
    pairs = set(zip(valid["segment_type"].to_pylist(), valid["shape"].to_pylist(), strict=True))
    for segment, shape in pairs:
        for column, kind in shapes[shape].items():
            observed.setdefault(segment, {}).setdefault(column, set()).add(kind)
    return {segment: evolve(None, found, sorted(found)).columns for segment, found in observed.items()}


def cast_typed_pieces(
    typed: list[pa.Table], columns: list[tuple[str, str]]
) -> list[tuple[pa.Table, list[Any]]]:
    return [write.cast_typed_piece(piece, columns) for piece in typed]


def write_costs(
    json_folder: Path, typed_folder: Path, parsed: pa.Table, repeat: int
) -> list[tuple[str, int, float, float, int, str]]:
    """Per segment type, on the rows (b) judged on columns: (type, rows, seconds of
    cast_json_pieces on (a)'s pieces, seconds of cast_typed_piece on (b)'s, values that differ,
    values that did not fit (a)/(b))."""
    schemas = table_columns(parsed)
    json_found = pieces.pieces_by_type(STORAGE, json_folder)
    results = []
    for name, (_, paths) in sorted(pieces.pieces_by_type(STORAGE, typed_folder).items()):
        typed = [p for p in pieces.read_all_pieces(STORAGE, paths, NO_POSITIONS, None)[1] if p.num_rows]
        if not typed or name not in json_found or name not in schemas:
            continue
        columns = schemas[name]
        positions = pa.concat_arrays([p["position"].combine_chunks() for p in typed])
        table = pieces.read_all_pieces(STORAGE, json_found[name][1], NO_POSITIONS, None)[0]
        table = table.filter(pc.is_in(table["position"], value_set=positions))
        table = table.take(pc.sort_indices(table["position"]))
        slow, (expected, rejected) = least(repeat, functools.partial(write.cast_json_pieces, table, columns))
        fast, casts = least(repeat, functools.partial(cast_typed_pieces, typed, columns))
        got = pa.concat_tables([cast for cast, _ in casts]).take(pc.sort_indices(positions))
        if got.num_rows != expected.num_rows:
            mismatches = abs(got.num_rows - expected.num_rows) * len(columns)
        else:
            mismatches = sum(
                a != b for column in got.column_names
                for a, b in zip(got[column].to_pylist(), expected[column].to_pylist(), strict=True)
            )  # fmt: skip
        unfit = f"{len(rejected)}/{sum(len(bad) for _, bad in casts)}"
        results.append((name, got.num_rows, slow, fast, mismatches, unfit))
    return results


# ---------------------------------------------------------------- the run


def archive(args: argparse.Namespace, work: Path) -> list[Path]:
    project = work / "project"
    if not any(project.rglob("*.gz")):
        generator.generate(project, "bench", args.messages, args.files, kind=args.kind)
    files = sorted(project.rglob("*.gz"))
    if args.edges:  # the edge lines spread over the first file
        lines = gzip.decompress(files[0].read_bytes()).splitlines()
        edges = edge_lines() + fuzz_lines(2000) + typed_lines(2000)
        step = max(1, len(lines) // (len(edges) + 1))
        for n, edge in enumerate(edges):
            lines.insert((n + 1) * step + n, edge)
        files[0] = work / "edges.gz"
        files[0].write_bytes(gzip.compress(b"\n".join(lines) + b"\n", 1))
    return files


@dataclass
class Results:
    """What the files gave, summed."""

    messages: int = 0
    parse: Counter[str] = field(default_factory=Counter)  # (a), (b) -> CPU seconds
    phases: Counter[str] = field(default_factory=Counter)
    missing: list[str] = field(default_factory=list)  # phases not found
    reasons: Counter[str] = field(default_factory=Counter)
    judged: int = 0
    dropped: int = 0
    # reader -> [read s, read + judge s (None: the row is dropped), judged rows, notes, differences,
    # reasons rows went back]
    readers: dict[str, list[Any]] = field(default_factory=dict)
    writes: list[tuple[str, int, float, float, int, str]] = field(default_factory=list)


def measure(path: Path, number: int, work: Path, args: argparse.Namespace, results: Results) -> None:
    """Sections 1 to 4 on one file (parse task ``number``)."""
    suppressed, repeat = args.suppressed, args.repeat
    json_folder, typed_folder = work / f"pieces-{number}-per-message", work / f"pieces-{number}-columnar"
    seconds, parsed = least(repeat, functools.partial(parse, path, number, json_folder, suppressed, False))
    results.parse["(a)"] += seconds
    results.parse["(b)"] += least(
        repeat, functools.partial(parse, path, number, typed_folder, suppressed, True)
    )[0]
    results.messages += parsed.num_rows - int(pc.sum(pc.is_null(parsed["ok"])).as_py() or 0)

    best: Phases | None = None
    for _ in range(repeat):
        run = Phases()
        gc.collect()
        started = cpu()
        with run.installed() as results.missing:
            parse(path, number, work / "pieces-phases", suppressed, True)
        rest = cpu() - started - sum(run.seconds.values())
        run.seconds["the rest (file read, batches, pieces closed)"] = rest
        if best is None or sum(run.seconds.values()) < sum(best.seconds.values()):
            best = run
    assert best is not None
    results.phases.update(best.seconds)
    for groups, left in best.judged:
        for group in groups:
            results.reasons.update(group.reasons)
            results.judged += int(group.judged.sum())
            results.dropped += int(group.dropped.sum())
        if len(left):
            results.reasons["lines left by judge_file (not one object, not UTF-8, did not read)"] += len(left)

    expected, base = expected_rows(parsed), pieces.position_base(number)
    for label, read, whole, groups, note in readers(path, repeat, suppressed, args.connection):
        entry = results.readers.setdefault(label, [0.0, 0.0, 0, [], Counter(), Counter()])
        entry[0] += read
        if whole is None or groups is None:
            entry[1] = None
        elif entry[1] is not None:
            entry[1] += whole
            entry[2] += sum(int(g.judged.sum()) for g in groups)
            entry[4].update(differences(groups, expected, base))
            for group in groups:
                entry[5].update(group.reasons)
        if note:
            entry[3].append(f"file {number}: {note}")
    results.writes += write_costs(json_folder, typed_folder, parsed, repeat)


def report(results: Results, args: argparse.Namespace, files: int) -> None:
    messages = results.messages
    a, b = results.parse["(a)"], results.parse["(b)"]
    print(f"\n{messages:,} messages ({args.kind}) in {files} files", end="")
    print(f"{', with the edges' if args.edges else ''}; load average after: {load()}")
    if args.edges:
        print("(--edges: a group that does not read is halved down to single lines, not the product's 64)")
    print(f"\n1. the parse task, CPU µs per message (least of {args.repeat})")
    print(f"  (a) parse_files(columnar=False): parse_line on every line {a / messages * 1e6:9.2f}")
    print(f"  (b) parse_files(columnar=True): judge_file + parse_line   {b / messages * 1e6:9.2f}")
    print(f"  (a) / (b)                                                 {a / b:8.2f}x")

    print("\n2. where (b)'s time goes (one more run, its phases timed; µs per message, inner phases apart)")
    whole = sum(results.phases.values())
    labels = [label for _, _, label in PHASES if label in results.phases]
    for label in [*labels, *(label for label in results.phases if label not in labels)]:
        seconds = results.phases[label]
        print(f"  {label:<58} {seconds / messages * 1e6:8.2f} {seconds / whole:7.1%}")
    print(f"  {'all (the timed run)':<58} {whole / messages * 1e6:8.2f}")
    for label in results.missing:
        print(f"  (not found, in the rest: {label})")
    print(f"  judged on columns: {results.judged:,} of {messages:,} messages", end="")
    print(f" ({results.judged / messages:.2%}), {results.dropped:,} of them dropped (suppressed userId)")
    print("  left to the per-message rules (a row may have several reasons):")
    for reason, count in results.reasons.most_common():
        print(f"  {count:>9,} ({count / messages:7.2%}) {reason}")

    print("\n3. readers + columnar.judge, µs per message (gunzip included; DuckDB reads the gzip file)")
    print(f"  {'reader':<46} {'read':>7} {'+judge':>7} {'(a)/this':>8} {'judged':>7} {'differs':>7}")
    for label, (read, seconds, count, notes, found, back) in results.readers.items():
        shown = f"{read / messages * 1e6:7.2f}" if read else f"{'':>7}"
        if seconds is None:
            print(f"  {label:<46} {shown}  (row dropped)")
        else:
            print(f"  {label:<46} {shown} {seconds / messages * 1e6:7.2f} {a / seconds:7.2f}x", end="")
            print(f" {count / messages:7.2%} {sum(found.values()):>7}")
        for note in notes:
            print(f"      {note}")
        if back:
            print("      back: " + "; ".join(f"{n:,} {reason}" for reason, n in back.most_common(3)))
        for difference, times in found.most_common():
            print(f"      DIFFERS from (a): {difference}: {times}")

    print("\n4. the write pass on the rows (b) judged, µs per row: cast_json_pieces vs cast_typed_piece")
    summary: dict[str, list[Any]] = {}
    for name, count, slow, fast, mismatches, unfit in results.writes:
        entry = summary.setdefault(name, [0, 0.0, 0.0, 0, []])
        entry[0] += count
        entry[1] += slow
        entry[2] += fast
        entry[3] += mismatches
        entry[4].append(unfit)
    header = f"{'segment type':<34} {'rows':>8} {'json':>7} {'typed':>7} {'ratio':>6} {'differ':>6}"
    print(f"  {header}  not fit (a)/(b)")
    ranked = sorted(summary.items(), key=lambda kv: -kv[1][0])
    everything = ("all types", [sum(e[i] for e in summary.values()) for i in range(4)] + [[]])
    for name, (count, slow, fast, mismatches, unfit) in [*ranked[:8], everything]:
        if count:
            print(f"  {name:<34} {count:>8,} {slow / count * 1e6:7.2f} {fast / count * 1e6:7.2f}", end="")
            print(f" {slow / max(fast, 1e-9):5.1f}x {mismatches:>6}  {' '.join(unfit)}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=2)
    parser.add_argument("--kind", choices=sorted(generator.INPUTS), default="analytics", help="the input")
    parser.add_argument("--workdir", type=Path, default=None, help="kept: its archive is used again")
    parser.add_argument("--repeat", type=int, default=1, help="each timing the least of N runs")
    parser.add_argument(
        "--suppress", type=int, default=0, help="suppress the userIds user-0 .. user-<N-1> (of 50,000)"
    )
    parser.add_argument("--edges", action="store_true", help="the first file with edge messages mixed in")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="eventlake-readers-"))
    files = archive(args, work)
    args.suppressed = frozenset(f"user-{n}" for n in range(args.suppress))
    if args.edges:
        columnar.LEAST_LINES = 1
    args.connection = duckdb.connect()
    args.connection.execute("SET threads = 1")
    parse(files[0], 0, work / "warm", args.suppressed, True)  # compute kernels and regexes: once per process
    results = Results()
    print(f"load average before: {load()}", flush=True)
    for number, path in enumerate(files):
        measure(path, number, work, args, results)
        print(f"file {number}: done, load {load()}", flush=True)
    report(results, args, len(files))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
