"""Compaction on a real lake (several small syncs), read by both engines, killed at every step."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventlake import layout, partitions, state_layout
from eventlake.cli.compact import duration_hours
from eventlake.config import add_source, load_settings, write_initial_config
from eventlake.errors import UsageError
from eventlake.query import run_query
from eventlake.storage import FileInfo, LocalStorage
from eventlake.sync import run_sync
from eventlake.sync.maintenance.compact import compact_sources, plan_bins
from eventlake.sync.protocol import rewrite
from eventlake.sync.protocol.stage import RunStage
from eventlake.sync.protocol.state import SyncState
from eventlake.timestamps import now_utc, parse_timestamp
from tests.conftest import Lake
from tests.sync.test_sync import track

pytestmark = pytest.mark.spark
OLD = parse_timestamp("2026-11-20T07:30:00Z")  # a closed hour: compacted by default
TABLES = ("identify", "track_order_completed")


def identify(message_id: str, **traits) -> dict:
    return {"type": "identify", "userId": "u1", "messageId": message_id, "traits": traits}


# three syncs into one hour: three files per partition; the second adds columns (older files lack them)
BATCHES = [
    [
        track("m1", revenue=1.5, paid=True, at="2026-11-19T10:00:00Z"),
        identify("i1", email="a@b.c"),
        {"type": "page", "userId": "u1", "messageId": "p1", "name": "Home"},  # one file: left alone
    ],
    [track("m2", revenue=2, plan="pro"), track("m3", revenue=0.25), identify("i2", age=41)],
    [track("m4", revenue=3.25, plan=None, paid=False), identify("i3", email="x@y.z", age=7)],
]


def quiet(line: str) -> None:
    pass


def sync(lake: Lake, spark):
    [result] = run_sync(lake.settings, [lake.slug], spark=spark, say=quiet)
    return result


def compact(lake: Lake, **options):
    [result] = compact_sources(lake.settings, [lake.slug], say=quiet, **options)
    return result


def engine_rows(lake: Lake, spark, table: str, engine: str) -> tuple[dict, ...]:
    qualified = f"{lake.source.database}.{table}"
    if engine == "spark":
        spark.catalog.refreshTable(qualified)  # a warm session's file listings are cached
    sql = f"SELECT * FROM {qualified} ORDER BY message_id"
    return run_query(lake.settings, sql, engine=engine, spark=spark).rows


def both_engines(lake: Lake, spark, engines=("duckdb", "spark")) -> dict[tuple[str, str], tuple[dict, ...]]:
    return {(t, e): engine_rows(lake, spark, t, e) for t in TABLES for e in engines}


def table_dir(lake: Lake, table: str) -> Path:
    return layout.table_dir(lake.settings.lake.root, lake.source.id, table)


def message_ids(files) -> list[str]:
    return sorted(
        i for f in files for i in pq.read_table(f, columns=["message_id"])["message_id"].to_pylist()
    )


def by_rule(lake: Lake) -> dict[str, list[str]]:
    """What eventlake's readers read: the data files by the lake's rule."""
    storage = LocalStorage()
    return {
        t: message_ids(f.path for f in partitions.table_data_files(storage, table_dir(lake, t), 2))
        for t in TABLES
    }


def by_listing(lake: Lake) -> dict[str, list[str]]:
    """What a reader that only lists the partition folders reads (Spark through the metastore, Hive)."""
    return {
        t: message_ids(
            p for p in table_dir(lake, t).glob("*/*/*.parquet") if layout.is_data_file_name(p.name)
        )
        for t in TABLES
    }


def folder_files(lake: Lake) -> dict[str, list[str]]:
    data = layout.source_data_dir(lake.settings.lake.root, lake.source.id)
    found: dict[str, list[str]] = {}
    for path in sorted(data.rglob("*")):
        if path.is_file():
            found.setdefault(path.parent.relative_to(data).as_posix(), []).append(path.name)
    return found


@dataclasses.dataclass
class Template:
    lake: Lake
    pristine: Path
    rows: dict  # both engines' rows before compaction
    ids: dict[str, list[str]]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, spark_state: Path, spark) -> Template:
    """A lake with three files in each partition of an old hour (synced once per module)."""
    root = tmp_path_factory.mktemp("compact")
    config = write_initial_config(root / "project")
    slug = f"cmp_{uuid.uuid4().hex[:8]}"
    add_source(config, slug, write_key=f"wk_{slug}")
    settings = load_settings(config, environ={})
    settings = dataclasses.replace(settings, lake=dataclasses.replace(settings.lake, state_dir=spark_state))
    lake = Lake(root / "project", config, settings, slug)
    for batch in BATCHES:
        lake.archive(batch, received_at=OLD)
        assert sync(lake, spark).status == "Success"
    pristine = root / "pristine"
    shutil.copytree(settings.lake.root, pristine)
    return Template(lake, pristine, both_engines(lake, spark), by_rule(lake))


@pytest.fixture
def fresh(template: Template, spark) -> Lake:
    """The template's lake as synced, before any compaction (restored in place: the catalog's
    partitions point there)."""
    root = template.lake.settings.lake.root
    shutil.rmtree(root)
    shutil.copytree(template.pristine, root)
    return template.lake


def assert_compacted(lake: Lake, template: Template, spark) -> None:
    """Every row once on both engines, one file (and its marker) per compacted partition, nothing
    pending or staged, and nothing left to compact."""
    assert both_engines(lake, spark) == template.rows
    assert by_rule(lake) == by_listing(lake) == template.ids
    for table in TABLES:
        [folder] = [k for k in folder_files(lake) if k.startswith(f"segment_type={table}/")]
        names = folder_files(lake)[folder]
        assert len(names) == 2 and layout.output_run_id(names[1]) and layout.marker_run_id(names[0]), names
    root = lake.settings.lake.root
    assert not SyncState(LocalStorage(), root, lake.source.id).pending()
    assert not list(layout.stage_root(root, lake.source.id).glob("*"))
    assert compact(lake).status == "Nothing to do"


def test_the_template_has_small_files(template: Template) -> None:
    files = folder_files(template.lake)
    assert sorted(len(names) for names in files.values()) == [1, 3, 3]  # page, identify, track


def test_compaction_keeps_every_row_and_value_on_both_engines(fresh: Lake, template: Template, spark) -> None:
    page_before = folder_files(fresh)["segment_type=page/day=2026-11-20/hr=07"]
    result = compact(fresh)
    assert result.status == "Success", result.error
    assert (result.partitions, result.files_in, result.files_out) == (2, 6, 2)
    assert sorted(result.compacted_tables) == [f"{fresh.source.database}.{t}" for t in TABLES]
    assert_compacted(fresh, template, spark)
    assert folder_files(fresh)["segment_type=page/day=2026-11-20/hr=07"] == page_before  # one file
    # the new file has the table's current columns, in order: older rows read null in newer ones
    folder = table_dir(fresh, "track_order_completed") / "day=2026-11-20" / "hr=07"
    [new] = [p for p in folder.glob("*.parquet")]
    columns = [f.name for f in pq.read_schema(new)]
    spec = state_layout.schema_file(fresh.settings.lake.root, fresh.source.database, "track_order_completed")
    assert columns == [c["name"] for c in orjson.loads(spec.read_bytes())["columns"]]


def test_the_dedupe_index_is_merged_a_day_per_file_and_still_drops_a_resent_message(
    fresh: Lake, spark
) -> None:
    index = state_layout.dedupe_index_dir(fresh.settings.lake.root, fresh.source.id)
    before = sorted(index.glob("*/*.keys"))
    days = {p.parent.name[len("run_id=") :][:8] for p in before}  # the runs' days (one, unless at midnight)
    keys = sorted(index_records(index))
    result = compact(fresh)
    assert result.index_files == (len(before), len(days)) and len(before) > len(days)
    assert sorted(index_records(index)) == keys
    fresh.archive([track("m2", revenue=2, plan="pro"), track("m5", revenue=1)], received_at=OLD)
    resent = sync(fresh, spark)
    assert (resent.status, resent.duplicates_dropped, resent.rows) == ("Success", 1, 1)


def index_records(index) -> list[tuple[int, int, int]]:
    from eventlake.storage import LocalStorage
    from eventlake.sync.index.dedupe_index import index_listing
    from eventlake.sync.index.index_keys import open_keys

    found = []
    for info in index_listing(LocalStorage(), index):
        file = open_keys(LocalStorage(), info)
        found += [tuple(int(v) for v in r) for r in file.records(LocalStorage(), [(0, file.count)])]
    return found


def test_a_rerun_changes_nothing(fresh: Lake) -> None:
    assert compact(fresh).status == "Success"
    data = layout.source_data_dir(fresh.settings.lake.root, fresh.source.id)
    before = {p: p.stat().st_mtime_ns for p in data.rglob("*")}
    assert compact(fresh).status == "Nothing to do"
    assert {p: p.stat().st_mtime_ns for p in data.rglob("*")} == before


def test_a_late_file_in_a_compacted_partition_is_compacted_with_it(
    fresh: Lake, template: Template, spark
) -> None:
    assert compact(fresh).status == "Success"
    [old_marker] = [n for n in folder_files(fresh)["segment_type=track_order_completed/day=2026-11-20/hr=07"]
                    if layout.marker_run_id(n)]  # fmt: skip
    fresh.archive([track("m5", revenue=5)], received_at=OLD)  # late: synced into the compacted hour
    assert sync(fresh, spark).rows == 1
    ids = by_rule(fresh)
    assert ids["track_order_completed"] == [*template.ids["track_order_completed"], "m5"]
    assert compact(fresh).files_in == 2
    names = folder_files(fresh)["segment_type=track_order_completed/day=2026-11-20/hr=07"]
    assert len(names) == 2 and old_marker not in names
    rows = engine_rows(fresh, spark, "track_order_completed", "duckdb")
    assert rows == engine_rows(fresh, spark, "track_order_completed", "spark")
    assert [r["message_id"] for r in rows] == ["m1", "m2", "m3", "m4", "m5"]
    assert by_rule(fresh) == by_listing(fresh) == ids


def test_older_than_leaves_recent_partitions(lake: Lake, spark) -> None:
    recent, earlier = now_utc(), now_utc() - timedelta(hours=3)
    for n in range(2):
        lake.archive([track(f"new{n}")], received_at=recent)
        lake.archive([track(f"old{n}")], received_at=earlier)
        assert sync(lake, spark).status == "Success"
    untouched = compact(lake, older_than_hours=24)  # (the dedupe index is merged whatever the age)
    assert untouched.partitions == 0 and untouched.index_files == (2, 1), untouched
    result = compact(lake)  # default: hours that ended at least an hour ago
    assert (result.partitions, result.files_in, result.files_out) == (1, 2, 1)
    current = layout.partition_subdir(("day", "hr"), (recent.strftime("%Y-%m-%d"), recent.strftime("%H")))
    assert len(folder_files(lake)[f"segment_type=track_order_completed/{current}"]) == 2
    sql = f"SELECT message_id FROM {lake.source.database}.track_order_completed ORDER BY 1"
    got = run_query(lake.settings, sql, engine="duckdb").rows
    assert [r["message_id"] for r in got] == ["new0", "new1", "old0", "old1"]


def test_a_file_with_a_column_the_table_lacks_is_left_alone(fresh: Lake) -> None:
    folder = table_dir(fresh, "identify") / "day=2026-11-20" / "hr=07"
    first = sorted(folder.glob("*.parquet"))[0]
    stray = pq.read_table(first).append_column("surprise", pa.array(["x"]))
    pq.write_table(stray, folder / "part-stray-00000.parquet")
    before = sorted(p.name for p in folder.iterdir())
    result = compact(fresh)
    [identify_result] = [t for t in result.tables if t.table == "identify"]
    assert identify_result.partitions == 0 and "surprise" in identify_result.notices[0]
    assert sorted(p.name for p in folder.iterdir()) == before
    assert result.partitions == 1  # the other table


# -- killed at every step ---------------------------------------------------------------------

CRASH_POINTS = {
    "after staging, before the manifest": ("eventlake.sync.protocol.state.SyncState", "write_pending", 1),
    "after the manifest, before applying it": ("eventlake.sync.protocol.runner", "apply", 1),
    "after switching, before dropping the replaced files":
        ("eventlake.sync.protocol.rewrite", "drop_replaced", 1),
    "after dropping the first replaced file": ("eventlake.storage.LocalStorage", "delete", 2),
    "before dropping the manifest": ("eventlake.sync.protocol.state.SyncState", "drop_pending", 1),
    "before deleting the staging": ("eventlake.storage.LocalStorage", "delete_tree", 2),
    "first table done, before the second manifest":
        ("eventlake.sync.protocol.state.SyncState", "write_pending", 2),
}  # fmt: skip
SWAP_POINTS = {"before exchanging the folders": ("eventlake.sync.protocol.rewrite", "exchange_folders", 1)}
PUBLISH_POINTS = {
    "before publishing the new file": ("eventlake.storage.LocalStorage", "publish", 1),
    "after publishing the new file, before the marker": ("eventlake.storage.LocalStorage", "publish", 2),
}
CASES = [("swap", p) for p in [*CRASH_POINTS, *SWAP_POINTS]] + [
    ("publish", p) for p in [*CRASH_POINTS, *PUBLISH_POINTS]
]
POINTS = {**CRASH_POINTS, **SWAP_POINTS, **PUBLISH_POINTS}


def kill_compaction(lake: Lake, mode: str, point: str) -> None:
    """``kill -9`` a compaction process at ``point``."""
    command = [sys.executable, "-m", "tests.sync.compact_crash", str(lake.config), *map(str, POINTS[point])]
    killed = subprocess.run([*command, *(["publish"] if mode == "publish" else [])], capture_output=True,
                            text=True, timeout=300, cwd=Path(__file__).resolve().parents[2])  # fmt: skip
    assert killed.returncode == -9, killed.stderr


@pytest.mark.integration
@pytest.mark.parametrize(("mode", "point"), CASES, ids=[f"{m}: {p}" for m, p in CASES])
def test_a_compaction_killed_at_any_step_is_completed_exactly_once(
    fresh: Lake, template: Template, spark, mode: str, point: str
) -> None:
    kill_compaction(fresh, mode, point)
    # readers meanwhile: every row once (a reader that only lists folders too, when folders are swapped)
    assert by_rule(fresh) == template.ids
    assert both_engines(fresh, spark, ("duckdb",)) == {
        k: v for k, v in template.rows.items() if k[1] == "duckdb"
    }
    if mode == "swap":
        assert by_listing(fresh) == template.ids
        assert both_engines(fresh, spark) == template.rows
    assert compact(fresh).status in ("Success", "Nothing to do")  # completes (or redoes) it
    assert_compacted(fresh, template, spark)


@pytest.mark.integration
@pytest.mark.parametrize(
    "point", ["after the manifest, before applying it", "after dropping the first replaced file"]
)
def test_a_sync_completes_an_interrupted_compaction(
    fresh: Lake, template: Template, spark, point: str
) -> None:
    kill_compaction(fresh, "publish", point)
    assert sync(fresh, spark).status == "Nothing to do"
    assert by_rule(fresh) == template.ids and both_engines(fresh, spark, ("duckdb",)) == {
        k: v for k, v in template.rows.items() if k[1] == "duckdb"
    }
    compact(fresh)
    assert_compacted(fresh, template, spark)


@pytest.mark.parametrize("mode", ["swap", "publish"])
def test_readers_see_every_row_once_after_every_step(
    fresh: Lake, template: Template, monkeypatch, mode
) -> None:
    """After each change a compaction makes to the lake, the files a reader would read hold every
    row exactly once: eventlake's readers always; readers that only list folders when swapped."""
    steps = []

    def check(name: str) -> None:
        steps.append(name)
        assert by_rule(fresh) == template.ids, f"after {name} #{len(steps)}"
        if mode == "swap":
            assert by_listing(fresh) == template.ids, f"after {name} #{len(steps)}"

    def checked(owner, name):
        original = getattr(owner, name)

        def call(*args, **kwargs):
            result = original(*args, **kwargs)
            check(name)
            return result

        monkeypatch.setattr(owner, name, call)

    for name in ("publish", "delete", "delete_tree", "write"):
        checked(LocalStorage, name)
    if mode == "publish":
        monkeypatch.setattr(rewrite, "exchange_folders", lambda first, second: False)
    else:
        checked(rewrite, "exchange_folders")
    assert compact(fresh).partitions == 2
    assert ("exchange_folders" in steps) == (mode == "swap") and "delete" in steps


# -- without a lake -----------------------------------------------------------------------------


def test_small_files_are_packed_up_to_the_target() -> None:
    files = [FileInfo(Path(f"f{i}"), size) for i, size in enumerate([60, 60, 60, 200, 10, 5])]
    assert [[f.path.name for f in g] for g in plan_bins(files, 128)] == [["f0", "f1"], ["f2", "f4", "f5"]]
    assert plan_bins(files[3:4], 128) == [] and plan_bins(files[:1], 128) == []  # at the target; one file
    assert plan_bins([FileInfo(Path("a"), 100), FileInfo(Path("b"), 100)], 128) == []  # would exceed it


def test_the_data_file_rule() -> None:
    sync_file, old, new = (
        "part-r1-00000.parquet",
        "part-compact-c1-00000.parquet",
        "part-compact-c2-00000.parquet",
    )
    markers = {"_compact-c1.json": ["part-r0-00000.parquet"], "_compact-c2.json": [old, "_compact-c1.json"]}
    rule = lambda names: layout.visible_data_files(names, markers.__getitem__)  # noqa: E731
    assert rule([sync_file, old]) == [sync_file]  # c1 not committed
    assert rule([sync_file, old, "_compact-c1.json"]) == [old, sync_file]  # committed, a later sync file
    assert rule([old, "_compact-c1.json", new, "_compact-c2.json"]) == [new]  # c2 replaced c1's output
    assert rule([new, "_compact-c2.json", ".x.parquet", "_y.parquet"]) == [new]
    assert rule(["part-r0-00000.parquet", old, "_compact-c1.json"]) == [old]


def test_older_than_durations() -> None:
    assert [duration_hours(d) for d in ("30m", "2h", "1.5", "7d", "3600s")] == [0.5, 2.0, 1.5, 168.0, 1.0]
    with pytest.raises(UsageError, match=r"--older-than 'soon'.*2h"):
        duration_hours("soon")


def test_the_data_file_rule_with_version_folders() -> None:
    """With a committed version folder: its files, and a file of another writer outside it that its
    marker does not cover (written after the rewrite listed the folder); an older version's marker
    (without ``covers``) covers what it replaced and the files it copied, by name."""
    sdl, late = "part-00000-a.c000.snappy.parquet", "part-00000-b.c000.snappy.parquet"
    ours = "part-20261122T104700123Z-1a2b-00000.parquet"
    v1 = ["_v-000001-c1/_compact-c1.json", "_v-000001-c1/part-compact-c1-00000.parquet"]
    v2 = [
        "_v-000002-c2/_compact-c2.json",
        "_v-000002-c2/part-compact-c2-00000.parquet",
        f"_v-000002-c2/{sdl}",
    ]
    markers = {
        v1[0]: layout.Marker(replaced=(sdl, ours)),  # written before markers recorded covers
        v2[0]: layout.Marker(covers=frozenset([sdl, ours, *v1])),
    }
    rule = lambda names: layout.partition_data(names, markers.__getitem__)  # noqa: E731
    assert rule([sdl, ours, *v1]) == [v1[1]]
    assert rule([sdl, ours, late, *v1]) == [v1[1], late]  # SDL's, later: data
    assert rule([sdl, ours, late, *v1, *v2]) == sorted([*v2[1:], late])  # not listed by c2 either
    assert rule([sdl, ours, *v1, *v2]) == sorted(v2[1:])
    assert rule([sdl, *v1, "_v-000003-c3/part-compact-c3-00000.parquet"]) == [v1[1]]  # c3 not committed
    names = [sdl, ours, late, *v1, *v2]
    assert str(layout.partition_state(names, rule(names))) == "versioned+foreign"
    assert layout.outside_current_version(names, rule(names)) == [late]


def test_a_rewrite_retires_only_what_it_read_and_eventlakes_own_files() -> None:
    names = ["part-00000-a.c000.snappy.parquet", "_SUCCESS", "notes.txt", "_v-000001-c1/_compact-c1.json",
             "_v-000001-c1/part-compact-c1-00000.parquet", "part-00000-z.c000.snappy.parquet"]  # fmt: skip
    data = ["_v-000001-c1/part-compact-c1-00000.parquet", "part-00000-z.c000.snappy.parquet"]
    retired = rewrite.retirement(names, data, data[:1], "_v-000002-c2")
    assert retired == [
        "_v-000001-c1/part-compact-c1-00000.parquet",  # read and superseded
        "part-00000-a.c000.snappy.parquet",  # superseded by c1 already (still in its grace period)
        "_v-000001-c1/_compact-c1.json",  # markers last
    ]  # not z (data it did not supersede), nor another writer's files that are no data


def test_a_rewrite_id_in_use_in_a_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "segment_type=x" / "day=2026-11-20" / "hr=07"
    folder.mkdir(parents=True)
    run = rewrite.RewriteRun.new(rewrite.RewriteKind.REPLAY)
    (folder / layout.compaction_marker_name(run.id)).write_bytes(b"{}")
    stage = RunStage(tmp_path, "s", "s", "r1", ("day", "hr"))
    with pytest.raises(rewrite.RewriteIdError, match=f"rewrite {run.id} already has a marker"):
        rewrite.finish_rewrite(
            LocalStorage(), stage, folder, [layout.compaction_marker_name(run.id)], [], [], run
        )
    assert rewrite.RewriteRun.new(rewrite.RewriteKind.REPLAY).id != run.id
