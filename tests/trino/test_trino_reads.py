"""Trino 476 reads the lake through its catalog, as Athena (built from Trino) and a Trino cluster
would: (a) eventlake's Hive metastore service (`eventlake metastore`, Thrift) over a lake on a local
disk, (b) Glue and S3 (moto). Every table kind, every column type a sync writes, partition pruning,
the warehouse views; each answer equals eventlake's DuckDB engine's."""

from __future__ import annotations

import dataclasses
import datetime as dt
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from trino.exceptions import TrinoExternalError

from eventlake.config import add_source, load_settings, write_initial_config
from eventlake.sync import run_sync
from tests.catalog.conftest import clean_env
from tests.catalog.servers import MetastoreCommand
from tests.collect.harness import EVENTLAKE
from tests.conftest import Lake
from tests.objectstore.conftest import s3_project
from tests.trino.lake import QUERIES, RECEIVED, REPORTS, VIEWS, duckdb_rows, messages, trino_rows
from tests.trino.server import (
    ATHENA_CATALOG,
    PARQUET_UTC,
    SERVER_ZONE,
    Trino,
    glue_catalog,
    hive_metastore_catalog,
)

pytestmark = pytest.mark.integration


@dataclasses.dataclass
class TrinoLake:
    kind: str  # "hive" | "glue"
    catalog: str  # the Trino catalog reading it
    lake: Lake
    properties: dict[str, str]  # the catalog's

    @property
    def database(self) -> str:
        return self.lake.source.database


def _archive(lake: Lake) -> None:
    for batch, received in enumerate(RECEIVED):
        lake.archive(messages(batch), received)


def _hive_lake(trino: Trino, directory: Path) -> Iterator[TrinoLake]:
    """A lake on a local disk, its catalog the project's Derby metastore served by `eventlake
    metastore`; `eventlake sync` (another process) reaches it through the service."""
    config = write_initial_config(directory)
    add_source(config, "web", write_key="wk_web")
    lake = Lake(directory, config, load_settings(config, environ={}), "web")
    _archive(lake)
    service = MetastoreCommand(config, directory / "metastore.log").start(clean_env())
    try:
        synced = subprocess.run([str(EVENTLAKE), "--config", str(config), "sync"],
                                capture_output=True, text=True, timeout=600, env=clean_env())  # fmt: skip
        assert synced.returncode == 0, synced.stderr
        name, properties = f"hms_{uuid.uuid4().hex[:6]}", hive_metastore_catalog(service.uri)
        trino.create_catalog(name, properties)
        yield TrinoLake("hive", name, lake, properties)
    finally:
        assert service.stop() == 0, (directory / "metastore.log").read_text()


def _glue_lake(trino: Trino, directory: Path, moto, spark, spark_state: Path) -> Iterator[TrinoLake]:
    """A lake on S3 (moto) with its tables in Glue (moto), synced by this process's Spark."""
    slug = f"trino{uuid.uuid4().hex[:6]}"
    config = s3_project(directory, moto, f"t-{uuid.uuid4().hex[:12]}", slug)
    settings = load_settings(config, environ={})
    settings = dataclasses.replace(settings, lake=dataclasses.replace(settings.lake, state_dir=spark_state))
    lake = Lake(directory, config, settings, slug)
    _archive(lake)
    (synced,) = run_sync(settings, spark=spark, say=lambda line: None)
    assert synced.status == "Success", synced
    # Athena's views (eventlake's in Glue, as Athena's CREATE VIEW makes them) name their catalog
    # `awsdatacatalog`: Trino resolves them only in a catalog of that name
    properties = glue_catalog(moto.endpoint)
    trino.ensure_catalog(ATHENA_CATALOG, properties)
    yield TrinoLake("glue", ATHENA_CATALOG, lake, properties)


@pytest.fixture(scope="module", params=["hive", "glue"])
def trino_lake(request, trino: Trino, tmp_path_factory) -> Iterator[TrinoLake]:
    directory = tmp_path_factory.mktemp(f"trino-{request.param}-lake")
    if request.param == "hive":
        yield from _hive_lake(trino, directory)
    else:
        spark, moto = request.getfixturevalue("spark"), request.getfixturevalue("moto")
        yield from _glue_lake(trino, directory, moto, spark, request.getfixturevalue("spark_state"))


@pytest.mark.parametrize("name, sql", QUERIES, ids=[name for name, _ in QUERIES])
def test_trino_reads_every_table_as_eventlake_does(trino: Trino, trino_lake: TrinoLake, name: str, sql: str):
    sql = sql.format(db=trino_lake.database)
    expected = duckdb_rows(trino_lake.lake.settings, sql)
    assert expected, f"{name}: no rows on DuckDB"
    assert trino_rows(trino, trino_lake.catalog, sql) == expected


def test_trino_reads_the_sync_reports(trino: Trino, trino_lake: TrinoLake):
    """In a Hive metastore the table is Spark's `USING json` table, whose descriptor eventlake writes
    with the columns and the JSON SerDe (catalog/hive_descriptor.py); before, Trino saw Spark's
    placeholder (`col array<string>`, SequenceFile) and failed "... is not a Sequence File"."""
    sql = REPORTS.format(source_id=trino_lake.lake.source.id)
    expected = duckdb_rows(trino_lake.lake.settings, sql)
    assert len(expected) == 4  # the run and its three tables
    assert trino_rows(trino, trino_lake.catalog, sql) == expected


def test_trino_prunes_partitions_by_day_and_hour(trino: Trino, trino_lake: TrinoLake):
    """A filter on ``day`` and ``hr`` reads only that partition's files: a third of the rows and
    bytes of the table (three partitions of the same size), and the plan names the partition."""
    db, catalog = trino_lake.database, trino_lake.catalog
    _, everything = trino.query(f"SELECT count(*) FROM {db}.page", catalog)
    where = "day = '2026-11-19' AND hr = '08'"
    [(count,)], pruned = trino.query(f"SELECT count(*) FROM {db}.page WHERE {where}", catalog)
    assert count == 3 and everything["processedRows"] == 9, everything
    assert (
        pruned["processedRows"] == 3 and pruned["physicalInputBytes"] * 3 == everything["physicalInputBytes"]
    )
    [(plan,)] = trino.rows(f"EXPLAIN SELECT count(*) FROM {db}.page WHERE {where}", catalog)
    assert ":: [[08]]" in plan and ":: [[2026-11-19]]" in plan, plan


@pytest.mark.parametrize("name, sql", VIEWS, ids=[name for name, _ in VIEWS])
def test_trino_reads_the_warehouse_views(trino: Trino, trino_lake: TrinoLake, name: str, sql: str):
    """Glue holds Athena (Presto) views, which Trino reads as they are; a Hive metastore holds
    Spark's views, which Trino translates (``hive.hive-views.enabled``) except ``users``: its
    ``max_by(...) FILTER (WHERE ...)`` is Spark SQL that Trino's translator (Coral) cannot parse."""
    sql = sql.format(db=trino_lake.database)
    expected = duckdb_rows(trino_lake.lake.settings, sql)
    assert expected, f"{name}: no rows on DuckDB"
    if trino_lake.kind == "hive" and name == "users":
        with pytest.raises(TrinoExternalError, match="HIVE_VIEW_TRANSLATION_ERROR"):
            trino.rows(sql, trino_lake.catalog)
        return
    assert trino_rows(trino, trino_lake.catalog, sql) == expected


def test_trino_shows_the_lake_s_times_in_utc_only_with_the_parquet_time_zone_set(
    trino: Trino, trino_lake: TrinoLake
):
    """The lake's timestamps are instants; a catalog without ``hive.parquet.time-zone=UTC`` shows
    them in the server's zone (the test server's is not UTC), hours off: the setting is needed."""
    name = f"{trino_lake.kind}_server_zone_{uuid.uuid4().hex[:4]}"
    trino.create_catalog(name, {k: v for k, v in trino_lake.properties.items() if k not in PARQUET_UTC})
    sql = f"SELECT received_at FROM {trino_lake.database}.page WHERE message_id = 'p-0-0'"
    [(utc,)] = trino.rows(sql, trino_lake.catalog)
    [(local,)] = trino.rows(sql, name)
    assert utc == dt.datetime(2026, 11, 19, 7, 0)
    offset = ZoneInfo(SERVER_ZONE).utcoffset(utc)
    assert offset == dt.timedelta(hours=-5) and local == utc + offset
