"""The Segment message model: types, validation, enrichment and timestamp correction."""

from eventlake.message_types import MESSAGE_TYPES
from eventlake.spec.message import (
    ENDPOINT_TYPES,
    MAX_MESSAGE_ID,
    Invalid,
    InvalidCode,
    enrich,
    merge_batch_fields,
    validate,
)

__all__ = [
    "ENDPOINT_TYPES",
    "MAX_MESSAGE_ID",
    "MESSAGE_TYPES",
    "Invalid",
    "InvalidCode",
    "enrich",
    "merge_batch_fields",
    "validate",
]
