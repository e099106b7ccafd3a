"""Query engines over the lake: Spark SQL through the catalog (the default) and DuckDB over the files."""

from eventlake.query.engine import QueryResult, run_query

__all__ = ["QueryResult", "run_query"]
