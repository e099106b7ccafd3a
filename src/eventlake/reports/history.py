"""The last sync runs: one row per run, from the report files (a run's, or a merged day's)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import orjson

from eventlake.config import Settings
from eventlake.sync.protocol.report import read_report_rows, report_files_by_day, report_runs, run_status
from eventlake.sync.protocol.status import Status
from eventlake.timestamps import now_utc

RUN_COLUMNS = (
    "start_time",
    "source",
    "run_id",
    "kind",
    "status",
    "duration_s",
    "rows",
    "tables",
    "new_columns",
    "duplicates_dropped",
    "rejected",
    "damaged_files",
    "error",
)


HEALTH_COLUMNS = ("day", "source", "runs", "failed_runs", "rows", "duplicates_dropped", "rejected")


def _runs(
    settings: Settings, source: str | None, since: str | None = None
) -> Iterator[tuple[str, list[tuple[dict[str, Any], list[dict[str, Any]]]]]]:
    """Each UTC day's runs (``source`` row, ``event`` rows), the newest day first, back to
    ``since``: a caller stops listing and reading once it has the days it needs."""
    wanted = settings.source(source).id if source else None
    storage = settings.lake.storage()
    for day, paths in report_files_by_day(storage, settings.lake.root, wanted, since):
        runs = []
        for path in paths:
            try:
                read = read_report_rows(storage, path)
            except (OSError, orjson.JSONDecodeError) as exc:
                print(f"warning: skipping unreadable report {path}: {exc}", file=sys.stderr)
                continue
            for rows in report_runs(read):  # one run's file, or a merged day's
                head = next((r for r in rows if r["type"] == "source"), None)
                if head is not None and (wanted is None or head["source_id"] == wanted):
                    runs.append((head, rows))
        yield day, runs


def run_history(settings: Settings, source: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """The newest ``limit`` runs, newest first (the reports of the newest days only: a run's day is
    the day it started, so once the days read hold ``limit`` runs no older day holds a newer one)."""
    ids = {s.id: s.slug for s in settings.sources}
    runs = []
    for _, day_runs in _runs(settings, source):
        for head, rows in day_runs:
            tables = [r for r in rows if r["type"] == "event" and r["status"] != "failed"]
            runs.append(
                {
                    "start_time": head["start_time"],
                    "source": ids.get(head["source_id"], head["source_id"]),
                    "run_id": head["run_id"],
                    "kind": "replay" if head.get("replay") else "sync",
                    "status": run_status(rows),
                    "duration_s": round(head["duration_mins"] * 60, 1),
                    "rows": head["row_count"],
                    "tables": len(tables),
                    "new_columns": sum(len(t["new_columns"]) for t in tables),
                    "duplicates_dropped": head.get("duplicates_dropped", 0),
                    "rejected": head.get("rejected_messages", 0) + head.get("rejected_values", 0),
                    # archive files quarantined by name (eventlake.sync.protocol.damaged), with their problem
                    "damaged_files": "; ".join(
                        f"{d['file']} ({d.get('problem') or 'damaged'})"
                        for d in head.get("damaged_files") or ()
                    ),
                    "error": head.get("error") or "",
                }
            )
        if len(runs) >= limit:
            break
    runs.sort(key=lambda r: (r["start_time"], r["run_id"]), reverse=True)
    return runs[:limit]


def daily_health(settings: Settings, source: str | None = None, days: int = 30) -> list[dict[str, Any]]:
    """Synced rows per day and source over the last ``days`` days (by run day), newest first."""
    ids = {s.id: s.slug for s in settings.sources}
    since = (now_utc() - timedelta(days=days - 1)).strftime("%Y-%m-%d")
    totals: dict[tuple[str, str], dict[str, Any]] = {}
    for _, day_runs in _runs(settings, source, since):
        for head, rows in day_runs:
            slug = ids.get(head["source_id"], head["source_id"])
            day = totals.setdefault(
                (head["day"], slug),
                {"day": head["day"], "source": slug, "runs": 0, "failed_runs": 0, "rows": 0,
                 "duplicates_dropped": 0, "rejected": 0},
            )  # fmt: skip
            day["runs"] += 1
            day["failed_runs"] += run_status(rows) == Status.FAILED
            day["rows"] += head["row_count"] or 0
            day["duplicates_dropped"] += head.get("duplicates_dropped") or 0
            day["rejected"] += (head.get("rejected_messages") or 0) + (head.get("rejected_values") or 0)
    return sorted(totals.values(), key=lambda d: (d["day"], d["source"]), reverse=True)
