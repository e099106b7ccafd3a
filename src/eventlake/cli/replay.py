"""``eventlake replay``: rebuild a source's tables for a received-time range from its raw archive."""

from __future__ import annotations

import click

from eventlake.cli.main import Context, cli, handle_errors, pass_context
from eventlake.cli.render import format_option, render


@cli.command()
@click.option("--source", "slug", required=True, metavar="SLUG", help="The source to replay.")
@click.option(
    "--from", "first", metavar="DAY", help="First received day, YYYY-MM-DD (default: the archive's first)."
)
@click.option(
    "--to", "last", metavar="DAY", help="Last received day, included (default: the archive's last)."
)
@click.option(
    "--table", "tables", multiple=True, metavar="TABLE", help="Only this table of the source (repeatable)."
)
@click.option("--no-wait", is_flag=True, help="Fail instead of waiting for a running sync of the source.")
@format_option
@pass_context
@handle_errors
def replay(
    ctx: Context,
    slug: str,
    first: str | None,
    last: str | None,
    tables: tuple[str, ...],
    no_wait: bool,
    fmt: str,
) -> None:
    """Rebuild the source's tables for the messages received from --from to --to.

    Reads the synced archive files of the range again with today's settings and schemas (after
    `schema set-type`, quarantined values come back typed; after a change of database or
    table_prefix, the tables appear under their new names) and replaces each partition of the
    range whole: readers see a partition's old rows or its new ones, never both, never none.
    Deterministic and idempotent; killed, the next sync, compact or replay completes or drops it.
    Reported like a sync, with replay, replay_from and replay_to set.

    \b
    Examples:
      eventlake replay --source web --from 2026-11-01 --to 2026-11-07
      eventlake replay --source web            # the whole archive
      eventlake replay --source web --table track_order_completed --from 2026-11-01
    """
    from eventlake.cli.outcome import exit_busy
    from eventlake.sync import SyncBusyError
    from eventlake.sync.maintenance.replay import ReplayRange, parse_day, run_replay, stale_tables

    settings = ctx.settings()
    wanted = ReplayRange(
        parse_day(first, "--from") if first else None, parse_day(last, "--to") if last else None, tables
    )
    try:
        result = run_replay(settings, slug, wanted, wait=not no_wait)
    except SyncBusyError as exc:
        exit_busy(f"{slug}: {exc}")
    rows = [
        {"source": slug, "table": f"{t.database}.{t.table}", "rows": t.rows, "partitions": len(t.partitions)}
        for t in result.tables
    ]
    click.echo(
        f"{slug}: replay {result.status}, {result.rows} rows in {len(result.tables)} tables, "
        f"{result.duplicates_dropped} duplicates dropped, {result.rejected_messages} messages and "
        f"{result.rejected_values} values quarantined, {result.duration_seconds:.1f} s",
        err=True,
    )
    stale = stale_tables(settings, settings.source(slug))
    if stale:
        click.echo(
            f"{slug}: tables left from earlier settings (not dropped): {', '.join(stale)}; "
            'drop them with `eventlake sql "DROP TABLE <name>"` once nothing reads them',
            err=True,
        )
    render(["source", "table", "rows", "partitions"], rows, fmt)
