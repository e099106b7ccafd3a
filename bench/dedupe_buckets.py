"""Dedupe key files benchmark: a micro-batch's lookup against a busy source's whole window, and the
merge of a day, with today's Parquet index as the baseline.

Fabricates the index a source at ``--rate`` messages/s leaves over ``--days`` days (one merged key
file per closed day, ``rate`` × 86,400 ids each: random 128-bit keys, which is what BLAKE2b keys
are, plus ``--dups`` keys of real ids per day), writing with `eventlake.sync.index.index_keys.KeyWriter`
a key range at a time. Then, in one process:

- **lookup**: `eventlake.sync.index.dedupe_index.seen` of ``--batch`` ids (``--dups`` of them in the
  index), ``--runs`` times, against the first 1, 2, 4, ... ``--days`` days (how it grows with the
  index), the first run of each size separately (its buckets not yet in the page cache); then the
  same lookups with the key files' filters ignored (``lookup_buckets``: every id's bucket
  read, as before the filters), the ratio filtered / unfiltered;
- **merge**: a further day as 24 hourly files merged into one by
  `eventlake.sync.index.index_merge.merge_index` in a child process: wall time and the child's peak RSS;
- **baseline**: today's format, a Parquet file of ``--baseline`` million string ids, looked up the
  way the driver reads it (`seen` on an old-format file); its time per million ids extrapolated to
  the window, and the ratio.

    .venv/bin/python bench/dedupe_buckets.py --rate 2000 --days 7          # 1.2 billion ids, 29 GB
    .venv/bin/python bench/dedupe_buckets.py --rate 200 --days 7 --runs 5  # a quick look
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from eventlake.storage import LocalStorage
from eventlake.sync.index.dedupe_index import index_files, seen
from eventlake.sync.index.index_keys import RECORD, KeyWriter, keys, lookup_buckets, open_keys

PARTS_BITS = 6  # fabricate a day 64 key ranges at a time
MERGE = """
import resource, sys, time
from datetime import datetime, timezone
from eventlake.storage import LocalStorage
from eventlake.sync.index.index_merge import merge_index
begun = time.monotonic()
print(merge_index(LocalStorage(), sys.argv[1], now=datetime.fromisoformat(sys.argv[2])))
print(time.monotonic() - begun, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def run_folder(index: Path, started: datetime) -> Path:
    return index / f"run_id={started:%Y%m%dT%H%M%S}{started.microsecond // 1000:03d}Z-bench"


def fabricate(path: Path, ids: int, start: datetime, span: timedelta, known: np.ndarray, rng) -> None:
    """A key file of ``ids`` random keys and the ``known`` records, received over ``span``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    first = int(start.timestamp() * 1e6)
    with path.open("wb") as handle:
        writer = KeyWriter(handle, ids + len(known))
        for part in range(2**PARTS_BITS):
            n = ids // 2**PARTS_BITS + (1 if part < ids % 2**PARTS_BITS else 0)
            records = np.empty(n, RECORD)
            records["hi"] = (rng.integers(0, 2 ** (64 - PARTS_BITS), n, dtype=np.uint64)) | np.uint64(
                part << (64 - PARTS_BITS)
            )
            records["lo"] = rng.integers(0, 2**63, n, dtype=np.uint64)
            records["at"] = first + rng.integers(0, int(span.total_seconds() * 1e6), n)
            mine = known[(known["hi"] >> np.uint64(64 - PARTS_BITS)) == part]
            records = np.concatenate((records, mine))
            writer.add(records[np.argsort(records["hi"])])
        writer.close()


def unfiltered_seen(storage: LocalStorage, files: list, batch: pa.Array, since: datetime) -> int:
    """How many of ``batch`` the key files hold, reading every id's bucket (no filter): the baseline."""
    records = keys(batch.to_pylist())
    wanted = records[np.lexsort((records["lo"], records["hi"]))]
    floor = int(since.timestamp() * 1e6)
    found = np.zeros(len(wanted), bool)
    for info in files:
        found |= lookup_buckets(storage, open_keys(storage, info), wanted, floor, None)
    return int(found.sum())


def timed(call, runs: int) -> tuple[float, float, object]:
    """The first run's time, the median of the next ``runs``, the last answer."""
    times, answer = [], None
    for _ in range(runs + 1):
        started = time.monotonic()
        answer = call()
        times.append(time.monotonic() - started)
    return times[0], statistics.median(times[1:]), answer


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=int, default=2_000, help="messages/s of the source")
    parser.add_argument("--days", type=int, default=7, help="closed days in the window")
    parser.add_argument("--batch", type=int, default=2_000)
    parser.add_argument("--dups", type=int, default=20, help="ids of each day the batch sends again")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", type=float, default=10.0, help="million ids in the Parquet baseline")
    parser.add_argument("--no-merge", action="store_true")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="eventlake-dedupe-buckets-"))
    index, storage, rng = work / "dedupe", LocalStorage(), np.random.default_rng(7)
    now = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    per_day = args.rate * 86_400
    again = [f"again-{d}-{n}" for d in range(args.days) for n in range(args.dups)]
    known = keys(again)
    begun = time.monotonic()
    for day in range(args.days):  # day 0 is the newest closed day
        start = now - timedelta(days=day + 1)
        records = known[day * args.dups : (day + 1) * args.dups].copy()
        records["at"] = int((start + timedelta(hours=1)).timestamp() * 1e6)
        merged = run_folder(index, start + timedelta(hours=23)) / "merged.keys"
        fabricate(merged, per_day, start, timedelta(days=1), records, rng)
        print(f"day {day + 1}: {per_day:,} ids ({time.monotonic() - begun:.0f} s)", flush=True)
    size = sum(p.stat().st_size for p in index.rglob("*.keys"))
    print(f"index: {args.days * per_day:,} ids in {args.days} key files, {size / 2**30:.1f} GiB, "
          f"laid in {time.monotonic() - begun:.0f} s", flush=True)  # fmt: skip

    since = now - timedelta(days=args.days + 1)
    files = sorted(index_files(storage, index, since), key=lambda f: str(f.path), reverse=True)
    counts = sorted({min(args.days, 2**n) for n in range(args.days.bit_length() + 1)})
    for days in counts:
        batch = pa.array(
            again[: days * args.dups] + [str(uuid.uuid4()) for _ in range(args.batch - days * args.dups)]
        )
        chosen = files[:days]
        first, warm, found = timed(lambda: seen(storage, chosen, batch, since), args.runs)  # noqa: B023
        assert len(found) == days * args.dups, (len(found), days * args.dups)
        base_first, base, base_found = timed(
            lambda: unfiltered_seen(storage, chosen, batch, since),  # noqa: B023
            args.runs,
        )
        assert base_found == len(found), (base_found, len(found))
        print(f"lookup of {args.batch:,} ids in {days} day(s), {days * per_day:,} ids: first "
              f"{first:.3f} s, then median {warm:.3f} s (found {len(found)}); without the filters "
              f"first {base_first:.3f} s, median {base:.3f} s: ratio {warm / base:.2f}",
              flush=True)  # fmt: skip

    if not args.no_merge:
        day_start = now - timedelta(days=args.days + 1)
        for hour in range(24):
            started = day_start + timedelta(hours=hour)
            fabricate(run_folder(index, started) / "part.keys", per_day // 24, started, timedelta(hours=1),
                      np.zeros(0, RECORD), rng)  # fmt: skip
        merged = subprocess.run(
            [sys.executable, "-c", MERGE, str(index), now.isoformat()],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
        took, rss = merged[1].split()
        print(f"merge of a day as 24 hourly files ({per_day:,} ids): {merged[0]} files in "
              f"{float(took):.1f} s, peak RSS {int(rss) / 2**20:.2f} GiB", flush=True)  # fmt: skip

    baseline = work / "baseline" / "run_id=20000101T000000000Z-base"
    baseline.mkdir(parents=True)
    n = int(args.baseline * 1e6)
    ids = pa.array([str(uuid.uuid4()) for _ in range(n)])
    table = pa.table({"message_id": ids, "received_at": pa.array(np.full(n, int(now.timestamp() * 1e6)),
                      pa.timestamp("us", tz="UTC"))})  # fmt: skip
    pq.write_table(table, baseline / "merged.parquet")
    old = index_files(storage, baseline.parent, since)
    batch = pa.array([str(uuid.uuid4()) for _ in range(args.batch)])
    times = []
    for _ in range(3):
        started = time.monotonic()
        seen(storage, old, batch, since)
        times.append(time.monotonic() - started)
    per_million = statistics.median(times) / args.baseline
    window = args.days * per_day / 1e6 * per_million
    print(f"today's format: {args.baseline:g} M ids in Parquet, lookup median "
          f"{statistics.median(times):.2f} s "
          f"({per_million:.3f} s per million ids): {args.days * per_day / 1e6:,.0f} M ids would take "
          f"{window:.0f} s; key files {warm:.3f} s, ratio {warm / window:.5f}")  # fmt: skip
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
    if args.workdir is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
