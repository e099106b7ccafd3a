"""``eventlake thrift``: Spark's Thrift server (HiveServer2: JDBC/ODBC, dbt-spark) over the catalog."""

from __future__ import annotations

import sys

import click

from eventlake.cli.main import Context, cli, handle_errors, pass_context


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
