"""``eventlake up``: the collector plus one long-lived engine (a Spark session that syncs every
``[sync] interval_seconds`` and serves SQL); ``eventlake engine``: that engine alone."""

from eventlake.scheduler.engine import run_engine
from eventlake.scheduler.up import EngineSupervisor, run_up

__all__ = ["EngineSupervisor", "run_engine", "run_up"]
