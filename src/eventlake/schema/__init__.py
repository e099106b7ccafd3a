"""Lake schema rules, pure Python: names (naming), column types (types), flat rows (flatten)."""

from __future__ import annotations

from eventlake.schema.flatten import Collision, Flattened, flatten
from eventlake.schema.naming import (
    MAX_COLUMN_NAME_LENGTH,
    MAX_SEGMENT_TYPE_LENGTH,
    MESSAGE_TYPES,
    column_name,
    is_safe_identifier,
    segment_type,
    short_hash,
    snake_case,
    table_name,
)
from eventlake.schema.types import (
    BIGINT,
    BOOLEAN,
    DECIMAL,
    RESERVED_TYPES,
    STRING,
    TIMESTAMP,
    TYPES,
    Evolution,
    cast_value,
    evolve,
    infer_type,
    json_text,
    merge_types,
    value_type,
)

__all__ = [
    "BIGINT",
    "BOOLEAN",
    "DECIMAL",
    "MAX_COLUMN_NAME_LENGTH",
    "MAX_SEGMENT_TYPE_LENGTH",
    "MESSAGE_TYPES",
    "RESERVED_TYPES",
    "STRING",
    "TIMESTAMP",
    "TYPES",
    "Collision",
    "Evolution",
    "Flattened",
    "cast_value",
    "column_name",
    "evolve",
    "flatten",
    "infer_type",
    "is_safe_identifier",
    "json_text",
    "merge_types",
    "segment_type",
    "short_hash",
    "snake_case",
    "table_name",
    "value_type",
]
