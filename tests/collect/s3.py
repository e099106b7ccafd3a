"""A moto S3 server for the collector's tests on an object-store lake, startable again on the same
port (an outage of the store and its return: moto keeps its state in memory, so buckets are gone)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import boto3

from ..catalog.servers import AWS_ENV, Moto, free_port, missing, port_open, wait_until

REGION = "us-east-1"
ENVIRONMENT = {**AWS_ENV, "AWS_DEFAULT_REGION": REGION}  # moto's fake credentials, boto3's chain


def start_moto(log: Path, port: int = 0) -> Moto:
    """``python -m moto.server`` on 127.0.0.1:``port`` (a free one when 0), once it listens."""
    try:
        import moto.server  # noqa: F401
    except ImportError:
        missing("moto[server]")
    port = port or free_port()
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    server = Moto(port, process, log)
    wait_until(lambda: port_open(port), "moto_server", process, log)
    return server


def s3_client(endpoint: str):  # noqa: ANN201 - a boto3 client
    return boto3.client("s3", endpoint_url=endpoint, region_name=REGION)


def create_bucket(endpoint: str, bucket: str) -> None:
    s3_client(endpoint).create_bucket(Bucket=bucket)


def objects(endpoint: str, bucket: str, prefix: str) -> dict[str, bytes]:
    """Every object under ``prefix/`` of ``bucket``: key -> bytes (read with boto3 itself, not
    through eventlake's storage layer)."""
    client = s3_client(endpoint)
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/")
    keys = [item["Key"] for page in pages for item in page.get("Contents", [])]
    return {key: client.get_object(Bucket=bucket, Key=key)["Body"].read() for key in keys}
