"""The raw archive: the collector's fsynced spool, sealing into gzip NDJSON files, and reading them.

Layout (Segment's S3 destination): ``<lake>/segment-logs/<source-id>/<received-day-ms>/<file>.gz``,
on the lake's store (a local directory or a bucket).
"""

from eventlake.archive.errors import (
    ArchiveUploadError,
    DamagedArchiveFileError,
    SpoolBusyError,
    SpoolClosedError,
    SpoolError,
    SpoolFullError,
    SpoolLockedError,
    SpoolWriteError,
    SuppressionError,
)
from eventlake.archive.files import (
    ArchiveFile,
    FileLines,
    archive_content,
    archive_lines,
    list_archive_files,
    read_archive_lines,
)
from eventlake.archive.spool import Spool, SpoolStats
from eventlake.archive.suppression import SuppressedUser, SuppressionCache, SuppressionList

__all__ = [
    "ArchiveFile",
    "ArchiveUploadError",
    "DamagedArchiveFileError",
    "FileLines",
    "Spool",
    "SpoolBusyError",
    "SpoolClosedError",
    "SpoolError",
    "SpoolFullError",
    "SpoolLockedError",
    "SpoolStats",
    "SpoolWriteError",
    "SuppressedUser",
    "SuppressionCache",
    "SuppressionError",
    "SuppressionList",
    "archive_content",
    "archive_lines",
    "list_archive_files",
    "read_archive_lines",
]
