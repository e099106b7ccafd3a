"""The web console: sync history, health, freshness, schemas, quarantine and a query box."""

from eventlake.console.server import Console, run_console

__all__ = ["Console", "run_console"]
