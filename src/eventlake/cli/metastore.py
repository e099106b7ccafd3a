"""``eventlake metastore``: a Hive metastore service over the project's metastore database."""

from __future__ import annotations

import click

from eventlake.cli.main import Context, cli, handle_errors, pass_context


@cli.command()
@click.option("--port", default=9083, show_default=True, help="Port the service listens on (all interfaces).")
@pass_context
@handle_errors
def metastore(ctx: Context, port: int) -> None:
    """Run a Hive metastore service (thrift) until SIGTERM or Ctrl-C, from the pyspark wheel's jars,
    over the embedded Derby in [lake] state_dir or over [catalog] jdbc_url (PostgreSQL, MariaDB).

    While it runs on Derby, this project's other eventlake commands use it, and so can any Spark
    or Hive client with hive.metastore.uris = thrift://HOST:PORT. It has no authentication:
    firewall the port.

    \b
    Example:
      eventlake metastore --port 9083
    """
    from eventlake.config import CatalogKind
    from eventlake.jvm.service import run_metastore

    settings = ctx.settings()
    if settings.catalog.kind != CatalogKind.HIVE:
        from eventlake.errors import UsageError

        raise UsageError(
            f'eventlake metastore serves a Hive metastore, not catalog.kind = "{settings.catalog.kind}"'
        )
    run_metastore(settings, port)
