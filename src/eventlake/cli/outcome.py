"""How a command over sources ends: its exit code from the sources' results, in one place."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from eventlake.sync.protocol.runner import EXIT_BUSY, SourceResult, busy_sources, exit_code


def exit_for(results: Sequence[SourceResult], busy: str = "") -> None:
    """Exit as :func:`eventlake.sync.protocol.runner.exit_code` says (1 when a source failed, else 75 when
    one was busy); return when every source ended. ``busy``: said first when sources were busy
    (``{sources}``: their slugs)."""
    code = exit_code(results)
    if code == EXIT_BUSY and busy:
        click.echo(busy.format(sources=", ".join(busy_sources(results))), err=True)
    if code:
        sys.exit(code)


def exit_busy(message: str) -> None:
    """Exit 75 (try again later) for a one-source command whose source another process holds."""
    click.echo(message, err=True)
    sys.exit(EXIT_BUSY)
