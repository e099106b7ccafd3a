"""The ``eventlake`` click group. Commands are thin: parse, load settings, call one function, render."""

from __future__ import annotations

import dataclasses
import functools
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from eventlake import __version__, layout
from eventlake.cli.failure import one_line, write_traceback
from eventlake.cli.render import format_option, render
from eventlake.config import DATE_PARTITIONS, Settings, add_source, load_settings, write_initial_config
from eventlake.errors import EventLakeError, UsageError

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Turn an :class:`EventLakeError` into a one-line message on stderr and its exit code; any
    other exception into one line too, naming the file that holds its traceback (exit code 1)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except EventLakeError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # click's own: it prints them
        except Exception as exc:
            command = click.get_current_context(silent=True)
            path = write_traceback(exc, _state_dir(command), command.command_path if command else "eventlake")
            if path is None:  # nowhere to keep it: the traceback goes to the terminal after all
                traceback.print_exception(type(exc), exc, exc.__traceback__)
            where = f" (full traceback: {path})" if path else ""
            click.echo(f"error: {one_line(exc)}{where}", err=True)
            sys.exit(EventLakeError.exit_code)

    return wrapper  # type: ignore[return-value]


def _state_dir(command: click.Context | None) -> Path | None:
    """The project's state dir, if its settings load (the failure may be theirs)."""
    context = command.find_object(Context) if command else None
    try:
        return context.settings().lake.state_dir if context else None
    except Exception:
        return None


class Context:
    def __init__(self, config: str | None) -> None:
        self.config = config
        self._settings: Settings | None = None

    def settings(self, **collector: Any) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.config)
        overrides = {k: v for k, v in collector.items() if v is not None}
        if overrides:
            return dataclasses.replace(
                self._settings, collector=dataclasses.replace(self._settings.collector, **overrides)
            )
        return self._settings


pass_context = click.make_pass_decorator(Context)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    envvar="EVENTLAKE_CONFIG",
    type=click.Path(dir_okay=False),
    help="Config file (default ./eventlake.toml, or $EVENTLAKE_CONFIG).",
)
@click.version_option(__version__, prog_name="eventlake")
@click.pass_context
def cli(ctx: click.Context, config: str | None) -> None:
    """eventlake: a self-hosted Segment Data Lakes.

    \b
    Collect Segment events over HTTP, archive them raw, and sync them with Spark into
    a Hive-cataloged Parquet lake you can query with SQL.

    \b
    Quick start:
      eventlake init ./mylake && cd mylake
      eventlake sources add web --write-key wk_web
      eventlake up --port 8088
    """
    ctx.obj = Context(config)


@cli.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False))
@handle_errors
def init(directory: str) -> None:
    """Write DIRECTORY/eventlake.toml with embedded defaults (lake in DIRECTORY/lake).

    \b
    Example:
      eventlake init ./mylake
    """
    path = write_initial_config(Path(directory))
    click.echo(f"wrote {path}")
    click.echo("next: cd into it, then `eventlake sources add SLUG` and `eventlake up`")


@cli.group()
def sources() -> None:
    """Manage sources (each has a slug, a generated source id and a write key)."""


@sources.command("add")
@click.argument("slug")
@click.option("--write-key", help="The source's write key (default: a random one).")
@click.option("--database", help="Catalog database for its tables (default: the slug).")
@click.option("--table-prefix", default="", help="Prefix for its table names.")
@click.option("--date-partition", type=click.Choice(DATE_PARTITIONS), default="day-hour", show_default=True)
@pass_context
@handle_errors
def sources_add(
    ctx: Context,
    slug: str,
    write_key: str | None,
    database: str | None,
    table_prefix: str,
    date_partition: str,
) -> None:
    """Add a source to eventlake.toml.

    \b
    Example:
      eventlake sources add web --write-key wk_web
    """
    from eventlake.config import resolve_config_path

    entry = add_source(
        resolve_config_path(ctx.config), slug, write_key, database, table_prefix, date_partition
    )
    click.echo(
        f"added source {entry['slug']}: id {entry['id']}, write key {entry['write_key']}, "
        f"database {entry['database']}"
    )
    click.echo(_RUNNING_NOTE, err=True)


_RUNNING_NOTE = (
    "a running `eventlake serve` or `eventlake up` takes this up within a second, without a restart"
)


@sources.command("disable")
@click.argument("slug")
@pass_context
@handle_errors
def sources_disable(ctx: Context, slug: str) -> None:
    """Stop syncing a source; its events are still collected and archived.

    Writes `enabled = false` into its [[sources]] entry. The collector keeps accepting its write
    key and archiving its events; `eventlake sync` and `up` skip it ("Skipped: disabled") until
    `eventlake sources enable SLUG`, whose next sync takes everything archived meanwhile.

    \b
    Example:
      eventlake sources disable web
    """
    from eventlake.config import resolve_config_path, set_source_enabled

    path = resolve_config_path(ctx.config)
    if not set_source_enabled(path, slug, False):
        click.echo(f"source {slug} is already disabled")
        return
    source = ctx.settings().source(slug)
    archive = layout.archive_source_dir(ctx.settings().lake.root, source.id)
    click.echo(
        f"disabled source {slug}: its events are still collected and archived (in {archive}), not "
        f"synced until `eventlake sources enable {slug}`"
    )
    click.echo(_RUNNING_NOTE, err=True)


@sources.command("enable")
@click.argument("slug")
@pass_context
@handle_errors
def sources_enable(ctx: Context, slug: str) -> None:
    """Sync a disabled source again, everything archived while it was disabled included.

    \b
    Example:
      eventlake sources enable web
    """
    from eventlake.config import resolve_config_path, set_source_enabled

    if not set_source_enabled(resolve_config_path(ctx.config), slug, True):
        click.echo(f"source {slug} is already enabled")
        return
    click.echo(
        f"enabled source {slug}: the next sync (`eventlake sync`, or `up` within [sync] interval_seconds) "
        "takes everything archived while it was disabled"
    )
    click.echo(_RUNNING_NOTE, err=True)


@sources.command("remove")
@click.argument("slug")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_context
@handle_errors
def sources_remove(ctx: Context, slug: str, yes: bool) -> None:
    """Remove a source from eventlake.toml; its write key is refused (401) from then on.

    Its lake data, tables and raw archive are not deleted: the command says where they stay, and
    prints the removed [[sources]] entry on stdout (append it to eventlake.toml to undo).

    \b
    Examples:
      eventlake sources remove web            # asks first
      eventlake sources remove web --yes > removed-web.toml
    """
    from eventlake.config import remove_source, resolve_config_path

    settings = ctx.settings()
    source = settings.source(slug)
    lake = settings.lake.root
    data = layout.source_data_dir(lake, source.dir_name)
    archive = layout.archive_source_dir(lake, source.id)
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError(f"not removing source {slug} without a confirmation: pass --yes")
        click.confirm(
            f"Remove source {slug} (id {source.id}) from {settings.path}? Its write key will be refused; "
            "its lake data and archive stay",
            abort=True,
            err=True,
        )
    removed = remove_source(resolve_config_path(ctx.config), slug)
    click.echo(removed, nl=False)
    click.echo(
        f"removed source {slug} (id {source.id}) from {settings.path}; kept: its lake data in {data}, "
        f"its tables in database {settings.database_name(source)}, its raw archive in {archive} "
        "(delete them yourself if they are no longer wanted; to undo, append the entry above to the file)",
        err=True,
    )
    click.echo(_RUNNING_NOTE, err=True)


@sources.command("list")
@format_option
@pass_context
@handle_errors
def sources_list(ctx: Context, fmt: str) -> None:
    """List the configured sources.

    \b
    Example:
      eventlake sources list --format json
    """
    rows = [
        {
            "slug": s.slug,
            "id": s.id,
            "database": s.database,
            "table_prefix": s.table_prefix,
            "date_partition": s.date_partition,
            "enabled": s.enabled,
        }
        for s in ctx.settings().sources
    ]
    render(["slug", "id", "database", "table_prefix", "date_partition", "enabled"], rows, fmt)


@cli.command()
@click.option("--host", help="Interface to listen on (default [collector] host).")
@click.option("--port", type=int, help="Port to listen on (default [collector] port).")
@pass_context
@handle_errors
def serve(ctx: Context, host: str | None, port: int | None) -> None:
    """Run the Segment-compatible collector until SIGTERM or Ctrl-C.

    \b
    Example:
      eventlake serve --port 8088 &
      curl -u wk_web: -H 'Content-Type: application/json' \\
           -d '{"userId":"u1","event":"Signed Up"}' http://127.0.0.1:8088/v1/track
    """
    from eventlake.collect import run_collector

    run_collector(ctx.settings(host=host, port=port))


@cli.command()
@click.option(
    "--source", "sources_", multiple=True, metavar="SLUG", help="Sync only this source (repeatable)."
)
@click.option("--no-wait", is_flag=True, help="Exit at once if a sync of the same source is running.")
@click.option(
    "--rescan",
    is_flag=True,
    help=(
        "List every day of the archive once, not only the open days, and read the damaged archive "
        "files quarantined so far again (after copying or restoring archive files by hand)."
    ),
)
@format_option
@pass_context
@handle_errors
def sync(ctx: Context, sources_: tuple[str, ...], no_wait: bool, rescan: bool, fmt: str) -> None:
    """Sync the raw archive into the lake now (a Spark job); prints rows written per table.

    Exits 0 only if every source finished. A sync lists only the archive's open days (those not
    yet all synced, and days something wrote into again); --rescan lists them all once. A disabled
    source (`eventlake sources disable`) is skipped and said ("Skipped: disabled"); named with
    --source it exits 2.

    An archive file that is not whole gzip (an interrupted copy, a bad disk) does not stop the
    source: the others are synced, the run is a Partial Success (exit 0), and the file is
    quarantined by name (none of its messages synced; said here, in `eventlake reports`, the web
    console and an alert) and not read again until --rescan asks for it, once it is restored.

    \b
    Example:
      eventlake sync
      eventlake sync --source web --format json
      eventlake sync --rescan     # after restoring archive files by hand (damaged ones too)
    """
    from eventlake.cli.outcome import exit_for
    from eventlake.errors import UsageError
    from eventlake.progress import say
    from eventlake.scheduler.alerts import failed_results, notify_results
    from eventlake.sync import DISABLED, run_sync

    settings = ctx.settings()
    if rescan:
        from eventlake.archive.days import reopen_archive
        from eventlake.sync.protocol.damaged import ask_retry

        for source in settings.sources:
            if not sources_ or source.slug in sources_:
                days = reopen_archive(settings.lake.storage(), settings.lake.root, source.id)
                damaged = ask_retry(settings.lake.storage(), settings.lake.root, source.id)
                retried = f", {damaged} damaged archive files to read again" if damaged else ""
                say(f"{source.slug}: {days} archive days to list again{retried}")
    try:
        results = run_sync(settings, sources_, wait=not no_wait)
    except Exception as exc:  # the sync failed as a whole: a failure of each source (alerts)
        if not isinstance(exc, UsageError):  # not a usage mistake (an unknown source)
            notify_results(settings, failed_results(settings, exc, sources_), say)
        raise
    notify_results(settings, results, say)  # failure and recovery alerts (eventlake.scheduler.alerts)
    rows = []
    for result in results:
        if result.status == DISABLED:
            click.echo(f"{result.source}: {DISABLED} ({result.error})", err=True)
            continue
        for table in result.tables:
            rows.append(
                {
                    "source": result.source,
                    "table": f"{table.database}.{table.table}",
                    "rows": table.rows,
                    "new_columns": ", ".join(f"{n} {t}" for n, t in table.new_columns),
                    "status": result.status,
                }
            )
        summary = (
            f"{result.source}: {result.status}, {result.rows} rows in {len(result.tables)} tables, "
            f"{result.duplicates_dropped} duplicates dropped, {result.rejected_messages} messages and "
            f"{result.rejected_values} values quarantined, "
            + (f"{result.suppressed} messages of suppressed users dropped, " if result.suppressed else "")
            + f"{result.duration_seconds:.1f} s"
        )
        click.echo(summary + (f" ({result.error})" if result.error else ""), err=True)
        for found in result.damaged:
            click.echo(f"{result.source}: warning: {found.describe()}", err=True)
    render(["source", "table", "rows", "new_columns", "status"], rows, fmt)
    exit_for(results, busy="error: a sync of {sources} is already running (without --no-wait this waits)")
    asked_disabled = [r.source for r in results if r.status == DISABLED and r.source in sources_]
    if asked_disabled:  # named with --source: the user expected a sync
        click.echo(f"error: {', '.join(asked_disabled)} not synced: disabled", err=True)
        sys.exit(UsageError.exit_code)


@cli.command()
@click.argument("query")
@format_option
@click.option(
    "--engine",
    type=click.Choice(["spark", "duckdb"]),
    default="spark",
    show_default=True,
    help="spark: Spark SQL through the catalog; duckdb: in-process over the Parquet files, no JVM.",
)
@pass_context
@handle_errors
def sql(ctx: Context, query: str, fmt: str, engine: str) -> None:
    """Run a SQL query against the lake's catalog (one database per source).

    --engine spark (default) runs Spark SQL through the metastore; --engine duckdb reads the same
    Parquet files through the tables' schema files, starts no JVM and answers in well under a second.

    \b
    Examples:
      eventlake sql "SHOW TABLES IN web"
      eventlake sql "SELECT user_id, properties_revenue FROM web.track_order_completed"
      eventlake sql --format json "SELECT count(*) AS n FROM web.identify"
      eventlake sql --engine duckdb "SELECT day, count(*) AS n FROM web.page GROUP BY day"
    """
    from eventlake.query import run_query

    result = run_query(ctx.settings(), query, engine)
    render(result.columns, result.rows, fmt)


@cli.command()
@click.option("--source", help="Only this source's runs.")
@click.option("--limit", default=100, show_default=True, help="How many runs to show.")
@click.option("--health", is_flag=True, help="Synced rows per day for the last 30 days instead.")
@format_option
@pass_context
@handle_errors
def reports(ctx: Context, source: str | None, limit: int, health: bool, fmt: str) -> None:
    """Show the last sync runs: status, rows, new columns, duration (or --health: rows per day).

    \b
    Examples:
      eventlake reports --source web --limit 10
      eventlake reports --health
    """
    from eventlake.reports import HEALTH_COLUMNS, RUN_COLUMNS, daily_health, run_history

    if health:
        render(HEALTH_COLUMNS, daily_health(ctx.settings(), source), fmt)
    else:
        render(RUN_COLUMNS, run_history(ctx.settings(), source, limit), fmt)


def console_settings(
    settings: Settings, host: str | None, port: int | None, enabled: bool = True
) -> Settings:
    """``settings`` with the console's ``--console-host`` / ``--console-port`` (and ``--no-console``)."""
    overrides: dict[str, Any] = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    if not enabled:
        overrides["enabled"] = False
    if not overrides:
        return settings
    return dataclasses.replace(settings, console=dataclasses.replace(settings.console, **overrides))


@cli.command()
@click.option("--host", help="Interface to listen on (default [collector] host).")
@click.option("--port", type=int, help="Port to listen on (default [collector] port).")
@click.option("--console-host", help="The web console's interface (default [console] host: 127.0.0.1).")
@click.option("--console-port", type=int, help="The web console's port (default [console] port: 8089).")
@click.option("--no-console", is_flag=True, help="Do not serve the web console.")
@pass_context
@handle_errors
def up(
    ctx: Context, host: str | None, port: int | None, console_host: str | None, console_port: int | None,
    no_console: bool,
) -> None:  # fmt: skip
    """Run the collector, the engine and the web console, until SIGTERM or Ctrl-C.

    The engine is one long-lived Spark session (restarted if it dies) that syncs every source every
    [sync] interval_seconds (default 30: with the collector sealing every 5 s, a message is
    queryable about 5 + 30 s + one sync after its 200, within a minute on the 2-core reference
    machine) and serves SQL on Spark's Thrift server at 127.0.0.1:[query] thrift_port (default
    10000, or the next free port): `eventlake sql --engine spark` and JDBC/ODBC tools use it
    without starting a JVM. Stopping seals the collector's spool, stops the engine (an interrupted
    sync is completed by the next one) and the project's metastore service.

    The web console (sync history, freshness, schemas, quarantine, a query box) is on
    http://127.0.0.1:8089/ ([console] host and port); on any other interface it needs
    [console] token (or EVENTLAKE__CONSOLE__TOKEN).

    \b
    Example:
      eventlake up --port 8088
      eventlake sql "SELECT count(*) AS n FROM web.page"   # answered by up's engine
      EVENTLAKE__CONSOLE__TOKEN=s3cret eventlake up --console-host 0.0.0.0
    """
    from eventlake.scheduler.up import run_up

    run_up(console_settings(ctx.settings(host=host, port=port), console_host, console_port, not no_console))


@cli.command()
@click.option("--host", help="Interface to listen on (default [console] host: 127.0.0.1).")
@click.option("--port", type=int, help="Port to listen on (default [console] port: 8089).")
@pass_context
@handle_errors
def console(ctx: Context, host: str | None, port: int | None) -> None:
    """Serve the web console on its own, until SIGTERM or Ctrl-C (`eventlake up` serves it too).

    Overview (per source: messages accepted per minute, the oldest message not yet queryable, the
    last sync), sync history with filters and charts, schemas with the run that added each column,
    the quarantine with the command that fixes each kind, and a read-only query box on the DuckDB
    engine. Off 127.0.0.1 it needs [console] token (or EVENTLAKE__CONSOLE__TOKEN).

    \b
    Example:
      eventlake console                      # http://127.0.0.1:8089/
      EVENTLAKE__CONSOLE__TOKEN=s3cret eventlake console --host 0.0.0.0 --port 9000
    """
    from eventlake.console import run_console
    from eventlake.progress import say

    run_console(console_settings(ctx.settings(), host, port), say)


@cli.command()
@pass_context
@handle_errors
def engine(ctx: Context) -> None:
    """Run the engine of `eventlake up` alone, until SIGTERM or Ctrl-C: one Spark session that
    syncs every [sync] interval_seconds and serves SQL on Spark's Thrift server (127.0.0.1,
    [query] thrift_port). `up` runs it beside the collector; run it yourself only to keep the
    collector (`eventlake serve`) and the engine as separate services.

    \b
    Example:
      eventlake serve --port 8088 &
      eventlake engine
    """
    from eventlake.scheduler.engine import run_engine

    sys.exit(run_engine(ctx.settings()))


def main() -> None:
    cli(prog_name="eventlake")
