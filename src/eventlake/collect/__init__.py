"""The collector: a Segment-compatible HTTP Tracking API that spools, fsyncs, then acknowledges."""

from eventlake.collect.app import create_app
from eventlake.collect.server import run_collector

__all__ = ["create_app", "run_collector"]
