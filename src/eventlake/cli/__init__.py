"""The ``eventlake`` command."""

from eventlake.cli.main import cli, main

__all__ = ["cli", "main"]
