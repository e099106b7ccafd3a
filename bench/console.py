"""Web console benchmark: page views on a big lake, against a full scan of its reports.

Makes a lake of ``--runs`` sync runs (report files written by the sync's own writer, 3 tables
each, spread over 60 days and 2 sources) and ``--tables`` schema files, starts the console on it
(``Console``: its uvicorn server and refresh thread, no collector), and prints:

- the first read of the lake (every report file once), then one refresh with nothing new, then
  one after 10 new runs;
- each page's time over HTTP (median and max of ``--views`` views): ``/``, ``/runs`` (first page,
  a filtered one and the last page), a run's page, ``/schemas`` (first and last page), a table's
  page;
- the baseline, in the same script: ``eventlake reports`` (``run_history``: reads every report file
  on each call), the way a page would work without the console's index; and the ratio.

    .venv/bin/python bench/console.py                       # 10,000 runs, 500 tables
    .venv/bin/python bench/console.py --runs 2000 --tables 100
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import httpx

from eventlake.catalog import TableSpec
from eventlake.catalog.schema_file import write_schema_file
from eventlake.config import load_settings, write_initial_config
from eventlake.config.writer import add_source
from eventlake.console import Console
from eventlake.progress import quiet
from eventlake.reports.history import run_history
from eventlake.storage import LocalStorage
from eventlake.sync.protocol.report import (
    SyncResult,
    TableResult,
    report_path,
    report_rows,
    write_report_rows,
)
from eventlake.timestamps import now_utc


def make_lake(directory: Path, runs: int, tables: int) -> Path:
    config = write_initial_config(directory)
    ids = [add_source(config, slug, write_key=f"wk_{slug}")["id"] for slug in ("web", "ios")]
    settings = load_settings(config, environ={})
    lake, storage = settings.lake.root, LocalStorage()
    for n in range(tables):
        columns = tuple((f"properties_field_{i}", "string") for i in range(30))
        location = str(lake / "segment-data" / "data" / ids[n % 2] / f"segment_type=track_event_{n}")
        write_schema_file(storage, lake, TableSpec("web" if n % 2 == 0 else "ios", f"track_event_{n}",
                                                   columns, ("day", "hr"), location))  # fmt: skip
    write_runs(settings, ids, 0, runs)
    return config


def write_runs(settings, ids: list[str], first: int, count: int) -> None:
    now, lake, storage = now_utc(), settings.lake.root, LocalStorage()
    for n in range(first, first + count):
        start = now - timedelta(minutes=(first + count - n) * 8)  # every 8 minutes: 10,000 runs = 55 days
        tables = tuple(
            TableResult("web", f"track_event_{(n + t) % 500}", 100 + t, False, (), ({"day": "d", "hr": "h"},))
            for t in range(3)
        )
        status = "Failed" if n % 97 == 0 else "Success"
        slug, source_id = ("web", ids[0]) if n % 2 == 0 else ("ios", ids[1])
        result = SyncResult(slug, source_id, f"run-{n:06d}", status, start, start + timedelta(seconds=6),
                            tables=tables, input_messages=300)  # fmt: skip
        write_report_rows(storage, report_path(result, lake), report_rows(result, lake))


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--views", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        made = time.perf_counter()
        config = make_lake(Path(tmp) / "lake", args.runs, args.tables)
        print(f"lake: {args.runs:,} runs, {args.tables} tables, made in {time.perf_counter() - made:.1f} s")
        settings = load_settings(config, environ={})
        console = Console(settings, quiet)
        print(f"first read of the lake:        {timed(console.watch.refresh):7.3f} s")
        print(f"refresh, nothing new:          {timed(console.watch.refresh):7.3f} s")
        ids = [s.id for s in settings.sources]
        write_runs(settings, ids, args.runs, 10)
        print(f"refresh after 10 new runs:     {timed(console.watch.refresh):7.3f} s")
        console.start()
        base = console.url.rstrip("/")
        last_runs = (args.runs + 10 - 1) // 50 * 50
        pages = ["/", "/runs", "/runs?source=ios&status=Failed", f"/runs?offset={last_runs}",
                 "/runs/run-000123", "/schemas", f"/schemas?offset={args.tables // 100 * 100}",
                 "/schemas/web/track_event_0"]  # fmt: skip
        medians = {}
        try:
            with httpx.Client(base_url=base, timeout=60) as client:
                for path in pages:
                    times = []
                    for _ in range(args.views):
                        started = time.perf_counter()
                        response = client.get(path)
                        times.append(time.perf_counter() - started)
                        assert response.status_code == 200, (path, response.status_code)
                    medians[path] = statistics.median(times)
                    print(
                        f"{path:36} median {medians[path] * 1000:7.1f} ms   max {max(times) * 1000:7.1f} ms"
                    )
        finally:
            console.stop()
        baseline = [timed(lambda: run_history(settings, None, 50)) for _ in range(3)]
        scan = statistics.median(baseline)
        print(f"baseline: `eventlake reports` (reads every report file), median of 3: {scan * 1000:.0f} ms")
        slowest = max(medians.values())
        print(f"ratio: slowest page median / baseline = {slowest / scan:.3f}")


if __name__ == "__main__":
    main()
