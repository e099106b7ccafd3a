"""The DuckDB engine: the lake's Parquet files queried in-process, with no JVM and no metastore.

Every table the query names gets a view ``"<database>"."<table>"`` over its partition folders,
typed from the table's schema file (``segment-data/_state/schemas/``): data columns in the
schema's order and types (a column a file lacks reads NULL, even when no file has it), then the
partition keys as strings, exactly as Spark shows the table. A table whose files DuckDB cannot
open fails only the queries of its rows (:func:`unreadable_view_sql`). Timestamps are UTC.
Spark's backtick-quoted identifiers and ``SHOW TABLES IN db`` are translated (see
:mod:`eventlake.query.dialect`).

DuckDB reads every partition folder on disk, where Spark reads the partitions registered in the
catalog; the two differ only while a sync is publishing. In each folder it reads the data files by
the lake's rule (:func:`eventlake.layout.partition_data`), so a rewrite in progress is seen
before or after, never both. A lake on an object store is read
through :mod:`eventlake.storage` (an Arrow dataset on :func:`~eventlake.storage.arrow.arrow_filesystem`),
since DuckDB's httpfs extension may not be installable: the same credentials and endpoint as the sync.
"""

from __future__ import annotations

import re
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pyarrow.dataset as ds

from eventlake import layout, partitions
from eventlake.catalog.base import TableSpec
from eventlake.catalog.schema_file import read_schema_files
from eventlake.catalog.views import database_views
from eventlake.config import Settings
from eventlake.query.dialect import spark_to_duckdb
from eventlake.query.errors import QueryError, first_line
from eventlake.query.result import QueryResult
from eventlake.schema.arrow import arrow_schema
from eventlake.schema.warehouse import Views
from eventlake.schema.warehouse import view_sql as warehouse_sql
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
# statements the read-only connection runs (see connect(read_only=True)); everything else is refused
# (SHOW, DESCRIBE and SUMMARIZE are SELECTs; EXPLAIN is not: EXPLAIN ANALYZE runs what it explains)
READ_ONLY_STATEMENTS = ("SELECT",)
READ_ONLY_MEMORY = "2GB"  # a query box statement's memory (it runs inside `eventlake up`)
# table functions a read-only query may call: they make rows, read none (read_parquet, read_json,
# glob, read_text and the like read files by path, and are refused: see refuse_file_reads)
READ_ONLY_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest", "json_each", "json_tree"})
_METADATA_FUNCTIONS = ("duckdb_", "pragma_")  # the catalog's own tables (duckdb_tables(), ...)


def duckdb_type(spark_type: str) -> str:
    """
    >>> duckdb_type("decimal(38,6)"), duckdb_type("timestamp"), duckdb_type("string")
    ('DECIMAL(38,6)', 'TIMESTAMP', 'VARCHAR')
    >>> duckdb_type("array<map<string,string>>"), duckdb_type("array<struct<name:string,type:string>>")
    ('MAP(VARCHAR, VARCHAR)[]', 'STRUCT("name" VARCHAR, "type" VARCHAR)[]')
    """
    text = spark_type.strip()
    lower = text.lower()
    if lower.startswith("array<") and lower.endswith(">"):
        return duckdb_type(text[6:-1]) + "[]"
    if lower.startswith("map<") and lower.endswith(">"):
        key, value = _split_top(text[4:-1])
        return f"MAP({duckdb_type(key)}, {duckdb_type(value)})"
    if lower.startswith("struct<") and lower.endswith(">"):
        fields = [field.split(":", 1) for field in _split_top(text[7:-1])]
        return "STRUCT(" + ", ".join(f"{ident(n.strip())} {duckdb_type(t)}" for n, t in fields) + ")"
    decimal = _DECIMAL.fullmatch(text)
    if decimal:
        return f"DECIMAL({decimal[1]},{decimal[2]})"
    return _TYPES.get(lower, text)


def _split_top(text: str) -> list[str]:
    """``a,b<c,d>`` -> ``['a', 'b<c,d>']``: the comma-separated parts outside ``<>``."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"<": 1, ">": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def view_sql(spec: TableSpec, scan: str | None, present: Iterable[str] = ()) -> str:
    """``CREATE VIEW`` for one table over ``scan`` (the FROM of its files; None: no files): its
    columns, then its partition keys (folders of a Parquet table, fields of a JSON table's rows).
    ``present``: the columns ``scan`` has (:func:`scan_columns`); a column of the table that none
    of its files has (an older writer's files only) reads NULL of its type, like a file lacking a
    column among files having it (read by name, ``union_by_name``)."""
    have = {n.lower() for n in present}  # DuckDB's names are case-insensitive

    def column(name: str, kind: str) -> str:
        value = ident(name) if scan is not None and name.lower() in have else "NULL"
        return f"CAST({value} AS {kind}) AS {ident(name)}"

    selected = [column(n, duckdb_type(t)) for n, t in spec.columns]
    selected += [column(k, "VARCHAR") for k in spec.partition_keys]
    view = f"CREATE VIEW {ident(spec.database)}.{ident(spec.name)} AS SELECT " + ", ".join(selected)
    return view + (" WHERE false" if scan is None else f" FROM {scan}")


def scan_columns(con: duckdb.DuckDBPyConnection, scan: str) -> list[str]:
    """The columns ``scan`` has (every file's, by name)."""
    return [row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()]


def unreadable_view_sql(spec: TableSpec, error: str) -> str:
    """``CREATE VIEW`` for a table whose files DuckDB cannot open: its columns, and a query of
    its rows fails with ``error`` (the other tables stay readable)."""
    message = f"cannot read the table {spec.qualified}: {error}"
    view = view_sql(spec, None).removesuffix(" WHERE false")
    return view + f" FROM (SELECT error({literal(message)}) AS e) WHERE e IS NULL"


def json_scan(storage: Storage, spec: TableSpec, scratch: Path) -> str | None:
    """The FROM clause over a JSON table's files (the sync reports: one JSON object per line, the
    partition keys among the fields); None when it has none. On an object store the files are
    copied into one file under ``scratch`` first (DuckDB's httpfs may not be installable)."""
    location = to_location(spec.location)
    if spec.partition_path == layout.REPORT_PARTITION_PATH:  # a run's files and merged days'
        files = partitions.report_table_files(storage, location)
    else:
        files = [info.path for info in storage.list(location, _glob(spec))]
    if not files:
        return None
    columns = [*spec.columns, *((k, "string") for k in spec.partition_keys)]
    types = "{" + ", ".join(f"{literal(n)}: {literal(duckdb_type(t))}" for n, t in columns) + "}"
    if storage.local_path(location) is not None:
        listed = [str(storage.local_path(f)) for f in files]
    else:
        copy = scratch / f"{spec.database}.{spec.name}.json"
        copy.write_bytes(b"".join(storage.read(f).rstrip(b"\n") + b"\n" for f in files))
        listed = [str(copy)]
    paths = "[" + ", ".join(literal(p) for p in listed) + "]"
    return f"read_json({paths}, format = 'newline_delimited', columns = {types})"


def _glob(spec: TableSpec) -> str:
    """The files of a table laid out by its ``partition_path`` (``day={day}/...``), any name."""
    return re.sub(r"\{\w+\}", "*", spec.partition_path) + "/*" if spec.partition_path else "*"


def table_scan(con: duckdb.DuckDBPyConnection, storage: Storage, spec: TableSpec, index: int) -> str | None:
    """The FROM clause over a table's ``k=v/.../*.parquet`` data files (the rule of
    :func:`eventlake.layout.partition_data`: a rewrite's files once committed, never with the
    files they replace); None when it has none. On disk DuckDB reads the listed files itself; on an
    object store they are an Arrow dataset read through ``storage``."""
    location = to_location(spec.location)
    files = [str(f.path) for f in partitions.table_data_files(storage, location, len(spec.partition_keys))]
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


def tables_named_in(
    sql: str, specs: list[TableSpec], views: Sequence[tuple[str, Views]] = ()
) -> list[TableSpec]:
    """The tables a query can read: those whose name appears in it as a word, and those the
    warehouse views it names read. Only their files are opened (the others are defined with their
    columns and no rows: ``SHOW TABLES`` and ``information_schema`` see every table).

    >>> specs = [TableSpec("web", n, (), (), "/l") for n in ("page", "identify")]
    >>> [s.name for s in tables_named_in("SELECT count(*) FROM web.page", specs)]
    ['page']
    >>> tables_named_in("SELECT * FROM web.not_yet_synced", specs)
    []
    """
    words = {w.lower() for w in _WORD.findall(sql)}
    wanted = {(s.database, s.name) for s in specs if s.name.lower() in words}
    for database, found in views:
        for view in found.views:
            if view.name.lower() in words:
                wanted.update((database, select.table) for select in view.selects)
    return [s for s in specs if (s.database, s.name) in wanted]


def connect(
    settings: Settings, sql: str, scratch: Path, *, read_only: bool = False
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB in UTC with a view per lake table (over its files when ``sql`` names it,
    or every table when ``sql`` is empty: :func:`define_lake`), in a schema per database;
    ``scratch``: a folder for copies of an object store's JSON tables, kept while the connection is
    used.

    Each source's warehouse views (``tracks``, ``pages``, ``users``, one per event: see
    :mod:`eventlake.schema.warehouse`) are defined over its tables, as the catalog has them.

    ``read_only``: the connection then reads files only in the folders of the lake's tables (and
    ``scratch``): not the lake's state (``_state/``: the deletion audit names erased users) nor
    the raw archive; its settings are locked; :func:`run_duckdb` with ``read_only`` also refuses
    any statement that is not a query, and any query reading files by path
    (:func:`check_read_only`)."""
    storage = settings.lake.storage()
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET TimeZone = 'UTC'")
        specs = lake_tables(settings)
        define_lake(con, settings, specs, sql, scratch)
        if read_only:
            folders = [storage.local_path(to_location(spec.location)) for spec in specs]
            allowed = [str(p).rstrip("/") + "/" for p in (*folders, scratch) if p is not None]
            con.execute(f"SET allowed_directories = [{', '.join(literal(p) for p in allowed)}]")
            con.execute(f"SET temp_directory = {literal(str(scratch))}")
            con.execute(f"SET memory_limit = {literal(READ_ONLY_MEMORY)}")
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
    except duckdb.Error as exc:
        con.close()
        raise QueryError(f"cannot open the lake in DuckDB: {first_line(exc)}") from None
    return con


def lake_tables(settings: Settings) -> list[TableSpec]:
    """The lake's tables DuckDB reads (Parquet and JSON), from their schema files."""
    specs = read_schema_files(settings.lake.storage(), settings.lake.root)
    return [s for s in specs if s.format in ("parquet", "json")]


def define_lake(
    con: duckdb.DuckDBPyConnection, settings: Settings, specs: list[TableSpec], sql: str, scratch: Path
) -> list[str]:
    """Create, in ``con``, a schema per database of ``specs`` (:func:`lake_tables`) with a view per
    table, over its files when ``sql`` reads it (:func:`tables_named_in`; every table when ``sql``
    is empty), else with its columns and no rows (a query's cost does not grow with the tables it
    does not read), and the warehouse views over them; the views' names."""
    storage = settings.lake.storage()
    views = database_views(specs)
    for database in sorted({s.database for s in specs}):
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {ident(database)}")
    opened = {(s.database, s.name) for s in (tables_named_in(sql, specs, views) if sql else specs)}
    made = []
    for index, spec in enumerate(specs):
        if (spec.database, spec.name) not in opened:  # a query that does not read it: no listing
            con.execute(view_sql(spec, None))
        else:
            _define_table(con, storage, spec, index, scratch)
        made.append(spec.qualified)
    have = {(s.database, s.name) for s in specs}
    for database, found in views:  # the warehouse views over the tables
        for view in found.views:
            if all((database, select.table) in have for select in view.selects):
                select = warehouse_sql(view, database, ident, duckdb_type)
                con.execute(f"CREATE VIEW {ident(database)}.{ident(view.name)} AS {select}")
                made.append(f"{database}.{view.name}")
    return made


def _define_table(
    con: duckdb.DuckDBPyConnection, storage: Storage, spec: TableSpec, index: int, scratch: Path
) -> None:
    """The view of one table over its files; when DuckDB cannot open them (a damaged file), a
    view whose rows fail with DuckDB's error: one table's problem does not close the lake. Files
    opened by path are probed on a cursor of their own: a failed statement would abort ``con``'s
    transaction (:func:`write_database_file`); an object store's are an Arrow dataset registered
    on ``con``, typed by the schema file."""
    try:
        if spec.format == "json":
            scan = json_scan(storage, spec, scratch)
        else:
            scan = table_scan(con, storage, spec, index)
        present: list[str] = []
        if scan is not None:
            local = storage.local_path(to_location(spec.location)) is not None
            probe = con.cursor() if local else con
            try:
                present = scan_columns(probe, scan)
            finally:
                if probe is not con:
                    probe.close()
        con.execute(view_sql(spec, scan, present))
    except duckdb.Error as exc:
        con.execute(unreadable_view_sql(spec, first_line(exc)))


def write_database_file(settings: Settings, path: Path) -> list[str]:
    """A DuckDB database file with the lake's tables and warehouse views as views over its
    Parquet files (for dbt-duckdb and BI tools): the files of each table as they are now (the same
    as ``eventlake sql --engine duckdb`` reads), so write it again after a sync. The schemas of the
    lake's databases are replaced whole; any other schema in the file (dbt's models) is kept.
    The views' names."""
    storage = settings.lake.storage()
    if storage.local_path(settings.lake.root) is None:
        raise QueryError(
            f"a DuckDB file reads the lake's files from disk, and {settings.lake.root} is in a bucket "
            "(DuckDB's httpfs extension cannot be installed here): query it with `eventlake sql` "
            "(either engine), Spark's Thrift server or Athena"
        )
    specs = lake_tables(settings)
    try:
        con = duckdb.connect(str(path))
    except duckdb.Error as exc:
        raise QueryError(
            f"cannot open {path}: {first_line(exc)} (a dbt run or a BI tool may hold it)"
        ) from None
    try:
        con.execute("BEGIN TRANSACTION")  # readers see the old views or the new ones
        for database in sorted({s.database for s in specs}):
            con.execute(f"DROP SCHEMA IF EXISTS {ident(database)} CASCADE")
        made = define_lake(con, settings, specs, "", path.parent)
        con.execute("COMMIT")
        return made
    except duckdb.Error as exc:
        raise QueryError(f"cannot write {path}: {first_line(exc)}") from None
    finally:
        con.close()


def check_read_only(sql: str) -> None:
    """Refuse anything but one query (``SELECT``, ``WITH``, ``SHOW``, ``DESCRIBE``, ``SUMMARIZE``)."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"query failed: {first_line(exc)}") from None
    if len(statements) != 1:
        raise QueryError(f"one statement at a time, please (got {len(statements)})")
    kind = statements[0].type.name
    if kind not in READ_ONLY_STATEMENTS:
        raise QueryError(f"only queries run here: a {kind} statement is refused (the console is read-only)")
    refuse_file_reads(sql)


def refuse_file_reads(sql: str) -> None:
    """Refuse a query that reads files by path: a table function other than
    :data:`READ_ONLY_TABLE_FUNCTIONS` and the catalog's own (``read_parquet``, ``read_json``,
    ``glob``, ``read_text``, ...) or a path as a table (``FROM 'x.parquet'``). The read-only
    connection cannot open a file outside the tables' folders anyway (:func:`connect`); this names
    what is refused and what to do instead, before anything is opened.

    >>> refuse_file_reads("SELECT * FROM range(3) JOIN web.page ON true")
    >>> refuse_file_reads("SELECT * FROM glob('/lake/*')")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    eventlake.query.errors.QueryError: the query box reads the lake's tables by name, not files: glob() ...
    """
    con = duckdb.connect(":memory:")
    try:
        tree = orjson.loads(con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0])  # type: ignore[index]
    finally:
        con.close()
    if tree.get("error"):
        raise QueryError(f"query failed: {tree.get('error_message', 'it does not parse')}")
    for node in _nodes(tree):
        if node.get("type") == "TABLE_FUNCTION":
            name = str(node.get("function", {}).get("function_name", "")).lower()
            if name in READ_ONLY_TABLE_FUNCTIONS or name.startswith(_METADATA_FUNCTIONS):
                continue
            what = f"{name}()"
        elif node.get("type") == "BASE_TABLE" and any(c in str(node.get("table_name")) for c in "/.*"):
            what = f"the path {node['table_name']!r} as a table"
        else:
            continue
        raise QueryError(
            f"the query box reads the lake's tables by name, not files: {what} is refused (query a "
            "table, e.g. SELECT * FROM <database>.<table>; SHOW ALL TABLES lists them)"
        )


def _nodes(tree: object) -> Iterator[dict[str, Any]]:
    """Every object of a parse tree (``json_serialize_sql``), depth first."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def run_duckdb(
    settings: Settings, sql: str, *, read_only: bool = False, max_rows: int | None = None,
    timeout: float | None = None,
) -> QueryResult:  # fmt: skip
    """The rows of ``sql`` (Spark-style SQL accepted: see :func:`spark_to_duckdb`).

    ``read_only``: one query only, reading nothing outside the lake (see :func:`check_read_only`);
    ``max_rows``: at most that many rows (``QueryResult.truncated`` says when more were left);
    ``timeout``: seconds after which the statement is interrupted (a :class:`QueryError`)."""
    translated = spark_to_duckdb(sql)
    if read_only:
        check_read_only(translated)
    with tempfile.TemporaryDirectory(prefix="eventlake-duckdb-") as scratch:
        con = connect(settings, translated, Path(scratch), read_only=read_only)
        timer = threading.Timer(timeout, con.interrupt) if timeout else None
        try:
            if timer is not None:
                timer.start()
            return _rows(con.execute(translated), max_rows)
        except duckdb.InterruptException:
            raise QueryError(f"the query ran past {timeout:g} s and was stopped") from None
        except duckdb.Error as exc:
            raise _query_error(settings, exc) from None
        finally:
            if timer is not None:
                timer.cancel()
            con.close()


def _rows(cursor: duckdb.DuckDBPyConnection, max_rows: int | None) -> QueryResult:
    if cursor.description is None:
        return QueryResult((), ())
    columns = tuple(d[0] for d in cursor.description)
    if max_rows is None:
        return QueryResult.of(columns, cursor.fetchall())
    rows = cursor.fetchmany(max_rows + 1)
    return QueryResult.of(columns, rows[:max_rows], truncated=len(rows) > max_rows)


def _query_error(settings: Settings, exc: duckdb.Error) -> QueryError:
    hint = ""
    if isinstance(exc, duckdb.CatalogException) and not read_schema_files(
        settings.lake.storage(), settings.lake.root
    ):
        hint = f" (no table has a schema file under {settings.lake.root} yet: `eventlake sync` writes them)"
    return QueryError(f"query failed: {first_line(exc)}{hint}")
