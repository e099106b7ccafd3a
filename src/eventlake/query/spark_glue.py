"""Spark SQL over a lake in a bucket whose tables are in Glue, read by Spark's own Parquet reader
through S3A (:mod:`eventlake.jvm.connectors`): what EMR does with AWS's Glue client, done with
boto3, since open-source Spark cannot open Glue as its metastore.

Each table of the lake (its schema file: columns, partition keys, location) becomes a Parquet
table of the session's in-memory catalog, with the partitions Glue has, each at Glue's location
(``s3://`` read as ``s3a://``). A query reads what a reader through Glue (Athena) reads: the
visible files under each partition's location (Spark, like Athena and Trino, skips names starting
with ``_`` or ``.``). A long-lived session (``eventlake up``'s engine) registers again before each
query: partitions Glue added, dropped or moved (a rewrite's switch) are added, dropped or moved.

Without S3A on the class path, :mod:`eventlake.query.spark_lake` reads the lake instead.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from eventlake.catalog.base import TableSpec
from eventlake.catalog.glue import GlueCatalog
from eventlake.query.spark_lake import create_databases, create_views, ident, table_ddl
from eventlake.storage import hadoop_uri

ADD_BATCH = 200  # partitions per ALTER TABLE ... ADD statement
# what each session has registered: (database, table) -> {partition values: location}
_REGISTERED: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], dict[tuple[str, ...], str]]] = (
    weakref.WeakKeyDictionary()
)


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _spec_clause(spec: TableSpec, values: tuple[str, ...]) -> str:
    keys = ", ".join(f"{ident(k)}={_literal(v)}" for k, v in zip(spec.partition_keys, values, strict=True))
    return f"PARTITION ({keys})"


def register_glue_tables(spark: Any, specs: Sequence[TableSpec], glue: GlueCatalog) -> None:
    """A Parquet table per spec in ``spark``'s in-memory catalog with Glue's partitions, and each
    source's warehouse views over them; again on the same session: brought up to date with Glue."""
    registered = _REGISTERED.setdefault(spark, {})
    create_databases(spark, specs)
    for spec in specs:
        name = f"{ident(spec.database)}.{ident(spec.name)}"
        known = registered.get((spec.database, spec.name))
        if known is None:
            partitioned = f" PARTITIONED BY ({', '.join(map(ident, spec.partition_keys))})"
            spark.sql(
                f"CREATE TABLE IF NOT EXISTS {name} ({table_ddl(spec)}) USING parquet"
                + (partitioned if spec.partition_keys else "")
                + f" LOCATION {_literal(hadoop_uri(spec.location))}"
            )
            known = {}
        if not spec.partition_keys:
            if (spec.database, spec.name) in registered:
                spark.catalog.refreshTable(name)
            registered[(spec.database, spec.name)] = known
            continue
        current = glue.partition_locations(spec.database, spec.name)
        gone = [values for values, where in known.items() if current.get(values) != where]
        new = [values for values, where in current.items() if known.get(values) != where]
        if gone:  # dropped in Glue, or moved (a rewrite's switch): added again below where Glue has it
            clauses = ", ".join(_spec_clause(spec, values) for values in gone)
            spark.sql(f"ALTER TABLE {name} DROP IF EXISTS {clauses}")
        for start in range(0, len(new), ADD_BATCH):
            clauses = " ".join(
                f"{_spec_clause(spec, values)} LOCATION {_literal(hadoop_uri(current[values]))}"
                for values in new[start : start + ADD_BATCH]
            )
            spark.sql(f"ALTER TABLE {name} ADD IF NOT EXISTS {clauses}")
        if (spec.database, spec.name) in registered:  # files a sync added since: listed again
            spark.catalog.refreshTable(name)
        registered[(spec.database, spec.name)] = current
    create_views(spark, specs)
