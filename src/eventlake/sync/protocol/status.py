"""A source's outcome, one word for every job: the reports table, the console and the CLI show it.

Its own module (no imports): :mod:`.report` writes it and :mod:`.runner`, which reaches the
report through the commit, decides it.
"""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):  # enum.StrEnum once Python 3.10 is dropped
    """A source's outcome, as the reports table, the console and the CLI show it.

    >>> str(Status.PARTIAL), Status.FAILED == "Failed"
    ('Partial Success', True)
    """

    def __str__(self) -> str:
        return self.value

    SUCCESS = "Success"
    PARTIAL = "Partial Success"  # some tables failed (the table limit)
    NOTHING = "Nothing to do"
    SKIPPED = "Skipped: already running"  # another process holds the source's lock (--no-wait)
    DISABLED = "Skipped: disabled"  # a source with enabled = false: collected and archived, not synced
    FAILED = "Failed"


__all__ = ["Status"]
