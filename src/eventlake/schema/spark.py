"""The one adapter between eventlake's column types and Spark's (imported only by Spark code)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import types as T

from eventlake.schema.types import BIGINT, BOOLEAN, DECIMAL, STRING, TIMESTAMP

SPARK_TYPES: dict[str, T.DataType] = {
    BIGINT: T.LongType(),
    BOOLEAN: T.BooleanType(),
    DECIMAL: T.DecimalType(38, 6),
    STRING: T.StringType(),
    TIMESTAMP: T.TimestampType(),
}


def spark_type(kind: str) -> T.DataType:
    return SPARK_TYPES[kind]


def struct_type(columns: Sequence[tuple[str, str]]) -> T.StructType:
    """A nullable Spark struct for ``(name, type)`` columns."""
    return T.StructType([T.StructField(name, spark_type(kind), True) for name, kind in columns])
