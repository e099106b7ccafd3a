"""``eventlake up``: the collector plus a sync every ``[sync] interval_seconds``."""

from eventlake.scheduler.up import SyncScheduler, run_up

__all__ = ["SyncScheduler", "run_up"]
