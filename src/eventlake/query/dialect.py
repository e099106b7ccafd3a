"""The little Spark SQL the DuckDB engine translates, so that both engines accept the same queries.

Only what differs in *syntax* for simple queries: Spark's backtick-quoted identifiers and
``SHOW TABLES IN db``. Functions, types and string-literal escapes are not rewritten: they are
the same in both for the simple SQL the docs show (``count``, ``sum``, ``coalesce``, ``CAST``,
``GROUP BY``, joins, ``UNION ALL``), and the rest is each engine's own.
"""

from __future__ import annotations

import re

_SHOW_TABLES_IN = re.compile(r"^(\s*SHOW\s+TABLES\s+)IN(\s)", re.IGNORECASE)


def _end_of_literal(sql: str, start: int) -> int:
    """The index just past the quoted text opening at ``start`` (Spark rules: ``\\x`` and a doubled
    quote escape); the end of ``sql`` when it is not closed."""
    quote = sql[start]
    i = start + 1
    while i < len(sql):
        char = sql[i]
        if char == "\\":
            i += 2
        elif char == quote:
            if sql.startswith(quote, i + 1):
                i += 2
            else:
                return i + 1
        else:
            i += 1
    return len(sql)


def backticks_to_double_quotes(sql: str) -> str:
    """Spark's `` `quoted` `` identifiers as standard ``"quoted"`` ones, outside string literals and
    comments. A doubled backtick inside is a backtick; a double quote inside is doubled.

    >>> backticks_to_double_quotes("SELECT `day`, count(*) AS `n` FROM `web`.`page` GROUP BY `day`")
    'SELECT "day", count(*) AS "n" FROM "web"."page" GROUP BY "day"'
    >>> backticks_to_double_quotes("SELECT '`not`' AS `a``b`  -- `comment`")
    'SELECT \\'`not`\\' AS "a`b"  -- `comment`'
    """
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        char = sql[i]
        if char in "'\"":
            end = _end_of_literal(sql, i)
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif char == "`":
            name: list[str] = []
            j = i + 1
            while j < n:
                if sql[j] == "`":
                    if sql.startswith("`", j + 1):
                        name.append("`")
                        j += 2
                        continue
                    break
                name.append(sql[j])
                j += 1
            if j >= n:  # not closed: left as it is, for the engine to report
                out.append(sql[i:])
                break
            out.append('"' + "".join(name).replace('"', '""') + '"')
            i = j + 1
            continue
        else:
            end = i + 1
        out.append(sql[i:end])
        i = end
    return "".join(out)


def spark_to_duckdb(sql: str) -> str:
    """``sql`` written for Spark, as DuckDB reads it.

    >>> spark_to_duckdb("SHOW TABLES IN `web`")
    'SHOW TABLES FROM "web"'
    """
    return _SHOW_TABLES_IN.sub(r"\1FROM\2", backticks_to_double_quotes(sql), count=1)
