"""Where each segment type of a source lives: its folder (``segment_type=<folder>``) and its table.

eventlake's own names: the folder is the segment type (``track_order_completed``) and the table
is the source's ``table_prefix`` + the segment type. A lake adopted from Segment Data Lakes keeps
SDL's names instead (``eventlake adopt``): its track folders hold the event alone
(``segment_type=order_completed``) and its tables are whatever SDL registered in Glue
(``track_order_completed``, ``tracks_order_completed``, ``ios_track_order_completed``, ...). The
adoption records each adopted segment type's folder and table, and the convention they follow for
event types that appear later; the sync writes through :class:`TableNames`, so it appends to the
adopted tables and names new ones as SDL would have.

>>> adopted = {"track_page_viewed": ("page_viewed", "ios_tracks_page_viewed")}
>>> names = TableNames(prefix="ios_", adopted=adopted, track_folder="", track_table="tracks_")
>>> names.folder("track_page_viewed"), names.table("track_page_viewed")
('page_viewed', 'ios_tracks_page_viewed')
>>> names.folder("track_signed_up"), names.table("track_signed_up"), names.table("identify")
('signed_up', 'ios_tracks_signed_up', 'ios_identify')
>>> TableNames().folder("track_signed_up"), TableNames("web_").table("track_signed_up")
('track_signed_up', 'web_track_signed_up')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from eventlake.message_types import MESSAGE_TYPES
from eventlake.schema.naming import is_safe_identifier, table_name

TRACK = "track_"  # how eventlake's segment type of a track call starts
TRACK_TABLE_STYLES = ("track_", "tracks_")  # what SDL's track tables put before the event (docs differ)


@dataclass(frozen=True)
class TableNames:
    prefix: str = ""  # before every table name (the source's table_prefix, or what SDL's tables had)
    adopted: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # segment type -> (folder, table)
    track_folder: str = TRACK  # before a track event's name in the folder of a new event type
    track_table: str = TRACK  # before it in the table's name (after the prefix)

    def folder(self, segment_type: str) -> str:
        """The ``segment_type=`` folder value of a segment type."""
        if segment_type in self.adopted:
            return self.adopted[segment_type][0]
        if segment_type.startswith(TRACK):
            return self.track_folder + segment_type[len(TRACK) :]
        return segment_type

    def table(self, segment_type: str) -> str:
        """The table of a segment type (without its database)."""
        if segment_type in self.adopted:
            return self.adopted[segment_type][1]
        if segment_type.startswith(TRACK):
            return table_name(self.track_table + segment_type[len(TRACK) :], self.prefix)
        return table_name(segment_type, self.prefix)

    def segment_type_of_folder(self, folder: str) -> str:
        """The segment type whose ``segment_type=`` folder is ``folder`` (the inverse of :meth:`folder`).

        >>> names = TableNames("ios_", {"identify": ("identify", "ios_identify")}, "", "tracks_")
        >>> names.segment_type_of_folder("identify"), names.segment_type_of_folder("page_viewed")
        ('identify', 'track_page_viewed')
        >>> TableNames().segment_type_of_folder("track_signed_up")
        'track_signed_up'
        """
        for segment_type, (name, _) in self.adopted.items():
            if name == folder:
                return segment_type
        return folder if self.track_folder else folder_segment_type(folder)  # eventlake's folders, or SDL's

    def segment_type_of_table(self, table: str) -> str | None:
        """The segment type whose table is ``table`` (the inverse of :meth:`table`); None for a name
        no segment type of this source gives.

        >>> names = TableNames("ios_", {"identify": ("identify", "ios_identify")}, "", "tracks_")
        >>> names.segment_type_of_table("ios_identify"), names.segment_type_of_table("ios_tracks_signed_up")
        ('identify', 'track_signed_up')
        >>> web = TableNames("web_")
        >>> web.segment_type_of_table("web_page"), web.segment_type_of_table("page")
        ('page', None)
        """
        for segment_type, (_, name) in self.adopted.items():
            if name == table:
                return segment_type
        if not table.startswith(self.prefix):
            return None
        rest = table[len(self.prefix) :]
        segment_type = TRACK + rest[len(self.track_table) :] if rest.startswith(self.track_table) else rest
        return segment_type if segment_type and self.table(segment_type) == table else None

    def to_json(self) -> bytes:
        document = {
            "prefix": self.prefix,
            "track_folder": self.track_folder,
            "track_table": self.track_table,
            "adopted": {t: {"folder": f, "table": n} for t, (f, n) in sorted(self.adopted.items())},
        }
        return orjson.dumps(document, option=orjson.OPT_INDENT_2)

    @classmethod
    def from_json(cls, data: bytes) -> TableNames:
        document: dict[str, Any] = orjson.loads(data)
        adopted = {t: (entry["folder"], entry["table"]) for t, entry in document["adopted"].items()}
        for segment_type, (folder, table) in adopted.items():
            if not (
                is_safe_identifier(segment_type) and is_safe_identifier(folder) and is_safe_identifier(table)
            ):
                raise ValueError(f"unsafe name in the table names of {segment_type!r}: {folder!r}, {table!r}")
        return cls(document["prefix"], adopted, document["track_folder"], document["track_table"])


def folder_segment_type(folder: str) -> str:
    """eventlake's segment type of an SDL folder: a call type's folder is its type; any other folder
    holds a track event, named by the event alone (SDL's ``segment_type=page_viewed``).

    >>> folder_segment_type("identify"), folder_segment_type("page_viewed")
    ('identify', 'track_page_viewed')
    """
    return folder if folder in MESSAGE_TYPES and folder != "track" else TRACK + folder
