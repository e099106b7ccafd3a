"""``eventlake import``: bring in an existing Segment archive (the S3 destination's gzip files)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from eventlake.cli.main import Context, cli, handle_errors, pass_context
from eventlake.errors import UsageError
from eventlake.progress import prefixed, say


@cli.command("import")
@click.argument("path_or_uri", metavar="PATH-OR-URI")
@click.option("--source", "slug", required=True, metavar="SLUG", help="The eventlake source to import into.")
@click.option(
    "--segment-source", metavar="ID", help="The Segment source id to take, when PATH-OR-URI holds several."
)
@click.option(
    "--endpoint-url", default="", metavar="URL", help="An S3-compatible or Azure endpoint for the URI."
)
@click.option("--sync", "sync_after", is_flag=True, help="Sync the source right after the import.")
@pass_context
@handle_errors
def import_(
    ctx: Context, path_or_uri: str, slug: str, segment_source: str | None, endpoint_url: str, sync_after: bool
) -> None:
    """Import a Segment archive: segment-logs/<segment-source-id>/<day-ms>/*.gz.

    PATH-OR-URI is a local folder or a bucket URI (s3://, abfss://, az://; credentials as for the
    lake) holding Segment's layout at any level: the bucket's root, segment-logs/, one source's
    folder or one day's. Each file is copied whole into the source's raw archive; the next sync
    (or --sync) reads it like the collector's files: validation and quarantine, dedupe against
    what the lake holds, suppression, reports. A rerun skips what is already imported, so an
    interrupted import is finished by running it again. The days whose archive files retention
    already deleted are skipped (and counted): their messages are not brought back.

    \b
    Examples:
      eventlake import ./segment-export/segment-logs --source web --sync
      eventlake import s3://old-segment-bucket/segment-logs/AbC123 --source web
    """
    from eventlake.archive.importer import import_segment_archive
    from eventlake.storage import load_storage, to_location, uri_scheme

    settings = ctx.settings()
    source = settings.source(slug)
    local = uri_scheme(path_or_uri) == "file"
    root = Path(path_or_uri).expanduser().resolve() if local else to_location(path_or_uri)
    if isinstance(root, Path) and not root.is_dir():
        raise UsageError(f"{path_or_uri}: no such folder (give the folder that holds the Segment archive)")
    source_storage = load_storage(root, endpoint_url=endpoint_url)
    result = import_segment_archive(
        source_storage, root, settings.lake.storage(), settings.lake.root, source.id,
        segment_source=segment_source, say=prefixed(say, slug),
    )  # fmt: skip
    click.echo(
        f"{slug}: imported {result.files} files ({result.bytes / 1e6:.1f} MB, {len(result.days)} days), "
        f"{result.skipped} already imported"
        + (f", {result.expired} skipped (days retention deleted)" if result.expired else "")
        + (f", {len(result.broken)} left out" if result.broken else ""),
        err=True,
    )
    if sync_after:
        from eventlake.cli.outcome import exit_for
        from eventlake.sync import run_sync

        [synced] = run_sync(settings, [slug])
        click.echo(
            f"{slug}: sync {synced.status}, {synced.rows} rows, {synced.duplicates_dropped} duplicates "
            f"dropped, {synced.rejected_messages} messages quarantined",
            err=True,
        )
        exit_for([synced])
    if result.broken:
        click.echo("error: not whole gzip files, left out: " + "; ".join(result.broken[:5]), err=True)
        sys.exit(1)
    if not sync_after:
        click.echo(
            f"run `eventlake sync --source {slug}` (or let `eventlake up` sync) to load them", err=True
        )
