"""The collector's counters and their Prometheus text exposition (``GET /metrics``).

Hand-written exposition format 0.0.4: counters, gauges and one histogram, no client library.
Everything is counted in the event loop's thread, so plain integers suffice; the spool's own
counters come from :meth:`eventlake.archive.Spool.stats` when the page is rendered.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections import Counter
from collections.abc import Iterable

from eventlake.archive import SpoolStats

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# request latency buckets, seconds (a durable acknowledgement costs at least one fsync)
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# spec.validate's reasons, as bounded label values
_REASONS = (
    (re.compile(r"^message is not a JSON object"), "not_an_object"),
    (re.compile(r"^unknown type"), "unknown_type"),
    (re.compile(r"^neither userId nor anonymousId"), "missing_user_id_and_anonymous_id"),
    (re.compile(r"^\w+ message without (\w+)"), "missing_{0}"),
    (re.compile(r"^messageId is not a string"), "invalid_message_id"),
    (re.compile(r"^messageId longer than"), "message_id_too_long"),
    (re.compile(r"^(\w+) .* is not an ISO-8601 date-time"), "invalid_{0}"),
    (re.compile(r"^receivedAt missing or invalid"), "invalid_received_at"),
)
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
    ("eventlake_spool_size_bytes", "gauge", "Bytes in spool segments not sealed yet.", "spool_bytes"),
    ("eventlake_sealed_files_total", "counter", "Archive files sealed (recovered included).", "sealed_files"),
    (
        "eventlake_recovered_segments_total",
        "counter",
        "Segments of a crashed process sealed.",
        "recovered_segments",
    ),
    ("eventlake_spool_write_errors_total", "counter", "Group commits that failed (503).", "write_errors"),
    ("eventlake_seal_errors_total", "counter", "Failed seal attempts (retried).", "seal_errors"),
)
_SNAKE = re.compile(r"(?<=[a-z0-9])([A-Z])")


def reason_label(reason: str) -> str:
    """A bounded label value for a :func:`eventlake.spec.validate` reason.

    >>> reason_label("track message without event")
    'missing_event'
    >>> reason_label("alias message without previousId")
    'missing_previous_id'
    >>> reason_label("sentAt 'yesterday' is not an ISO-8601 date-time")
    'invalid_sent_at'
    >>> reason_label("unknown type 'launch' (expected one of track, ...)")
    'unknown_type'
    """
    for pattern, label in _REASONS:
        match = pattern.match(reason)
        if match:
            return label.format(*(_SNAKE.sub(r"_\1", group).lower() for group in match.groups()))
    return "other"


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

    def observe_request(self, status: int, seconds: float) -> None:
        self.requests[status] += 1
        self._bucket_counts[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self._latency_sum += seconds

    def reject(self, status: int, code: str) -> None:
        self.rejected[(status, code)] += 1

    def render(self, spool: SpoolStats) -> bytes:
        out: list[str] = []
        family = functools.partial(_family, out)
        family(
            "eventlake_requests_total",
            "counter",
            "Tracking API requests, by HTTP status.",
            [({"status": str(status)}, n) for status, n in sorted(self.requests.items())],
        )
        family(
            "eventlake_requests_rejected_total",
            "counter",
            "Requests answered with an error, by HTTP status and error code (nothing of them is stored).",
            [({"status": str(s), "code": c}, n) for (s, c), n in sorted(self.rejected.items())],
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
            family(name, "counter", help_text, [({"source": k}, n) for k, n in sorted(counter.items())])
        family(
            "eventlake_messages_invalid_total",
            "counter",
            "Acknowledged messages that fail validation, by source and reason (archived; the sync "
            "quarantines them).",
            [({"source": k, "reason": r}, n) for (k, r), n in sorted(self.invalid.items())],
        )
        singles = [
            (
                "eventlake_received_bytes_total",
                "counter",
                "Request body bytes received.",
                self.received_bytes,
            ),
            (
                "eventlake_client_metrics_requests_total",
                "counter",
                "analytics.js telemetry posts to /v1/m (answered, not stored).",
                self.client_metrics,
            ),
        ]
        singles += [(name, kind, help_text, getattr(spool, attr)) for name, kind, help_text, attr in _SPOOL]
        for name, kind, help_text, value in singles:
            family(name, kind, help_text, [({}, value)])
        self._render_latency(out)
        return ("\n".join(out) + "\n").encode()

    def _render_latency(self, out: list[str]) -> None:
        name = "eventlake_request_duration_seconds"
        _family(out, name, "histogram", "Time from a request's arrival to its answer, /v1/* endpoints.", [])
        cumulative = 0
        for bound, count in zip(LATENCY_BUCKETS, self._bucket_counts, strict=False):
            cumulative += count
            out.append(f'{name}_bucket{{le="{bound}"}} {cumulative}')
        cumulative += self._bucket_counts[-1]
        out.append(f'{name}_bucket{{le="+Inf"}} {cumulative}')
        out.append(f"{name}_sum {self._latency_sum:.6f}")
        out.append(f"{name}_count {cumulative}")


def _family(
    out: list[str], name: str, kind: str, help_text: str, samples: Iterable[tuple[dict[str, str], float]]
) -> None:
    out.append(f"# HELP {name} {help_text}")
    out.append(f"# TYPE {name} {kind}")
    for labels, value in samples:
        out.append(f"{name}{_labels(labels)} {value}")


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items()) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
