"""Reports after a long time: `eventlake reports` (library call) and the console's first read over
``--days`` days of ``--runs-per-day`` report files per day (`up` writes 2,880 a day per source),
fabricated directly on a local lake with the sync's own writer, before and after the reports'
index (``_state/reports.json``: without it every report file is listed, as before it existed), and
after the daily merge (``--merged``: each finished day's runs in one file, as
:mod:`eventlake.sync.protocol.report_days` leaves them; today's runs stay a file each).

Prints, for each: seconds for the newest 100 runs, for the 30-day health, for the console's first
read (until its first page is published, and until every run is read: the console holds the last two
days' runs and a summary of each older day, made from its reports at the first start and kept in the
state folder); the last row is a console started again on the same lake (it reads the summaries).

    .venv/bin/python bench/reports_age.py --days 365 --runs-per-day 100
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

from eventlake import layout, partitions
from eventlake.config import LakeSettings, Settings, SourceSettings
from eventlake.config.settings import Secret
from eventlake.console.lake import LakeWatch
from eventlake.reports import daily_health, run_history
from eventlake.storage import LocalStorage
from eventlake.sync.protocol.report import (
    SyncResult,
    TableResult,
    note_report_day,
    report_path,
    report_rows,
    write_report_rows,
)
from eventlake.timestamps import now_utc


def lay(settings: Settings, days: int, per_day: int) -> int:
    storage, lake, now = LocalStorage(), settings.lake.root, now_utc()
    table = TableResult("bench", "track_x", 50, False, (), ({"day": "d", "hr": "00"},))
    written = 0
    for day in range(days):
        for n in range(per_day):
            start = now - timedelta(days=day, seconds=n * 86400 // per_day)
            run = SyncResult("bench", "SRC", f"{start:%Y%m%dT%H%M%S}000Z-{n:04x}", "Success", start,
                             start + timedelta(seconds=20), tables=(table,))  # fmt: skip
            write_report_rows(storage, report_path(run, lake), report_rows(run, lake))
            written += 1
    return written


def merge_days(settings: Settings) -> int:
    """Each finished day's run files as one merged file and its marker (what the merge leaves on a
    local disk, without its catalog: only the files matter to these readers)."""
    storage, lake, today = LocalStorage(), settings.lake.root, now_utc().strftime("%Y-%m-%d")
    merged = 0
    for folder in sorted(layout.reports_root(lake).glob("day=*/source=*")):
        day = folder.parent.name.split("=", 1)[1]
        names = sorted(p.name for p in folder.iterdir() if layout.is_run_report_name(p.name))
        if day >= today or not names:
            continue
        merge_id = f"compact-{day.replace('-', '')}T235959000Z-0000"
        data = b"".join(storage.read(folder / name) for name in names)
        storage.write(folder / layout.merged_report_name(merge_id), data)
        marker = partitions.marker_document(merge_id, [layout.merged_report_name(merge_id)], names)
        storage.write(folder / layout.compaction_marker_name(merge_id), marker)
        for name in names:
            storage.delete(folder / name)
        merged += 1
    return merged


def measure(settings: Settings, label: str) -> None:
    started = time.monotonic()
    run_history(settings, limit=100)
    newest = time.monotonic() - started
    started = time.monotonic()
    daily_health(settings)
    health = time.monotonic() - started
    watch = LakeWatch(settings, collector_url=None)
    first_page: list[float] = []
    started = time.monotonic()

    def poll() -> None:
        while not first_page:
            if watch.runs(limit=1)[1]:
                first_page.append(time.monotonic() - started)
            time.sleep(0.01)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    watch.refresh()
    whole = time.monotonic() - started
    poller.join(5)
    page = first_page[0] if first_page else whole
    print(f"| {label} | {newest:.2f} s | {health:.2f} s | {page:.2f} s | {whole:.2f} s |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--runs-per-day", type=int, default=100)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="eventlake-bench-reports-"))
    source = SourceSettings("bench", "SRC", Secret("wk"), "bench")
    settings = Settings(
        path=None, lake=LakeSettings(root=work / "lake", state_dir=work / "state"), sources=(source,)
    )
    started = time.monotonic()
    written = lay(settings, args.days, args.runs_per_day)
    print(f"laid {written:,} report files over {args.days} days in {time.monotonic() - started:.0f} s\n")
    print("| reports | newest 100 runs | 30-day health | console: first page | console: every run |")
    print("|---|---|---|---|---|")
    measure(settings, "without the index (before)")
    note_report_day(LocalStorage(), settings.lake.root, now_utc().strftime("%Y-%m-%d"))  # a sync writes it
    measure(settings, "with the index (a file per run)")
    started = time.monotonic()
    days = merge_days(settings)
    print(f"\n(merged {days} finished days in {time.monotonic() - started:.0f} s)\n")
    measure(settings, "with the index, finished days merged (after)")
    measure(settings, "the same, console restarted (older days' summaries kept)")


if __name__ == "__main__":
    main()
