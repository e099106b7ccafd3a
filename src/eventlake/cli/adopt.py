"""``eventlake adopt``: make a Segment Data Lakes lake the history of a source, in place."""

from __future__ import annotations

import click

from eventlake.cli.main import Context, cli, handle_errors, pass_context
from eventlake.cli.render import format_option, render

COLUMNS = [
    "folder", "table", "segment_type", "in_catalog", "columns", "partitions", "new_partitions",
    "partitions_to_seed",
]  # fmt: skip


@cli.command()
@click.option("--source", "slug", required=True, metavar="SLUG", help="The source whose SDL data to adopt.")
@click.option("--dry-run", is_flag=True, help="List what would be adopted; change nothing.")
@click.option(
    "--track-tables",
    type=click.Choice(["track_", "tracks_"]),
    default=None,
    help="What SDL put before an event's name in track tables the catalog lacks "
    "(default: what the catalog's track tables show, else track_).",
)
@click.option("--no-wait", is_flag=True, help="Fail instead of waiting for a running sync of the source.")
@format_option
@pass_context
@handle_errors
def adopt(ctx: Context, slug: str, dry_run: bool, track_tables: str | None, no_wait: bool, fmt: str) -> None:
    """Adopt a Segment Data Lakes (SDL) lake in place as the history of source SLUG.

    The source's lake root must be the folder or bucket prefix holding SDL's segment-data/, its id
    SDL's source id (segment-data/data/<id>/), its date_partition SDL's layout and its database
    SDL's Glue database. Nothing is copied: each segment_type= folder keeps its files, its table
    (the catalog's table over the folder, found by location, with its columns and types) and its
    partitions, registered where they are; schema files are written for DuckDB and the console;
    the message ids of the partitions inside the dedupe window seed the dedupe index. Later syncs
    append to the same tables and folders under SDL's names. A rerun adopts only what is new
    (SDL still syncing) and finishes an interrupted adoption.

    \b
    Examples:
      eventlake adopt --source ios --dry-run
      eventlake adopt --source ios
      eventlake adopt --source ios --track-tables tracks_   # no Glue tables: name them tracks_<event>
    """
    from eventlake.progress import say
    from eventlake.sync.maintenance.adopt import adopt_source

    settings = ctx.settings()
    result = adopt_source(
        settings, slug, dry_run=dry_run, track_tables=track_tables or "", wait=not no_wait, say=say
    )
    render(COLUMNS, [t.row() for t in result.tables], fmt)
    partitions = sum(len(t.new_partitions) for t in result.tables)
    seeds = sum(len(t.seed) for t in result.tables)
    if dry_run:
        click.echo(
            f"{slug}: would adopt {len(result.tables)} tables into {result.database} "
            f"({partitions} partitions to register, {seeds} to seed the dedupe index from)"
            + ("" if result.work else ": nothing new to adopt"),
            err=True,
        )
    else:
        click.echo(
            f"{slug}: adopted {len(result.tables)} tables into {result.database}, {partitions} partitions "
            f"registered, {result.seeded_ids} message ids in the dedupe index",
            err=True,
        )
