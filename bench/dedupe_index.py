"""Dedupe index benchmark: warm micro-batches against the index a day of `eventlake up` leaves.

Every sync run adds a folder of small files to its source's dedupe index, and every sync reads the
index's files within its window: `up` syncing every 30 s adds 2,880 folders a day. The script
builds a fresh project, syncs ``--base`` messages of `bench/sync.py`'s generator, then fabricates
``--folders`` run folders of ``--files`` index files of ``--ids`` message ids each (ids received
over the last day, run names over the same day, as `up`'s runs would have left them), and times
warm micro-batches of ``--batch`` messages (one archive file each, all in one hour) through
`eventlake.sync.run_sync` on one Spark session:

- **before**: ``--runs`` batches against the index as the runs left it (the baseline);
- **merged**: the index merged by `eventlake.sync.index.dedupe_index.merge_index` (what compaction does
  every hour in `up`), then ``--runs`` batches again.

Prints each run, the medians and the ratio merged / before.

    .venv/bin/python bench/dedupe_index.py
    .venv/bin/python bench/dedupe_index.py --folders 2880 --files 4 --runs 4
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from incremental import QUIET, add_batch, synced_project, warm_engine  # noqa: E402


def fabricate_index(index: Path, folders: int, files: int, ids: int, now: datetime) -> None:
    """``folders`` run folders over the day before ``now``, each with ``files`` files of ``ids`` ids."""
    schema = pa.schema([("message_id", pa.string()), ("received_at", pa.timestamp("us", tz="UTC"))])
    for n in range(folders):
        started = now - timedelta(days=1) + timedelta(seconds=n * 86_400 / folders)
        folder = index / f"run_id={started:%Y%m%dT%H%M%S}{started.microsecond // 1000:03d}Z-{n % 65536:04x}"
        folder.mkdir(parents=True)
        for part in range(files):
            received = [started - timedelta(seconds=30 * i / ids) for i in range(ids)]
            table = pa.table({"message_id": [str(uuid.uuid4()) for _ in range(ids)], "received_at": received},
                             schema=schema)  # fmt: skip
            pq.write_table(table, folder / f"part-{n:05d}-{part:05d}.parquet")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", type=int, default=20_000, help="messages synced first")
    parser.add_argument("--batch", type=int, default=2_000, help="messages per micro-batch")
    parser.add_argument("--folders", type=int, default=2_880, help="run folders in the index (a day at 30 s)")
    parser.add_argument("--files", type=int, default=2, help="index files per run folder")
    parser.add_argument("--ids", type=int, default=500, help="message ids per index file")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="eventlake-dedupe-index-"))
    project, source_id, _ = synced_project(work, args.base)

    from eventlake import state_layout
    from eventlake.storage import LocalStorage
    from eventlake.sync import run_sync
    from eventlake.sync.index.index_merge import merge_index

    settings, spark, catalog = warm_engine(project, "eventlake-bench-dedupe-index")
    index = Path(state_layout.dedupe_index_dir(settings.lake.root, source_id))
    started = time.monotonic()
    fabricate_index(index, args.folders, args.files, args.ids, datetime.now(timezone.utc))
    files = len(list(index.glob("*/*.parquet")))
    ids = args.folders * args.files * args.ids
    took = time.monotonic() - started
    print(f"index: {files:,} files in {args.folders:,} run folders ({ids:,} ids, fabricated in {took:.1f} s)")

    batch = 0

    def runs(label: str, count: int) -> list[float]:
        nonlocal batch
        times = []
        for run in range(count):
            add_batch(project, source_id, work, batch, args.batch, same_hour=True)
            batch += 1
            begun = time.monotonic()
            [result] = run_sync(settings, spark=spark, catalog=catalog, say=QUIET)
            times.append(time.monotonic() - begun)
            print(f"{label} run {run + 1}: {result.input_messages:,} messages, {result.duplicates_dropped} "
                  f"duplicates: {times[-1]:.2f} s ({result.status})", flush=True)  # fmt: skip
        return times

    runs("warm-up (not counted)", 1)
    before = runs("before the merge", args.runs)
    begun = time.monotonic()
    files_in, files_out = merge_index(LocalStorage(), index)
    print(f"merge_index: {files_in:,} files -> {files_out:,} in {time.monotonic() - begun:.1f} s", flush=True)
    merged = runs("merged", args.runs)
    spark.stop()

    a, b = statistics.median(before), statistics.median(merged)
    print(f"median before {a:.2f} s, merged {b:.2f} s; ratio merged / before: {b / a:.2f}")


if __name__ == "__main__":
    main()
