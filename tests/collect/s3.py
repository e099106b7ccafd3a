"""The collector's tests on an object-store lake: a moto S3 server (``Moto.start``, again on the
same port for an outage of the store and its return: moto keeps its state in memory), its bucket
and objects read with boto3 itself."""

from __future__ import annotations

import boto3

from ..catalog.servers import AWS_ENV

REGION = "us-east-1"
ENVIRONMENT = {**AWS_ENV, "AWS_DEFAULT_REGION": REGION}  # moto's fake credentials, boto3's chain


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
