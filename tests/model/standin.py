"""The sync's parse and write passes in this process, without Spark: a
:class:`~eventlake.sync.pipeline.job.Stager` for the model-based tests, so that a run costs milliseconds.

It runs the product's own worker functions, those Spark runs in its Python workers
(:func:`eventlake.sync.pipeline.transform.parse_files`,
:func:`eventlake.sync.pipeline.write.write_segment_types`,
the quarantine's message writer), on the same tasks Spark would give them (files dealt as
:func:`eventlake.sync.pipeline.read.files_frame` deals them, segment types as
:func:`eventlake.sync.pipeline.write.write_units` does), so they write the same files. Only what Spark does
between them is done here with pyarrow: the counts, the selection's rows (a replay's range), the
dedupe within the run and ``observe``. ``test_standin.py`` holds this stand-in and the Spark job
equal on the same inputs.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc

from eventlake import state_layout
from eventlake.archive import ArchiveFile
from eventlake.sync.index.dedupe_index import index_files, seen
from eventlake.sync.pipeline.job import ParsedRun, SourceSync
from eventlake.sync.pipeline.plan import Observed, Plan
from eventlake.sync.pipeline.quarantine import _write_messages
from eventlake.sync.pipeline.transform import PARSED_ARROW, SUPPRESSED, parse_files
from eventlake.sync.pipeline.write import write_segment_types, write_units
from eventlake.sync.protocol.cutoffs import dedupe_since
from eventlake.sync.protocol.stage import MESSAGES, RunStage, StagedFile
from eventlake.timestamps import as_utc

CORES = 2  # as the tests' Spark session (local[2]): the same tasks, so the same file names
FILE_TASKS_PER_CORE = 8  # files_frame's default


class InProcessStager:
    """A :class:`~eventlake.sync.pipeline.job.Stager` that runs the worker functions in this process."""

    application_id = "in-process"

    def __init__(self, cores: int = CORES) -> None:
        self.cores = cores

    def parse(
        self, run: SourceSync, files: Sequence[ArchiveFile], stage: RunStage, suppressed: frozenset[str]
    ) -> ParsedRun:
        pieces = stage.scratch("pieces")
        rows = [(str(f.path), n, f.size) for n, f in enumerate(files)]
        slices = max(1, min(len(rows), FILE_TASKS_PER_CORE * self.cores))
        batches: list[pa.RecordBatch] = []
        for i in range(slices):  # as Spark's parallelize slices a list
            task = rows[i * len(rows) // slices : (i + 1) * len(rows) // slices]
            if not task:
                continue
            frame = pa.RecordBatch.from_pydict(
                {
                    "location": [r[0] for r in task],
                    "number": [r[1] for r in task],
                    "size": [r[2] for r in task],
                }
            )
            batches += parse_files(
                [frame], storage=run.storage, pieces=pieces, suppressed=suppressed,
                columnar=run.settings.sync.parser == "columnar",
            )  # fmt: skip
        parsed = pa.Table.from_batches(batches, PARSED_ARROW) if batches else PARSED_ARROW.empty_table()
        parsed = _selected(run, parsed)
        messages = parsed.filter(pc.is_valid(parsed["ok"]))
        shapes: dict[str, dict[str, str]] = {}
        damaged: dict[str, str] = {}  # a damaged archive file's row: ok and shape null
        others = parsed.filter(pc.is_null(parsed["ok"]))
        for name, types, problem, raw in zip(
            *(others[c].to_pylist() for c in ("shape", "types", "reason", "raw")), strict=True
        ):
            if name is None:
                damaged[raw] = problem
            else:
                shapes[name] = dict(types)
        ok, reason = messages["ok"].to_pylist(), messages["reason"].to_pylist()
        valid = sum(1 for o in ok if o)
        suppressed_rows = sum(1 for o, r in zip(ok, reason, strict=True) if not o and r == SUPPRESSED)
        invalid = len(ok) - valid - suppressed_rows
        valid_rows = messages.filter(pc.equal(messages["ok"], True))
        received = valid_rows["received_at"]
        first = pc.min(received).as_py() if valid_rows.num_rows else None
        drop = _dedupe(run, valid_rows, first)
        kept = (
            valid_rows.filter(pc.invert(pc.is_in(valid_rows["position"], value_set=drop)))
            if len(drop)
            else valid_rows
        )
        observed = _observe(kept, shapes)
        return ParsedRun(valid, invalid, suppressed_rows, first, drop, observed, parsed, damaged)

    def write_tables(
        self, run: SourceSync, parsed: ParsedRun, plan: Plan, stage: RunStage
    ) -> list[StagedFile]:
        pieces = stage.scratch("pieces")
        schemas, blocked = plan.schemas, plan.blocked
        write = functools.partial(
            write_segment_types, schemas=schemas, blocked=frozenset(blocked), window=run.selection.window(),
            stage=stage, drop=parsed.drop, storage=run.storage, date_partition=run.source.date_partition,
        )  # fmt: skip
        return [
            f
            for units in write_units(run.storage, pieces, schemas, blocked, 2 * self.cores)
            for f in write(units)
        ]

    def write_invalid(self, run: SourceSync, parsed: ParsedRun, stage: RunStage) -> list[StagedFile]:
        rows = parsed.rows
        rows = rows.filter(pc.and_(pc.equal(rows["ok"], False), pc.not_equal(rows["reason"], SUPPRESSED)))
        none = pa.nulls(rows.num_rows, pa.string())
        table = pa.table(
            {
                "kind": pa.array(["message"] * rows.num_rows, pa.string()), "reason": rows["reason"],
                "message_id": rows["message_id"], "table_name": none, "column_name": none,
                "target_type": none,
                "raw_value": rows["raw"], "received_at": rows["received_at"],
            }
        )  # fmt: skip
        out = list(_write_messages(table.to_batches(), stage=stage, storage=run.storage))
        return [StagedFile(MESSAGES, b["name"][0].as_py(), b["rows"][0].as_py()) for b in out]

    def release(self) -> None:
        pass


def _selected(run: SourceSync, parsed: pa.Table) -> pa.Table:
    """The selection's rows (``Selection.rows`` in Spark): a replay keeps its range's messages (of
    its tables), and every shape row."""
    window = run.selection.window()
    if window is None:
        return parsed
    start, end = window
    received = parsed["received_at"]
    keep = pc.and_kleene(
        pc.greater_equal(received, pa.scalar(start, received.type)),
        pc.less(received, pa.scalar(end, received.type)),
    )
    types = getattr(run.selection, "segment_types", None)
    if types is not None:
        keep = pc.and_kleene(
            keep, pc.is_in(parsed["segment_type"], value_set=pa.array(sorted(types), pa.string()))
        )
    keep = pc.or_kleene(pc.is_null(parsed["ok"]), keep)
    return parsed.filter(pc.fill_null(keep, False))


def _dedupe(run: SourceSync, valid: pa.Table, first: datetime | None) -> pa.Array:
    """:func:`eventlake.sync.pipeline.dedupe.dedupe` without Spark: the positions of every copy of a
    messageId but the first (earliest received, then smaller hash of its values, then earlier
    position), and of the ids the index holds in the window."""
    ids = valid["message_id"].to_pylist()
    order = sorted(
        zip(ids, *(valid[c].to_pylist() for c in ("received_at", "line_hash", "position")), strict=True),
        key=lambda r: (r[0], r[1], r[2], r[3]),
    )  # fmt: skip
    drop = [r[3] for i, r in enumerate(order) if i and order[i - 1][0] == r[0]]
    if first is not None:
        since = dedupe_since(as_utc(first), run.source.dedupe_window_days)
        files = index_files(run.storage, state_layout.dedupe_index_dir(run.lake, run.source.id), since)
        if files:
            wanted = pa.array(sorted(set(ids)), pa.string())
            filters = state_layout.dedupe_filter_dir(run.settings.lake.state_dir, run.source.id)
            found = set(seen(run.storage, files, wanted, since, run.selection.until(), filters).to_pylist())
            drop += [p for m, p in zip(ids, valid["position"].to_pylist(), strict=True) if m in found]
    return pa.array(sorted(set(drop)), pa.int64())


def _observe(kept: pa.Table, shapes: dict[str, dict[str, str]]) -> Observed:
    counts: dict[str, int] = {}
    types: dict[str, dict[str, set[str]]] = {}
    collisions: dict[str, list[str]] = {}
    for kind, shape, found in zip(
        *(kept[c].to_pylist() for c in ("segment_type", "shape", "collisions")), strict=True
    ):
        counts[kind] = counts.get(kind, 0) + 1
        columns = types.setdefault(kind, {})
        for column, value_type in shapes[shape].items():
            columns.setdefault(column, set()).add(value_type)
        for c in found or ():
            seen_here = collisions.setdefault(kind, [])
            if c not in seen_here:
                seen_here.append(c)
    return Observed(counts, types, collisions)
