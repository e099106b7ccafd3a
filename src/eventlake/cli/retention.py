"""``eventlake retention``: delete archive files and table partitions past ``[retention]``."""

from __future__ import annotations

import click

from eventlake.cli.main import Context, cli, handle_errors, pass_context
from eventlake.cli.render import format_option, render

COLUMNS = ["source", "kind", "what", "files", "mb"]


@cli.command()
@click.option("--source", "sources_", multiple=True, metavar="SLUG", help="Only this source (repeatable).")
@click.option("--dry-run", is_flag=True, help="List what would be deleted; delete nothing.")
@click.option("--no-wait", is_flag=True, help="Skip a source whose sync is running instead of waiting.")
@format_option
@pass_context
@handle_errors
def retention(ctx: Context, sources_: tuple[str, ...], dry_run: bool, no_wait: bool, fmt: str) -> None:
    """Delete archive days and table partitions older than [retention] allows.

    [retention] archive_days: archive files whose received day ended more than that many days ago,
    once a sync has read them (an unsynced file is kept and counted). [retention] table_days:
    partitions of the source's tables whose hour (or day) ended more than that many days ago,
    files and catalog entries. Both are off (0) by default; `eventlake up` applies them every
    [retention] interval_seconds. With archive_days, the dedupe index's ids older than the archive
    kept (by the source's dedupe_window_days and a day) go too. Lists every archive day, partition
    and index day it deletes.

    \b
    Examples:
      eventlake retention --dry-run
      eventlake retention --source web --format json
    """
    from eventlake.cli.outcome import exit_for
    from eventlake.sync.maintenance.retention import apply_retention

    results = apply_retention(ctx.settings(), sources_, dry_run=dry_run, wait=not no_wait)
    rows = []
    for result in results:
        for item in result.expired:
            rows.append(
                {
                    "source": item.source,
                    "kind": item.kind,
                    "what": item.what,
                    "files": item.files,
                    "mb": round(item.bytes / 1e6, 3),
                }  # fmt: skip
            )
        archive = sum(1 for e in result.expired if e.kind == "archive")
        tables = sum(1 for e in result.expired if e.kind == "table")
        index = sum(1 for e in result.expired if e.kind == "dedupe")
        verb = "would delete" if dry_run else "deleted"
        click.echo(
            f"{result.source}: {result.status}, {verb} {archive} archive days and {tables} table partitions"
            + (" (their files after sync.rewrite_grace_minutes)" if tables and not dry_run else "")
            + (f", {index} days of the dedupe index" if index else "")
            + (f", kept {result.unsynced_files} unsynced archive files" if result.unsynced_files else "")
            + (f", kept {result.damaged_files} damaged archive files" if result.damaged_files else "")
            + (f" ({result.error})" if result.error else ""),
            err=True,
        )
    render(COLUMNS, rows, fmt)
    exit_for(results)
