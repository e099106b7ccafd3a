"""The reports' daily checkpoint on a lake in a bucket with Glue (moto): a finished day's runs are
merged into one file in a version folder and the day's Glue partition moves to it in one call, so
a reader that does what Athena does (Glue's partitions -> list each location -> read each file)
reads the same runs before and after, and so do `eventlake reports` and `catalog repair`."""

from __future__ import annotations

from datetime import datetime, timedelta

import boto3
import orjson
import pytest

from eventlake import layout, partitions
from eventlake.catalog import load_catalog
from eventlake.catalog.repair import repair_table
from eventlake.reports import run_history
from eventlake.storage import ObjectPath, Storage, to_location
from eventlake.sync.protocol.report import (
    REPORTS_DATABASE,
    REPORTS_TABLE,
    SyncResult,
    TableResult,
    reports_table,
)
from eventlake.sync.protocol.report_days import checkpoint_reports
from eventlake.sync.protocol.state import SyncState
from eventlake.sync.protocol.status import Status
from eventlake.timestamps import now_utc
from tests.sync.test_report_days import register_report

pytestmark = pytest.mark.integration

NOW = now_utc().replace(hour=12, minute=0, second=0, microsecond=0)
YESTERDAY = NOW - timedelta(days=1)


def athena_runs(glue, storage: Storage, source_id: str) -> list[tuple[str, str]]:
    """(day, run_id) of the source's rows, read as Athena reads the table: Glue's partitions (the
    source's: the worker's other tests' lakes share this Glue table), each location listed (files
    whose names start with ``_`` or ``.`` skipped), every file read."""
    runs = []
    pages = glue.get_paginator("get_partitions").paginate(
        DatabaseName=REPORTS_DATABASE, TableName=REPORTS_TABLE
    )
    for partition in (p for page in pages for p in page["Partitions"] if p["Values"][0] == source_id):
        location = to_location(partition["StorageDescriptor"]["Location"].rstrip("/"))
        for info in storage.list(location, "*"):
            if info.path.name.startswith(("_", ".")):
                continue
            rows = [orjson.loads(line) for line in storage.read(info.path).splitlines() if line.strip()]
            runs += [(r["day"], r["run_id"]) for r in rows if r["type"] == "source"]
    return sorted(runs)


def test_a_finished_day_moves_to_a_version_folder_and_glue_follows(s3_lake, moto) -> None:
    settings, storage, lake = s3_lake.settings, s3_lake.settings.lake.storage(), s3_lake.settings.lake.root
    source_id = s3_lake.source.id
    catalog = load_catalog(settings)
    state = SyncState(storage, lake, source_id)
    say = lambda line: None  # noqa: E731
    assert (
        checkpoint_reports(storage, lake, catalog, state, source_id, say, now=YESTERDAY - timedelta(days=1))
        == 0
    )

    def write_run(start: datetime, n: int) -> str:  # as a sync's commit does
        table = TableResult(s3_lake.source.database, "pages", n, False, (), ({"day": f"{start:%Y-%m-%d}"},))
        result = SyncResult(
            s3_lake.slug, source_id, f"{start:%Y%m%dT%H%M%S}000Z-{n:04x}", Status.SUCCESS, start,
            start + timedelta(seconds=5), tables=(table,), input_files=1,
        )  # fmt: skip
        register_report(storage, lake, catalog, result)
        return result.run_id

    runs = [(f"{YESTERDAY:%Y-%m-%d}", write_run(YESTERDAY.replace(hour=2 * n), n)) for n in range(4)]
    runs += [(f"{NOW:%Y-%m-%d}", write_run(NOW.replace(hour=1), 10))]
    glue = boto3.client("glue", endpoint_url=moto.endpoint)
    assert athena_runs(glue, storage, source_id) == sorted(runs)
    history = run_history(settings, limit=100)

    assert checkpoint_reports(storage, lake, catalog, state, source_id, say, now=NOW) == 1
    folder = layout.report_folder(lake, f"{YESTERDAY:%Y-%m-%d}", source_id)
    assert isinstance(folder, ObjectPath)
    [version] = {layout.current_version([n]) for n in _names(storage, folder)} - {None}
    merged = [n for n in _names(storage, folder) if n.startswith(version + "/reports-compact-")]
    assert len(merged) == 1  # one file holds the day (the per-run files stay until the grace period)
    location = glue.get_partition(
        DatabaseName=REPORTS_DATABASE,
        TableName=REPORTS_TABLE,
        PartitionValues=[source_id, f"{YESTERDAY:%Y-%m-%d}"],
    )["Partition"]["StorageDescriptor"]["Location"]
    assert location.rstrip("/") == str(layout.version_dir(folder, version))
    assert "/segment-data/versions/reports/" in location  # outside the table's folder
    assert athena_runs(glue, storage, source_id) == sorted(runs)  # not the per-run files and the merged one
    assert run_history(settings, limit=100) == history

    # the grace period over, the per-run files go; then the source's partitions lost from the
    # catalog are rebuilt from the lake: the merged day is registered at its version folder again
    for info in storage.list(folder, "*"):
        storage.delete(info.path)
    assert athena_runs(glue, storage, source_id) == sorted(runs)
    glue.batch_delete_partition(
        DatabaseName=REPORTS_DATABASE, TableName=REPORTS_TABLE,
        PartitionsToDelete=[{"Values": [source_id, day]} for day in sorted({d for d, _ in runs})],
    )  # fmt: skip
    assert athena_runs(glue, storage, source_id) == []
    assert repair_table(catalog, storage, reports_table(lake)).partitions == 2
    assert athena_runs(glue, storage, source_id) == sorted(runs)


def _names(storage: Storage, folder: ObjectPath) -> list[str]:
    return list(partitions.report_folder_names(storage, folder))
