"""The Spark-to-DuckDB translation: backtick identifiers outside literals and comments."""

from __future__ import annotations

import pytest

from eventlake.query.dialect import backticks_to_double_quotes, spark_to_duckdb


@pytest.mark.parametrize(
    ("spark", "duckdb"),
    [
        ("SELECT `day` FROM `web`.`page`", 'SELECT "day" FROM "web"."page"'),
        ("SELECT count(*) AS `n` FROM web.page", 'SELECT count(*) AS "n" FROM web.page'),
        ("SELECT `a``b`", 'SELECT "a`b"'),
        ('SELECT `say "hi"`', 'SELECT "say ""hi"""'),
        ("SELECT '`day`'", "SELECT '`day`'"),
        ("SELECT 'it''s `x`', `y`", "SELECT 'it''s `x`', \"y\""),
        ("SELECT 'it\\'s `x`', `y`", "SELECT 'it\\'s `x`', \"y\""),
        ('SELECT "`x`"', 'SELECT "`x`"'),
        ("SELECT `x` -- the `x`\nFROM t", 'SELECT "x" -- the `x`\nFROM t'),
        ("SELECT /* `x` */ `x`", 'SELECT /* `x` */ "x"'),
        ("SELECT `日本`", 'SELECT "日本"'),
        ("SELECT `unclosed", "SELECT `unclosed"),
        ("SELECT 'unclosed `x`", "SELECT 'unclosed `x`"),
        ("", ""),
    ],
)
def test_backticks_become_double_quotes_outside_literals_and_comments(spark: str, duckdb: str) -> None:
    assert backticks_to_double_quotes(spark) == duckdb


def test_show_tables_in() -> None:
    assert spark_to_duckdb("show tables in `web`") == 'show tables FROM "web"'
    assert spark_to_duckdb("SELECT 'SHOW TABLES IN x'") == "SELECT 'SHOW TABLES IN x'"
