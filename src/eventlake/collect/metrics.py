"""The collector's counters and their Prometheus text exposition (``GET /metrics``).

Everything is counted in the event loop's thread, so plain integers suffice: the hot path pays no
lock (prometheus-client's own counters take one per increment). ``prometheus-client`` only renders
them, at scrape time (text format 0.0.4), through a collector that turns them into metric families;
the spool's own counters come from :meth:`eventlake.archive.Spool.stats` when the page is rendered.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.utils import floatToGoString

from eventlake.archive import SpoolStats
from eventlake.spec import Invalid

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# request latency buckets, seconds (a durable acknowledgement costs at least one fsync)
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# the spool's counters (SpoolStats fields) as metrics: name, kind, help, field
_SPOOL = (
    ("eventlake_spool_messages_total", "counter", "Messages fsynced to the spool.", "messages"),
    ("eventlake_spool_bytes_total", "counter", "Bytes fsynced to the spool.", "bytes"),
    (
        "eventlake_spool_group_commits_total",
        "counter",
        "Group commits (one fsync per segment).",
        "group_commits",
    ),
    ("eventlake_spool_pending_bytes", "gauge", "Bytes waiting for the spool writer.", "pending_bytes"),
    (
        "eventlake_spool_size_bytes",
        "gauge",
        "Bytes in spool segments not in the archive yet (past max_spool_bytes: 429).",
        "spool_bytes",
    ),
    (
        "eventlake_spool_segments",
        "gauge",
        "Spool segments not in the archive yet (open, or waiting to be sealed or uploaded).",
        "spool_segments",
    ),
    ("eventlake_sealed_files_total", "counter", "Archive files sealed (recovered included).", "sealed_files"),
    (
        "eventlake_recovered_segments_total",
        "counter",
        "Segments of a crashed process sealed.",
        "recovered_segments",
    ),
    ("eventlake_spool_write_errors_total", "counter", "Group commits that failed (503).", "write_errors"),
    ("eventlake_seal_errors_total", "counter", "Failed seal attempts (retried).", "seal_errors"),
    (
        "eventlake_sealed_suppressed_total",
        "counter",
        "Messages acknowledged before their userId was suppressed, dropped when sealed (not archived).",
        "suppressed_lines",
    ),
    (
        "eventlake_archive_upload_failures_total",
        "counter",
        "Failed writes of sealed segments to the archive's store (retried with backoff; kept in the spool).",
        "upload_failures",
    ),
)


def reason_label(invalid: Invalid) -> str:
    """A bounded label value for what :func:`eventlake.spec.validate` found: its code.

    >>> from eventlake.spec import validate
    >>> reason_label(validate({"type": "alias", "userId": "u1", "messageId": "m1"}))
    'missing_previous_id'
    >>> reason_label(validate({"type": "launch", "userId": "u1"}))
    'unknown_type'
    """
    return invalid.code.value


class CollectorMetrics:
    """Counters since the collector started."""

    def __init__(self, source_slugs: Iterable[str] = ()) -> None:
        slugs = list(source_slugs)
        self.requests: Counter[int] = Counter()  # by HTTP status, every request to /v1/*
        self.rejected: Counter[tuple[int, str]] = Counter()  # by (status, error code)
        self.accepted: Counter[str] = Counter(dict.fromkeys(slugs, 0))  # messages stored, by source
        self.invalid: Counter[tuple[str, str]] = Counter()  # stored but failing validation
        self.suppressed: Counter[str] = Counter(dict.fromkeys(slugs, 0))  # blocked, by source
        self.ip_filled: Counter[str] = Counter()  # messages whose context.ip came from the request
        self.received_bytes = 0  # request bodies as sent (compressed when gzip)
        self.client_metrics = 0  # analytics.js telemetry posts to /v1/m, answered and dropped
        self._bucket_counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self._latency_sum = 0.0

    def add_source(self, slug: str) -> None:
        """A source added while running: its counters show from now on, at 0."""
        for counter in (self.accepted, self.suppressed):
            counter.setdefault(slug, 0)

    def observe_request(self, status: int, seconds: float) -> None:
        self.requests[status] += 1
        self._bucket_counts[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self._latency_sum += seconds

    def reject(self, status: int, code: str) -> None:
        self.rejected[(status, code)] += 1

    def render(self, spool: SpoolStats) -> bytes:
        """The Prometheus text exposition (format 0.0.4) of these counters and ``spool``'s."""
        return generate_latest(_Scrape(self, spool))

    def families(self, spool: SpoolStats) -> Iterator[Metric]:
        """Every metric family, with the values of now."""
        yield _counter(
            "eventlake_requests_total",
            "Tracking API requests, by HTTP status.",
            ("status",),
            {(str(status),): n for status, n in sorted(self.requests.items())},
        )
        yield _counter(
            "eventlake_requests_rejected_total",
            "Requests answered with an error, by HTTP status and error code (nothing of them is stored).",
            ("status", "code"),
            {(str(s), c): n for (s, c), n in sorted(self.rejected.items())},
        )
        by_source = [
            (
                "eventlake_messages_accepted_total",
                self.accepted,
                "Messages acknowledged: fsynced to the spool (invalid ones included), by source.",
            ),
            (
                "eventlake_messages_suppressed_total",
                self.suppressed,
                "Messages of a suppressed userId, blocked and not archived, by source.",
            ),
            (
                "eventlake_messages_ip_filled_total",
                self.ip_filled,
                "Messages whose context.ip was filled from the request, by source.",
            ),
        ]
        for name, counter, help_text in by_source:
            yield _counter(name, help_text, ("source",), {(k,): n for k, n in sorted(counter.items())})
        yield _counter(
            "eventlake_messages_invalid_total",
            "Acknowledged messages that fail validation, by source and reason (archived; the sync "
            "quarantines them).",
            ("source", "reason"),
            dict(sorted(self.invalid.items())),
        )
        yield CounterMetricFamily(
            "eventlake_received_bytes_total", "Request body bytes received.", value=self.received_bytes
        )
        yield CounterMetricFamily(
            "eventlake_client_metrics_requests_total",
            "analytics.js telemetry posts to /v1/m (answered, not stored).",
            value=self.client_metrics,
        )
        for name, kind, help_text, attr in _SPOOL:
            family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            yield family(name, help_text, value=getattr(spool, attr))
        yield self._latency()

    def _latency(self) -> HistogramMetricFamily:
        cumulative, buckets = 0, []
        for bound, count in zip((*LATENCY_BUCKETS, float("inf")), self._bucket_counts, strict=True):
            cumulative += count
            # prometheus_client leaves floatToGoString unannotated
            buckets.append((floatToGoString(bound), cumulative))  # type: ignore[no-untyped-call]
        return HistogramMetricFamily(
            "eventlake_request_duration_seconds",
            "Time from a request's arrival to its answer, /v1/* endpoints.",
            buckets=buckets,
            sum_value=self._latency_sum,
        )


class _Scrape:
    """One scrape as a prometheus-client collector: the families of ``metrics`` and ``spool``."""

    def __init__(self, metrics: CollectorMetrics, spool: SpoolStats) -> None:
        self.metrics = metrics
        self.spool = spool

    def collect(self) -> Iterator[Metric]:
        return self.metrics.families(self.spool)


def _counter(
    name: str, help_text: str, labels: tuple[str, ...], samples: Mapping[tuple[str, ...], float]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, help_text, labels=labels)
    for values, value in samples.items():
        family.add_metric(values, value)
    return family
