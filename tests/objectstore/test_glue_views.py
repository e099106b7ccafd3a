"""The warehouse views in Glue, as Athena reads them: ``VIRTUAL_VIEW`` tables whose view text is a
Presto view (the SQL and its columns, base64-encoded), replaced when a sync adds a column. Athena
itself cannot run here: the SQL is run on DuckDB over the same lake instead."""

from __future__ import annotations

import base64
import json

import boto3
import pytest

from eventlake.query.duckdb_engine import run_duckdb
from eventlake.timestamps import now_utc
from tests.objectstore.conftest import spark_sql_rows
from tests.objectstore.test_s3_sync import MESSAGES, sync, track

pytestmark = pytest.mark.integration


def _presto(glue, database: str, name: str) -> dict:
    table = glue.get_table(DatabaseName=database, Name=name)["Table"]
    assert table["TableType"] == "VIRTUAL_VIEW" and table["Parameters"]["presto_view"] == "true"
    text = table["ViewOriginalText"]
    assert text.startswith("/* Presto View: ") and text.endswith(" */")
    document = json.loads(base64.b64decode(text[len("/* Presto View: ") : -len(" */")]))
    assert [c["Name"] for c in table["StorageDescriptor"]["Columns"]] == [
        c["name"] for c in document["columns"]
    ]
    return document


def test_glue_gets_athena_views_that_follow_the_tables(s3_lake, spark, moto):
    received = now_utc()
    s3_lake.archive(MESSAGES, received)
    assert sync(s3_lake, spark).status == "Success"
    glue = boto3.client("glue", endpoint_url=moto.endpoint, region_name="us-east-1")
    db = s3_lake.source.database
    names = {t["Name"]: t["TableType"] for t in glue.get_tables(DatabaseName=db)["TableList"]}
    views = {"tracks", "pages", "screens", "identifies", "groups", "aliases", "users", "order_completed"}
    assert {n for n, kind in names.items() if kind == "VIRTUAL_VIEW"} == views

    orders = _presto(glue, db, "order_completed")
    assert orders["schema"] == db and orders["catalog"] == "awsdatacatalog"
    columns = {c["name"]: c["type"] for c in orders["columns"]}
    assert columns["id"] == "varchar" and columns["revenue"] == "decimal(38,6)" and "coupon" not in columns
    # the SQL Athena runs, run on DuckDB over the same lake: the same rows as the lake table's
    count = f"SELECT count(*) AS n FROM ({orders['originalSql']}) v"
    assert run_duckdb(s3_lake.settings, count).rows == ({"n": 2},)
    users = _presto(glue, db, "users")
    rows = run_duckdb(s3_lake.settings, f"SELECT id, plan FROM ({users['originalSql']}) v").rows
    assert rows == ({"id": "u1", "plan": "pro"},)

    s3_lake.archive([track("m7", revenue=3, coupon="FALL")], received)  # a new column: views replaced
    assert sync(s3_lake, spark).status == "Success"
    orders = _presto(glue, db, "order_completed")
    assert {c["name"]: c["type"] for c in orders["columns"]}["coupon"] == "varchar"
    rows = run_duckdb(
        s3_lake.settings, f"SELECT id, coupon FROM ({orders['originalSql']}) v ORDER BY id"
    ).rows
    assert rows[-1] == {"id": "m7", "coupon": "FALL"}

    # Spark reads a Glue lake through its schema files: the same views, defined in its session
    query = f"SELECT id, coupon FROM {db}.order_completed ORDER BY id"
    assert spark_sql_rows(s3_lake, query) == [dict(r) for r in rows]
