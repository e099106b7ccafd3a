"""The raw archive: the collector's fsynced spool, sealing into gzip NDJSON files, and reading them.

Layout (Segment's S3 destination): ``<lake>/segment-logs/<source-id>/<received-day-ms>/<file>.gz``.
"""

from eventlake.archive.errors import (
    SpoolBusyError,
    SpoolClosedError,
    SpoolError,
    SpoolLockedError,
    SpoolWriteError,
)
from eventlake.archive.files import ArchiveFile, list_archive_files, read_archive_lines
from eventlake.archive.spool import Spool, SpoolStats

__all__ = [
    "ArchiveFile",
    "Spool",
    "SpoolBusyError",
    "SpoolClosedError",
    "SpoolError",
    "SpoolLockedError",
    "SpoolStats",
    "SpoolWriteError",
    "list_archive_files",
    "read_archive_lines",
]
