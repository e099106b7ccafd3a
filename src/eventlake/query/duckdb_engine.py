"""The DuckDB engine: the lake's Parquet files queried in-process, with no JVM and no metastore.

Every table the query names gets a view ``"<database>"."<table>"`` over its partition folders,
typed from the table's schema file (``segment-data/_state/schemas/``): data columns in the
schema's order and types (a column missing from older files reads NULL), then the partition keys
as strings, exactly as Spark shows the table. Timestamps are UTC. Spark's backtick-quoted
identifiers and ``SHOW TABLES IN db`` are translated (see :mod:`eventlake.query.dialect`).

DuckDB reads every partition folder on disk, where Spark reads the partitions registered in the
catalog; the two differ only while a sync is publishing. In each folder it reads the data files by
the lake's rule (:func:`eventlake.layout.visible_data_files`), so a compaction in progress is seen
before or after, never both. A lake on an object store is read
through :mod:`eventlake.storage` (an Arrow dataset on :func:`~eventlake.storage.arrow.arrow_filesystem`),
since DuckDB's httpfs extension may not be installable: the same credentials and endpoint as the sync.
"""

from __future__ import annotations

import re

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds

from eventlake import layout
from eventlake.catalog.base import TableSpec
from eventlake.catalog.schema_file import read_schema_files
from eventlake.config import Settings
from eventlake.query.dialect import spark_to_duckdb
from eventlake.query.engine import QueryError, QueryResult, first_line
from eventlake.schema.arrow import arrow_schema
from eventlake.storage import Storage, to_location
from eventlake.storage.arrow import arrow_filesystem

# eventlake's column types (eventlake.schema.types) and a few more Spark names, as DuckDB types
_TYPES = {
    "string": "VARCHAR",
    "bigint": "BIGINT",
    "int": "INTEGER",
    "integer": "INTEGER",
    "smallint": "SMALLINT",
    "tinyint": "TINYINT",
    "boolean": "BOOLEAN",
    "double": "DOUBLE",
    "float": "FLOAT",
    "date": "DATE",
    "timestamp": "TIMESTAMP",  # Spark's session zone is UTC: naive UTC values, like Spark's
    "binary": "BLOB",
}
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z0-9_]+")


def duckdb_type(spark_type: str) -> str:
    """
    >>> duckdb_type("decimal(38,6)"), duckdb_type("timestamp"), duckdb_type("string")
    ('DECIMAL(38,6)', 'TIMESTAMP', 'VARCHAR')
    """
    decimal = _DECIMAL.fullmatch(spark_type.strip())
    if decimal:
        return f"DECIMAL({decimal[1]},{decimal[2]})"
    return _TYPES.get(spark_type.strip().lower(), spark_type)


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def view_sql(spec: TableSpec, scan: str | None) -> str:
    """``CREATE VIEW`` for one table over ``scan`` (the FROM of its Parquet files; None: no files)."""
    columns = [f"CAST({ident(n)} AS {duckdb_type(t)}) AS {ident(n)}" for n, t in spec.columns]
    keys = [f"CAST({ident(k)} AS VARCHAR) AS {ident(k)}" for k in spec.partition_keys]
    view = f"CREATE VIEW {ident(spec.database)}.{ident(spec.name)} AS SELECT "
    if scan is None:
        nulls = [f"CAST(NULL AS {duckdb_type(t)}) AS {ident(n)}" for n, t in spec.columns]
        nulls += [f"CAST(NULL AS VARCHAR) AS {ident(k)}" for k in spec.partition_keys]
        return view + ", ".join(nulls) + " WHERE false"
    return view + ", ".join(columns + keys) + f" FROM {scan}"


def table_scan(con: duckdb.DuckDBPyConnection, storage: Storage, spec: TableSpec, index: int) -> str | None:
    """The FROM clause over a table's ``k=v/.../*.parquet`` data files (the rule of
    :func:`eventlake.layout.visible_data_files`: a compaction's files once committed, never with the
    files they replace); None when it has none. On disk DuckDB reads the listed files itself; on an
    object store they are an Arrow dataset read through ``storage``."""
    location = to_location(spec.location)
    files = [str(f.path) for f in layout.table_data_files(storage, location, len(spec.partition_keys))]
    if not files:
        return None
    if storage.local_path(location) is not None:
        listed = "[" + ", ".join(literal(f) for f in files) + "]"
        hive = ", hive_partitioning = true, hive_types_autocast = false" if spec.partition_keys else ""
        return f"read_parquet({listed}, union_by_name = true{hive})"
    keys = pa.schema([(k, pa.string()) for k in spec.partition_keys])
    dataset = ds.dataset(
        files, schema=pa.unify_schemas([arrow_schema(spec.columns), keys]), format="parquet",
        filesystem=arrow_filesystem(storage), partitioning=ds.partitioning(keys, flavor="hive"),
        partition_base_dir=str(location),
    )  # fmt: skip
    name = f"__eventlake_table_{index}"
    con.register(name, dataset)
    return ident(name)


def tables_named_in(sql: str, specs: list[TableSpec]) -> list[TableSpec]:
    """The tables a query can refer to: those whose name appears in it as a word (all of them when
    none does, for ``SHOW TABLES`` or ``information_schema``). Only their files are opened.

    >>> specs = [TableSpec("web", n, (), (), "/l") for n in ("page", "identify")]
    >>> [s.name for s in tables_named_in("SELECT count(*) FROM web.page", specs)]
    ['page']
    """
    words = {w.lower() for w in _WORD.findall(sql)}
    named = [s for s in specs if s.name.lower() in words]
    return named or specs


def connect(settings: Settings, sql: str = "") -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB in UTC with a view per lake table named in ``sql`` (every table when
    ``sql`` is empty), in a schema per database."""
    storage = settings.lake.storage()
    specs = [s for s in read_schema_files(storage, settings.lake.root) if s.format == "parquet"]
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET TimeZone = 'UTC'")
        for database in sorted({s.database for s in specs}):
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {ident(database)}")
        for index, spec in enumerate(tables_named_in(sql, specs) if sql else specs):
            con.execute(view_sql(spec, table_scan(con, storage, spec, index)))
    except duckdb.Error as exc:
        con.close()
        raise QueryError(f"cannot open the lake in DuckDB: {first_line(exc)}") from None
    return con


def run_duckdb(settings: Settings, sql: str) -> QueryResult:
    """The rows of ``sql`` (Spark-style SQL accepted: see :func:`spark_to_duckdb`)."""
    translated = spark_to_duckdb(sql)
    con = connect(settings, translated)
    try:
        cursor = con.execute(translated)
        if cursor.description is None:
            return QueryResult((), ())
        columns = tuple(d[0] for d in cursor.description)
        return QueryResult.of(columns, cursor.fetchall())
    except duckdb.Error as exc:
        hint = ""
        if isinstance(exc, duckdb.CatalogException) and not read_schema_files(
            settings.lake.storage(), settings.lake.root
        ):
            hint = (
                f" (no table has a schema file under {settings.lake.root} yet: `eventlake sync` writes them)"
            )
        raise QueryError(f"query failed: {first_line(exc)}{hint}") from None
    finally:
        con.close()
