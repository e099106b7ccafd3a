"""The Spark sync: archive files not yet synced -> the Parquet lake and the catalog."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from eventlake.config import Settings
from eventlake.errors import UsageError
from eventlake.progress import Say, say
from eventlake.sync.lock import SyncBusyError, source_lock
from eventlake.sync.report import SyncResult, TableResult

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from eventlake.catalog import Catalog

SKIPPED = "Skipped: already running"
DISABLED = "Skipped: disabled"  # a source with enabled = false: collected and archived, not synced


def disabled_message(slug: str) -> str:
    return (
        f"source {slug} is disabled: its events are collected and archived but not synced; "
        f"`eventlake sources enable {slug}` resumes syncing, everything archived meanwhile included"
    )


def run_sync(
    settings: Settings, slugs: Sequence[str] = (), *, wait: bool = True,
    spark: SparkSession | None = None, catalog: Catalog | None = None, say: Say = say,
) -> list[SyncResult]:  # fmt: skip
    """Sync the given sources (default: all) once; a failed source does not stop the others. A
    disabled source is not synced: its result says :data:`DISABLED`.

    ``spark`` is an existing SparkSession (tests, long-lived services); otherwise one is built
    from the settings and stopped at the end. ``catalog`` is an existing catalog on that session
    (a long-lived service keeps one); otherwise one is loaded for the run.
    """
    from eventlake.catalog import load_catalog
    from eventlake.jvm.session import owned_session
    from eventlake.sync.job import SourceSync

    sources = [settings.source(slug) for slug in slugs] if slugs else list(settings.sources)
    if not sources:
        raise UsageError("no sources configured: add one with `eventlake sources add SLUG`")
    results: list[SyncResult] = []
    for source in sources:
        if not source.enabled:  # said by the caller (up's engine: once, not every interval)
            results.append(
                SyncResult.skipped(source.slug, source.id, DISABLED, disabled_message(source.slug))
            )
    sources = [source for source in sources if source.enabled]
    if not sources:  # every source asked for is disabled: no Spark to start
        return results
    storage = settings.lake.storage()
    with owned_session(settings, "eventlake-sync", spark, say) as spark:
        if catalog is None:
            catalog = load_catalog(settings, spark)
        for source in sources:
            job = None
            try:
                lease_seconds = settings.sync.lease_seconds
                with source_lock(
                    storage, settings.lake.root, source.slug, source.id, wait, say, lease_seconds
                ) as lease:
                    job = SourceSync(spark, catalog, storage, settings, source, say, lease)
                    results.append(job.run())
            except SyncBusyError as exc:  # --no-wait: leave it to the running sync
                say(f"{source.slug}: {exc}")
                results.append(SyncResult.failure(source.slug, source.id, exc, status=SKIPPED))
            except Exception as exc:  # reported by the job; go on with the next source
                say(f"{source.slug}: sync failed: {type(exc).__name__}: {exc}")
                reported = job.failed if job is not None else None  # its run id, as in its report
                results.append(reported or SyncResult.failure(source.slug, source.id, exc))
    return results


__all__ = [
    "DISABLED",
    "SKIPPED",
    "disabled_message",
    "SyncBusyError",
    "SyncResult",
    "TableResult",
    "run_sync",
]
