"""Lakes on S3: a moto server (S3 and Glue, in server mode on 127.0.0.1) for the whole run, a fresh
bucket prefix per test, projects whose ``lake.root`` is ``s3://...`` and whose catalog is Glue."""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from eventlake.config import add_source, load_settings, write_initial_config
from tests.catalog.conftest import clean_env
from tests.catalog.servers import AZURITE_ACCOUNT, Azurite, Moto
from tests.collect.harness import EVENTLAKE
from tests.conftest import Lake

BUCKET = "eventlake-lake"
CONTAINER = "eventlake-lake"
_slugs = itertools.count(1)


@pytest.fixture(scope="session")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    server = Moto.start(tmp_path_factory.mktemp("moto") / "moto.log")
    boto3.client("s3", endpoint_url=server.endpoint).create_bucket(Bucket=BUCKET)
    yield server
    server.stop()


def s3_project(directory: Path, moto: Moto, prefix: str, slug: str) -> Path:
    """A project directory whose lake is ``s3://BUCKET/<prefix>`` and whose catalog is Glue, both on
    ``moto``."""
    return _project(directory, f"s3://{BUCKET}/{prefix}", moto.endpoint, moto, slug)


def _project(directory: Path, root: str, endpoint: str, moto: Moto, slug: str) -> Path:
    config = write_initial_config(directory)
    glue = f'kind = "glue"\nregion = "us-east-1"\nendpoint_url = "{moto.endpoint}"'
    text = config.read_text().replace('kind = "hive"', glue, 1)
    config.write_text(text.replace('root = "lake"', f'root = "{root}"\nendpoint_url = "{endpoint}"', 1))
    add_source(config, slug, write_key=f"wk_{slug}")
    return config


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    from azure.storage.blob import BlobServiceClient

    server = Azurite.start(tmp_path_factory.mktemp("azurite") / "azurite.log")
    BlobServiceClient.from_connection_string(server.connection_string).create_container(CONTAINER)
    yield server
    server.stop()


@pytest.fixture
def azure_lake(tmp_path: Path, azurite: Azurite, moto: Moto, spark_state: Path) -> Lake:
    """A project whose lake is on Azurite (``abfss://``), its tables in Glue on moto (the one
    catalog that needs no Hadoop connector for a lake in a bucket)."""
    slug = f"azsrc{next(_slugs)}"
    root = f"abfss://{CONTAINER}@{AZURITE_ACCOUNT}.dfs.core.windows.net/t-{uuid.uuid4().hex[:12]}"
    config = _project(tmp_path / "azure-project", root, azurite.endpoint, moto, slug)
    settings = load_settings(config, environ={})
    settings = dataclasses.replace(settings, lake=dataclasses.replace(settings.lake, state_dir=spark_state))
    return Lake(tmp_path / "azure-project", config, settings, slug)


@pytest.fixture
def s3_lake(tmp_path: Path, moto: Moto, spark_state: Path) -> Lake:
    """A project on a fresh prefix of the bucket (sharing the test session's Spark state)."""
    slug = f"s3src{next(_slugs)}"
    config = s3_project(tmp_path / "s3-project", moto, f"t-{uuid.uuid4().hex[:12]}", slug)
    settings = load_settings(config, environ={})
    settings = dataclasses.replace(settings, lake=dataclasses.replace(settings.lake, state_dir=spark_state))
    return Lake(tmp_path / "s3-project", config, settings, slug)


def spark_sql_rows(lake: Lake, query: str) -> list[dict]:
    """``eventlake sql --engine spark --format json`` on ``lake`` in its own process (a session of its
    own: a Glue lake's tables come from its schema files), as rows."""
    result = subprocess.run(
        [EVENTLAKE, "--config", lake.config, "sql", "--engine", "spark", "--format", "json", query],
        capture_output=True, text=True, timeout=300, env=clean_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
