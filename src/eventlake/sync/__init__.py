"""The Spark sync: archive files not yet synced -> the Parquet lake and the catalog."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from eventlake.config import Settings, SourceSettings
from eventlake.errors import UsageError
from eventlake.progress import Say, say
from eventlake.storage import Storage
from eventlake.sync.protocol.lock import SyncBusyError
from eventlake.sync.protocol.report import SyncResult, TableResult
from eventlake.sync.protocol.runner import Hold, run_source
from eventlake.sync.protocol.status import Status

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from eventlake.catalog import Catalog
    from eventlake.sync.pipeline.job import Stager

SKIPPED = Status.SKIPPED
DISABLED = Status.DISABLED  # a source with enabled = false: collected and archived, not synced


def disabled_message(slug: str) -> str:
    return (
        f"source {slug} is disabled: its events are collected and archived but not synced; "
        f"`eventlake sources enable {slug}` resumes syncing, everything archived meanwhile included"
    )


def run_sync(
    settings: Settings, slugs: Sequence[str] = (), *, wait: bool = True,
    spark: SparkSession | None = None, catalog: Catalog | None = None, say: Say = say,
    stager: Stager | None = None,
) -> list[SyncResult]:  # fmt: skip
    """Sync the given sources (default: all) once; a failed source does not stop the others. A
    disabled source is not synced: its result says :data:`DISABLED`.

    ``spark`` is an existing SparkSession (tests, long-lived services); otherwise one is built
    from the settings and stopped at the end. ``catalog`` is an existing catalog on that session
    (a long-lived service keeps one); otherwise one is loaded for the run. ``stager``: who runs the
    parse and write passes (default: Spark; with one given, no session is started).
    """
    from eventlake.catalog import load_catalog
    from eventlake.jvm.session import owned_session

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
    session: Any = (
        owned_session(settings, "eventlake-sync", spark, say, one_run=True)
        if stager is None
        else contextlib.nullcontext(spark)
    )
    with session as spark:
        if catalog is None:
            catalog = load_catalog(settings, spark)
        for source in sources:
            results.append(_sync_source(settings, storage, spark, catalog, source, wait, say, stager))
    return results


def _sync_source(
    settings: Settings,
    storage: Storage,
    spark: SparkSession | None,
    catalog: Catalog,
    source: SourceSettings,
    wait: bool,
    say: Say,
    stager: Stager | None = None,
) -> SyncResult:
    """One source's sync under its lock; a busy or failed source is a result, not an error."""
    from eventlake.sync.pipeline.job import SourceSync

    jobs: list[SourceSync] = []

    def work(hold: Hold) -> SyncResult:
        jobs.append(SourceSync(spark, catalog, storage, settings, source, say, hold, stager=stager))
        return jobs[0].run()

    def failed(status: Status, exc: BaseException) -> SyncResult:
        reported = jobs[0].failed if jobs else None  # its run id, as in its report
        return reported or SyncResult.failure(source.slug, source.id, exc, status=status)

    return run_source(
        settings, storage, source, work, failed=failed, what="sync", catalog=lambda: catalog,
        wait=wait, say=say,
    )  # fmt: skip


__all__ = [
    "DISABLED",
    "SKIPPED",
    "Status",
    "disabled_message",
    "SyncBusyError",
    "SyncResult",
    "TableResult",
    "run_sync",
]
