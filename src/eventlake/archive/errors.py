"""Errors of the collector's spool; the HTTP app maps them to a status through ``http_status``."""

from __future__ import annotations

import os
import re
from pathlib import Path

from eventlake.errors import EventLakeError
from eventlake.storage import Location

_SECRET_NAME = re.compile(r"SECRET|TOKEN|PASSWORD|CREDENTIAL|ACCOUNT_KEY|CONNECTION_STRING", re.IGNORECASE)
_MAX_PROBLEM_CHARS = 300


class SpoolError(EventLakeError):
    """Something went wrong with the local write-ahead spool."""

    http_status = 503
    code = "spool_unavailable"


class SpoolLockedError(SpoolError):
    """Another collector already owns this spool directory."""

    exit_code = 2
    code = "spool_locked"

    def __init__(self, spool_dir: Path, holder: str = "") -> None:
        who = f" (pid {holder})" if holder else ""
        super().__init__(
            f"spool directory {spool_dir} is in use by another eventlake collector{who}; stop it, "
            "or give this one its own [lake] state_dir",
            spool_dir=str(spool_dir),
            holder=holder,
        )
        self.spool_dir = spool_dir


class SpoolClosedError(SpoolError):
    """The spool is closing or closed: nothing more is accepted."""

    code = "shutting_down"

    def __init__(self, spool_dir: Path) -> None:
        super().__init__(
            f"the collector is shutting down (spool {spool_dir} is closed); retry later",
            spool_dir=str(spool_dir),
        )


class SpoolWriteError(SpoolError):
    """Writing or fsyncing a spool segment failed: the messages were not stored."""

    code = "spool_write_failed"

    def __init__(self, segment: Path, problem: str) -> None:
        super().__init__(
            f"could not store the messages durably in {segment}: {problem}; retry later",
            segment=str(segment),
            problem=problem,
        )


class SpoolBusyError(SpoolError):
    """More bytes wait for the disk than the spool accepts: the client should retry later."""

    http_status = 429
    code = "overloaded"
    retry_after_seconds = 1

    def __init__(self, pending_bytes: int, limit: int) -> None:
        super().__init__(
            f"the collector is overloaded ({pending_bytes} bytes wait for the disk, limit {limit}); "
            f"retry after {self.retry_after_seconds} s",
            pending_bytes=pending_bytes,
            limit=limit,
        )


class SuppressionError(EventLakeError):
    """A suppression list cannot be read or written, or a userId given to it is not valid."""

    def __init__(self, path: Location | None, problem: str) -> None:
        where = f"suppression list {path}: " if path is not None else ""
        super().__init__(f"{where}{problem}", path=str(path) if path else None, problem=problem)
        self.path = path


class SpoolFullError(SpoolError):
    """More unsealed bytes sit in the spool than allowed: sealing into the archive falls behind."""

    http_status = 429
    code = "overloaded"
    retry_after_seconds = 5

    def __init__(self, spool_bytes: int, limit: int) -> None:
        super().__init__(
            f"the collector is overloaded ({spool_bytes} bytes in its spool wait to be sealed into the "
            f"archive, limit {limit}; if the archive's store is unreachable, its log says why); "
            f"retry after {self.retry_after_seconds} s",
            spool_bytes=spool_bytes,
            limit=limit,
        )


class ArchiveUploadError(SpoolError):
    """A sealed segment could not be written to the archive's store (down, throttling, refusing):
    the segment stays in the spool and is retried. The message names the object and the store's
    error, never a credential."""

    code = "archive_upload_failed"

    def __init__(self, target: Location, error: BaseException) -> None:
        problem = describe_store_error(error)
        super().__init__(
            f"could not write {target} to the archive: {problem}", target=str(target), problem=problem
        )
        self.target = target
        self.problem = problem


class DamagedArchiveFileError(EventLakeError):
    """An archive file is not whole gzip (an interrupted copy, a bad disk, another format): none of
    its lines can be trusted. A sync quarantines it by name (see :mod:`eventlake.sync.protocol.damaged`)."""

    code = "archive_file_damaged"

    def __init__(
        self, path: Location | str | None, problem: str, then: str = "run `eventlake sync --rescan`"
    ) -> None:
        where = f"archive file {path}" if path is not None else "an archive file"
        super().__init__(
            f"{where} is damaged, not a whole gzip file ({problem}): restore it (copy it again, or "
            f"from a backup), then {then}",
            path=str(path) if path is not None else None,
            problem=problem,
        )
        self.path = path
        self.problem = problem


def describe_store_error(error: BaseException) -> str:
    """A one-line, credential-free account of a store's error: the S3 error code and HTTP status
    of a ``ClientError``, else the exception's type and message; the values of secret-looking
    environment variables (``*SECRET*``, ``*TOKEN*``, ...) are masked should a message echo one."""
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        response = {}
    details = response.get("Error", {})
    if details.get("Code"):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", "?")
        text = f"{details['Code']} (HTTP {status}): {details.get('Message', '')}".rstrip(": ")
    else:
        text = f"{type(error).__name__}: {error}"
    for name, value in os.environ.items():
        if len(value) >= 8 and _SECRET_NAME.search(name) and value in text:
            text = text.replace(value, "***")
    text = " ".join(text.split())
    return text if len(text) <= _MAX_PROBLEM_CHARS else text[: _MAX_PROBLEM_CHARS - 3] + "..."
