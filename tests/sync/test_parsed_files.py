"""The parse pass's rows as Spark reads them from the Parquet files its workers write (a local
stage: :func:`.transform.parse_files_to`), held to the rows Spark receives from the same workers
through ``mapInArrow`` (a stage in a bucket): every value, type and row, the edges of the
columnar corpus, random messages, a suppressed user's, a damaged file, several row groups."""

from __future__ import annotations

import functools
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventlake.storage import LocalStorage, to_location
from eventlake.sync.pipeline import transform
from eventlake.sync.pipeline.read import files_frame
from eventlake.sync.pipeline.transform import PARSED_SCHEMA, parse_files, parse_files_to

from .columnar_corpus import edge_lines, fuzz_lines, typed_lines
from .test_columnar import _archives

pytestmark = pytest.mark.spark


def rows(frame) -> list[dict]:
    return sorted((row.asDict(recursive=True) for row in frame.collect()), key=lambda row: row["position"])


def test_the_rows_spark_reads_from_the_workers_files_are_the_rows_it_received(
    spark, tmp_path: Path, monkeypatch
) -> None:
    files = _archives(
        tmp_path / "archive",
        [edge_lines(), fuzz_lines(800, seed=5) + typed_lines(1200, seed=5), typed_lines(300, seed=6)],
    )
    damaged = tmp_path / "archive" / "archive-003.gz"
    damaged.write_bytes(files[0].read_bytes()[:200])  # cut short
    files.append(damaged)
    options = {"storage": LocalStorage(), "suppressed": frozenset({"u3"}), "columnar": True}

    received = files_frame(spark, files).mapInArrow(
        functools.partial(parse_files, pieces=to_location(tmp_path / "pieces-a"), **options), PARSED_SCHEMA
    )
    monkeypatch.setattr(transform, "ROW_GROUP_ROWS", 700)  # in this process: several row groups a file
    written = []
    for task in ([0], [1], [2], [3]):  # a task a file, as files_frame deals them here
        batch = pa.RecordBatch.from_pydict(
            {"location": [str(files[n]) for n in task], "number": task, "size": [0] * len(task)}
        )
        written += pa.Table.from_batches(
            list(
                parse_files_to(
                    [batch], parsed=to_location(tmp_path / "parsed"),
                    pieces=to_location(tmp_path / "pieces-b"),
                    **options,
                )
            )
        ).column("file").to_pylist()  # fmt: skip
    assert [Path(f).name for f in written] == [f"part-00000{n}.parquet" for n in range(4)]
    assert received.rdd.getNumPartitions() == 4
    assert pq.ParquetFile(written[1]).num_row_groups >= 2
    read = spark.read.schema(PARSED_SCHEMA).parquet(*written)

    expected = rows(received)
    assert rows(read) == expected
    kinds = {(r["ok"], r["shape"] is not None, r["reason"]) for r in expected}
    assert {(True, True, None), (False, False, "suppressed userId")} <= kinds  # valid and suppressed
    assert any(r["ok"] is None and r["shape"] is not None and r["types"] for r in expected)  # shapes
    assert any(r["ok"] is None and r["raw"] == str(damaged) for r in expected)  # the damaged file
    assert any(r["ok"] is False and r["reason"] != "suppressed userId" for r in expected)  # invalid


def test_a_task_without_files_writes_nothing(tmp_path: Path) -> None:
    empty = pa.RecordBatch.from_pydict({"location": [], "number": [], "size": []}, schema=pa.schema(
        [("location", pa.string()), ("number", pa.int64()), ("size", pa.int64())]
    ))  # fmt: skip
    out = list(
        parse_files_to([empty], parsed=to_location(tmp_path / "parsed"), storage=LocalStorage(),
                       pieces=to_location(tmp_path / "pieces"))
    )  # fmt: skip
    assert out == [] and not (tmp_path / "parsed").exists()
