"""The Hive metastore catalog, driven through Spark SQL DDL (embedded Derby by default)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import SparkSession
from pyspark.sql.utils import AnalysisException

from eventlake.catalog.base import Catalog, Column, TableSpec
from eventlake.layout import partition_subdir

# partitions registered per ALTER TABLE statement
_PARTITION_BATCH = 100


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _columns_ddl(columns: Sequence[Column]) -> str:
    return ", ".join(f"{_ident(name)} {kind}" for name, kind in columns)


class HiveCatalog(Catalog):
    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def ensure_database(self, name: str) -> None:
        if not self.spark.catalog.databaseExists(name):  # IF NOT EXISTS alone logs a Hive stack trace
            self.spark.sql(f"CREATE DATABASE IF NOT EXISTS {_ident(name)}")

    def table_columns(self, database: str, table: str) -> tuple[Column, ...] | None:
        if not self.spark.catalog.tableExists(f"{_ident(database)}.{_ident(table)}"):
            return None
        columns = self.spark.catalog.listColumns(f"{_ident(database)}.{_ident(table)}")
        return tuple((c.name, c.dataType) for c in columns if not c.isPartition)

    def list_tables(self, database: str) -> list[str]:
        try:
            return sorted(t.name for t in self.spark.catalog.listTables(database))
        except AnalysisException:
            return []

    def create_table(self, spec: TableSpec) -> None:
        partitions = ", ".join(f"{_ident(k)} string" for k in spec.partition_keys)
        self.spark.sql(
            f"CREATE EXTERNAL TABLE IF NOT EXISTS {_ident(spec.database)}.{_ident(spec.name)} "
            f"({_columns_ddl(spec.columns)}) "
            + (f"PARTITIONED BY ({partitions}) " if partitions else "")
            + f"STORED AS PARQUET LOCATION {_literal(spec.location)}"
        )

    def add_columns(self, database: str, table: str, columns: Sequence[Column]) -> None:
        if columns:
            self.spark.sql(
                f"ALTER TABLE {_ident(database)}.{_ident(table)} ADD COLUMNS ({_columns_ddl(columns)})"
            )

    def add_partitions(self, spec: TableSpec, partitions: Sequence[tuple[str, ...]]) -> None:
        unique = sorted(set(partitions))
        for start in range(0, len(unique), _PARTITION_BATCH):
            clauses = []
            for values in unique[start : start + _PARTITION_BATCH]:
                keys = ", ".join(
                    f"{_ident(k)}={_literal(v)}" for k, v in zip(spec.partition_keys, values, strict=True)
                )
                location = spec.location.rstrip("/") + "/" + partition_subdir(spec.partition_keys, values)
                clauses.append(f"PARTITION ({keys}) LOCATION {_literal(location)}")
            self.spark.sql(
                f"ALTER TABLE {_ident(spec.database)}.{_ident(spec.name)} ADD IF NOT EXISTS "
                + " ".join(clauses)
            )
