"""The catalog interface every back end implements, and the loader that picks one by kind."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from eventlake import layout
from eventlake.config.settings import CatalogKind
from eventlake.errors import ConfigError, DependencyError
from eventlake.jvm.connectors import S3A_CLASS, has_class
from eventlake.schema.warehouse import View
from eventlake.storage import storage_scheme

_Item = TypeVar("_Item")

if TYPE_CHECKING:
    from eventlake.config import Settings

Column = tuple[str, str]  # (name, type): type is one of eventlake.schema.types.TYPES
# what Catalog.view_definitions says of a name a table (not a view) has, and of one nothing has
NOT_A_VIEW = object()
NO_VIEW = object()


@dataclass(frozen=True)
class TableSpec:
    """A lake table as the catalog registers it."""

    database: str
    name: str
    columns: tuple[Column, ...]
    partition_keys: tuple[str, ...]
    location: str
    format: str = "parquet"  # parquet (lake tables), json (sync reports)
    # where a partition's files are, relative to location, e.g. "day={day}/source={source_id}";
    # empty: the Hive default "key=value/..." in partition_keys order
    partition_path: str = ""

    def partition_location(self, values: tuple[str, ...]) -> str:
        named = dict(zip(self.partition_keys, values, strict=True))
        relative = (
            self.partition_path.format(**named)
            if self.partition_path
            else layout.partition_subdir(self.partition_keys, values)
        )
        return self.location.rstrip("/") + "/" + relative

    @property
    def qualified(self) -> str:
        return f"{self.database}.{self.name}"


@dataclass(frozen=True)
class ListedTable:
    """A table or view of a database as one listing of the catalog has it
    (:meth:`Catalog.list_described`)."""

    name: str
    columns: tuple[Column, ...] | None = None  # None: not in the listing (ask table_columns)
    location: str | None = None  # as the catalog has it; "" for a view; None: not in the listing


class Catalog(ABC):
    """Databases, tables, columns and partitions of the lake. Every call is idempotent."""

    @abstractmethod
    def ensure_database(self, name: str) -> None: ...

    @abstractmethod
    def table_columns(self, database: str, table: str) -> tuple[Column, ...] | None:
        """The table's data columns (partition keys excluded), or None when it does not exist."""

    @abstractmethod
    def list_tables(self, database: str) -> list[str]: ...

    def list_described(self, database: str) -> list[ListedTable]:
        """Every table and view of the database with what one listing of the catalog tells of it,
        which :meth:`table_schemas` and :meth:`table_locations` read. The default lists the names
        only; back ends override it to ask the metastore once for columns and locations."""
        return [ListedTable(name) for name in self.list_tables(database)]

    def table_schemas(self, database: str) -> dict[str, tuple[Column, ...]]:
        """Every table of the database with its data columns (what a sync plans against): from
        :meth:`list_described`, and :meth:`table_columns` for the tables it has no columns of."""
        schemas: dict[str, tuple[Column, ...]] = {}
        for table in self.list_described(database):
            columns = table.columns if table.columns is not None else self.table_columns(database, table.name)
            if columns is not None:
                schemas[table.name] = columns
        return schemas

    def table_locations(self, database: str) -> dict[str, str]:
        """Every table of the database with its location (as the catalog has it: ``s3://...``,
        ``file:/...``); views have none and are left out. Tables a lake adopted from Segment Data
        Lakes are found by their location (see ``eventlake adopt``)."""
        tables = self.list_described(database)
        if any(table.location is None for table in tables):
            raise NotImplementedError(f"{type(self).__name__} cannot list table locations")
        return {table.name: table.location for table in tables if table.location}

    @abstractmethod
    def create_table(self, spec: TableSpec) -> None:
        """Create the table if it does not exist (an existing one is left as it is)."""

    @abstractmethod
    def add_columns(self, database: str, table: str, columns: Sequence[Column]) -> None:
        """Append columns at the end of the table's schema."""

    @abstractmethod
    def set_column_type(self, database: str, table: str, column: str, kind: str) -> None:
        """Change one column's type (``eventlake schema set-type``); the others stay as they are."""

    @abstractmethod
    def add_partitions(self, spec: TableSpec, partitions: Sequence[tuple[str, ...]]) -> None:
        """Register partitions (values in ``spec.partition_keys`` order); existing ones are kept."""

    def add_partitions_of(self, tables: Sequence[tuple[TableSpec, Sequence[tuple[str, ...]]]]) -> None:
        """:meth:`add_partitions` for each table (a run's commit); a back end may register several
        tables at once."""
        for spec, partitions in tables:
            self.add_partitions(spec, partitions)

    @abstractmethod
    def drop_partitions(self, spec: TableSpec, partitions: Sequence[tuple[str, ...]]) -> None:
        """Unregister partitions (their files stay); missing ones are not an error."""

    @abstractmethod
    def set_partition_location(
        self,
        database: str,
        table: str,
        partition_keys: tuple[str, ...],
        values: tuple[str, ...],
        location: str,
    ) -> bool:
        """Point one partition at ``location`` in one call (readers through the catalog switch from
        the old files to the new ones at once), registering it there if missing. False (and nothing
        changed) when the table does not exist."""

    def set_partition_locations(
        self,
        database: str,
        table: str,
        partition_keys: tuple[str, ...],
        moves: Sequence[tuple[tuple[str, ...], str]],
    ) -> bool:
        """:meth:`set_partition_location` of each ``(values, location)``, in as few calls as the
        catalog allows (each partition still switches in one change). False (nothing changed) when
        the table does not exist."""
        for values, location in moves:
            if not self.set_partition_location(database, table, partition_keys, values, location):
                return False
        return True

    @abstractmethod
    def partitions(self, database: str, table: str) -> list[tuple[str, ...]]:
        """The table's registered partitions (values in partition key order), sorted."""

    @abstractmethod
    def drop_table(self, database: str, table: str) -> None:
        """Remove the table from the catalog (its files stay); a missing table is not an error."""

    @abstractmethod
    def drop_database(self, database: str) -> None:
        """Remove the database and its tables from the catalog (files stay); missing is not an error."""

    def replace_views(self, database: str, views: Sequence[View]) -> list[str]:
        """Create or replace these warehouse views (see :mod:`eventlake.schema.warehouse`) over
        ``database``'s tables, so that they have the tables' columns as they are now. A name
        that a table (not a view: a dbt model, say) has is left alone: the names left, returned.

        Only the views whose definition the catalog does not hold already are written: one listing
        of what the catalog has under the views' names (:meth:`view_definitions`), compared with
        what each view would be (:meth:`view_definition`: its SQL and columns, which the tables'
        columns decide). A run that appends a column to one table rewrites the views that read it
        (that table's, ``tracks`` for a context column), not every view of the database, and a
        catalog repair of an unchanged lake writes none. Each write costs a statement on a Hive
        metastore (Spark analyses the view: 40 to 300 ms) and a table version in Glue."""
        held = self.view_definitions(database, [view.name for view in views])
        left, writes = [], []
        for view in views:
            found = held.get(view.name, NO_VIEW)
            if found is NOT_A_VIEW:
                left.append(view.name)
            elif found != self.view_definition(database, view):
                writes.append((view, found is not NO_VIEW))
        self.write_views(database, writes)
        return left

    def write_views(self, database: str, writes: Sequence[tuple[View, bool]]) -> None:
        """:meth:`write_view` of each ``(view, replace)`` (through :meth:`each`); when one fails the
        others are still written and the first failure in the order given is raised."""
        failed: list[tuple[int, Exception]] = []

        def write(item: tuple[int, tuple[View, bool]]) -> None:
            try:
                self.write_view(database, *item[1])
            except Exception as exc:  # the others are still written
                failed.append((item[0], exc))

        self.each(list(enumerate(writes)), write)
        if failed:
            raise min(failed, key=lambda found: found[0])[1]

    def each(self, items: Sequence[_Item], work: Callable[[_Item], None]) -> None:
        """``work`` of each item, one after another; a back end may run several at once (the Hive
        catalog on its own threads). A failure stops the items not taken yet and is raised."""
        for item in items:
            work(item)

    def view_definitions(self, database: str, names: Sequence[str]) -> dict[str, object]:
        """What the catalog holds under these names, by name: a view's definition, comparable with
        :meth:`view_definition`'s, or :data:`NOT_A_VIEW` for a table; names it lacks are left out.
        In as few calls as the catalog allows."""
        raise NotImplementedError(f"{type(self).__name__} has no warehouse views")

    def view_definition(self, database: str, view: View) -> object:
        """``view`` as :meth:`view_definitions` would read it back once written (what decides
        whether it is written again)."""
        raise NotImplementedError(f"{type(self).__name__} has no warehouse views")

    def write_view(self, database: str, view: View, replace: bool) -> None:
        """Create the view (``replace``: a view of that name exists; replace it)."""
        raise NotImplementedError(f"{type(self).__name__} has no warehouse views")

    def ensure_table(self, spec: TableSpec) -> tuple[Column, ...]:
        """Create the table or append the columns it lacks; returns the columns that were added."""
        existing = self.table_columns(spec.database, spec.name)
        if existing is None:
            self.ensure_database(spec.database)
            self.create_table(spec)
            return spec.columns
        have = {name for name, _ in existing}
        missing = tuple(c for c in spec.columns if c[0] not in have)
        if missing:
            self.add_columns(spec.database, spec.name, missing)
        return missing


def _load_hive(settings: Settings, session: Any) -> Catalog:
    from eventlake.catalog.hive import HiveCatalog

    if session is None:
        from eventlake.jvm.session import spark_session

        session = spark_session(settings, "eventlake-catalog")
    _check_connector(settings, session)
    return HiveCatalog(session)


# the Hadoop file system a Hive metastore (and Spark reading its tables) needs for each lake scheme
CONNECTORS = {
    "s3": (S3A_CLASS, "hadoop-aws and the AWS SDK"),
    "s3a": (S3A_CLASS, "hadoop-aws and the AWS SDK"),
    "abfss": ("org.apache.hadoop.fs.azurebfs.SecureAzureBlobFileSystem", "hadoop-azure"),
    "abfs": ("org.apache.hadoop.fs.azurebfs.AzureBlobFileSystem", "hadoop-azure"),
}


def _check_connector(settings: Settings, session: Any) -> None:
    """A Hive metastore checks every table location with Hadoop's file system for its scheme: a
    lake in a bucket needs the connector on the class path, or the first table fails obscurely."""
    scheme = storage_scheme(settings.lake.root)
    if scheme not in CONNECTORS:
        return
    class_name, jars = CONNECTORS[scheme]
    if not has_class(session, class_name):
        fetch = " (scripts/ensure-jars.sh fetches them for S3)" if class_name == S3A_CLASS else ""
        raise ConfigError(
            "catalog.kind",
            f'"hive" with lake.root {settings.lake.root}',
            f"a Hive metastore needs {jars} ({class_name}) on Spark's class path for {scheme}:// "
            f"locations: [spark] jars_dir names a folder of them{fetch}, or spark.jars as EMR, "
            'Dataproc and Databricks provide; or use kind = "glue" (S3)',
        )


def _load_glue(settings: Settings, session: Any) -> Catalog:
    from eventlake.catalog.glue import GlueCatalog

    return GlueCatalog.from_settings(settings.catalog)


CATALOG_LOADERS: dict[str, Callable[[Settings, Any], Catalog]] = {
    CatalogKind.HIVE: _load_hive,
    CatalogKind.GLUE: _load_glue,
}
# the extra that brings each back end's client library
CATALOG_EXTRAS: dict[str, str] = {CatalogKind.HIVE: "spark", CatalogKind.GLUE: "glue"}


def load_catalog(settings: Settings, session: Any = None) -> Catalog:
    """The configured catalog back end. ``session`` is the SparkSession for ``hive`` (the other
    back ends ignore it); without one, ``hive`` builds one from the settings."""
    kind = settings.catalog.kind
    try:
        return CATALOG_LOADERS[kind](settings, session)
    except ImportError as exc:
        extra = CATALOG_EXTRAS.get(kind, kind)
        raise DependencyError(
            f"the {kind} catalog needs {exc.name or 'a missing package'}: pip install 'eventlake[{extra}]'"
        ) from None
