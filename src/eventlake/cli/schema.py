"""``eventlake schema set-type``: change a column's type on purpose."""

from __future__ import annotations

import click

from eventlake.cli.main import Context, cli, handle_errors, pass_context


@cli.group()
def schema() -> None:
    """Change table schemas on purpose (types never change by themselves)."""


@schema.command("set-type")
@click.argument("table", metavar="DB.TABLE")
@click.argument("column")
@click.argument("type_", metavar="TYPE")
@pass_context
@handle_errors
def set_type(ctx: Context, table: str, column: str, type_: str) -> None:
    """Change COLUMN of DB.TABLE to TYPE (bigint, boolean, decimal(38,6), string, timestamp).

    The catalog, the table's schema file and the Parquet files already written change together;
    values that do not fit the new type become null and are kept in the source's quarantine.
    Waits for a running sync of the source.

    \b
    Example:
      eventlake schema set-type web.track_order_completed properties_revenue "decimal(38,6)"
    """
    from eventlake.jvm.session import owned_session
    from eventlake.progress import say
    from eventlake.sync.maintenance.retype import set_column_type

    settings = ctx.settings()
    with owned_session(settings, "eventlake-schema") as spark:
        result = set_column_type(settings, spark, table, column, type_, say)
    click.echo(
        f"{result.table}.{result.column}: {result.old_type} -> {result.new_type}; "
        f"{result.files_rewritten} files rewritten, {result.values_quarantined} values quarantined"
    )
