"""The Spark sync: archive files not yet synced -> the Parquet lake and the catalog."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from eventlake.config import Settings
from eventlake.errors import UsageError
from eventlake.sync.lock import SyncBusyError, source_lock
from eventlake.sync.report import SyncResult, TableResult

_STARTED = time.monotonic()


def say_progress(line: str) -> None:
    """Progress on stderr, with the seconds since the process started."""
    print(f"[{time.monotonic() - _STARTED:6.1f}s] {line}", file=sys.stderr, flush=True)


SKIPPED = "Skipped: already running"


def run_sync(
    settings: Settings, slugs: Sequence[str] = (), *, wait: bool = True, spark=None, say=say_progress
) -> list[SyncResult]:
    """Sync the given sources (default: all) once; a failed source does not stop the others.

    ``spark`` is an existing SparkSession (tests, long-lived services); otherwise one is built
    from the settings and stopped at the end.
    """
    from eventlake.catalog import load_catalog
    from eventlake.catalog.session import spark_session
    from eventlake.sync.job import SourceSync

    sources = [settings.source(slug) for slug in slugs] if slugs else list(settings.sources)
    if not sources:
        raise UsageError("no sources configured: add one with `eventlake sources add SLUG`")
    own = spark is None
    if own:
        say("starting Spark ...")
        spark = spark_session(settings, "eventlake-sync")
    results: list[SyncResult] = []
    try:
        catalog = load_catalog(settings, spark)
        for source in sources:
            try:
                with source_lock(settings.lake.root, source.slug, source.id, wait, say):
                    results.append(SourceSync(spark, catalog, settings, source, say).run())
            except SyncBusyError as exc:  # --no-wait: leave it to the running sync
                say(f"{source.slug}: {exc}")
                results.append(_failed(source.slug, source.id, exc, status=SKIPPED))
            except Exception as exc:  # reported by the job; go on with the next source
                say(f"{source.slug}: sync failed: {type(exc).__name__}: {exc}")
                results.append(_failed(source.slug, source.id, exc))
    finally:
        if own:
            spark.stop()
    return results


def _failed(slug: str, source_id: str, exc: Exception, status: str = "Failed") -> SyncResult:
    from eventlake.timestamps import now_utc

    now = now_utc()
    return SyncResult(
        slug,
        source_id,
        "",
        status,
        now,
        now,
        error=f"{type(exc).__name__}: {exc}"[:500],
        error_code=getattr(exc, "code", "internal_error"),
    )


__all__ = ["SKIPPED", "SyncBusyError", "SyncResult", "TableResult", "run_sync"]
