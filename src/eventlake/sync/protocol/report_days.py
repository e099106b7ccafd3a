"""The daily checkpoint of the run reports: a source's finished UTC days merged into one file each,
and the ``__segment_datalake.sync_reports`` table partitioned by source and day (not by run), so
that a year of runs (about a million at ``up``'s 30 s pace) is 365 files and partitions a source.

Where reports are (:mod:`eventlake.layout`): a run writes ``report-<run>.json`` straight into its
day's folder ``reports/day=<d>/source=<s>/``, which is the day's partition: the partition is
registered by the day's first run and shows each later run as it lands (Spark, Hive and Athena read
a partition's own files). A merge writes the day's reports as one file and switches readers to it
as a compaction switches a partition (:mod:`eventlake.sync.protocol.rewrite`, through a manifest):

1. the merged file and its commit marker are staged (killed here: the next run drops the stage);
2. the manifest is written (from here on, the next run completes it);
3. on a local disk the staged folder is exchanged with the day's folder in one ``renameat2``: every
   reader, through the catalog or not, sees the per-run files or the merged one. On an object
   store the merged file and the marker go to a version folder inside the day's folder (eventlake's
   readers switch at the marker), then the catalog's partition moves to it in one call (Glue
   BatchUpdatePartition, Hive ``SET LOCATION``: catalog readers switch); the per-run files are retired
   and deleted once ``sync.rewrite_grace_minutes`` passed;
4. the source's progress (``_state/report-days/<source-id>.json``) moves past the day.

A report written into a merged day later (a run that started before midnight and was completed by
the next run) goes to the day's current folder, beside the merged file, and is merged with it if
the day comes up again. Today is never merged: it is still being written.

**Who merges: the sync, at its start.** It holds the source's lock (or lease), which every writer of
the source's reports holds, and it has completed the interrupted commits just before, so no report
of a finished day is still to come from them. Compaction (also under the lock) runs only in ``up``
and ``eventlake compact``: a lake synced by ``eventlake sync`` from cron would never merge, and
the upgrade below must happen before the sync's own commit registers a partition of the new form
anyway. The cost is once a day a source: one read of the progress file a sync otherwise.

**The upgrade of a lake written before the merge** (a partition per run, ``run_id=<run>/report.json``
folders) happens at each source's first sync on this version, all of it or, killed, at the next:
its per-run reports are read and staged day by day, the table is created anew with the new keys
(its old partitions cannot be re-keyed in place; the files stay), then one manifest publishes each
day's merged file straight into the day's folder with its marker, deletes the per-run files (a
reader of the new table does not see them: they are in sub-folders) and registers the day
partitions in one batch. Catalog readers miss the source's older reports from the table's
re-creation until that manifest is applied (seconds), and another source's until its own first sync
on this version (the next round of ``up``, or the same ``eventlake sync``).
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import date, datetime, timedelta

import orjson

from eventlake import layout, partitions, state_layout
from eventlake.catalog import Catalog
from eventlake.progress import Say
from eventlake.storage import Location, Storage
from eventlake.sync.protocol.manifest import CHECK, Manifest, PartitionRewrite, TableEntry
from eventlake.sync.protocol.report import (
    REPORT_PARTITION_KEYS,
    REPORTS_DATABASE,
    REPORTS_TABLE,
    reports_table,
)
from eventlake.sync.protocol.rewrite import RewriteKind, RewriteRun, finish_rewrite
from eventlake.sync.protocol.runner import Hold, publish
from eventlake.sync.protocol.stage import RunStage
from eventlake.sync.protocol.state import SyncState
from eventlake.timestamps import now_utc


def checkpoint_reports(
    storage: Storage, lake: Location, catalog: Catalog, state: SyncState, source_id: str, say: Say,
    hold: Hold | None = None, now: datetime | None = None,
) -> int:  # fmt: skip
    """Merge the source's finished days not merged yet (upgrading a lake written before the merge
    first); call it under the source's lock, after completing its interrupted commits. ``hold``:
    the source's (its lease checked before anything is published, and the merge's manifest fenced
    by it: :func:`eventlake.sync.protocol.runner.publish`). Returns the days merged."""
    now, hold = now or now_utc(), hold or Hold()
    yesterday = (now.date() - timedelta(days=1)).isoformat()
    done = merged_through(storage, lake, source_id)
    if done is None:
        merged = _upgrade(storage, lake, catalog, state, source_id, say, hold, now)
    elif done >= yesterday:
        return 0
    else:
        days, day = [], date.fromisoformat(done) + timedelta(days=1)
        while day.isoformat() <= yesterday:
            days.append(day.isoformat())
            day += timedelta(days=1)
        merged = _merge(storage, lake, catalog, state, source_id, days, hold, now)
    storage.write(state_layout.report_days_file(lake, source_id), orjson.dumps({"merged_through": yesterday}))
    if merged:
        say(f"reports of {merged} finished days merged into a file each")
    return merged


def merged_through(storage: Storage, lake: Location, source_id: str) -> str | None:
    """The last day whose reports the source merged; None before its first merge (not upgraded)."""
    try:
        return str(
            orjson.loads(storage.read(state_layout.report_days_file(lake, source_id)))["merged_through"]
        )
    except FileNotFoundError:
        return None
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None  # damaged: merging again finds the merged days with nothing to merge


def _merge(
    storage: Storage, lake: Location, catalog: Catalog, state: SyncState, source_id: str,
    days: list[str], hold: Hold, now: datetime, upgrade: bool = False,
) -> int:  # fmt: skip
    run = RewriteRun.new(RewriteKind.REPORT_MERGE, now)
    stage = RunStage(lake, source_id, source_id, run.id, ())
    rewrites = [r for day in days if (r := stage_day(storage, stage, run, lake, source_id, day)) is not None]
    if not rewrites:
        storage.delete_tree(stage.root)
        return 0
    if upgrade:  # into the day folder: the old table's partitions (its sub-folders) see no change
        rewrites = [replace(r, version="") for r in rewrites]
        _drop_old_table(catalog)
    partitions = tuple(r.values for r in rewrites)
    manifest = Manifest(
        run_id=stage.run_id, source_id=source_id, files=(), moves=(),
        tables=(TableEntry(reports_table(lake), partitions, CHECK),), report_path="", report=(),
        stage=str(stage.root), rewrites=tuple(rewrites),
    )  # fmt: skip
    publish(manifest, hold, state, storage, lake, catalog)  # fenced by the lease, as a sync's commit
    return len(rewrites)


def stage_day(
    storage: Storage, stage: RunStage, run: RewriteRun, lake: Location, source_id: str, day: str
) -> PartitionRewrite | None:
    """Stage one day's merged reports (the per-run files and an earlier merged file, as readers see
    them) and its marker; None when the day holds no per-run report (merged, or none that day)."""
    folder = layout.report_folder(lake, day, source_id)
    names = partitions.report_folder_names(storage, folder)
    reports = layout.report_folder_files(names, partitions.read_marker(storage, folder))
    if not any(layout.is_run_report_name(n) for n in reports):
        return None
    staged = stage.rewrite_folder(folder)
    merged, replaced = [], []
    for name in reports:
        data = storage.read(layout.partition_file(folder, name))
        try:
            for line in data.splitlines():
                orjson.loads(line)
        except orjson.JSONDecodeError:  # damaged: left where it is, readers name it
            continue
        merged.append(data if data.endswith(b"\n") or not data else data + b"\n")
        replaced.append(name)
    output = layout.merged_report_name(run.id)
    storage.write(staged / output, b"".join(merged))
    rewrite = finish_rewrite(storage, stage, folder, names, [output], replaced, run, data=reports)
    return replace(
        rewrite,
        database=REPORTS_DATABASE,
        table=REPORTS_TABLE,
        keys=REPORT_PARTITION_KEYS,
        values=(source_id, day),
    )


def _upgrade(
    storage: Storage, lake: Location, catalog: Catalog, state: SyncState, source_id: str, say: Say,
    hold: Hold, now: datetime,
) -> int:  # fmt: skip
    """A source's first merge: every day holding its reports of a partition per run (one listing of
    them), merged, and the table re-created with a partition per day."""
    pattern = layout.LEGACY_REPORT_PATH.format(day="*", source_id=source_id, run_id="*")
    legacy = storage.list(layout.reports_root(lake), pattern)
    days = sorted({layout.report_day(info.path, lake) for info in legacy})
    if days:
        say(f"reports: {len(legacy)} run reports of {len(days)} days to merge into a partition per day")
    merged = _merge(storage, lake, catalog, state, source_id, days, hold, now, upgrade=True)
    if not days:
        _drop_old_table(catalog)  # (another source's reports, if any, come back with its own first sync)
    for info in legacy:  # the emptied per-run folders (a local disk's): a day folder swaps whole later
        storage.delete_tree(info.path.parent)
    root = storage.local_path(layout.reports_root(lake))
    if root is not None:  # those a killed upgrade emptied (an object store keeps no empty folder)
        for folder in root.glob(f"day=*/source={source_id}/run_id=*"):
            with contextlib.suppress(OSError):  # not empty: not merged, kept
                folder.rmdir()
    return merged


def _drop_old_table(catalog: Catalog) -> None:
    """Drop the reports table when it is partitioned by run (written before the merge): a table's
    partition keys cannot change. Its files stay; the commit creates the table anew."""
    columns = catalog.table_columns(REPORTS_DATABASE, REPORTS_TABLE)
    if columns is not None and "run_id" not in {name for name, _ in columns}:
        catalog.drop_table(REPORTS_DATABASE, REPORTS_TABLE)
