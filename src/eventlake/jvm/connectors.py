"""Hadoop's object-store connectors for eventlake's JVMs (Spark sessions, the Thrift server, the
metastore service): the jars of ``[spark] jars_dir`` and the ``fs.s3a.*`` properties that point
S3A, Hadoop's S3 file system, at the lake's bucket.

With S3A on the class path, Spark reads a lake in a bucket with its own Parquet reader (a Glue
lake: :mod:`eventlake.query.spark_glue`) and a Hive metastore can catalog it; without it, Spark
reads such a lake through eventlake's Python data source (:mod:`eventlake.query.spark_lake`) and a
Hive metastore is refused. Hadoop names S3 ``s3a://`` (:func:`eventlake.storage.hadoop_uri`).

The properties are per bucket (``fs.s3a.bucket.<bucket>.*``), so a session reading other buckets
(on AWS) keeps S3A's defaults for them. Credentials are never set: S3A takes them from its own
chain (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN`` in the environment,
the instance's role), as Spark conf is shown in the UI and the event log.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eventlake.config import Settings
from eventlake.errors import ConfigError
from eventlake.storage import ObjectPath, storage_scheme

__all__ = ["S3A_CLASS", "connector_jars", "has_class", "s3a_properties"]

S3A_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem"
FETCH_HINT = "run scripts/ensure-jars.sh (make setup does): it fetches them into .cache/jars/s3a"


def connector_jars(settings: Settings) -> tuple[str, ...]:
    """The jars of ``[spark] jars_dir``, sorted; none when it is not set. A folder that is missing
    or holds no jar is a :class:`ConfigError` (the session would start, then fail on the lake)."""
    folder = settings.spark.jars_dir
    if not folder:
        return ()
    jars = sorted(Path(folder).glob("*.jar")) if Path(folder).is_dir() else []
    if not jars:
        raise ConfigError("spark.jars_dir", f"{folder} holds no jars", FETCH_HINT)
    return tuple(str(jar) for jar in jars)


def s3a_properties(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Hadoop properties (no ``spark.hadoop.`` prefix) for the lake's bucket; none unless the lake is
    on S3 and an endpoint is set (``[lake] endpoint_url``, else ``AWS_ENDPOINT_URL_S3``, else
    ``AWS_ENDPOINT_URL``): AWS itself needs none.

    An S3-compatible store (MinIO, Ceph, moto) gets its endpoint, path-style requests (the bucket
    in the path, as those stores expect), no TLS for an ``http://`` endpoint, and the region of
    ``AWS_REGION``/``AWS_DEFAULT_REGION`` when set. ``[spark.conf]`` overrides any of them
    (``spark.hadoop.fs.s3a.bucket.<bucket>.path.style.access = "false"``).

    >>> from eventlake.config import LakeSettings, Settings
    >>> lake = LakeSettings(ObjectPath.parse("s3://bk/lake"), Path("/s"), "http://127.0.0.1:5000")
    >>> settings = Settings(path=Path("/x"), lake=lake)
    >>> sorted(s3a_properties(settings, environ={}).items())  # doctest: +NORMALIZE_WHITESPACE
    [('fs.s3a.bucket.bk.connection.ssl.enabled', 'false'),
     ('fs.s3a.bucket.bk.endpoint', 'http://127.0.0.1:5000'),
     ('fs.s3a.bucket.bk.path.style.access', 'true')]
    """
    environ = os.environ if environ is None else environ
    root = settings.lake.root
    if storage_scheme(root) not in ("s3", "s3a") or not isinstance(root, ObjectPath):
        return {}
    endpoint = (
        settings.lake.endpoint_url or environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL")
    )
    if not endpoint:
        return {}
    prefix = f"fs.s3a.bucket.{root.authority}."
    properties = {prefix + "endpoint": endpoint, prefix + "path.style.access": "true"}
    if endpoint.startswith("http://"):
        properties[prefix + "connection.ssl.enabled"] = "false"
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
    if region:
        properties[prefix + "endpoint.region"] = region
    return properties


def has_class(session: Any, class_name: str) -> bool:
    """Whether ``session``'s driver loads ``class_name`` (:data:`S3A_CLASS`: the S3 connector), from
    the driver's class path or from ``spark.jars`` (Spark's own class loader, as Hadoop uses)."""
    try:
        session.sparkContext._jvm.org.apache.spark.util.Utils.classForName(class_name, False, False)
    except Exception:
        return False
    return True
