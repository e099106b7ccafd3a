"""The dedupe index on disk: the files a run reads, and their merge (no Spark)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventlake.storage import LocalStorage
from eventlake.sync.dedupe_index import index_files, merge_index, run_started

UTC = timezone.utc
SCHEMA = pa.schema([("message_id", pa.string()), ("received_at", pa.timestamp("us", tz="UTC"))])


def run_folder(index: Path, started: datetime, suffix: str = "ab12") -> Path:
    return index / f"run_id={started:%Y%m%dT%H%M%S}{started.microsecond // 1000:03d}Z-{suffix}"


def write_ids(folder: Path, name: str, ids: dict[str, datetime]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table({"message_id": list(ids), "received_at": list(ids.values())}, schema=SCHEMA)
    pq.write_table(table, folder / name)


def read_ids(index: Path) -> dict[str, list[datetime]]:
    found: dict[str, list[datetime]] = {}
    for path in sorted(index.glob("*/*.parquet")):
        for row in pq.read_table(path).to_pylist():
            found.setdefault(row["message_id"], []).append(row["received_at"])
    return found


def test_a_run_folder_names_when_its_run_started() -> None:
    assert run_started("run_id=20261122T104700123Z-1a2b") == datetime(2026, 11, 22, 10, 47, 0, 123000, UTC)
    assert run_started("run_id=compact-20261122T104700123Z-1a2b") is None
    assert run_started("notes") is None


def test_a_run_reads_only_the_folders_of_runs_that_started_within_its_window(tmp_path: Path) -> None:
    index = tmp_path / "dedupe"
    day = datetime(2026, 11, 20, 12, tzinfo=UTC)
    for days_before in (0, 1, 2, 5):
        started = day - timedelta(days=days_before)
        write_ids(run_folder(index, started), "part-0.parquet", {f"m{days_before}": started})
    write_ids(index / "run_id=other", "part-0.parquet", {"x": day})  # not a run's name: always read
    storage = LocalStorage()
    since = day - timedelta(days=1)  # the window starts a day before; a day's margin for clocks
    read = sorted(f.path.parent.name for f in index_files(storage, index, since))
    assert read == sorted(run_folder(index, day - timedelta(days=n)).name for n in (0, 1, 2)) + [
        "run_id=other"
    ]
    naive = since.replace(tzinfo=None)  # as Spark hands it back: UTC
    assert len(index_files(storage, index, naive)) == 4


def test_merging_leaves_one_file_a_day_in_its_newest_run_folder_and_every_id_once(tmp_path: Path) -> None:
    index = tmp_path / "dedupe"
    first = datetime(2026, 11, 20, 1, tzinfo=UTC)
    ids: dict[str, datetime] = {}
    for run in range(5):  # four runs on the 20th, one on the 21st
        started = first + timedelta(hours=6 * run)
        batch = {f"m{run}-{n}": started - timedelta(minutes=n) for n in range(3)}
        for part in range(2):
            write_ids(run_folder(index, started), f"part-{part}.parquet", dict(list(batch.items())[part::2]))
        ids |= batch
    # an id synced again after it left the window (an import of old messages): both times stay; and
    # copies a merge cut off between its write and its deletes leaves: once
    again = first + timedelta(days=3)
    write_ids(
        run_folder(index, first + timedelta(hours=1)), "part-0.parquet", {"m0-0": again, "m1-1": ids["m1-1"]}
    )
    storage = LocalStorage()

    assert merge_index(storage, index) == (11, 2)

    folders = sorted(p.name for p in index.iterdir())
    assert folders == [
        run_folder(index, first + timedelta(hours=18)).name,
        run_folder(index, first + timedelta(hours=24)).name,
    ]
    assert [p.name for p in (index / folders[0]).iterdir()] == [
        f"merged-{folders[0][len('run_id=') :]}.parquet"
    ]
    assert read_ids(index) == {message_id: [received] for message_id, received in ids.items()} | {
        "m0-0": [ids["m0-0"], again]
    }
    assert merge_index(storage, index) == (2, 2)  # nothing more to merge


class DeleteFailsAfter(LocalStorage):
    def __init__(self, deletes: int) -> None:
        super().__init__()
        self.deletes = deletes

    def delete(self, path: Path) -> None:
        self.count()
        super().delete(path)

    def delete_tree(self, folder: Path) -> None:
        self.count()
        super().delete_tree(folder)

    def count(self) -> None:
        if self.deletes == 0:
            raise OSError("killed")
        self.deletes -= 1


@pytest.mark.parametrize("deletes", [0, 1, 3])
def test_a_merge_cut_off_keeps_every_id_and_the_next_one_finishes_it(tmp_path: Path, deletes: int) -> None:
    index = tmp_path / "dedupe"
    started = datetime(2026, 11, 20, 1, tzinfo=UTC)
    ids = {}
    for run in range(4):
        batch = {f"m{run}": started + timedelta(minutes=run)}
        write_ids(run_folder(index, started + timedelta(hours=run)), "part-0.parquet", batch)
        ids |= batch
    with pytest.raises(OSError, match="killed"):
        merge_index(DeleteFailsAfter(deletes), index)
    assert set(read_ids(index)) == set(ids)  # each id still there (some twice)

    assert merge_index(LocalStorage(), index)[1] == 1
    assert read_ids(index) == {message_id: [received] for message_id, received in ids.items()}


def test_the_lease_is_checked_before_each_days_change(tmp_path: Path) -> None:
    index = tmp_path / "dedupe"
    for day in (20, 21, 22):  # the 22nd has one file: nothing to change
        for hour in (1, 2) if day < 22 else (1,):
            started = datetime(2026, 11, day, hour, tzinfo=UTC)
            write_ids(run_folder(index, started), "part-0.parquet", {f"m{day}-{hour}": started})
    checks: list[int] = []
    assert merge_index(LocalStorage(), index, lambda: checks.append(len(list(index.iterdir())))) == (5, 3)
    assert checks == [5, 4]  # before the 20th's merge, then before the 21st's
