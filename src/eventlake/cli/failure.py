"""An error the CLI did not expect (a bug, or a failure nothing translates yet): its full
traceback goes to a file under the state dir, ``logs/error-<time>-<pid>.log`` (a temporary file
when the state dir cannot take it), and the terminal gets one line that names the file."""

from __future__ import annotations

import os
import tempfile
import traceback
from pathlib import Path

from eventlake import __version__, state_layout
from eventlake.storage.local import write_atomic
from eventlake.timestamps import now_utc

LINE_CHARS = 300  # a JVM error's message is a whole stack: its first line is enough here


def one_line(exc: BaseException) -> str:
    """The exception's type and the first line of its message.

    >>> one_line(FileExistsError(17, "File exists"))
    'FileExistsError: [Errno 17] File exists'
    >>> one_line(KeyError("database"))
    "KeyError: 'database'"
    >>> one_line(RuntimeError("An error occurred\\n\\tat org.apache.spark..."))
    'RuntimeError: An error occurred'
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = type(exc).__name__ + (f": {lines[0]}" if lines else "")
    return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 3] + "..."


def write_traceback(exc: BaseException, state_dir: Path | None, command: str) -> Path | None:
    """Write the exception's traceback (owner-only: a message may quote a setting); where, or
    None when no file could be written."""
    at = now_utc()
    text = f"eventlake {__version__}: `{command}` failed at {at.isoformat()}\n\n" + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__)
    )
    if state_dir is not None:
        path = state_layout.error_log(state_dir, at, os.getpid())
        try:
            write_atomic(path, text.encode("utf-8"), mode=0o600)
            return path
        except OSError:
            pass  # the state dir may be what failed
    try:
        fd, name = tempfile.mkstemp(prefix="eventlake-error-", suffix=".log")  # 0600
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        return Path(name)
    except OSError:
        return None
