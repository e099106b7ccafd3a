"""The one adapter between eventlake's column types and Arrow/Parquet's (used by the sync's writer).

Timestamps are UTC microseconds (Parquet ``TIMESTAMP(MICROS, isAdjustedToUTC=true)``), which
Spark reads as ``timestamp`` and DuckDB as ``TIMESTAMP WITH TIME ZONE``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from eventlake.schema.types import BIGINT, BOOLEAN, DECIMAL, DOUBLE, STRING, TIMESTAMP

ARROW_TYPES: dict[str, pa.DataType] = {
    BIGINT: pa.int64(),
    BOOLEAN: pa.bool_(),
    DECIMAL: pa.decimal128(38, 6),
    DOUBLE: pa.float64(),  # never inferred: an adopted table's (see eventlake.schema.types)
    STRING: pa.string(),
    TIMESTAMP: pa.timestamp("us", tz="UTC"),
}


def arrow_schema(columns: Sequence[tuple[str, str]]) -> pa.Schema:
    """An Arrow schema for ``(name, type)`` columns, in order."""
    return pa.schema([(name, ARROW_TYPES[kind]) for name, kind in columns])
