"""``eventlake compact``: rewrite the lake's small files into files of the target size."""

from __future__ import annotations

import re

import click

from eventlake.cli.main import Context, cli, handle_errors, pass_context
from eventlake.cli.render import format_option, render
from eventlake.errors import UsageError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_HOURS_PER_UNIT = {"s": 1 / 3600, "m": 1 / 60, "h": 1.0, "": 1.0, "d": 24.0}
COLUMNS = ["source", "table", "partitions", "files_in", "files_out", "mb_in", "mb_out", "status"]


def duration_hours(text: str) -> float:
    """``--older-than``'s value in hours: a number with ``s``, ``m``, ``h`` (the default) or ``d``.

    >>> duration_hours("90m"), duration_hours("2h"), duration_hours("1d"), duration_hours("0")
    (1.5, 2.0, 24.0, 0.0)
    """
    match = _DURATION.match(text)
    if match is None:
        raise UsageError(
            f"--older-than {text!r} is not a duration: use a number with s, m, h or d (e.g. 30m, 2h, 7d)"
        )
    return float(match[1]) * _HOURS_PER_UNIT[match[2]]


@cli.command()
@click.option(
    "--source", "sources_", multiple=True, metavar="SLUG", help="Compact only this source (repeatable)."
)
@click.option(
    "--older-than",
    metavar="DURATION",
    help="Only partitions whose hour (or day) ended at least this long ago: 30m, 2h, 7d "
    "(default [compact] older_than_hours).",
)
@click.option("--no-wait", is_flag=True, help="Skip a source whose sync is running instead of waiting.")
@format_option
@pass_context
@handle_errors
def compact(ctx: Context, sources_: tuple[str, ...], older_than: str | None, no_wait: bool, fmt: str) -> None:
    """Rewrite each closed partition's small files into files of about [compact] target_file_mb.

    Micro-batch syncs leave a small file per run in each hour's partition; compaction packs them
    into few large files (rows and values unchanged; `eventlake up` does it every [compact]
    interval_seconds). Readers of either engine see each partition before or after, never both.
    Waits for a running sync of the source; killed, the next compact or sync completes it. The
    runs' files of the dedupe index (read by every sync) are merged too, one file per day (killed,
    the index keeps every id, and the next compact merges again).

    \b
    Examples:
      eventlake compact
      eventlake compact --source web --older-than 2h --format json
    """
    from eventlake.cli.outcome import exit_for
    from eventlake.sync.maintenance.compact import compact_sources

    hours = duration_hours(older_than) if older_than is not None else None
    results = compact_sources(ctx.settings(), sources_, older_than_hours=hours, wait=not no_wait)
    rows = []
    for result in results:
        for table in result.tables:
            rows.append(
                {
                    "source": result.source,
                    "table": f"{table.database}.{table.table}",
                    "partitions": table.partitions,
                    "files_in": table.files_in,
                    "files_out": table.files_out,
                    "mb_in": round(table.bytes_in / 1e6, 1),
                    "mb_out": round(table.bytes_out / 1e6, 1),
                    "status": result.status,
                }
            )
        summary = (
            f"{result.source}: {result.status}, {result.partitions} partitions compacted, "
            f"{result.files_in} files -> {result.files_out}"
            + (", dedupe index {} files -> {}".format(*result.index_files) if result.index_merged else "")
        )
        click.echo(summary + (f" ({result.error})" if result.error else ""), err=True)
    render(COLUMNS, rows, fmt)
    exit_for(results)
