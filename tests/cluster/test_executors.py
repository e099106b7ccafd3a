"""What an eventlake session's executors on the cluster get: the project's Python (the workers
themselves would start the system python3), the object store's endpoint and region from the
driver's environment, and none of the driver's credentials."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eventlake.config import write_initial_config

from .conftest import SparkCluster
from .test_cluster_sync import toml_table

pytestmark = pytest.mark.integration

# runs in a driver process of its own: the cluster's app, built by eventlake's spark_session
PROBE = """
import json, os, sys
from eventlake.config import load_settings
from eventlake.jvm.session import spark_session

NAMES = json.loads(sys.argv[2])


def probe(_):
    import os, sys
    import eventlake, pyarrow  # the project and its dependencies, on the executor
    yield {"python": sys.executable, "cwd": os.getcwd(), "env": {n: os.environ.get(n) for n in NAMES}}


spark = spark_session(load_settings(sys.argv[1]), "eventlake-probe", say=lambda line: None)
try:
    rows = spark.sparkContext.parallelize(range(2), 2).mapPartitions(probe).collect()
    print(json.dumps({"app": spark.sparkContext.applicationId, "rows": rows}))
finally:
    spark.stop()
"""
ENDPOINTS = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9/aws",
    "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9/s3",
    "AWS_REGION": "eu-west-1",
    "AWS_DEFAULT_REGION": "eu-west-1",
    "AZURE_STORAGE_BLOB_ENDPOINT": "http://127.0.0.1:9/devstoreaccount1",
}
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIAPROBE",
    "AWS_SECRET_ACCESS_KEY": "probe-secret",
    "AWS_SESSION_TOKEN": "probe-token",
    "AZURE_STORAGE_KEY": "probe-account-key",
    "AZURE_STORAGE_CONNECTION_STRING": "AccountKey=probe",
}


def test_executors_run_the_project_python_with_endpoints_and_no_credentials(
    spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    config = write_initial_config(tmp_path / "project")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("EVENTLAKE", "PYSPARK_", "AWS_", "AZURE_"))
    }
    env.update(ENDPOINTS)
    env.update(CREDENTIALS)
    env["EVENTLAKE__SPARK__MASTER"] = spark_cluster.url
    env["EVENTLAKE__SPARK__CONF"] = toml_table(spark_cluster.conf())
    names = json.dumps([*ENDPOINTS, *CREDENTIALS, "PYSPARK_PYTHON"])
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(config), names],
        capture_output=True, text=True, timeout=300, env=env, cwd=config.parent,  # a bound against a hang
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    probe = json.loads(result.stdout.strip().splitlines()[-1])

    assert len(probe["rows"]) == 2
    work_dirs = {str(w) for w in spark_cluster.work_dirs}
    for row in probe["rows"]:
        assert row["python"] == sys.executable  # the venv's, named by the driver
        assert str(Path(row["cwd"]).parent.parent) in work_dirs  # <worker dir>/<app id>/<executor id>
        assert Path(row["cwd"]).parent.name == probe["app"]
        assert {n: row["env"][n] for n in ENDPOINTS} == ENDPOINTS
        assert all(row["env"][n] is None for n in CREDENTIALS), row["env"]
        assert row["env"]["PYSPARK_PYTHON"] == sys.executable
    # the credentials are nowhere in what the cluster keeps of the app (executor command lines, logs)
    logs = [p for d in spark_cluster.executor_dirs(probe["app"]) for p in d.iterdir() if p.is_file()]
    assert logs
    for log in logs:
        text = log.read_text(errors="replace")
        assert not [v for v in CREDENTIALS.values() if v in text], log
