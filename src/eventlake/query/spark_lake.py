"""Spark SQL over a lake on an object store without Hadoop connectors: each table of the lake (from
its schema file) becomes a table of the session's in-memory catalog backed by a Python data
source that reads its Parquet files through :mod:`eventlake.storage`, in the executors.

A Glue catalog is not a Hive metastore Spark can open; this is how ``eventlake sql --engine spark``
reads such a lake when Spark has no file system for it: no S3A (``[spark] jars_dir``, see
:mod:`eventlake.jvm.connectors`; with it, :mod:`eventlake.query.spark_glue` reads the lake with
Spark's own Parquet reader), and always on Azure (no hadoop-azure). A cluster with the connectors
and a Glue-aware metastore (EMR, Databricks) reads the registered tables directly instead.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from eventlake import partitions
from eventlake.catalog.base import TableSpec
from eventlake.catalog.views import database_views
from eventlake.schema.warehouse import view_sql
from eventlake.storage import load_storage, relative_to, to_location

SOURCE_NAME = "eventlake_lake"


def ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def table_ddl(spec: TableSpec) -> str:
    """The columns of ``spec``'s table, then its partition keys (strings), as Spark DDL."""
    columns = [*spec.columns, *((k, "string") for k in spec.partition_keys)]
    return ", ".join(f"{ident(name)} {kind}" for name, kind in columns)


class LakeTableSource(DataSource):
    """One lake table. Spark hands no ``OPTIONS`` to a Python data source read through a catalog
    table, so each table gets its own subclass (:func:`table_source`) holding its spec, the lake
    root and the store's endpoint; Spark pickles the class to the workers with them."""

    source_name = SOURCE_NAME
    spec: TableSpec
    root = ""
    endpoint = ""

    @classmethod
    def name(cls) -> str:
        return cls.source_name

    def schema(self) -> str:
        return table_ddl(self.spec)

    def reader(self, schema: Any) -> DataSourceReader:
        return LakeTableReader(self.spec, self.root, self.endpoint)


def table_source(index: int, spec: TableSpec, root: str, endpoint: str) -> type[LakeTableSource]:
    attributes = {"source_name": f"{SOURCE_NAME}_{index}", "spec": spec, "root": root, "endpoint": endpoint}
    return type(f"LakeTableSource{index}", (LakeTableSource,), attributes)


class LakeTableReader(DataSourceReader):
    def __init__(self, spec: TableSpec, root: str, endpoint: str) -> None:
        self.spec, self.root, self.endpoint = spec, root, endpoint

    def partitions(self) -> list[InputPartition]:
        """One per data file of the table, listed on the driver by the lake's rule
        (:func:`eventlake.layout.partition_data`: a rewrite is seen before or after)."""
        storage = load_storage(self.root, endpoint_url=self.endpoint)
        location = to_location(self.spec.location)
        files = partitions.table_data_files(storage, location, len(self.spec.partition_keys))
        return [InputPartition(str(f.path)) for f in files] or [InputPartition("")]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from eventlake.schema.arrow import arrow_schema

        path = partition.value
        if not path:
            return
        storage = load_storage(self.root, endpoint_url=self.endpoint)
        schema = arrow_schema(self.spec.columns)
        table = pq.read_table(io.BytesIO(storage.read(to_location(path))))
        columns = [
            table[f.name].cast(f.type) if f.name in table.column_names else pa.nulls(len(table), f.type)
            for f in schema
        ]
        folder = relative_to(to_location(path).parent, to_location(self.spec.location))
        folders = folder.as_posix().split("/")
        values = dict(part.split("=", 1) for part in folders if "=" in part)
        columns += [pa.array([values.get(k)] * len(table), pa.string()) for k in self.spec.partition_keys]
        names = [*schema.names, *self.spec.partition_keys]
        yield from pa.Table.from_arrays(columns, names=names).to_batches()


def register_lake_tables(spark: Any, specs: list[TableSpec], root: str, endpoint: str) -> None:
    """A table per spec in the session's (in-memory) catalog, read through the lake's storage, and
    each source's warehouse views over them."""
    create_databases(spark, specs)
    for index, spec in enumerate(specs):
        source = table_source(index, spec, root, endpoint)
        spark.dataSource.register(source)
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS {ident(spec.database)}.{ident(spec.name)} ({table_ddl(spec)}) "
            f"USING {source.source_name}"
        )
    create_views(spark, specs)


def create_databases(spark: Any, specs: Sequence[TableSpec]) -> None:
    """Each database of ``specs`` in the session's catalog."""
    for database in sorted({s.database for s in specs}):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {ident(database)}")


def create_views(spark: Any, specs: Sequence[TableSpec]) -> None:
    """Each source's warehouse views over ``specs``' tables, as the catalog has them."""
    for database, found in database_views(specs):
        for view in found.views:
            name = f"{ident(database)}.{ident(view.name)}"
            spark.sql(f"CREATE OR REPLACE VIEW {name} AS {view_sql(view, database, ident)}")
