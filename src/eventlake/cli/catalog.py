"""``eventlake catalog ...``: maintenance of the catalog (Hive metastore or Glue)."""

from __future__ import annotations

import click

from eventlake.cli.main import Context, cli, handle_errors, pass_context
from eventlake.cli.render import format_option, render


@cli.group()
def catalog() -> None:
    """Maintain the catalog: databases, tables, columns and partitions of the lake."""


@catalog.command("repair")
@click.option(
    "--source", "sources_", multiple=True, metavar="SLUG", help="Only this source's database (repeatable)."
)
@format_option
@pass_context
@handle_errors
def catalog_repair(ctx: Context, sources_: tuple[str, ...], fmt: str) -> None:
    """Rebuild databases, tables and partitions in the catalog from the lake's schema files and
    partition folders (after losing or moving a metastore). What exists is kept.

    \b
    Example:
      eventlake catalog repair
      eventlake catalog repair --source web --format json
    """
    from eventlake.catalog.repair import repair_catalog
    from eventlake.sync.report import reports_table

    settings = ctx.settings()
    result = repair_catalog(settings, sources_, tables=[reports_table(settings.lake.root)])
    rows = [
        {
            "table": f"{t.database}.{t.table}",
            "created": t.created,
            "columns_added": ", ".join(f"{n} {k}" for n, k in t.columns_added),
            "partitions": t.partitions,
            "location": t.location,
            "notice": t.notice,
        }
        for t in result.tables
    ]
    click.echo(
        f"{len(result.tables)} tables ({result.created} created), {result.partitions} partitions on disk",
        err=True,
    )
    render(["table", "created", "columns_added", "partitions", "location", "notice"], rows, fmt)
