"""Errors of the JVM side."""

from __future__ import annotations

from eventlake.errors import EventLakeError


class MetastoreError(EventLakeError):
    """The metastore could not be reached, created or started."""
