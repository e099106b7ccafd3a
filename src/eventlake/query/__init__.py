"""Query engines over the lake: Spark SQL through the catalog (the default) and DuckDB over the files."""

from eventlake.query.engine import run_query
from eventlake.query.result import QueryResult

__all__ = ["QueryResult", "run_query"]
