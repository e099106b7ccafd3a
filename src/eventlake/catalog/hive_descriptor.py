"""What readers other than Spark see of a JSON table (the sync reports) in a Hive metastore.

Spark keeps a data source table (``CREATE TABLE ... USING json``) in the metastore with a
placeholder descriptor: one column ``col array<string>``, SequenceFile, a location of
``<warehouse>/<table>-__PLACEHOLDER__``; it reads the table by its own properties
(``spark.sql.sources.provider``, ``spark.sql.sources.schema``, the ``path`` SerDe parameter). Trino,
Athena and Hive go by the descriptor: Trino saw only ``col`` and failed "is not a Sequence File".

The table stays a Spark data source table (Spark reads it with its own JSON reader: no SerDe class
needed), and eventlake writes its descriptor and its partitions' as in Glue: the real columns, the
table's location, JSON text with the OpenX SerDe (:data:`eventlake.schema.storage_formats.FORMATS`).

These writes go through the metastore's client (its Thrift API objects), not Hive's table layer:
that one instantiates the table's SerDe to validate every change, and no JSON SerDe is on Spark's
class path (``ClassNotFoundException``). For the same reason Spark cannot add columns to such a
table (``ALTER TABLE ADD COLUMNS``): :func:`describe_json_table` appends them, to the descriptor
and to Spark's schema property. Partitions that Spark adds later copy the table's descriptor (its
columns from the metastore: ``hive.serdes.using.metastore.for.schema``, see
:func:`eventlake.jvm.session.spark_conf`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import SparkSession

from eventlake.catalog.base import Column
from eventlake.schema.storage_formats import FORMATS

SCHEMA_PROPERTY = "spark.sql.sources.schema"  # Spark's table schema, JSON, in parts when long
SCHEMA_THRESHOLD_CONF = "spark.sql.sources.schemaStringLengthThreshold"
PARTITION_ALTER_BATCH = 500


def is_json_table(spark: SparkSession, database: str, table: str) -> bool:
    external = spark._jsparkSession.sharedState().externalCatalog()
    provider = external.getTable(database, table).provider()
    return bool(provider.isDefined() and provider.get().lower() == "json")


def describe_json_table(
    spark: SparkSession, msc: Any, database: str, table: str, added: Sequence[Column] = ()
) -> bool:
    """Write the Hive descriptor of the JSON data source table ``database.table`` (and of each of its
    partitions) with Spark's columns and ``added`` after them, its location and the JSON text format;
    ``added`` also goes into Spark's schema. ``msc``: the caller's metastore client
    (:meth:`eventlake.catalog.hive.HiveCatalog._metastore_client`). Two metastore calls when all is
    so already; returns whether anything was written."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None, "the SparkContext is stopped"
    spark_table = spark._jsparkSession.sharedState().externalCatalog().getTable(database, table)
    data = [(f.name(), f.dataType().catalogString()) for f in _fields(spark_table.dataSchema())]
    have = {name for name, _ in data}
    added = [(name, kind) for name, kind in added if name not in have]
    columns = [*data, *added]
    location = spark_table.location().toString()
    hive_table = msc.getTable(database, table)
    descriptor = hive_table.getSd()
    fields = _field_schemas(jvm, columns)
    if _readable(descriptor, fields) and descriptor.getLocation() == location and not added:
        return False
    now = _columns(descriptor)
    _set_format(descriptor)
    descriptor.setLocation(location)
    if added:
        partition_keys = [(k.getName(), k.getType()) for k in hive_table.getPartitionKeys()]
        _set_spark_schema(spark, hive_table.getParameters(), [*columns, *partition_keys])
    if now != columns[: len(now)]:
        # a metastore refusing type changes (Hive's default) takes no column in place of the
        # placeholder `col array<string>`: no column first, then the table's
        descriptor.setCols(jvm.java.util.ArrayList())
        msc.alter_table(database, table, hive_table)
    descriptor.setCols(fields)
    msc.alter_table(database, table, hive_table)
    partitions = msc.listPartitions(database, table, -1)
    stale = [
        p for p in (partitions.get(i) for i in range(partitions.size())) if not _readable(p.getSd(), fields)
    ]
    for start in range(0, len(stale), PARTITION_ALTER_BATCH):
        batch = jvm.java.util.ArrayList()
        for partition in stale[start : start + PARTITION_ALTER_BATCH]:
            _set_format(partition.getSd())
            partition.getSd().setCols(fields)
            batch.add(partition)
        msc.alter_partitions(database, table, batch)
    spark.catalog.refreshTable(f"`{database}`.`{table}`")
    return True


def _fields(schema: Any) -> list[Any]:
    return [schema.apply(i) for i in range(schema.length())]


def _columns(descriptor: Any) -> list[Column]:
    cols = descriptor.getCols()
    return [(c.getName(), c.getType()) for c in cols] if cols is not None else []


def _readable(descriptor: Any, fields: Any) -> bool:
    """Whether ``descriptor`` has the JSON text format and these columns (``fields``: a Java list of
    ``FieldSchema``, compared in the JVM: one call, not two per column)."""
    json = FORMATS["json"]
    cols = descriptor.getCols()
    return bool(
        descriptor.getInputFormat() == json["InputFormat"]
        and descriptor.getOutputFormat() == json["OutputFormat"]
        and descriptor.getSerdeInfo().getSerializationLib() == json["SerdeInfo"]["SerializationLibrary"]
        and cols is not None
        and cols.equals(fields)
    )


def _set_format(descriptor: Any) -> None:
    """The JSON text format; the SerDe's parameters stay (Spark's ``path`` is the table's location)."""
    json = FORMATS["json"]
    descriptor.setInputFormat(json["InputFormat"])
    descriptor.setOutputFormat(json["OutputFormat"])
    descriptor.getSerdeInfo().setSerializationLib(json["SerdeInfo"]["SerializationLibrary"])


def _field_schemas(jvm: Any, columns: Sequence[Column]) -> Any:
    fields = jvm.java.util.ArrayList()
    for name, kind in columns:
        fields.add(jvm.org.apache.hadoop.hive.metastore.api.FieldSchema(name, kind, None))
    return fields


def _set_spark_schema(spark: SparkSession, parameters: Any, columns: Sequence[Column]) -> None:
    """Spark's schema property (data columns, then partition columns) as Spark writes it: one JSON
    value, or ``numParts`` and ``part.<n>`` past ``spark.sql.sources.schemaStringLengthThreshold``."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None, "the SparkContext is stopped"
    ddl = ", ".join("`" + name.replace("`", "``") + "` " + kind for name, kind in columns)
    text = jvm.org.apache.spark.sql.types.StructType.fromDDL(ddl).json()
    for key in list(parameters.keySet().toArray()):
        if key in (SCHEMA_PROPERTY, f"{SCHEMA_PROPERTY}.numParts") or key.startswith(
            f"{SCHEMA_PROPERTY}.part."
        ):
            parameters.remove(key)
    threshold = int(spark.conf.get(SCHEMA_THRESHOLD_CONF, "4000") or 4000)
    if len(text) <= threshold:
        parameters.put(SCHEMA_PROPERTY, text)
        return
    parts = [text[i : i + threshold] for i in range(0, len(text), threshold)]
    parameters.put(f"{SCHEMA_PROPERTY}.numParts", str(len(parts)))
    for index, part in enumerate(parts):
        parameters.put(f"{SCHEMA_PROPERTY}.part.{index}", part)


def read_descriptor(msc: Any, database: str, table: str) -> dict[str, Any]:
    """What readers that go by the metastore's descriptor (Trino, Athena, Hive) see of a table:
    columns, formats, SerDe and location of the table and of each partition (by its values), read
    with the metastore client ``msc``."""

    def described(descriptor: Any) -> dict[str, Any]:
        return {
            "columns": _columns(descriptor),
            "input_format": descriptor.getInputFormat(),
            "serde": descriptor.getSerdeInfo().getSerializationLib(),
            "location": descriptor.getLocation(),
        }

    found = described(msc.getTable(database, table).getSd())
    partitions = msc.listPartitions(database, table, -1)
    found["partitions"] = {
        "/".join(p.getValues()): described(p.getSd())
        for p in (partitions.get(i) for i in range(partitions.size()))
    }
    return found
