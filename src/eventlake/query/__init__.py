"""Query engines over the catalog: Spark SQL (the default)."""

from eventlake.query.engine import QueryResult, run_query

__all__ = ["QueryResult", "run_query"]
