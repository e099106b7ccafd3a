"""Lake names: snake_case keys, column names, ``segment_type`` values and table names.

Every name this module returns matches ``^[a-z0-9_]+$`` so it can be used in SQL without quoting
surprises. Keys are converted with the rules of Segment's ``go-snakecase`` (ASCII only: every other
character, including non-ASCII letters, is a separator).

>>> column_name(["context", "library", "name"])
'context_library_name'
>>> segment_type("track", "Order Completed")
'track_order_completed'
>>> table_name("track_order_completed", prefix="web_")
'web_track_order_completed'
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from functools import lru_cache

from eventlake.message_types import MESSAGE_TYPES

__all__ = [
    "MAX_COLUMN_NAME_LENGTH",
    "MAX_SEGMENT_TYPE_LENGTH",
    "MESSAGE_TYPES",
    "PARTITION_NAMES",
    "SHADOWED_PREFIX",
    "column_name",
    "is_safe_identifier",
    "segment_type",
    "short_hash",
    "snake_case",
    "table_name",
]

MAX_COLUMN_NAME_LENGTH = 250  # Glue's limit
MAX_SEGMENT_TYPE_LENGTH = 200
# a column named as a partition key would shadow it: the column gets this prefix (``year`` -> ``_year``)
SHADOWED_PREFIX = "_"
PARTITION_NAMES = frozenset({"year", "month", "day", "hr", "segment_type", "run_id"})

_SAFE = re.compile(r"[a-z0-9_]+")
_HASH_CHARS = 8
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DIGIT = frozenset("0123456789")
_LOWER_OR_DIGIT = _LOWER | _DIGIT
_UPPER_OR_DIGIT = _UPPER | _DIGIT
_ALNUM = _LOWER | _UPPER | _DIGIT


@lru_cache(maxsize=65536)
def snake_case(name: str) -> str:
    """``name`` in snake_case, exactly as Segment's go-snakecase converts it.

    Only ASCII letters and digits survive; runs of anything else separate words. A lowercase
    letter followed by an uppercase one starts a new word; a run of capitals is one word.
    Digits stick to the word they follow. The result may be empty.

    >>> snake_case("sampleText")
    'sample_text'
    >>> snake_case("SAMPLE 2 TEXT")
    'sample_2_text'
    >>> snake_case("___$$Base64Encode")
    'base64_encode'
    >>> snake_case("CStringRef")
    'cstring_ref'
    >>> snake_case("2FA Enabled")
    '2fa_enabled'
    >>> snake_case("f_pX9")
    'f_p_x9'
    >>> snake_case("something.com")
    'something_com'
    >>> snake_case("AddressLine1")
    'address_line1'
    >>> snake_case("日本語")
    ''
    """
    length = len(name)
    idx = 0
    has_lower = False
    has_underscore = False
    lower_since_underscore = False
    # Leading run that needs no change: lowercase, digits, and single underscores inside it.
    while idx < length:
        char = name[idx]
        if char in _LOWER:
            has_lower = True
            if has_underscore:
                lower_since_underscore = True
        elif char in _DIGIT:
            pass
        elif char == "_" and 0 < idx < length - 1 and name[idx + 1] in _LOWER_OR_DIGIT:
            has_underscore = True
            lower_since_underscore = False
        else:
            break
        idx += 1
    if idx == length:
        return name

    out = [name[:idx]]
    if name[idx] in _UPPER and (not has_lower or (has_underscore and not lower_since_underscore)):
        # Capitals right after an all-digit (or digits-since-underscore) start continue that word.
        idx = _take_word(name, idx, out)
    while idx < length:
        if name[idx] not in _ALNUM:
            idx += 1
            continue
        if len(out) > 1 or out[0]:
            out.append("_")
        idx = _take_word(name, idx, out)
    return "".join(out)


def _take_word(name: str, idx: int, out: list[str]) -> int:
    """Append one word starting at ``idx`` (capitals and digits, then lowercase and digits)."""
    length = len(name)
    start = idx
    while idx < length and name[idx] in _UPPER_OR_DIGIT:
        idx += 1
    out.append(name[start:idx].lower())
    start = idx
    while idx < length and name[idx] in _LOWER_OR_DIGIT:
        idx += 1
    out.append(name[start:idx])
    return idx


def short_hash(text: str) -> str:
    """The first 8 hex characters of the SHA-1 of ``text`` (UTF-8): a stable name suffix.

    >>> short_hash("")
    'da39a3ee'
    """
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]


def _limit(name: str, max_length: int) -> str:
    """``name`` if short enough, else its head plus ``_`` and the hash of the whole name."""
    if len(name) <= max_length:
        return name
    head = name[: max_length - _HASH_CHARS - 1].rstrip("_")
    return f"{head}_{short_hash(name)}"


def column_name(path: Sequence[str]) -> str:
    """The column of a (nested) key path: each key snake_cased, joined with ``_``.

    Keys that snake_case to nothing are dropped. When nothing is left the name is ``_`` and a
    hash of the path; names over 250 characters keep their first 241 characters, then ``_`` and
    a hash of the whole name.

    >>> column_name(["properties", "itemCount"])
    'properties_item_count'
    >>> column_name(["integrations", "All"])
    'integrations_all'
    >>> column_name(["traits", "$$", "email"])
    'traits_email'
    >>> column_name(["$$"])
    '_d3dfb9de'
    >>> len(column_name(["x" * 300]))
    250
    """
    name = "_".join(part for part in map(snake_case, path) if part)
    if not name:
        return "_" + short_hash(json.dumps(list(path), ensure_ascii=False))
    return _limit(name, MAX_COLUMN_NAME_LENGTH)


def segment_type(message_type: str, event: str | None) -> str:
    """The ``segment_type`` (table) of a message: its type, or ``track_<event>`` for track calls.

    An event name with no ASCII letter or digit (or no event at all) becomes ``track_`` and a
    hash of the name. The result is at most 200 characters (longer: head, ``_``, hash).

    >>> segment_type("identify", None)
    'identify'
    >>> segment_type("track", "Order Completed")
    'track_order_completed'
    >>> segment_type("track", "日本語")
    'track_c12140a0'
    >>> segment_type("batch", None)
    Traceback (most recent call last):
    ...
    ValueError: unknown message type 'batch'
    """
    if message_type not in MESSAGE_TYPES:
        raise ValueError(f"unknown message type {message_type!r}")
    if message_type != "track":
        return message_type
    event = "" if event is None else str(event)
    snake = snake_case(event)
    name = "track_" + (snake if snake else short_hash(event))
    return _limit(name, MAX_SEGMENT_TYPE_LENGTH)


def table_name(segment_type: str, prefix: str = "") -> str:
    """The table of a ``segment_type``: ``prefix + segment_type``.

    Raises ValueError when the result is not a safe identifier (a bug upstream, never user input).

    >>> table_name("identify")
    'identify'
    >>> table_name("page", "app_")
    'app_page'
    """
    name = prefix + segment_type
    if not is_safe_identifier(name):
        raise ValueError(f"unsafe table name {name!r}")
    return name


def is_safe_identifier(name: object) -> bool:
    """Whether ``name`` is a non-empty string of ``[a-z0-9_]`` only.

    >>> is_safe_identifier("track_order_completed"), is_safe_identifier("a-b"), is_safe_identifier("a\\n")
    (True, False, False)
    """
    return isinstance(name, str) and _SAFE.fullmatch(name) is not None
