"""Spark reads a lake in a bucket itself, with S3A (hadoop-aws and the AWS SDK from
``scripts/ensure-jars.sh``, in ``.cache/jars/s3a``):

- a plain PySpark session that is not eventlake's, given only the metastore's URI and the S3A
  settings a user gives an EMR or Databricks cluster, reads every table and view of a lake whose
  tables are in ``eventlake metastore`` (a Hive metastore service) and gets eventlake's counts;
- eventlake's Spark session on a Glue lake reads Glue's partitions with Spark's Parquet reader
  and, in the same session after a user's deletion moved every partition to a version folder, the
  new locations, getting the DuckDB engine's counts (the old files stay at the old location for
  the grace period: a reader of the old locations or of the tables' folders would count the
  deleted user's rows). ``eventlake sql --engine spark`` is this session's first query.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import boto3
import pytest

from eventlake.config import add_source, load_settings, write_initial_config
from eventlake.query import run_query
from eventlake.query.spark_engine import NATIVE_READER
from eventlake.schema.storage_formats import SERDES_WITH_METASTORE_SCHEMA
from eventlake.sync import run_sync
from tests.catalog.conftest import clean_env
from tests.catalog.servers import MetastoreCommand, Moto, missing
from tests.collect.harness import EVENTLAKE
from tests.conftest import Lake

from .conftest import BUCKET

pytestmark = pytest.mark.integration

S3A_JARS = Path(__file__).resolve().parents[2] / ".cache" / "jars" / "s3a"
DAY = datetime(2026, 11, 19, tzinfo=timezone.utc)

# what a user of a Spark cluster sets (spark-defaults.conf, a Databricks cluster's Spark config):
# the metastore, and S3A pointed at the store; credentials come from the environment
PLAIN_SPARK = """
import json, sys
from pyspark.sql import SparkSession

uri, jars, endpoint, warehouse, serdes = sys.argv[1:6]
spark = (
    SparkSession.builder.master("local[1]").appName("not-eventlake")
    .config("spark.jars", jars)
    .config("spark.hadoop.hive.metastore.uris", uri)
    .config("spark.hadoop.fs.s3a.endpoint", endpoint)
    .config("spark.hadoop.fs.s3a.path.style.access", "true")
    .config("spark.sql.warehouse.dir", warehouse)
    .config("spark.ui.enabled", "false")
    # the reports table's JSON SerDe is not on Spark's class path: its columns from the metastore
    .config("spark.hadoop.hive.serdes.using.metastore.for.schema", serdes)
    .enableHiveSupport()
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
counts = {}
for database in spark.catalog.listDatabases():
    for table in spark.catalog.listTables(database.name):
        name = f"`{database.name}`.`{table.name}`"
        counts[f"{database.name}.{table.name}"] = [table.tableType, spark.table(name).count()]
print(json.dumps(counts))
"""


def quiet(line: str) -> None:
    pass


@pytest.fixture(scope="module")
def s3a_jars() -> list[str]:
    jars = sorted(str(p) for p in S3A_JARS.glob("*.jar"))
    if not jars:
        missing("the s3a jars (hadoop-aws and the AWS SDK)", "scripts/ensure-jars.sh")
    return jars


def messages(hour: int, batch: int) -> list[dict]:
    found: list[dict] = []
    for n in range(6):
        user, key = f"u{n % 3}", f"{hour}-{batch}-{n}"
        found += [
            {"type": "track", "userId": user, "event": "Order Completed", "messageId": f"t-{key}",
             "properties": {"revenue": 1.5 * n, "coupon": "A" if n % 2 else None}},
            {"type": "track", "userId": user, "event": "Signed Up", "messageId": f"s-{key}"},
            {"type": "page", "userId": user, "name": "Home", "messageId": f"p-{key}"},
            {"type": "identify", "userId": user, "traits": {"plan": "pro"}, "messageId": f"i-{key}"},
        ]  # fmt: skip
    return found


def duckdb_count(settings, table: str) -> int:
    return run_query(settings, f"SELECT count(*) AS n FROM {table}", engine="duckdb").rows[0]["n"]


def test_a_plain_spark_reads_every_table_of_a_lake_in_a_bucket_through_the_metastore_service(
    tmp_path: Path, moto: Moto, s3a_jars: list[str]
) -> None:
    project = tmp_path / "project"
    config = write_initial_config(project)
    root = f"s3://{BUCKET}/t-{uuid.uuid4().hex[:12]}"
    lake_lines = f'root = "{root}"\nendpoint_url = "{moto.endpoint}"'
    text = config.read_text().replace('root = "lake"', lake_lines, 1)
    text = text.replace("[spark]\n", f'[spark]\njars_dir = "{S3A_JARS}"\n', 1)
    config.write_text(text.replace('master = "local[*]"', 'master = "local[1]"', 1))
    add_source(config, "hms", write_key="wk_hms")
    settings = load_settings(config, environ={})
    lake = Lake(project, config, settings, "hms")
    for hour in (7, 8):
        lake.archive(messages(hour, 0), DAY + timedelta(hours=hour))
    env = clean_env()
    service = MetastoreCommand(config, tmp_path / "metastore.log").start(env)
    try:
        synced = subprocess.run(
            [EVENTLAKE, "--config", config, "sync"], capture_output=True, text=True, timeout=600, env=env
        )
        assert synced.returncode == 0, synced.stderr
        plain = subprocess.run(
            [sys.executable, "-c", PLAIN_SPARK, service.uri, ",".join(s3a_jars), moto.endpoint,
             str(tmp_path / "warehouse"), SERDES_WITH_METASTORE_SCHEMA],
            capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
        )  # fmt: skip
        assert plain.returncode == 0, plain.stderr[-3000:]
        assert "ERROR" not in plain.stderr, plain.stderr[-3000:]  # Hive logs a SerDe it cannot load
    finally:
        service.stop()
    counts = json.loads(plain.stdout.strip().splitlines()[-1])
    database = lake.source.database
    tables = {name: n for name, (kind, n) in counts.items() if kind != "VIEW"}
    views = {name: n for name, (kind, n) in counts.items() if kind == "VIEW"}
    expected = {"identify", "page", "track_order_completed", "track_signed_up", "tracks", "users"}
    assert {f"{database}.{t}" for t in expected} <= set(counts), counts
    assert "__segment_datalake.sync_reports" in tables, counts
    for name, n in {**tables, **views}.items():
        assert n == duckdb_count(settings, name), name
    assert tables[f"{database}.page"] == 12 and tables[f"{database}.track_order_completed"] == 12
    locations = boto3.client("s3", endpoint_url=moto.endpoint).list_objects_v2(
        Bucket=BUCKET, Prefix=str(settings.lake.root).split("/", 3)[3] + "/"
    )
    assert locations["KeyCount"] > 0  # the lake is in the bucket, not on this machine's disk
    assert not (project / "lake").exists()


def test_eventlakes_spark_reads_a_glue_lake_with_sparks_parquet_reader_and_follows_glue(
    s3_lake: Lake, spark, s3a_jars: list[str]
) -> None:
    lake = s3_lake
    settings = lake.settings
    for hour in (7, 8):
        lake.archive(messages(hour, 0), DAY + timedelta(hours=hour))
    (synced,) = run_sync(settings, spark=spark, say=quiet)
    assert synced.status == "Success", synced
    config = lake.config
    config.write_text(config.read_text().replace("[spark]\n", f'[spark]\njars_dir = "{S3A_JARS}"\n', 1))
    database = lake.source.database
    names = ["identify", "page", "track_order_completed", "track_signed_up", "tracks", "users"]
    query = " UNION ALL ".join(f"SELECT '{t}' AS t, count(*) AS n FROM {database}.{t}" for t in names)
    result = subprocess.run(
        [sys.executable, "-c", LONG_LIVED, str(config), lake.slug, query],
        capture_output=True, text=True, timeout=600, env=clean_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count(f"reading the lake with {NATIVE_READER}") == 1, result.stderr[-3000:]
    before, after = (dict(map(tuple, rows)) for rows in json.loads(result.stdout.strip().splitlines()[-1]))
    assert before["page"] == 12 and before["tracks"] == 24, before
    assert after == {t: duckdb_count(settings, f"{database}.{t}") for t in names}
    assert after["page"] == 8 and after["tracks"] == 16, after  # u1's third of the rows went


# a long-lived eventlake session (as `eventlake up`'s engine holds): a query, a user's deletion
# (every partition moves to a version folder; the old files stay there for the grace period), and
# the same query again in the same session
LONG_LIVED = """
import json, sys
from eventlake.config import load_settings
from eventlake.jvm.session import spark_session
from eventlake.query import run_query
from eventlake.sync.maintenance.erase import delete_user

config, slug, query = sys.argv[1:4]
settings = load_settings(config)
spark = spark_session(settings, "long-lived")
say = lambda line: print(line, file=sys.stderr)
before = [[r["t"], r["n"]] for r in run_query(settings, query, "spark", spark, say).rows]
[erased] = delete_user(settings, "u1", [slug], say=say)
assert erased.rows_deleted > 0, erased
after = [[r["t"], r["n"]] for r in run_query(settings, query, "spark", spark, say).rows]
print(json.dumps([before, after]))
"""
