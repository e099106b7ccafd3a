"""``CollectorMetrics.render`` without a server: Prometheus' own parser reads what it counted."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from eventlake.archive import SpoolStats
from eventlake.collect.metrics import LATENCY_BUCKETS, CollectorMetrics


def parsed(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text.decode())
        for sample in family.samples
    }


def test_counters_gauges_and_the_histogram() -> None:
    metrics = CollectorMetrics(["web", "app"])
    for status, seconds in [(200, 0.003), (200, 0.5), (400, 20.0)]:
        metrics.observe_request(status, seconds)
    metrics.reject(400, "invalid_json")
    metrics.accepted["web"] += 5
    metrics.invalid[("web", "missing_event")] += 2
    metrics.received_bytes += 1234
    spool = SpoolStats(
        messages=5,
        bytes=100,
        pending_bytes=3,
        spool_bytes=7,
        spool_segments=2,
        sealed_files=1,
        upload_failures=4,
    )

    samples = parsed(metrics.render(spool))

    assert samples[("eventlake_requests_total", (("status", "200"),))] == 2
    assert samples[("eventlake_requests_rejected_total", (("code", "invalid_json"), ("status", "400")))] == 1
    assert samples[("eventlake_messages_accepted_total", (("source", "web"),))] == 5
    assert samples[("eventlake_messages_accepted_total", (("source", "app"),))] == 0  # every source, from 0
    assert (
        samples[("eventlake_messages_invalid_total", (("reason", "missing_event"), ("source", "web")))] == 2
    )
    assert samples[("eventlake_received_bytes_total", ())] == 1234
    assert samples[("eventlake_spool_messages_total", ())] == 5
    assert samples[("eventlake_spool_size_bytes", ())] == 7
    assert samples[("eventlake_spool_segments", ())] == 2
    assert samples[("eventlake_archive_upload_failures_total", ())] == 4
    name = "eventlake_request_duration_seconds"
    buckets = [samples[(f"{name}_bucket", (("le", str(bound)),))] for bound in LATENCY_BUCKETS]
    assert buckets[:3] == [0, 0, 1] and buckets[-1] == 2  # cumulative; 20 s only in +Inf
    assert samples[(f"{name}_bucket", (("le", "+Inf"),))] == samples[(f"{name}_count", ())] == 3
    assert samples[(f"{name}_sum", ())] == 20.503


def test_every_family_is_typed_even_before_anything_happened() -> None:
    text = CollectorMetrics().render(SpoolStats()).decode()
    types = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert types["eventlake_requests"] == "counter"  # the parser strips _total from counter families
    assert types["eventlake_spool_pending_bytes"] == "gauge"
    assert types["eventlake_request_duration_seconds"] == "histogram"
    assert "# TYPE eventlake_requests_total counter" in text.splitlines()


def test_label_values_are_escaped() -> None:
    metrics = CollectorMetrics()
    metrics.reject(400, 'a "quoted"\\ code\non two lines')
    samples = parsed(metrics.render(SpoolStats()))
    key = (
        "eventlake_requests_rejected_total",
        (("code", 'a "quoted"\\ code\non two lines'), ("status", "400")),
    )
    assert samples[key] == 1
