"""The Hive catalog's partition registration on the test session's embedded metastore: requests
of at most ``PARTITION_BATCH`` partitions, none for partitions the table already has, the same
partitions through the metastore client as through Spark's statement."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.utils import AnalysisException

from eventlake.catalog import TableSpec
from eventlake.catalog import hive as hive_module
from eventlake.catalog.hive import HiveCatalog, _shared_prefix
from eventlake.schema.warehouse import LakeTable, View, warehouse_views

from .test_contract import partition_location

COLUMNS = (("message_id", "string"), ("received_at", "timestamp"))
_numbers = itertools.count(1)


class Statements:
    """The metastore requests of a catalog: ``(way, partitions)`` for each request of new
    partitions to the metastore client (``"client"``), each ALTER TABLE statement (``"sql"``) and
    each external catalog call (``"api"``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.adds: list[tuple[str, int]] = []
        ways = (("client", "_add_new"), ("sql", "_add_statement"), ("api", "_create_partitions"))
        for way, method in ways:
            monkeypatch.setattr(HiveCatalog, method, self._counted(way, getattr(HiveCatalog, method)))

    def _counted(self, way: str, add: Any) -> Any:
        def counted(catalog: HiveCatalog, spec: TableSpec, partitions: Any) -> None:
            self.adds.append((way, len(partitions)))
            add(catalog, spec, partitions)

        return counted


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Statements:
    return Statements(monkeypatch)


@pytest.fixture
def hive(spark: Any, statements: Statements) -> HiveCatalog:
    return HiveCatalog(spark)


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setattr(hive_module, "PARTITION_BATCH", 7)
    yield 7


def table(tmp_path: Path) -> TableSpec:
    return TableSpec(f"hive_{next(_numbers)}", "page", COLUMNS, ("day", "hr"), str(tmp_path / "page"))


def hours(day: int, count: int = 24) -> list[tuple[str, str]]:
    return [(f"2026-11-{day:02d}", f"{hour:02d}") for hour in range(count)]


@pytest.mark.spark
def test_partitions_are_added_in_requests_of_at_most_a_batch(
    hive: HiveCatalog, statements: Statements, small_batches: int, tmp_path: Path
) -> None:
    spec = table(tmp_path)
    hive.ensure_table(spec)
    partitions = hours(1) + hours(2) + hours(3)[:2]  # 50: 7 requests of 7 and one of 1
    hive.add_partitions(spec, partitions)
    assert statements.adds == [("client", 7)] * 7 + [("client", 1)]
    assert hive.partitions(spec.database, spec.name) == partitions


@pytest.mark.spark
def test_existing_partitions_cost_no_request(
    hive: HiveCatalog, statements: Statements, small_batches: int, tmp_path: Path
) -> None:
    spec = table(tmp_path)
    hive.ensure_table(spec)
    hive.add_partitions(spec, hours(1) + hours(2))
    statements.adds.clear()
    hive.add_partitions(spec, hours(1) + hours(2))  # a rerun after a crash
    hive.add_partitions(spec, hours(2)[5:9])  # within one day
    assert statements.adds == []
    hive.add_partitions(spec, hours(1)[20:] + hours(2) + hours(3)[:3])  # 3 new among 31
    assert statements.adds == [("api", 3)]  # a few: no statement to parse
    assert hive.partitions(spec.database, spec.name) == hours(1) + hours(2) + hours(3)[:3]


@pytest.mark.spark
def test_partition_values_that_need_escaping(
    hive: HiveCatalog, statements: Statements, tmp_path: Path
) -> None:
    """Hive escapes names (``a%2Fb``): the listing is read back to the values, so a rerun adds nothing."""
    spec = TableSpec(
        f"hive_{next(_numbers)}",
        "sync_reports",
        (("status", "string"),),
        ("source_id", "day"),
        str(tmp_path / "reports"),
        format="json",
        partition_path="day={day}/source={source_id}",
    )
    hive.ensure_table(spec)
    partitions = [("src:1=a/b%", "2026-11-22"), ("src 2", "2026-11-22"), ("src 2", "2026-11-23")]
    hive.add_partitions(spec, partitions)
    hive.add_partitions(spec, partitions)
    hive.add_partitions(spec, partitions[:1])
    assert statements.adds == [("api", 3)]  # a few: no statement to parse
    assert hive.partitions(spec.database, spec.name) == sorted(partitions)


def described(spark: Any, spec: TableSpec) -> list[tuple[Any, ...]]:
    """Each partition of the table as Spark's external catalog reads it back from the metastore:
    values, location, storage format, SerDe and its properties, parameters but the creation time."""
    external = spark._jsparkSession.sharedState().externalCatalog()
    none = spark.sparkContext._jvm.scala.Option.empty()
    found = []
    listed = external.listPartitions(spec.database, spec.name, none).iterator()
    while listed.hasNext():
        partition = listed.next()
        storage = partition.storage()
        java_map = spark.sparkContext._jvm.scala.jdk.javaapi.CollectionConverters.asJava(
            partition.parameters()
        )
        parameters = {k: v for k, v in dict(java_map).items() if k != "transient_lastDdlTime"}
        found.append(
            (
                tuple(partition.spec().apply(key) for key in spec.partition_keys),
                storage.locationUri().get().toString(),
                storage.inputFormat().get(),
                storage.outputFormat().get(),
                storage.serde().get(),
                storage.properties().toString(),
                sorted(parameters.items()),
            )
        )
    return sorted(found)


@pytest.mark.spark
def test_the_metastore_client_registers_what_spark_s_statement_registers(
    spark: Any, hive: HiveCatalog, statements: Statements, tmp_path: Path
) -> None:
    """Differential: the same partitions (values to escape, locations with a space and non-ASCII
    letters, a JSON table's path template) through one ``add_partitions`` request and
    through ``ALTER TABLE ... ADD PARTITION``: the metastore holds the same partitions."""
    partitions = [("src:1=a/b%", "2026-11-22"), ("src 2", "2026-11-22"), ("ü,é", "2026-11-23")]
    specs = []
    for way in ("client", "sql"):
        spec = TableSpec(
            f"hive_{next(_numbers)}",
            "sync_reports",
            (("status", "string"), ("rows", "bigint")),
            ("source_id", "day"),
            str(tmp_path / way / "reports dir ü"),
            format="json",
            partition_path="day={day}/source={source_id}",
        )
        hive.ensure_table(spec)
        (hive._add_new if way == "client" else hive._add_statement)(spec, partitions)
        specs.append(spec)
    client, statement = (described(spark, spec) for spec in specs)
    assert [row[0] for row in client] == sorted(partitions)
    assert client == [  # the tables' own folders apart
        tuple(field.replace("/sql/", "/client/") if isinstance(field, str) else field for field in row)
        for row in statement
    ]
    assert statements.adds == [("client", 3), ("sql", 3)]  # one request each way
    parquet = table(tmp_path)
    hive.ensure_table(parquet)
    hive._add_new(parquet, hours(1)[:2])
    assert [row[:2] for row in described(spark, parquet)] == [
        (values, f"file:{parquet.partition_location(values)}") for values in hours(1)[:2]
    ]


@pytest.mark.spark
def test_a_partition_another_writer_added_since_the_listing_is_left_and_the_others_added(
    spark: Any, hive: HiveCatalog, statements: Statements, tmp_path: Path
) -> None:
    spec = table(tmp_path)
    hive.ensure_table(spec)
    HiveCatalog(spark).add_partitions(spec, hours(1)[3:4])  # another writer, after the listing
    hive._add_new(spec, hours(1)[:6])
    assert statements.adds == [("api", 1), ("client", 6)]  # one request: the one there is left alone
    assert hive.partitions(spec.database, spec.name) == hours(1)[:6]


@pytest.mark.spark
def test_a_missing_table_is_an_error_as_before(hive: HiveCatalog, tmp_path: Path) -> None:
    spec = table(tmp_path)
    hive.ensure_database(spec.database)
    with pytest.raises(AnalysisException):
        hive.add_partitions(spec, hours(1)[:2])
    hive.add_partitions(spec, [])  # nothing to add: nothing asked of the metastore


def test_the_listing_is_narrowed_to_the_values_all_partitions_share() -> None:
    keys = ("year", "month", "day", "hr")
    assert _shared_prefix(keys, [("2026", "11", "22", "07"), ("2026", "11", "22", "08")]) == {
        "year": "2026",
        "month": "11",
        "day": "22",
    }
    assert _shared_prefix(keys, [("2026", "11", "22", "07"), ("2026", "12", "01", "00")]) == {"year": "2026"}
    assert _shared_prefix(("day", "hr"), [("2026-11-22", "07"), ("2026-11-23", "07")]) == {}
    assert _shared_prefix(("day", "hr"), [("2026-11-22", "07")]) == {"day": "2026-11-22", "hr": "07"}


@pytest.mark.spark
def test_a_long_lived_catalog_asks_nothing_for_the_partitions_it_knows(
    hive: HiveCatalog, statements: Statements, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    listings: list[int] = []
    registered = HiveCatalog._registered

    def counted(catalog: HiveCatalog, spec: TableSpec, partitions: Any) -> Any:
        listings.append(len(partitions))
        return registered(catalog, spec, partitions)

    monkeypatch.setattr(HiveCatalog, "_registered", counted)
    spec = table(tmp_path)
    hive.ensure_table(spec)
    hive.add_partitions(spec, hours(1)[:2])
    hive.add_partitions(spec, hours(1)[:2])  # the next micro-batch, same hours: no metastore call
    hive.add_partitions(spec, hours(1)[1:3])  # one new hour: only it is added, with no listing first
    assert listings == [] and statements.adds == [("api", 2), ("api", 1)]
    hive.drop_partitions(spec, hours(1)[:1])  # forgotten: added again
    hive.add_partitions(spec, hours(1)[:1])
    assert statements.adds[-1] == ("api", 1)
    assert hive.partitions(spec.database, spec.name) == hours(1)[:3]
    fresh = HiveCatalog(hive.spark)  # another process's catalog: the same hours exist, nothing fails
    fresh.add_partitions(spec, hours(1)[:3])
    assert hive.partitions(spec.database, spec.name) == hours(1)[:3]
    hive.add_partitions(spec, hours(1) + hours(2))  # many: listed first, the missing ones in statements
    assert listings == [45] and len(hive.partitions(spec.database, spec.name)) == 48


def _tables(hive: HiveCatalog, tmp_path: Path, count: int) -> list[TableSpec]:
    """``count`` tables of a new database, created."""
    database = f"hive_{next(_numbers)}"
    specs = [
        TableSpec(database, f"t{n}", COLUMNS, ("day", "hr"), str(tmp_path / database / f"t{n}"))
        for n in range(count)
    ]
    for spec in specs:
        hive.ensure_table(spec)
    return specs


@pytest.mark.spark
def test_a_commit_registers_its_tables_partitions_two_tables_at_a_time_on_the_catalogs_own_threads(
    hive: HiveCatalog, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    specs = _tables(hive, tmp_path, 6)
    both_in = threading.Barrier(hive_module.CATALOG_THREADS, timeout=60)
    clients: dict[str, set[int]] = {}
    requested: list[str] = []
    add_new = HiveCatalog._add_new

    def together(catalog: HiveCatalog, spec: TableSpec, partitions: Any) -> None:
        requested.append(spec.name)
        thread = threading.current_thread().name
        first = thread not in clients
        clients.setdefault(thread, set()).add(catalog._metastore_client().hashCode())
        if first:  # each thread's first request waits for the other's: they run at once
            both_in.wait()
        add_new(catalog, spec, partitions)

    monkeypatch.setattr(HiveCatalog, "_add_new", together)
    many = [(spec, hours(1) + hours(2)) for spec in specs[:5]]  # more than DIRECT_MAX each
    few = (specs[5], hours(3)[:2])
    hive.add_partitions_of([*many[:2], few, *many[2:]])
    assert len(clients) == 2 and all(name.startswith("eventlake-catalog") for name in clients)
    assert [len(made) for made in clients.values()] == [1, 1]  # one client each, not the same one
    assert len(set().union(*clients.values())) == 2
    for spec, partitions in [*many, few]:
        assert hive.partitions(spec.database, spec.name) == partitions
    assert getattr(hive._clients, "client", None) is None  # the main thread made none
    assert sorted(requested) == sorted(spec.name for spec in specs)  # the few too, on a thread's client
    made = set().union(*clients.values())
    more = _tables(hive, tmp_path, 3)
    hive.add_partitions_of([(spec, hours(4)) for spec in more])  # the next commit: the same threads
    assert len(clients) == 2 and set().union(*clients.values()) == made  # and clients
    for spec in more:
        assert hive.partitions(spec.database, spec.name) == hours(4)


@pytest.mark.spark
def test_a_failed_table_stops_the_other_thread_and_is_raised(
    hive: HiveCatalog, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    specs = _tables(hive, tmp_path, 8)
    add_partitions = HiveCatalog.add_partitions
    taken: list[str] = []

    def failing(catalog: HiveCatalog, spec: TableSpec, partitions: Any, **options: Any) -> None:
        taken.append(spec.name)
        if spec.name == "t0":
            raise RuntimeError("metastore gone")
        add_partitions(catalog, spec, partitions, **options)

    monkeypatch.setattr(HiveCatalog, "add_partitions", failing)
    few = (specs[7], hours(3)[:2])
    with pytest.raises(RuntimeError, match="metastore gone"):
        hive.add_partitions_of([(spec, hours(1)) for spec in specs[:7]] + [few])
    assert len(taken) < 7 and "t7" not in taken  # the others stopped; the few not registered
    monkeypatch.undo()
    hive.add_partitions_of([(spec, hours(1)) for spec in specs[:7]] + [few])  # the rerun: all of them
    for spec in specs[:7]:
        assert hive.partitions(spec.database, spec.name) == hours(1)
    assert hive.partitions(few[0].database, few[0].name) == hours(3)[:2]


def _views(database: str, tables: dict[str, tuple[tuple[str, str], ...]]) -> list[View]:
    """The warehouse views over these lake tables (by name: segment type and table name alike)."""
    return list(warehouse_views([LakeTable(name, name, columns) for name, columns in tables.items()]).views)


@pytest.mark.spark
def test_views_are_written_only_when_their_definition_changed(
    hive: HiveCatalog, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    database = f"hive_views_{next(_numbers)}"
    tables = {"page": COLUMNS, "track_signed_up": (*COLUMNS, ("event", "string"))}
    hive.ensure_database(database)
    for name, columns in tables.items():
        hive.create_table(TableSpec(database, name, columns, ("day", "hr"), str(tmp_path / name)))
    written: list[str] = []
    sql = hive.spark.sql

    def counted(query: str, *args: Any, **kwargs: Any) -> Any:
        if query.startswith("CREATE OR REPLACE VIEW"):
            written.append(query.split()[4].split(".")[1].strip("`"))
        return sql(query, *args, **kwargs)

    monkeypatch.setattr(hive.spark, "sql", counted)
    assert hive.replace_views(database, _views(database, tables)) == []
    assert sorted(written) == sorted(v.name for v in _views(database, tables))  # all new
    written.clear()
    assert hive.replace_views(database, _views(database, tables)) == []  # nothing changed: no statement
    assert written == []

    # a property column: the event's view changes, the others (tracks has no properties) stay
    tables["track_signed_up"] += (("properties_plan", "string"),)
    hive.add_columns(database, "track_signed_up", [("properties_plan", "string")])
    hive.replace_views(database, _views(database, tables))
    assert written == ["signed_up"]
    assert "plan" in hive.spark.table(f"{database}.signed_up").columns
    written.clear()
    # a new table: its view is created and tracks, which reads it, replaced; a context column of
    # page changes pages only
    tables["track_order_completed"] = (*COLUMNS, ("event", "string"))
    tables["page"] += (("context_locale_x", "string"),)
    hive.add_columns(database, "page", [("context_locale_x", "string")])
    spec = TableSpec(database, "track_order_completed", tables["track_order_completed"], ("day", "hr"),
                     str(tmp_path / "orders"))  # fmt: skip
    hive.create_table(spec)
    hive.replace_views(database, _views(database, tables))
    assert sorted(written) == ["order_completed", "pages", "tracks"]
    assert "context_locale_x" in hive.spark.table(f"{database}.pages").columns
    assert hive.spark.sql(f"SELECT count(*) FROM {database}.tracks").collect()[0][0] == 0


@pytest.mark.spark
def test_views_are_written_two_at_a_time_on_the_catalogs_threads(
    hive: HiveCatalog, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    database = f"hive_views_{next(_numbers)}"
    tables = {name: (*COLUMNS, ("event", "string")) for name in ("track_a", "track_b", "track_c")}
    hive.ensure_database(database)
    for name, columns in tables.items():
        hive.create_table(TableSpec(database, name, columns, ("day", "hr"), str(tmp_path / name)))
    both_in = threading.Barrier(hive_module.CATALOG_THREADS, timeout=60)
    threads: dict[str, list[str]] = {}
    write_view = HiveCatalog.write_view

    def together(catalog: HiveCatalog, database: str, view: View, replace: bool) -> None:
        thread = threading.current_thread().name
        if thread not in threads:  # each thread's first view waits for the other's: they run at once
            threads[thread] = []
            both_in.wait()
        threads[thread].append(view.name)
        write_view(catalog, database, view, replace)

    monkeypatch.setattr(HiveCatalog, "write_view", together)
    views = _views(database, tables)
    assert hive.replace_views(database, views) == []
    assert len(threads) == 2 and all(name.startswith("eventlake-catalog") for name in threads)
    assert sorted(sum(threads.values(), [])) == sorted(v.name for v in views)  # each once
    assert set(hive.list_tables(database)) == {*tables, *(v.name for v in views)}
    assert hive.spark.sql(f"SELECT count(*) FROM {database}.tracks").collect()[0][0] == 0


@pytest.mark.spark
def test_the_failure_raised_is_the_first_view_s_in_order_whichever_thread_fails_first(
    hive: HiveCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    views = _views("db", {name: (*COLUMNS, ("event", "string")) for name in ("track_a", "track_b")})
    first, later = views[0].name, views[-1].name
    written: list[str] = []

    def failing(catalog: HiveCatalog, database: str, view: View, replace: bool) -> None:
        if view.name == first:
            time.sleep(0.5)  # the later view fails first in time
        if view.name in (first, later):
            raise ValueError(view.name)
        written.append(view.name)

    monkeypatch.setattr(HiveCatalog, "write_view", failing)
    with pytest.raises(ValueError, match=f"^{first}$"):
        hive.write_views("db", [(view, False) for view in views])
    assert sorted(written) == sorted(v.name for v in views[1:-1])  # the others still written


@pytest.mark.spark
def test_a_view_that_fails_does_not_keep_the_others_from_being_written(
    hive: HiveCatalog, tmp_path: Path
) -> None:
    """E.g. Derby keeps at most 32,700 characters of a view's text: ``tracks`` over some thirty
    event tables does not fit; ``pages`` and the rest are still made."""
    database = f"hive_views_{next(_numbers)}"
    hive.ensure_database(database)
    hive.create_table(TableSpec(database, "page", COLUMNS, ("day", "hr"), str(tmp_path / "page")))
    # track_signed_up is not created: tracks and signed_up cannot be analysed
    views = _views(database, {"page": COLUMNS, "track_signed_up": (*COLUMNS, ("event", "string"))})
    assert views[0].name == "tracks"
    with pytest.raises(AnalysisException, match="track_signed_up"):
        hive.replace_views(database, views)
    made = set(hive.list_tables(database)) - {"page"}
    assert made == {v.name for v in views} - {"tracks", "signed_up"}


@pytest.mark.spark
def test_partitions_move_in_one_metastore_call_without_statements(
    hive: HiveCatalog, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A rewrite's switch (``set_partition_locations``): the existing partitions in one
    ``alterPartitions``, the missing ones in one ``createPartitions``, no SQL statement (before: two
    statements and a refresh per partition)."""
    spec = table(tmp_path)
    hive.ensure_table(spec)
    hive.add_partitions(spec, hours(1)[:20])
    queries: list[str] = []
    calls: list[str] = []
    sql, external = hive.spark.sql, hive._jvm()["external"]

    def counted(query: str, *args: Any, **kwargs: Any) -> Any:
        queries.append(query)
        return sql(query, *args, **kwargs)

    class Counted:  # the session's external catalog, its calls counted
        def __getattr__(self, name: str) -> Any:
            calls.append(name)
            return getattr(external, name)

    monkeypatch.setattr(hive.spark, "sql", counted)
    monkeypatch.setitem(hive._jvm_refs, "external", Counted())
    moves = [(values, str(tmp_path / "v-2" / "-".join(values))) for values in hours(1)]  # 4 missing
    for _ in range(2):  # the second: a rerun after a crash
        assert hive.set_partition_locations(spec.database, spec.name, spec.partition_keys, moves)
    assert queries == []
    assert calls.count("alterPartitions") == 2 and calls.count("createPartitions") == 1
    assert hive.partitions(spec.database, spec.name) == hours(1)
    for values, location in (moves[0], moves[23]):
        assert partition_location(hive, spec, values) == location
    assert not hive.set_partition_locations(spec.database, "no_such_table", spec.partition_keys, moves)


@pytest.mark.spark
def test_table_columns_are_what_spark_s_list_columns_says(hive: HiveCatalog, tmp_path: Path) -> None:
    """Differential: the external catalog's schema against ``spark.catalog.listColumns`` (the way
    before: 150-200 ms a table), every type a lake table or a user's table can hold, nested ones
    included, a name to quote, a JSON data source table (the reports); None for what is missing."""
    database = f"hive_columns_{next(_numbers)}"
    hive.ensure_database(database)
    columns = (
        ("a", "bigint"), ("b", "int"), ("c", "decimal(38,6)"), ("d", "timestamp"), ("e", "array<string>"),
        ("f", "struct<g:bigint,h:string>"), ("we.ird `name`", "string"), ("k", "map<string,bigint>"),
        ("l", "date"), ("m", "boolean"), ("n", "double"), ("o", "tinyint"), ("p", "smallint"),
        ("q", "float"), ("r", "binary"), ("s", "decimal(10,0)"),
    )  # fmt: skip
    specs = [
        TableSpec(database, "parquet", columns, ("day", "hr"), str(tmp_path / "parquet")),
        TableSpec(database, "json", columns[:4], ("day",), str(tmp_path / "json"), format="json"),
        TableSpec(database, "flat", columns[:4], (), str(tmp_path / "flat")),
    ]
    for spec in specs:
        hive.create_table(spec)
        listed = hive.spark.catalog.listColumns(f"`{database}`.`{spec.name}`")
        assert hive.table_columns(database, spec.name) == tuple(
            (c.name, c.dataType) for c in listed if not c.isPartition
        )
    assert hive.table_columns(database, "parquet") == columns
    assert hive.table_columns(database, "nothing") is None
    assert hive.table_columns(f"{database}_nothing", "parquet") is None


@pytest.mark.spark
def test_a_json_table_is_described_when_spark_s_hive_object_no_longer_fits_the_conf(
    hive: HiveCatalog, tmp_path: Path
) -> None:
    """`up`'s first sync failed in its commit: the JSON table's descriptor was read and written
    through Spark's shared ``Hive`` object (``Hive.get``), which makes a new one when the thread's
    no longer fits the conf (its client reconnected, or a metastore setting changed), closing
    Spark's, and registers Hive's functions, whose registry needs LLAP classes Spark's jars lack
    (NoClassDefFoundError). The catalog reads and writes it with its own client."""
    conf = hive.spark._jsparkSession.sharedState().externalCatalog().unwrapped().client().conf()
    setting = "hive.metastore.client.socket.timeout"  # one of the metastore settings Hive compares
    before = conf.get(setting)
    database = f"hive_json_{next(_numbers)}"
    hive.ensure_database(database)
    spec = TableSpec(database, "reports", COLUMNS, ("day",), str(tmp_path / "reports"), format="json")
    hive.ensure_table(spec)
    found: dict[str, Any] = {}

    def on_a_thread() -> None:  # as `up`'s commit: a thread whose first metastore call is this
        try:
            found["before"] = hive.hive_descriptor(database, "reports")
            hive.add_columns(database, "reports", [("context_ip", "string")])
            found["after"] = hive.hive_descriptor(database, "reports")
        except Exception as exc:  # raised below, in the test
            found["error"] = exc

    conf.set(setting, "987s")
    try:
        thread = threading.Thread(target=on_a_thread)
        thread.start()
        thread.join()
    finally:
        conf.set(setting, before)
    assert "error" not in found, found["error"]
    assert [name for name, _ in found["before"]["columns"]] == ["message_id", "received_at"]
    assert [name for name, _ in found["after"]["columns"]] == ["message_id", "received_at", "context_ip"]
    assert found["after"]["serde"] == "org.openx.data.jsonserde.JsonSerDe"
