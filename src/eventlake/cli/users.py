"""``eventlake users delete``: the right to erasure, across a source's lake and archive."""

from __future__ import annotations

import click

from eventlake.cli.main import Context, cli, handle_errors, pass_context
from eventlake.cli.render import format_option, render

COLUMNS = [
    "source", "status", "linked_anonymous_ids", "archive_messages_deleted", "archive_files_rewritten",
    "rows_deleted", "quarantine_rows_deleted", "table_files_rewritten",
]  # fmt: skip


@cli.group()
def users() -> None:
    """Users' data in the lake (deletion for the right to erasure)."""


@users.command("delete")
@click.argument("user_id")
@click.option("--source", "sources_", multiple=True, metavar="SLUG", help="Only this source (repeatable).")
@click.option(
    "--by", "requested_by", metavar="NAME", help="Who asked, for the audit record (default: OS user)."
)
@click.option("--no-wait", is_flag=True, help="Skip a source whose sync is running instead of waiting.")
@format_option
@pass_context
@handle_errors
def users_delete(
    ctx: Context, user_id: str, sources_: tuple[str, ...], requested_by: str | None, no_wait: bool, fmt: str
) -> None:
    """Delete every message of USER_ID from the lake: tables, quarantine and raw archive.

    Also the messages of the anonymous ids its identify and alias calls linked to it. USER_ID is
    suppressed first (the collector blocks its new messages, a sync drops any it finds). Each file
    holding the user's data is rewritten without it; readers of either engine see a partition
    before or after, never half. An audit record (who, by whom, when, counts) goes to
    segment-data/_state/deletions/<source-id>/. Killed, run it again: it finishes the work; run
    twice, the second deletes nothing.

    \b
    Examples:
      eventlake users delete u-1234
      eventlake users delete u-1234 --source web --by "dpo@example.com" --format json
    """
    from eventlake.cli.outcome import exit_for
    from eventlake.sync.maintenance.erase import delete_user

    results = delete_user(ctx.settings(), user_id, sources_, requested_by=requested_by, wait=not no_wait)
    rows = [{column: getattr(result, column) for column in COLUMNS} for result in results]
    for result in results:
        if result.error:
            click.echo(f"{result.source}: {result.status} ({result.error})", err=True)
    render(COLUMNS, rows, fmt)
    exit_for(results)
