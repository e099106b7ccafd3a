"""The dedupe index on disk: the files a run reads, the lookup, and the merge (no Spark). Lakes
written before key files hold Parquet files of ids (``write_ids``); a sync writes key files
(``write_keys_file``)."""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventlake.storage import FileInfo, LocalStorage, Storage
from eventlake.storage.location import ObjectPath
from eventlake.sync.index import index_merge
from eventlake.sync.index.dedupe_index import folder_started, index_files, index_listing, seen
from eventlake.sync.index.index_keys import keys, lookup, lookup_buckets, open_keys, records_of, write_keys
from eventlake.sync.index.index_merge import merge_index
from tests.catalog.servers import AWS_ENV, Moto

UTC = timezone.utc
SCHEMA = pa.schema([("message_id", pa.string()), ("received_at", pa.timestamp("us", tz="UTC"))])


def run_folder(index: Path, started: datetime, suffix: str = "ab12") -> Path:
    return index / f"run_id={started:%Y%m%dT%H%M%S}{started.microsecond // 1000:03d}Z-{suffix}"


def write_ids(folder: Path, name: str, ids: dict[str, datetime]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table({"message_id": list(ids), "received_at": list(ids.values())}, schema=SCHEMA)
    pq.write_table(table, folder / name)


def write_keys_file(folder: Path, name: str, ids: dict[str, datetime]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / name).open("wb") as handle:
        write_keys(handle, records_of(pa.array(list(ids)), pa.array(list(ids.values()), SCHEMA[1].type)))


def index_rows(index: Path, names: list[str]) -> dict[str, list[datetime]]:
    """The (id, received time) rows the index holds for these ids, from every file, copies too."""
    storage, found = LocalStorage(), {}
    by_key = {(int(r["hi"]), int(r["lo"])): n for n, r in zip(names, keys(names), strict=True)}
    for info in index_listing(storage, index):
        if info.path.suffix == ".parquet":
            rows = [(r["message_id"], r["received_at"]) for r in pq.read_table(info.path).to_pylist()]
        else:
            file = open_keys(storage, info)
            records = file.records(storage, [(0, file.count)])
            rows = [
                (by_key[(int(r["hi"]), int(r["lo"]))], datetime.fromtimestamp(int(r["at"]) / 1e6, UTC))
                for r in records
            ]
        for name, received in rows:
            found.setdefault(name, []).append(received)
    return {name: sorted(times) for name, times in found.items()}


def looked_up(index: Path, ids: list[str], since: datetime, until: datetime | None = None) -> list[str]:
    storage = LocalStorage()
    return sorted(seen(storage, index_files(storage, index, since), pa.array(ids), since, until).to_pylist())


def test_a_run_folder_names_when_its_run_started() -> None:
    assert folder_started("run_id=20261122T104700123Z-1a2b") == datetime(2026, 11, 22, 10, 47, 0, 123000, UTC)
    assert folder_started("run_id=compact-20261122T104700123Z-1a2b") is None
    assert folder_started("notes") is None


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


def test_a_lookup_finds_the_ids_received_in_its_window_in_key_files_and_old_parquet_files(
    tmp_path: Path,
) -> None:
    index = tmp_path / "dedupe"
    day = datetime(2026, 11, 20, 12, tzinfo=UTC)
    write_keys_file(run_folder(index, day), "part-0.keys", {"new": day, "edge": day - timedelta(hours=2)})
    write_ids(
        run_folder(index, day - timedelta(hours=1)),
        "part-0.parquet",
        {"old-format": day - timedelta(hours=1)},
    )
    many = {f"bulk-{n}": day - timedelta(seconds=n) for n in range(20_000)}  # 79 buckets of 256 or so
    write_keys_file(run_folder(index, day - timedelta(hours=3)), "part-0.keys", many)
    asked = ["new", "edge", "old-format", "bulk-7", "bulk-19999", "never", "new-2"]
    assert looked_up(index, asked, day - timedelta(days=1)) == [
        "bulk-19999", "bulk-7", "edge", "new", "old-format"
    ]  # fmt: skip
    # the window starts at ``since`` (inclusive); a replay's range ends at ``until`` (exclusive)
    assert looked_up(index, asked, day - timedelta(hours=2)) == ["bulk-7", "edge", "new", "old-format"]
    assert looked_up(index, asked, day - timedelta(days=1), until=day - timedelta(hours=1)) == [
        "bulk-19999", "edge"
    ]  # fmt: skip


class CountingStorage(LocalStorage):
    """The local disk, counting the bytes read."""

    def __init__(self) -> None:
        super().__init__()
        self.read_bytes = 0

    def read_ranges(self, path, ranges):  # type: ignore[no-untyped-def]
        data = super().read_ranges(path, ranges)
        self.read_bytes += sum(len(d) for d in data)
        return data


def test_a_lookup_reads_only_the_buckets_of_its_ids(tmp_path: Path) -> None:
    index = tmp_path / "dedupe"
    day = datetime(2026, 11, 20, 12, tzinfo=UTC)
    write_keys_file(run_folder(index, day), "part-0.keys", {f"m{n}": day for n in range(200_000)})
    storage = CountingStorage()
    [info] = index_files(storage, index, day - timedelta(days=1))
    found = seen(storage, [info], pa.array(["m5", "m199999", "x"]), day - timedelta(days=1)).to_pylist()
    assert sorted(found) == ["m199999", "m5"]
    assert storage.read_bytes < 20_000 < info.size // 200  # three buckets, their directory entries


def test_merging_converts_old_files_and_leaves_one_key_file_a_day_in_its_newest_run_folder(
    tmp_path: Path,
) -> None:
    index = tmp_path / "dedupe"
    first = datetime(2026, 11, 20, 1, tzinfo=UTC)
    ids: dict[str, datetime] = {}
    for run in range(5):  # four runs on the 20th, one on the 21st; the old format and the new
        started = first + timedelta(hours=6 * run)
        batch = {f"m{run}-{n}": started - timedelta(minutes=n) for n in range(3)}
        for part in range(2):
            write = write_ids if run % 2 else write_keys_file
            write(run_folder(index, started), f"part-{part}.x", dict(list(batch.items())[part::2]))
            (run_folder(index, started) / f"part-{part}.x").rename(
                run_folder(index, started) / f"part-{part}.{'parquet' if run % 2 else 'keys'}"
            )
        ids |= batch
    # an id synced again after it left the window (an import of old messages): both times stay; and
    # copies a merge cut off between its write and its deletes leaves: once
    again = first + timedelta(days=3)
    write_ids(
        run_folder(index, first + timedelta(hours=1)), "part-0.parquet", {"m0-0": again, "m1-1": ids["m1-1"]}
    )
    storage = LocalStorage()

    assert merge_index(storage, index, now=first + timedelta(days=5)) == (11, 2)

    folders = sorted(p.name for p in index.iterdir())
    assert folders == [
        run_folder(index, first + timedelta(hours=18)).name,
        run_folder(index, first + timedelta(hours=24)).name,
    ]
    assert [p.name for p in (index / folders[0]).iterdir()] == [
        f"merged-{folders[0][len('run_id=') :]}-00000.keys"
    ]
    assert index_rows(index, [*ids, "m0-0"]) == {i: [received] for i, received in ids.items()} | {
        "m0-0": sorted([ids["m0-0"], again])
    }
    assert merge_index(storage, index, now=first + timedelta(days=5)) == (2, 2)  # nothing more to merge


def test_an_open_day_merges_its_small_files_and_keeps_its_big_one(tmp_path: Path) -> None:
    index = tmp_path / "dedupe"
    now = datetime(2026, 11, 20, 12, tzinfo=UTC)
    big = {f"big-{n}": now - timedelta(hours=6) for n in range(1_000)}
    write_keys_file(run_folder(index, now - timedelta(hours=6)), "merged.keys", big)
    for run in range(3):
        started = now - timedelta(minutes=run)
        write_keys_file(
            run_folder(index, started), "part-0.keys", {f"new-{run}-{n}": started for n in range(10)}
        )
    assert merge_index(LocalStorage(), index, now=now) == (4, 2)
    sizes = sorted(open_keys(LocalStorage(), info).count for info in index_listing(LocalStorage(), index))
    assert sizes == [30, 1_000]
    assert merge_index(LocalStorage(), index, now=now + timedelta(days=1, hours=2)) == (
        2,
        1,
    )  # the day is over


def test_a_merge_holds_one_key_range_at_a_time_and_loses_nothing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(index_merge, "MERGE_RECORDS", 1_000)  # 16 key ranges for these 12,100 ids
    index = tmp_path / "dedupe"
    day = datetime(2026, 11, 20, 1, tzinfo=UTC)
    ids = {f"m{n}": day + timedelta(seconds=n) for n in range(12_000)}
    chunks = [dict(list(ids.items())[n::7]) for n in range(7)]  # files of 1,714 ids: 2 bits of buckets
    for n, chunk in enumerate(chunks):
        write_keys_file(run_folder(index, day + timedelta(hours=n)), "part-0.keys", chunk)
    tiny = {f"t{n}": day for n in range(100)}  # one bucket, shared by every key range
    write_ids(run_folder(index, day + timedelta(hours=8)), "part-0.parquet", tiny)
    merge_index(LocalStorage(), index, now=day + timedelta(days=3))
    [info] = index_listing(LocalStorage(), index)
    assert open_keys(LocalStorage(), info).count == 12_100
    assert index_rows(index, [*ids, *tiny]) == {i: [t] for i, t in (ids | tiny).items()}
    assert looked_up(index, ["m11999", "t5", "x"], day - timedelta(days=1)) == ["m11999", "t5"]


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


@pytest.mark.parametrize("deletes", [0, 1, 2, 3, 4])
def test_a_merge_cut_off_keeps_every_id_and_the_next_one_finishes_it(tmp_path: Path, deletes: int) -> None:
    index = tmp_path / "dedupe"
    started = datetime(2026, 11, 20, 1, tzinfo=UTC)
    ids = {}
    for run in range(4):  # two runs in the old format (converted first, one delete each), two new
        batch = {f"m{run}": started + timedelta(minutes=run)}
        write = write_ids if run < 2 else write_keys_file
        write(
            run_folder(index, started + timedelta(hours=run)),
            f"part-0.{'parquet' if run < 2 else 'keys'}",
            batch,
        )
        ids |= batch
    later = started + timedelta(days=2)
    with pytest.raises(OSError, match="killed"):
        merge_index(DeleteFailsAfter(deletes), index, now=later)
    assert set(index_rows(index, list(ids))) == set(ids)  # each id still there (some twice)

    assert merge_index(LocalStorage(), index, now=later)[1] == 1
    assert index_rows(index, list(ids)) == {message_id: [received] for message_id, received in ids.items()}


def test_the_lease_is_checked_before_each_days_change(tmp_path: Path) -> None:
    index = tmp_path / "dedupe"
    for day in (20, 21, 22):  # the 22nd has one file: nothing to change
        for hour in (1, 2) if day < 22 else (1,):
            started = datetime(2026, 11, day, hour, tzinfo=UTC)
            write_keys_file(run_folder(index, started), "part-0.keys", {f"m{day}-{hour}": started})
    checks: list[int] = []
    now = datetime(2026, 11, 25, tzinfo=UTC)
    merged = merge_index(LocalStorage(), index, lambda: checks.append(len(list(index.iterdir()))), now=now)
    assert merged == (5, 3)
    assert checks == [5, 4]  # before the 20th's merge, then before the 21st's


def test_a_key_file_cut_short_is_refused_with_what_to_do(tmp_path: Path) -> None:
    folder = run_folder(tmp_path, datetime(2026, 11, 20, tzinfo=UTC))
    write_keys_file(folder, "part-0.keys", {"m1": datetime(2026, 11, 20, tzinfo=UTC)})
    path = folder / "part-0.keys"
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(ValueError, match="not a dedupe key file|not a whole dedupe key file.*delete it"):
        open_keys(LocalStorage(), FileInfo(path, path.stat().st_size))


class ObjectLike(CountingStorage):
    """The local disk seen as an object store is: no local path (no memory map), ranged reads."""

    def local_path(self, path):  # type: ignore[no-untyped-def]
        return None


def test_the_filter_passes_every_key_a_file_holds_and_about_one_in_a_hundred_others(
    tmp_path: Path, monkeypatch
) -> None:
    import numpy as np

    from eventlake.sync.index import index_keys
    from eventlake.sync.index.index_keys import FILTER_BLOCK, KeyWriter, sort_unique

    monkeypatch.setattr(index_keys, "FILTER_CHUNK", 7_000)  # set and tested a few thousand keys at a time

    held = sort_unique(keys([f"m{n}" for n in range(60_000)]))
    absent = keys([f"x{n}" for n in range(60_000)])
    path = tmp_path / "part-0.keys"
    with path.open("wb") as handle:  # in chunks, as a merge writes a day: the filter spans them
        writer = KeyWriter(handle, len(held))
        for chunk in np.array_split(held, 7):
            writer.add(chunk)
        writer.close()
    for storage in (LocalStorage(), ObjectLike()):
        file = open_keys(storage, FileInfo(path, path.stat().st_size))
        assert file.blocks * FILTER_BLOCK * 8 >= 10 * 60_000  # ten bits a key
        assert file.may_hold(storage, held).all()  # no key it holds is ever refused
        passed = file.may_hold(storage, absent).mean()
        assert 0.001 < passed < 0.03, passed  # a Bloom filter's share of absent keys that pass


def test_a_lookup_of_new_ids_reads_the_filter_not_the_buckets(tmp_path: Path) -> None:
    index = tmp_path / "dedupe"
    day = datetime(2026, 11, 20, 12, tzinfo=UTC)
    write_keys_file(run_folder(index, day), "part-0.keys", {f"m{n}": day for n in range(200_000)})
    new = [f"new-{n}" for n in range(2_000)]
    for storage in (CountingStorage(), ObjectLike()):
        [info] = index_files(storage, index, day - timedelta(days=1))
        found = seen(storage, [info], pa.array([*new, "m7"]), day - timedelta(days=1)).to_pylist()
        assert found == ["m7"]
        # without the filter, 2,001 ids read every one of the file's 1,024 buckets (4.8 MB); with
        # it, ~20 ids get through to their bucket (4-6 KB each), and the filter itself is mapped
        # (local disk: not a read) or read whole, 250 KB (ranged reads: more than 1 block in 16)
        assert storage.read_bytes < info.size // 8, (storage.read_bytes, info.size)


def test_a_key_file_written_before_the_filter_is_read_and_merged_into_one_with_it(tmp_path: Path) -> None:
    """Lakes written by the previous version hold key files without a filter (``ELDEDUP1``): read
    as they are; a merge with another file of their day writes the filter."""
    from eventlake.sync.index.index_keys import FILTER_BLOCK, MAGIC_V1, TRAILER, TRAILER_V1

    index = tmp_path / "dedupe"
    day = datetime(2026, 11, 20, 12, tzinfo=UTC)
    folder = run_folder(index, day)
    write_keys_file(folder, "part-0.keys", {f"m{n}": day for n in range(5_000)})
    path = folder / "part-0.keys"
    data = path.read_bytes()
    magic, bits, count, least, most, blocks, _ = TRAILER.unpack(data[-TRAILER.size :])
    body = data[: -TRAILER.size - blocks * FILTER_BLOCK]  # records and directory
    path.write_bytes(body + TRAILER_V1.pack(MAGIC_V1, bits, count, least, most, MAGIC_V1))
    old = open_keys(LocalStorage(), FileInfo(path, path.stat().st_size))
    assert (old.blocks, old.count) == (0, 5_000)
    assert looked_up(index, ["m1", "m4999", "x"], day - timedelta(days=1)) == ["m1", "m4999"]
    write_keys_file(run_folder(index, day + timedelta(hours=1)), "part-0.keys", {"later": day})
    merge_index(LocalStorage(), index, now=day + timedelta(days=3))
    [info] = index_listing(LocalStorage(), index)
    merged = open_keys(LocalStorage(), info)
    assert merged.count == 5_001 and merged.blocks > 0
    assert looked_up(index, ["m1", "m4999", "later", "x"], day - timedelta(days=1)) == [
        "later",
        "m1",
        "m4999",
    ]


def test_on_an_object_store_the_filters_are_copied_once_and_dropped_when_their_file_goes(
    tmp_path: Path, monkeypatch
) -> None:
    """A lookup on an object store fetches each key file's filter whole into the local folder once
    and maps it after (no ranged read per id); without that folder a big filter is not used."""
    from eventlake.sync.index import index_keys

    index, filters = tmp_path / "dedupe", tmp_path / "state" / "dedupe-filters" / "src1"
    day = datetime(2026, 11, 20, 12, tzinfo=UTC)
    write_keys_file(run_folder(index, day), "part-0.keys", {f"m{n}": day for n in range(200_000)})
    write_keys_file(run_folder(index, day + timedelta(hours=1)), "part-0.keys", {"late": day})
    storage, since = ObjectLike(), day - timedelta(days=1)
    files = index_files(storage, index, since)
    big = open_keys(storage, files[0])
    asked = pa.array([*(f"new-{n}" for n in range(2_000)), "m7", "late"])
    assert sorted(seen(storage, files, asked, since, filters=filters).to_pylist()) == ["late", "m7"]
    assert len(list(filters.iterdir())) == 2  # one copy a key file
    assert storage.read_bytes >= big.blocks * 64  # the big file's filter, fetched whole
    storage.read_bytes = 0
    assert sorted(seen(storage, files, asked, since, filters=filters).to_pylist()) == ["late", "m7"]
    assert storage.read_bytes < 200_000  # ~20 ids' buckets: the filters are read from their copies
    seen(storage, files[1:], asked, since, filters=filters)  # the big file left the window
    assert [p.name for p in filters.iterdir()] == [index_keys.filter_copy_name(files[1])]

    monkeypatch.setattr(index_keys, "FILTER_READ_BYTES", 1_000)  # without copies: too big to read whole
    storage.read_bytes = 0
    assert seen(storage, files[:1], pa.array(["m7", "x"]), since).to_pylist() == ["m7"]
    assert storage.read_bytes < 20_000  # no filter: the two ids' buckets and directory entries


@pytest.fixture(scope="module")
def s3_index() -> Iterator[tuple[Storage, ObjectPath]]:
    """An S3Storage on a moto server of its own, and an index folder in its bucket."""
    pytest.importorskip("boto3")
    from eventlake.storage.s3 import S3Storage

    with tempfile.TemporaryDirectory() as logs:
        server = Moto.start(Path(logs) / "moto.log")
        try:
            with pytest.MonkeyPatch.context() as env:
                for key, value in {**AWS_ENV, "AWS_DEFAULT_REGION": "us-east-1"}.items():
                    env.setenv(key, value)
                storage = S3Storage(endpoint_url=server.endpoint)
                storage.client.create_bucket(Bucket="index-merge")
                yield storage, ObjectPath("s3", "index-merge", "segment-data/_state/dedupe/src1")
        finally:
            server.stop()


def test_a_days_merge_on_s3_is_sent_in_parts_never_one_put(s3_index, monkeypatch) -> None:
    """A busy source's merged day is over 5 GB, S3's limit for one put: the merge streams its file
    through the store's writer, which sends it in parts as the merge writes it (memory: one part
    and one key range, whatever the day's size)."""
    from eventlake.storage import s3

    storage, index = s3_index
    monkeypatch.setattr(s3, "PART_BYTES", 5 * 1024 * 1024, raising=False)  # S3's smallest part
    monkeypatch.setattr(index_merge, "MERGE_RECORDS", 100_000)  # 8 key ranges for these 480,000 ids
    day = datetime(2026, 11, 20, 1, tzinfo=UTC)
    received = pa.array([day] * 160_000, SCHEMA[1].type)
    for n in range(3):
        ids = pa.array([f"m{n}-{i}" for i in range(160_000)])
        handle = io.BytesIO()
        write_keys(handle, records_of(ids, received))
        folder = index / run_folder(Path("."), day + timedelta(hours=n)).name
        storage.write(folder / "part-0.keys", handle.getvalue())
    sent: list[tuple[str, int]] = []
    client = storage.client  # type: ignore[attr-defined]
    for call in ("put_object", "upload_part"):

        def recorded(
            *args: object, _call: str = call, _real: object = getattr(client, call), **kwargs: object
        ):
            body: Any = kwargs["Body"]
            size = len(body) if isinstance(body, bytes) else body.seek(0, io.SEEK_END)
            if not isinstance(body, bytes):
                body.seek(0)
            sent.append((_call, size))
            return _real(*args, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(client, call, recorded)

    assert merge_index(storage, index, now=day + timedelta(days=3)) == (3, 1)
    [merged] = index_listing(storage, index)
    assert merged.size > 2 * s3.PART_BYTES  # type: ignore[attr-defined]
    assert [call for call, _ in sent] == ["upload_part"] * 3  # parts, not one put
    assert max(size for _, size in sent) <= s3.PART_BYTES  # type: ignore[attr-defined]
    assert open_keys(storage, merged).count == 480_000
    files = index_files(storage, index, day - timedelta(days=1))
    asked = pa.array(["m2-5", "m0-159999", "x"])
    assert sorted(seen(storage, files, asked, day - timedelta(days=1)).to_pylist()) == ["m0-159999", "m2-5"]


def test_a_key_file_answers_alike_through_its_filter_and_without_it(tmp_path: Path) -> None:
    """``lookup`` asks the filter first, ``lookup_buckets`` reads every key's bucket: one answer."""
    start = datetime(2026, 11, 22, 10, tzinfo=UTC)
    held = {f"id-{n}": start + timedelta(seconds=n) for n in range(2000)}
    write_keys_file(tmp_path, "a.keys", held)
    storage = LocalStorage()
    file = open_keys(storage, FileInfo(tmp_path / "a.keys", (tmp_path / "a.keys").stat().st_size))
    assert file.blocks  # a filter to ask
    asked = [*held, *(f"other-{n}" for n in range(2000))]
    wanted = np.sort(keys(asked), order=("hi", "lo"))
    micros = int((start + timedelta(seconds=1000)).timestamp() * 1e6)
    for since, until in ((0, None), (micros, None), (0, micros)):
        through = lookup(storage, file, wanted, since, until)
        assert (through == lookup_buckets(storage, file, wanted, since, until)).all()
        expected = 2000 if (since, until) == (0, None) else 1000
        assert through.sum() == expected
    assert not lookup(storage, file, wanted[:0], 0, None).any()
