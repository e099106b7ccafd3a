"""The servers a lake's readers connect to: ``eventlake metastore`` (a Hive metastore service over
the project's metastore database) and ``eventlake thrift`` (Spark's Thrift server, HiveServer2:
JDBC/ODBC, dbt-spark, over the catalog)."""

from __future__ import annotations

import sys

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


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on (0.0.0.0: all).")
@click.option("--port", type=int, help="HiveServer2 port (default [query] thrift_port, 10000).")
@pass_context
@handle_errors
def thrift(ctx: Context, host: str, port: int | None) -> None:
    """Serve SQL over JDBC/ODBC (HiveServer2 protocol, Spark's Thrift server) on the lake's catalog,
    until SIGTERM or Ctrl-C. BI tools, beeline and dbt-spark (method: thrift) connect to
    jdbc:hive2://HOST:PORT/default, with no authentication. `eventlake sql --engine spark` sends its
    queries here while it runs. (`eventlake up` serves the same in its engine: no need for both.)

    \b
    Example:
      eventlake thrift --port 10000
      beeline -u jdbc:hive2://127.0.0.1:10000/default -e "SHOW DATABASES"
    """
    from eventlake.jvm.thriftserver import run_thrift_server

    settings = ctx.settings()
    sys.exit(run_thrift_server(settings, host, port or settings.query.thrift_port))
