"""Catalog back ends on real servers, one of each per test run (session scope).

- hive-derby: the shared test Spark session (embedded Derby), in this process;
- hive-postgres, hive-mariadb: a worker Spark process on a real PostgreSQL / MariaDB server,
  the metastore schema created by eventlake on first use;
- hive-thrift: a worker Spark process connected by URI to `eventlake metastore` (over PostgreSQL);
- glue: boto3 against moto's Glue emulator in server mode.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import tomli_w

from eventlake import layout
from eventlake.catalog import Catalog
from eventlake.config import CatalogSettings
from eventlake.spec import enrich
from eventlake.timestamps import day_start_ms

from .servers import AWS_ENV, PASSWORD, USER, MariaDB, MetastoreCommand, Moto, Postgres
from .worker import RemoteCatalog


def write_config(directory: Path, catalog: dict[str, Any]) -> Path:
    """An eventlake.toml for a small Spark (local[1]) with these [catalog] settings."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "eventlake.toml"
    config.write_text(
        tomli_w.dumps(
            {
                "lake": {"root": "lake", "state_dir": ".eventlake"},
                "catalog": catalog,
                "spark": {
                    "master": "local[1]",
                    "driver_memory": "512m",
                    "conf": {"spark.sql.shuffle.partitions": "1"},
                },
            }
        )
    )
    return config


def write_archive(lake: Path, source_id: str, messages: Sequence[dict[str, Any]], received: datetime) -> Path:
    """One sealed archive file of ``messages``, enriched as the collector does."""
    path = layout.archive_file(lake, source_id, day_start_ms(received), f"catalog-test-{len(messages):06d}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") as out:
        for message in messages:
            out.write(orjson.dumps(enrich(message, received_at=received, source_id=source_id)) + b"\n")
    return path


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLAKE")}
    return {**env, **extra}


@pytest.fixture(scope="session")
def aws_env() -> Iterator[dict[str, str]]:
    """Fake AWS credentials for moto, in this process's environment while the tests run."""
    saved = {k: os.environ.get(k) for k in AWS_ENV}
    os.environ.update(AWS_ENV)
    yield AWS_ENV
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    server = Moto.start(tmp_path_factory.mktemp("moto") / "moto.log")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def glue_settings(moto_server: Moto, aws_env: dict[str, str]) -> CatalogSettings:
    return CatalogSettings(kind="glue", region="us-east-1", endpoint_url=moto_server.endpoint)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    server = Postgres.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def mariadb() -> Iterator[MariaDB]:
    server = MariaDB.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_project(postgres: Postgres, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose metastore is a fresh PostgreSQL database (user and password)."""
    catalog = {"jdbc_url": postgres.create_database(), "user": USER, "password": PASSWORD}
    return write_config(tmp_path_factory.mktemp("pg-project"), catalog)


@pytest.fixture(scope="session")
def mariadb_project(mariadb: MariaDB, tmp_path_factory: pytest.TempPathFactory) -> Path:
    catalog = {"jdbc_url": mariadb.create_database(), "user": USER, "password": PASSWORD}
    return write_config(tmp_path_factory.mktemp("mariadb-project"), catalog)


def _worker(config: Path, name: str) -> RemoteCatalog:
    return RemoteCatalog(config, config.parent / f"{name}.log", env=clean_env())


@pytest.fixture(scope="session")
def hive_postgres(postgres_project: Path) -> Iterator[RemoteCatalog]:
    catalog = _worker(postgres_project, "worker-a")
    yield catalog
    catalog.close()


@pytest.fixture(scope="session")
def hive_mariadb(mariadb_project: Path) -> Iterator[RemoteCatalog]:
    catalog = _worker(mariadb_project, "worker-a")
    yield catalog
    catalog.close()


@pytest.fixture(scope="session")
def metastore_command(
    postgres: Postgres, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MetastoreCommand]:
    """`eventlake metastore` over a PostgreSQL database of its own (on Derby, `eventlake up` and
    `eventlake thrift` run the same service: tests/scheduler, tests/jvm/test_thrift_server.py)."""
    directory = tmp_path_factory.mktemp("metastore-project")
    catalog = {"jdbc_url": postgres.create_database(), "user": USER, "password": PASSWORD}
    service = MetastoreCommand(write_config(directory, catalog), directory / "metastore.log").start(
        clean_env()
    )
    yield service
    assert service.stop() == 0, (directory / "metastore.log").read_text()


@pytest.fixture(scope="session")
def hive_thrift(
    metastore_command: MetastoreCommand, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RemoteCatalog]:
    """A Spark process that knows the metastore only by its URI ([catalog] uri)."""
    config = write_config(tmp_path_factory.mktemp("uri-project"), {"uri": metastore_command.uri})
    catalog = _worker(config, "worker")
    yield catalog
    catalog.close()


@pytest.fixture(scope="session")
def glue(glue_settings: CatalogSettings) -> Catalog:
    from eventlake.catalog.glue import GlueCatalog

    return GlueCatalog.from_settings(glue_settings)


@pytest.fixture(scope="session")
def hive_derby(spark: Any) -> Catalog:
    from eventlake.catalog.hive import HiveCatalog

    return HiveCatalog(spark)
