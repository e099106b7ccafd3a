"""Sync history, read from the report files of the lake."""

from eventlake.reports.history import RUN_COLUMNS, run_history

__all__ = ["RUN_COLUMNS", "run_history"]
