"""The model's servers: one moto server (S3 and Glue) for the run, fake AWS credentials."""

from __future__ import annotations

import os
from collections.abc import Iterator

import boto3
import pytest

from tests.catalog.servers import AWS_ENV, Moto

from .world import BUCKET


@pytest.fixture(scope="session")
def model_moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    saved = {k: os.environ.get(k) for k in AWS_ENV}
    os.environ.update(AWS_ENV)
    server = Moto.start(tmp_path_factory.mktemp("moto") / "moto.log")
    boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    yield server
    server.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
