"""The root error and the structured errors every package derives from.

Errors carry structured fields and build their message from them; they are turned into a
one-line message and an exit code by the CLI, and into an HTTP status by the collector.
"""

from __future__ import annotations


class EventLakeError(Exception):
    """Root of every eventlake error. ``exit_code`` is what the CLI exits with."""

    exit_code = 1
    http_status = 500
    code = "internal_error"

    def __init__(self, message: str, **fields: object) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields

    def __str__(self) -> str:
        return self.message


class ConfigError(EventLakeError):
    """A setting is missing, malformed or out of range. ``setting`` names it."""

    exit_code = 2
    code = "invalid_settings"

    def __init__(self, setting: str, problem: str, fix: str = "") -> None:
        message = f"invalid setting {setting}: {problem}" + (f" ({fix})" if fix else "")
        super().__init__(message, setting=setting, problem=problem)
        self.setting = setting


class UsageError(EventLakeError):
    """The user asked for something that cannot be done as asked (unknown source, ...)."""

    exit_code = 2
    code = "invalid_request"


class PermissionsError(EventLakeError):
    """The lake or the catalog refused access."""

    code = "insufficient_permissions"


class DependencyError(EventLakeError):
    """An optional dependency (pyspark, Java, ...) is missing; the message says how to install it."""

    exit_code = 3
    code = "missing_dependency"
