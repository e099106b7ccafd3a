"""The sync side's metrics, per source, in Prometheus' text format (the console's ``GET /metrics``).

The collector cannot serve them (it does not read the lake's reports and ledger; see the layer
rule in ARCHITECTURE.md): the console's :class:`~eventlake.console.lake.LakeWatch` holds them
already, refreshed every few seconds, so a scrape reads nothing. Until its first refresh ends the
page holds only ``eventlake_console_up``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest

from eventlake.console.lake import LakeWatch
from eventlake.sync.protocol.status import Status
from eventlake.timestamps import now_utc

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
STATUS_LABELS = {Status.SUCCESS: "success", Status.PARTIAL: "partial_success", Status.FAILED: "failed"}


def render(watch: LakeWatch) -> bytes:
    """The Prometheus text exposition (format 0.0.4) of ``watch``'s sync metrics."""
    return generate_latest(_Scrape(watch))


def families(watch: LakeWatch) -> Iterator[Metric]:
    """Every metric family, per source (label ``source``: the slug, as in the collector's)."""
    refreshed = watch.refreshed
    yield GaugeMetricFamily(
        "eventlake_console_up", "1 once the console has read the lake (the sync metrics follow).",
        value=1 if refreshed else 0,
    )  # fmt: skip
    if refreshed is None:
        return
    yield GaugeMetricFamily(
        "eventlake_console_refresh_timestamp_seconds",
        "When the console last read the lake's reports, ledger, archive and spool (Unix seconds).",
        value=refreshed.timestamp(),
    )
    now = now_utc()
    health = {h.source.id: h for h in watch.health()}
    totals = watch.totals()
    slug = {s.id: s.slug for s in watch.settings.sources}
    gauges = {
        "failures": GaugeMetricFamily(
            "eventlake_sync_failures_in_a_row", "Syncs of the source that failed in a row (0: the last one "
            "did not fail); alerts go out at 1, 5 and 20.", labels=("source",)),
        "last_success": GaugeMetricFamily(
            "eventlake_sync_last_success_timestamp_seconds", "When the source's newest successful sync run "
            "(Success or Partial Success) finished (Unix seconds); absent before the first.",
            labels=("source",)),
        "age": GaugeMetricFamily(
            "eventlake_sync_oldest_unsynced_age_seconds", "How long the source's oldest message not in the "
            "lake yet has waited (the oldest archive file no sync has read, or spool file not sealed); 0: "
            "none waits.", labels=("source",)),
        "files": GaugeMetricFamily(
            "eventlake_sync_unsynced_files", "Archive files of the source that no sync has read yet.",
            labels=("source",)),
    }  # fmt: skip
    counters = {
        "rows": CounterMetricFamily(
            "eventlake_sync_rows", "Rows the source's sync runs wrote to the lake (replays left out).",
            labels=("source",)),
        "duplicates": CounterMetricFamily(
            "eventlake_sync_duplicates_dropped", "Messages the source's sync runs dropped as duplicates "
            "(same messageId).", labels=("source",)),
        "messages": CounterMetricFamily(
            "eventlake_sync_quarantined_messages", "Invalid messages the source's sync runs put in the "
            "quarantine.", labels=("source",)),
        "values": CounterMetricFamily(
            "eventlake_sync_quarantined_values", "Values that did not fit their column's type, put in the "
            "quarantine by the source's sync runs.", labels=("source",)),
        "runs": CounterMetricFamily(
            "eventlake_sync_runs", "The source's sync runs with a report, by status (success, "
            "partial_success, failed).", labels=("source", "status")),
    }  # fmt: skip
    for source_id in sorted(set(health) | set(totals), key=lambda i: slug.get(i, i)):
        name = slug.get(source_id, source_id)
        if source_id in health:
            h = health[source_id]
            gauges["failures"].add_metric([name], h.failures_in_a_row)
            gauges["age"].add_metric([name], h.lag_seconds(now))
            gauges["files"].add_metric([name], h.unsynced_files)
        total = totals.get(source_id)
        if total is None:
            continue
        if total.last_success is not None:
            gauges["last_success"].add_metric([name], total.last_success.timestamp())
        counters["rows"].add_metric([name], total.rows)
        counters["duplicates"].add_metric([name], total.duplicates_dropped)
        counters["messages"].add_metric([name], total.rejected_messages)
        counters["values"].add_metric([name], total.rejected_values)
        for status, label in STATUS_LABELS.items():
            counters["runs"].add_metric([name, label], total.runs.get(status, 0))
    yield from gauges.values()
    yield from counters.values()


class _Scrape:
    """One scrape as a prometheus-client collector."""

    def __init__(self, watch: LakeWatch) -> None:
        self.watch = watch

    def collect(self) -> Iterator[Metric]:
        return families(self.watch)
