"""Sync history and health, read from the report files of the lake."""

from eventlake.reports.history import HEALTH_COLUMNS, RUN_COLUMNS, daily_health, run_history

__all__ = ["HEALTH_COLUMNS", "RUN_COLUMNS", "daily_health", "run_history"]
