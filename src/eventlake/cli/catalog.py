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
    partition folders (after losing or moving a metastore), and each source's warehouse views
    (tracks, pages, users, one per event, ...). What exists is kept.

    \b
    Example:
      eventlake catalog repair
      eventlake catalog repair --source web --format json
    """
    from eventlake.catalog.repair import repair_catalog
    from eventlake.sync.protocol.report import reports_table

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
        f"{len(result.tables)} tables ({result.created} created), {result.partitions} partitions on disk, "
        f"{len(result.views)} warehouse views",
        err=True,
    )
    render(["table", "created", "columns_added", "partitions", "location", "notice"], rows, fmt)


@catalog.command("duckdb")
@click.argument("path", type=click.Path(dir_okay=False), default="lake.duckdb")
@pass_context
@handle_errors
def catalog_duckdb(ctx: Context, path: str) -> None:
    """Write a DuckDB database file (default lake.duckdb) holding the lake as views: a schema per
    database, a view per table over its Parquet files, the warehouse views (tracks, pages, users,
    one per event, ...) and __segment_datalake.sync_reports. For dbt-duckdb and BI tools (DBeaver,
    Metabase, Superset, Rill, ...); write it again after a sync to see new files. Other schemas in
    the file (dbt's models) are kept. Open it with the session time zone UTC (SET TimeZone='UTC').

    \b
    Example:
      eventlake catalog duckdb lake.duckdb
      duckdb -readonly lake.duckdb "SELECT event, count(*) FROM web.tracks GROUP BY 1"
    """
    from pathlib import Path

    from eventlake.query.duckdb_engine import write_database_file

    target = Path(path).resolve()
    views = write_database_file(ctx.settings(), target)
    click.echo(f"{target}: {len(views)} views over the lake", err=True)
    for name in views:
        click.echo(name)
