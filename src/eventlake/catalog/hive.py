"""The Hive metastore catalog, driven through Spark SQL DDL.

The session decides which metastore that is (see :mod:`eventlake.jvm.metastore`): embedded
Derby, the project's metastore service, a PostgreSQL/MariaDB database, or any thrift URI.

Partitions: the metastore checks each partition of an ``ADD IF NOT EXISTS`` by loading it (a few
ms each, also for those that exist) and every statement costs several table look-ups, so
:meth:`HiveCatalog.add_partitions` first lists the names the table already has (one metastore
call, narrowed to the leading partition values the new ones share) and hands the others to the
metastore client in one request (``add_partitions``, the partitions built in the JVM from one spec
in Thrift's binary encoding sharing the table's storage descriptor, :func:`partition_spec_bytes`,
each its values and location): Spark's ``ALTER TABLE ... ADD PARTITION`` spends half its time
per partition in Hive's client copying its whole configuration (``HiveConf.getChangedProperties``,
about 2 ms; bench/partitions.py).
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, TypeVar
from urllib.parse import unquote

import orjson
from py4j.java_gateway import JavaClass
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import convert_exception
from pyspark.sql import SparkSession

from eventlake.catalog.base import NOT_A_VIEW, Catalog, Column, ListedTable, TableSpec
from eventlake.catalog.hive_descriptor import describe_json_table, is_json_table, read_descriptor
from eventlake.schema.warehouse import View, view_sql
from eventlake.storage import hadoop_uri

# partitions per ALTER TABLE statement (Spark hands them to the metastore 100 per call,
# spark.sql.addPartitionInBatch.size; fewer statements save its per-statement table look-ups)
PARTITION_BATCH = 500
DIRECT_MAX = 20  # up to this many new partitions of a table: through the external catalog, no statement
# the catalog's threads: the tables whose partitions a commit registers at once (each thread with its
# own metastore client), the views it writes at once
CATALOG_THREADS = 2
_Item = TypeVar("_Item")


# Spark's JSON names of the atomic types that differ from their SQL (catalog) names, and those alike
_JSON_TYPE_NAMES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}
_JSON_SAME_NAMES = frozenset(
    {"string", "double", "float", "boolean", "date", "timestamp", "timestamp_ntz", "binary"}
)


def _catalog_type(json_type: object) -> str | None:
    """A field's type in a schema's JSON as the catalog spells it (``long`` -> ``bigint``); None
    for a nested or unusual type, to ask Spark for (``catalogString``)."""
    if not isinstance(json_type, str):
        return None
    if json_type in _JSON_SAME_NAMES or json_type.startswith("decimal("):
        return json_type
    return _JSON_TYPE_NAMES.get(json_type)


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _columns_ddl(columns: Sequence[Column]) -> str:
    return ", ".join(f"{_ident(name)} {kind}" for name, kind in columns)


def _partition_values(name: str) -> tuple[str, ...]:
    """``day=2026-11-22/hr=07`` (values escaped as in Hive paths, %XX) -> ``("2026-11-22", "07")``."""
    return tuple(unquote(part.split("=", 1)[1]) for part in name.split("/"))


def _shared_prefix(keys: Sequence[str], partitions: Sequence[tuple[str, ...]]) -> dict[str, str]:
    """The leading partition values every one of ``partitions`` has, by key: an hourly run's
    ``{"day": "2026-11-22"}``; empty when even the first key differs."""
    shared: dict[str, str] = {}
    for index, key in enumerate(keys):
        values = {p[index] for p in partitions}
        if len(values) != 1:
            break
        shared[key] = values.pop()
    return shared


# Thrift's binary protocol: the type codes and a field's header (type, field id)
_STOP, _STRING, _STRUCT, _MAP, _LIST = 0, 11, 12, 13, 15


def _field(kind: int, field_id: int) -> bytes:
    return struct.pack(">bh", kind, field_id)


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack(">i", len(data)) + data


def _qualified(location: str) -> str:
    """A partition's location as the metastore qualifies it when Spark adds the partition (its
    file system's scheme on a local path: ``file:/lake/...``); a spec's partitions skip that step."""
    return f"file:{location}" if location.startswith("/") else location


def partition_spec_bytes(located: Sequence[tuple[tuple[str, ...], str]]) -> bytes:
    """A Hive metastore ``PartitionSpecWithSharedSD`` holding ``located``'s partitions (values,
    location), without its storage descriptor (set in the JVM), in Thrift's binary protocol, so
    that the JVM builds every partition with one call: field 1, a list of ``PartitionWithoutSD``
    with their values (field 1), their location as the path relative to an empty shared location
    (field 4) and no parameters (field 5: the metastore adds its own)."""
    out = bytearray(_field(_LIST, 1) + struct.pack(">bi", _STRUCT, len(located)))
    for values, location in located:
        out += _field(_LIST, 1) + struct.pack(">bi", _STRING, len(values))
        for value in values:
            out += _string(value)
        out += _field(_STRING, 4) + _string(location)
        out += _field(_MAP, 5) + struct.pack(">bbi", _STRING, _STRING, 0)
        out.append(_STOP)  # the partition's end
    out.append(_STOP)  # the spec's end
    return bytes(out)


class HiveCatalog(Catalog):
    """The Hive metastore through a Spark session. A long-lived one (``eventlake up``'s engine)
    remembers the partitions it registered or found, by table, so that a micro-batch landing in
    the hours it already knows asks the metastore nothing; what it drops or creates it forgets.
    (A partition dropped behind its back by another process is registered again by ``eventlake
    catalog repair``.)"""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._known: dict[tuple[str, str], set[tuple[str, ...]]] = {}
        self._ensured: set[tuple[str, str, tuple[Column, ...]]] = set()  # tables ensure_table saw whole
        # tables' storage descriptors and formats (JVM objects), and the JVM classes used with them
        self._storage: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._jvm_refs: dict[str, Any] = {}
        self._clients = threading.local()  # each thread's metastore client of partition requests
        self._threads: ThreadPoolExecutor | None = None  # add_partitions_of's, made on first use

    def ensure_table(self, spec: TableSpec) -> tuple[Column, ...]:
        """As :meth:`Catalog.ensure_table`; a table this catalog already saw with every one of
        ``spec``'s columns (the quarantine and reports tables, every run) is not looked up again."""
        key = (spec.database, spec.name, spec.columns)
        if key in self._ensured:
            return ()
        added = super().ensure_table(spec)
        if spec.format == "json" and self._describe_json(spec.database, spec.name):
            # a table of an earlier version (Spark's placeholder descriptor), now readable by Trino
            self._storage.pop((spec.database, spec.name), None)
        self._ensured.add(key)
        return added

    def _forget(self, database: str, table: str | None = None) -> None:
        """Drop what this catalog remembers of a table (of every table of ``database`` when None)."""

        def kept(key: tuple[object, ...]) -> bool:
            return key[0] != database or table not in (None, key[1])

        # (copies first: a commit's other partition thread may add a table meanwhile, see
        # add_partitions_of; what it adds to a dropped copy is only asked for again)
        self._known = {k: v for k, v in list(self._known.items()) if kept(k)}
        self._ensured = {k for k in list(self._ensured) if kept(k)}
        self._storage = {k: v for k, v in list(self._storage.items()) if kept(k)}

    def ensure_database(self, name: str) -> None:
        if not self.spark.catalog.databaseExists(name):  # IF NOT EXISTS alone logs a Hive stack trace
            self.spark.sql(f"CREATE DATABASE IF NOT EXISTS {_ident(name)}")

    def table_columns(self, database: str, table: str) -> tuple[Column, ...] | None:
        """Through the external catalog, the data schema's JSON in one call (Spark's
        ``listColumns`` resolves the table first: 150-200 ms a table); a nested type is asked for
        its catalog name (as ``listColumns`` spells it) field by field."""
        external = self._jvm()["external"]
        if not (external.databaseExists(database) and external.tableExists(database, table)):
            return None
        schema = external.getTable(database, table).dataSchema()
        return tuple(
            (
                field["name"],
                _catalog_type(field["type"]) or schema.apply(field["name"]).dataType().catalogString(),
            )
            for field in orjson.loads(schema.json())["fields"]
        )

    def list_tables(self, database: str) -> list[str]:
        # the external catalog's names: spark.catalog.listTables looks every table up (150 ms each)
        external = self._jvm()["external"]
        if not external.databaseExists(database):
            return []
        names = external.listTables(database).mkString("\n")  # Hive's names hold no newline
        return sorted(names.split("\n")) if names else []

    def list_described(self, database: str) -> list[ListedTable]:
        """One metastore call for every table (``getTablesByName``) instead of two per table; a
        table with nested types (none in a sync's tables) has no columns here (asked one by one)."""
        names = self.list_tables(database)
        if not names:
            return []
        refs = self._jvm()
        found = refs["external"].getTablesByName(database, refs["toSeq"](names))
        described: dict[str, ListedTable] = {}
        tables = found.iterator()
        while tables.hasNext():
            table = tables.next()
            fields = orjson.loads(table.dataSchema().json())["fields"]
            kinds = [_catalog_type(f["type"]) for f in fields]  # None: a nested type, asked later
            columns = (
                tuple((f["name"], k) for f, k in zip(fields, kinds, strict=True) if k) if all(kinds) else None
            )
            location = table.storage().locationUri()
            at = (
                location.get().toString()
                if location.isDefined() and table.tableType().name() != "VIEW"
                else ""
            )
            described[table.identifier().table()] = ListedTable(table.identifier().table(), columns, at)
        return [described.get(name, ListedTable(name, None, "")) for name in names]

    def create_table(self, spec: TableSpec) -> None:
        self._forget(spec.database, spec.name)
        name = f"{_ident(spec.database)}.{_ident(spec.name)}"
        if spec.format == "json":  # a Spark data source table: no JSON SerDe ships with Spark's Hive
            keys = ", ".join(_ident(k) for k in spec.partition_keys)
            columns = [*spec.columns, *((k, "string") for k in spec.partition_keys)]
            self.spark.sql(
                f"CREATE TABLE IF NOT EXISTS {name} ({_columns_ddl(columns)}) USING json "
                + (f"PARTITIONED BY ({keys}) " if keys else "")
                + f"LOCATION {_literal(hadoop_uri(spec.location))}"
            )
            self._describe_json(spec.database, spec.name)
            return
        partitions = ", ".join(f"{_ident(k)} string" for k in spec.partition_keys)
        self.spark.sql(
            f"CREATE EXTERNAL TABLE IF NOT EXISTS {name} "
            f"({_columns_ddl(spec.columns)}) "
            + (f"PARTITIONED BY ({partitions}) " if partitions else "")
            + f"STORED AS PARQUET LOCATION {_literal(hadoop_uri(spec.location))}"
        )

    def add_columns(self, database: str, table: str, columns: Sequence[Column]) -> None:
        if columns and is_json_table(self.spark, database, table):  # Spark's ALTER would load the SerDe
            self._forget(database, table)
            self._describe_json(database, table, columns)
        elif columns:
            self.spark.sql(
                f"ALTER TABLE {_ident(database)}.{_ident(table)} ADD COLUMNS ({_columns_ddl(columns)})"
            )

    def set_column_type(self, database: str, table: str, column: str, kind: str) -> None:
        # ALTER TABLE ... CHANGE COLUMN refuses type changes: set the data schema through the catalog
        self._forget(database, table)
        columns = self.table_columns(database, table) or ()
        changed = [(name, kind if name == column else old) for name, old in columns]
        ddl = ", ".join(f"{_ident(name)} {k}" for name, k in changed)
        jvm = self._gateway()
        schema = jvm.org.apache.spark.sql.types.StructType.fromDDL(ddl)
        external = self._jvm()["external"]
        external.alterTableDataSchema(database, table, schema)
        self.spark.catalog.refreshTable(f"{_ident(database)}.{_ident(table)}")

    def _describe_json(self, database: str, table: str, added: Sequence[Column] = ()) -> bool:
        """The JSON table's descriptor for Trino, Athena and Hive, written with this thread's own
        metastore client: see :func:`eventlake.catalog.hive_descriptor.describe_json_table`."""
        return describe_json_table(self.spark, self._metastore_client(), database, table, added)

    def hive_descriptor(self, database: str, table: str) -> dict[str, Any]:
        """The table's descriptor as readers other than Spark see it (Trino, Athena, Hive), with its
        partitions': see :func:`eventlake.catalog.hive_descriptor.read_descriptor`."""
        return read_descriptor(self._metastore_client(), database, table)

    def add_partitions(
        self, spec: TableSpec, partitions: Sequence[tuple[str, ...]], *, own_client: bool = False
    ) -> None:
        """Adds the partitions the table lacks, as ``ALTER TABLE ... ADD IF NOT EXISTS PARTITION``
        does. A few (a micro-batch's hour) go straight to the session's external catalog, without
        listing the table's partitions first (created if missing): a statement costs 80 ms to parse
        and analyse on Derby, most of a small sync's commit, a listing 22 ms; more go in
        statements of :data:`PARTITION_BATCH`, whose cost per partition (2 ms) is half the API's
        (py4j calls to build each partition), see ``bench/partitions.py``. ``own_client``: on one
        of the catalog's threads (:meth:`add_partitions_of`), whose own metastore client takes
        the few too (:meth:`_add_new`, no listing first): Spark's external catalog serves one
        thread at a time."""
        known = self._known.setdefault((spec.database, spec.name), set())
        unknown = sorted(set(partitions) - known)
        if not unknown:
            return
        try:
            if len(unknown) <= DIRECT_MAX:  # a micro-batch's few: no listing, created if missing
                if own_client:
                    self._add_new(spec, unknown)
                else:
                    self._create_partitions(spec, unknown)
                self.spark.catalog.refreshTable(f"{_ident(spec.database)}.{_ident(spec.name)}")
            else:
                new = sorted(set(unknown) - self._registered(spec, unknown))
                for start in range(0, len(new), PARTITION_BATCH):
                    self._add_new(spec, new[start : start + PARTITION_BATCH])
                if new:  # Spark's cached relation of the table (the statement refreshed it)
                    self.spark.catalog.refreshTable(f"{_ident(spec.database)}.{_ident(spec.name)}")
        except Exception:  # e.g. the table was dropped behind this catalog's back: look again next time
            self._forget(spec.database, spec.name)
            raise
        known.update(unknown)

    def add_partitions_of(self, tables: Sequence[tuple[TableSpec, Sequence[tuple[str, ...]]]]) -> None:
        """As :meth:`add_partitions` for each table, on the catalog's threads (:meth:`each`), each
        with its own metastore client: the metastore's work for a partition (DataNucleus and Derby
        in the embedded one, a database round trip in a service) is most of a first sync's
        commit, and one table's request need not wait for another's (``bench/partitions.py``:
        2,520 partitions of 35 tables; a first sync of one hour's 35 tables of a partition each:
        3.2 -> 1.1 s, where Spark's external catalog took them one at a time). A failure stops
        the threads taking more tables, and is raised."""
        self.each(list(tables), lambda table: self.add_partitions(*table, own_client=len(tables) > 1))

    def each(self, items: Sequence[_Item], work: Callable[[_Item], None]) -> None:
        """``work`` of each item, :data:`CATALOG_THREADS` items at a time in the order given, on
        the catalog's own threads (made at the first call and kept for the catalog's life: a
        long-lived ``up`` makes no new JVM threads, metastore clients or embedded-metastore stores
        at each commit): the metastore's work for a commit's partitions, Spark's analysis of its
        views. A failure, or an interruption of the caller, stops the threads taking more items;
        the first failure is raised once they stop."""
        if len(items) < 2:
            super().each(items, work)
            return
        self._jvm()  # the JVM objects, looked up once before the threads share them
        if self._threads is None:
            self._threads = ThreadPoolExecutor(CATALOG_THREADS, thread_name_prefix="eventlake-catalog")
        pending, taking, failed = iter(range(len(items))), threading.Lock(), threading.Event()

        def take() -> None:
            try:
                while not failed.is_set():
                    with taking:
                        index = next(pending, None)
                    if index is None:
                        return
                    work(items[index])
            except BaseException:
                failed.set()
                raise

        running = [self._threads.submit(take) for _ in range(CATALOG_THREADS)]
        try:
            for done in running:
                done.result()  # the first failure, raised here
        except BaseException:
            failed.set()
            wait(running)  # (each finishes the item it holds)
            raise

    def set_partition_location(
        self,
        database: str,
        table: str,
        partition_keys: tuple[str, ...],
        values: tuple[str, ...],
        location: str,
    ) -> bool:
        return self.set_partition_locations(database, table, partition_keys, [(values, location)])

    def set_partition_locations(
        self,
        database: str,
        table: str,
        partition_keys: tuple[str, ...],
        moves: Sequence[tuple[tuple[str, ...], str]],
    ) -> bool:
        """What ``ALTER TABLE ... PARTITION (...) SET LOCATION`` does (the partition's storage
        with the new location, through the external catalog), for every partition of ``moves`` in
        one ``alterPartitions`` call (one metastore request), after one listing of the table's
        partitions under the leading values they share; the missing ones are created there in one
        ``createPartitions``. Before, two statements and a table refresh per partition (a replay
        of a week moves thousands)."""
        external = self._jvm()["external"]
        if not (external.databaseExists(database) and external.tableExists(database, table)):
            return False
        if not moves:
            return True
        wanted = {tuple(values): location for values, location in moves}
        jvm = self._jvm()
        shared = _shared_prefix(partition_keys, list(wanted))
        partial = jvm["option"](jvm["toScalaMap"](shared) if shared else None)
        listed = external.listPartitions(database, table, partial).iterator()
        altered, found = [], set()
        while listed.hasNext():
            partition = listed.next()
            spec = partition.spec()
            values = tuple(spec.apply(key) for key in partition_keys)
            if values not in wanted:
                continue
            found.add(values)
            storage = partition.storage()
            uri = jvm["stringToURI"](hadoop_uri(wanted[values]))
            located = storage.copy(
                jvm["option"](uri), *(getattr(storage, f"copy$default${i}")() for i in range(2, 8))
            )
            altered.append(
                partition.copy(
                    spec, located, partition.parameters(), partition.createTime(),
                    partition.lastAccessTime(), partition.stats(),
                )
            )  # fmt: skip
        if altered:
            external.alterPartitions(database, table, jvm["toSeq"](altered))
        missing = [(values, location) for values, location in wanted.items() if values not in found]
        if missing:
            self._create_located(database, table, partition_keys, missing)
        self._known.setdefault((database, table), set()).update(wanted)
        self.spark.catalog.refreshTable(f"{_ident(database)}.{_ident(table)}")
        return True

    def _add_new(self, spec: TableSpec, partitions: Sequence[tuple[str, ...]]) -> None:
        """``partitions``, which the table lacked a moment ago, in one metastore request
        (``add_partitions`` with ``ifNotExists``: one another writer added since is left as it is).
        They are built in the JVM in one call: a spec of partitions sharing the table's storage
        descriptor (:func:`partition_spec_bytes`), each given its own copy with its location by the
        metastore's own iterator. (Not ``add_partitions_pspec``: it looks every partition up
        twice, and refuses the whole request for one that exists.)"""
        if not partitions:
            return
        refs = self._jvm()
        client = self._metastore_client()
        try:
            table = client.getTable(spec.database, spec.name)
        except Py4JJavaError:  # no such table: the statement says why, as Spark words it
            self._add_statement(spec, partitions)
            return
        located = [(values, _qualified(hadoop_uri(spec.partition_location(values)))) for values in partitions]
        shared = refs["PartitionSpecWithSharedSD"]()
        refs["TDeserializer"]().deserialize(shared, partition_spec_bytes(located))
        storage = table.getSd().deepCopy()
        storage.setLocation("")  # each partition's location is its "relative" path, whole
        shared.setSd(storage)
        request = refs["PartitionSpec"]()
        request.setDbName(table.getDbName())
        request.setTableName(table.getTableName())
        request.setRootPath(table.getSd().getLocation())
        request.setSharedSDPartitionSpec(shared)
        built = refs["to_list"](refs["spec_proxy"](request).getPartitionIterator())
        client.add_partitions(built, True, False)  # ifNotExists, no results wanted

    def _metastore_client(self) -> Any:
        """A metastore client of this catalog's own, one per thread, made on first use (with
        reconnection, as Spark's). Not the session's: Spark's threads share that one under Spark's
        lock (in ``up`` the Thrift server's queries too), and a request sent on it from here could
        interleave with theirs on one connection; for the same reason no two threads share one."""
        client = getattr(self._clients, "client", None)
        if client is None:
            conf = self._jvm()["external"].unwrapped().client().conf()
            client = self._clients.client = self._jvm()["metastore_client"](conf, True)
        return client

    def _add_statement(self, spec: TableSpec, partitions: Sequence[tuple[str, ...]]) -> None:
        """One ``ALTER TABLE ... ADD IF NOT EXISTS`` statement for ``partitions``."""
        clauses = []
        for values in partitions:
            keys = ", ".join(
                f"{_ident(k)}={_literal(v)}" for k, v in zip(spec.partition_keys, values, strict=True)
            )
            clauses.append(
                f"PARTITION ({keys}) LOCATION {_literal(hadoop_uri(spec.partition_location(values)))}"
            )
        # IF NOT EXISTS: another writer may have added some since the listing
        self.spark.sql(
            f"ALTER TABLE {_ident(spec.database)}.{_ident(spec.name)} ADD IF NOT EXISTS " + " ".join(clauses)
        )

    def _create_partitions(self, spec: TableSpec, partitions: Sequence[tuple[str, ...]]) -> None:
        """``partitions`` in one external catalog call (one metastore request)."""
        located = [(values, spec.partition_location(values)) for values in partitions]
        self._create_located(spec.database, spec.name, spec.partition_keys, located)

    def _create_located(
        self,
        database: str,
        table: str,
        partition_keys: tuple[str, ...],
        located: Sequence[tuple[tuple[str, ...], str]],
    ) -> None:
        """Partitions at these locations in one external catalog call. Each py4j call is a round
        trip (about 0.4 ms): the JVM classes and each table's storage format are looked up once per
        catalog, not once per partition."""
        jvm = self._jvm()
        external = jvm["external"]
        storage, formats = self._storage.get((database, table), (None, None))
        if storage is None:
            try:
                storage = external.getTable(database, table).storage()
            except Py4JJavaError as exc:  # no such table: the AnalysisException the statement raised
                raise convert_exception(exc.java_exception) from None
            # the table's storage format, for each partition's copy with its location (Scala defaults)
            formats = [getattr(storage, f"copy$default${i}")() for i in range(2, 8)]
            self._storage[(database, table)] = (storage, formats)
        now = int(time.time() * 1000)
        batch = []
        for values, location in located:
            uri = jvm["stringToURI"](hadoop_uri(location))
            keys = jvm["toScalaMap"](dict(zip(partition_keys, values, strict=True)))
            at = storage.copy(jvm["option"](uri), *formats)
            batch.append(jvm["CatalogTablePartition"](keys, at, jvm["empty_map"], now, -1, jvm["none"]))
        # ignoreIfExists: they may exist (registered by another writer, or before a crash)
        external.createPartitions(database, table, jvm["toSeq"](batch), True)

    def _gateway(self) -> Any:
        """The session's py4j view of the JVM (pyspark types it Optional: None once stopped)."""
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None, "the SparkContext is stopped"
        return jvm

    def _jvm(self) -> dict[str, Any]:
        """The JVM objects, classes and static methods partition registration uses, looked up
        once: a class named through py4j's ``jvm.org.apache...`` costs a class path search per
        dotted name (3 ms), a method of a class a round trip before each call."""
        if not self._jvm_refs:
            gateway = self.spark.sparkContext._gateway
            assert gateway is not None, "the SparkContext is stopped"

            def named(name: str) -> Any:
                return JavaClass(name, gateway._gateway_client)

            api = "org.apache.hadoop.hive.metastore.api."
            utils = named("org.apache.spark.api.python.PythonUtils")
            option = named("scala.Option")
            self._jvm_refs = {
                "external": self.spark._jsparkSession.sharedState().externalCatalog(),
                "CatalogTablePartition": named("org.apache.spark.sql.catalyst.catalog.CatalogTablePartition"),
                "PartitionSpec": named(api + "PartitionSpec"),
                "PartitionSpecWithSharedSD": named(api + "PartitionSpecWithSharedSD"),
                "TDeserializer": named("org.apache.thrift.TDeserializer"),
                "stringToURI": named("org.apache.spark.sql.catalyst.catalog.CatalogUtils").stringToURI,
                "toScalaMap": utils.toScalaMap,
                "toSeq": utils.toSeq,
                "option": option.apply,  # Some(value), None for None
                "none": option.empty(),
                "empty_map": utils.toScalaMap({}),
                "spec_proxy": named(
                    "org.apache.hadoop.hive.metastore.partition.spec.PartitionSpecProxy$Factory"
                ).get,
                "to_list": named("org.apache.commons.collections4.IteratorUtils").toList,
                "metastore_client": named(
                    "org.apache.hadoop.hive.metastore.RetryingMetaStoreClient"
                ).getProxy,
            }
        return self._jvm_refs

    def drop_partitions(self, spec: TableSpec, partitions: Sequence[tuple[str, ...]]) -> None:
        table = f"{_ident(spec.database)}.{_ident(spec.name)}"
        self._known.get((spec.database, spec.name), set()).difference_update(partitions)
        if not partitions or not self.spark.catalog.tableExists(table):
            return
        ordered = sorted(set(partitions))
        for start in range(0, len(ordered), PARTITION_BATCH):
            clauses = ", ".join(
                "PARTITION ("
                + ", ".join(
                    f"{_ident(k)}={_literal(v)}" for k, v in zip(spec.partition_keys, values, strict=True)
                )
                + ")"
                for values in ordered[start : start + PARTITION_BATCH]
            )
            self.spark.sql(f"ALTER TABLE {table} DROP IF EXISTS {clauses}")  # an external table: files stay

    def _registered(self, spec: TableSpec, partitions: Sequence[tuple[str, ...]]) -> set[tuple[str, ...]]:
        """Which of ``partitions`` the table has: one listing of its partition names (through the
        session's external catalog: no SQL to plan), only those under the leading values all of
        ``partitions`` share (an hourly run lists one day, not years of them)."""
        if not partitions:
            return set()
        refs = self._jvm()
        shared = _shared_prefix(spec.partition_keys, partitions)
        partial = refs["option"](refs["toScalaMap"](shared) if shared else None)
        external = refs["external"]
        try:
            names = external.listPartitionNames(spec.database, spec.name, partial).mkString("\n")
        except Py4JJavaError:
            # nothing known (e.g. no such table): ADD IF NOT EXISTS adds what is missing or says why not
            return set()
        # Hive escapes control characters in names (%0A): a newline separates them
        return {_partition_values(name) for name in names.split("\n") if name} & set(partitions)

    def partitions(self, database: str, table: str) -> list[tuple[str, ...]]:
        if not self.spark.catalog.tableExists(f"{_ident(database)}.{_ident(table)}"):
            return []
        rows = self.spark.sql(f"SHOW PARTITIONS {_ident(database)}.{_ident(table)}").collect()
        return sorted(_partition_values(row[0]) for row in rows)

    def view_definitions(self, database: str, names: Sequence[str]) -> dict[str, object]:
        """One metastore call (``getTablesByName``) for every name: a view's text and columns as
        Spark stored them (Spark, the Thrift server and dbt-spark read these views)."""
        external = self._jvm()["external"]
        if not names or not external.databaseExists(database):
            return {}
        found = external.getTablesByName(database, self._jvm()["toSeq"](list(names)))
        held: dict[str, object] = {}
        tables = found.iterator()
        while tables.hasNext():
            table = tables.next()
            name = table.identifier().table()
            if table.tableType().name() != "VIEW":
                held[name] = NOT_A_VIEW
                continue
            text = table.viewText()
            fields = orjson.loads(table.schema().json())["fields"]
            kinds = (
                _JSON_TYPE_NAMES.get(f["type"], f["type"]) if isinstance(f["type"], str) else None
                for f in fields
            )
            columns = tuple(zip((f["name"] for f in fields), kinds, strict=True))
            held[name] = (text.get() if text.isDefined() else None, columns)
        return held

    def view_definition(self, database: str, view: View) -> object:
        return (view_sql(view, database, _ident), tuple(view.columns))

    def write_view(self, database: str, view: View, replace: bool) -> None:
        name = f"{_ident(database)}.{_ident(view.name)}"
        self.spark.sql(f"CREATE OR REPLACE VIEW {name} AS {view_sql(view, database, _ident)}")

    def drop_table(self, database: str, table: str) -> None:
        self._forget(database, table)
        if self.spark.catalog.databaseExists(database):
            self.spark.sql(f"DROP TABLE IF EXISTS {_ident(database)}.{_ident(table)}")

    def drop_database(self, database: str) -> None:
        self._forget(database)
        if self.spark.catalog.databaseExists(database):  # tables are external: their files stay
            self.spark.sql(f"DROP DATABASE IF EXISTS {_ident(database)} CASCADE")
