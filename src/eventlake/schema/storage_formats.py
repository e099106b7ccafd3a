"""The Hive storage descriptors of the lake's two file formats, as every catalog records them for
the readers that go by the descriptor (Trino, Athena, Hive, Spark on EMR through Glue): Parquet for
the lake's tables, JSON lines for the sync reports table.

The JSON SerDe is OpenX's (``org.openx.data.jsonserde.JsonSerDe``), which Athena, Trino and EMR read.
No JSON SerDe ships with Spark's Hive client: a Spark session whose metastore holds such a table
takes the table's columns from the metastore instead of instantiating the SerDe
(:data:`SERDES_WITH_METASTORE_SCHEMA`), or Hive logs an error with a stack trace on every look-up
of the table.
"""

from __future__ import annotations

from typing import Any

TEXT_INPUT_FORMAT = "org.apache.hadoop.mapred.TextInputFormat"
TEXT_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
JSON_SERDE = "org.openx.data.jsonserde.JsonSerDe"

# each format's descriptor in Glue's shape (the Hive metastore's StorageDescriptor has the same fields)
FORMATS: dict[str, dict[str, Any]] = {
    "parquet": {
        "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
        "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
        "SerdeInfo": {
            "SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
            "Parameters": {"serialization.format": "1"},
        },
    },
    "json": {
        "InputFormat": TEXT_INPUT_FORMAT,
        "OutputFormat": TEXT_OUTPUT_FORMAT,
        "SerdeInfo": {"SerializationLibrary": JSON_SERDE, "Parameters": {}},
    },
}

# Hive's property naming the SerDes whose tables' columns are the metastore's: Hive 2.3's default
# list (that of Spark's built-in Hive client) and the JSON SerDe
SCHEMA_FROM_METASTORE_PROPERTY = "hive.serdes.using.metastore.for.schema"
SERDES_WITH_METASTORE_SCHEMA = ",".join(
    (
        "org.apache.hadoop.hive.ql.io.orc.OrcSerde",
        "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
        "org.apache.hadoop.hive.serde2.columnar.ColumnarSerDe",
        "org.apache.hadoop.hive.serde2.dynamic_type.DynamicSerDe",
        "org.apache.hadoop.hive.serde2.MetadataTypedColumnsetSerDe",
        "org.apache.hadoop.hive.serde2.columnar.LazyBinaryColumnarSerDe",
        "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
        "org.apache.hadoop.hive.serde2.lazybinary.LazyBinarySerDe",
        JSON_SERDE,
    )
)
