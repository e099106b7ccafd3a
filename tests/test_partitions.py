"""Where a partition's versions are, as every listing of eventlake sees them: a version of the
versions tree (``segment-data/versions/...``) and a ``_v-`` one inside the partition folder (a lake
written before the tree) are both the partition's, numbered as one sequence; a folder inside the
partition that is named like a version of the tree is nobody's."""

from __future__ import annotations

from pathlib import Path

from eventlake import layout, partitions
from eventlake.storage import LocalStorage

DISK = LocalStorage()


def touch(path: Path, data: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_a_partitions_files_are_its_folders_and_its_versions_wherever_they_are(tmp_path: Path) -> None:
    table = layout.table_dir(tmp_path / "lake", "src", "page")
    folder = table / "day=2026-11-20" / "hr=07"
    old, new = layout.version_folder_name(1, "compact-c1"), layout.version_folder_name(2, "compact-c2")
    old = "_" + old  # as an earlier eventlake named it, inside the partition folder
    touch(folder / "part-a.parquet")
    touch(folder / old / "part-compact-c1-00000.parquet")
    touch(folder / old / "_compact-c1.json", partitions.marker_document("compact-c1", [], ["part-a.parquet"]))
    touch(folder / new / "part-stray.parquet")  # not a version: a version of the tree is not in here
    home = layout.versions_dir(folder)
    assert home == tmp_path / "lake/segment-data/versions/data/src/segment_type=page/day=2026-11-20/hr=07"
    assert layout.version_dir(folder, new) == home / new and layout.version_dir(folder, old) == folder / old
    touch(home / new / "part-compact-c2-00000.parquet")
    covers = ["part-a.parquet", f"{old}/_compact-c1.json", f"{old}/part-compact-c1-00000.parquet"]
    touch(home / new / "_compact-c2.json", partitions.marker_document("compact-c2", [], [], covers=covers))
    names = sorted(partitions.folder_names(DISK, folder))
    assert names == sorted([
        "part-a.parquet", f"{old}/_compact-c1.json", f"{old}/part-compact-c1-00000.parquet",
        f"{new}/_compact-c2.json", f"{new}/part-compact-c2-00000.parquet",
    ])  # fmt: skip
    assert partitions.partition_listing(DISK, table, 2) == {folder: partitions.folder_names(DISK, folder)}
    assert layout.current_version(names) == new and layout.next_version_number(names) == 3
    assert partitions.current_folder(DISK, folder) == home / new
    data = partitions.partition_files(DISK, folder, names)
    assert data == [f"{new}/part-compact-c2-00000.parquet"]
    assert [layout.partition_file(folder, n) for n in data] == [home / new / "part-compact-c2-00000.parquet"]
    assert [info.path for info in partitions.table_data_files(DISK, table, 2)] == [
        home / new / "part-compact-c2-00000.parquet"
    ]
    # the day's hours in one listing of the day (and one of its versions)
    other = table / "day=2026-11-20" / "hr=08"
    touch(other / "part-b.parquet")
    assert partitions.current_folders(DISK, [folder, other], by_parent=True) == {
        folder: home / new,
        other: other,
    }


def test_a_folder_outside_the_lakes_layout_has_no_versions_tree(tmp_path: Path) -> None:
    assert layout.versions_dir(tmp_path / "t" / "day=2026-11-20") is None
    touch(tmp_path / "t" / "day=2026-11-20" / "part-a.parquet")
    assert partitions.partition_listing(DISK, tmp_path / "t", 1) == {
        tmp_path / "t" / "day=2026-11-20": partitions.folder_names(DISK, tmp_path / "t" / "day=2026-11-20")
    }
