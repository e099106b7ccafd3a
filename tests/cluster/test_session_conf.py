"""``spark_conf`` for a cluster master: executors get the Python to run and the object store's
endpoint and region from the driver's environment, never a credential; local masters get none of it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from eventlake.config import LakeSettings, Settings, SparkSettings
from eventlake.jvm.session import EXECUTOR_ENVIRONMENT, executor_python, is_local_master, spark_conf

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEYID0001",
    "AWS_SECRET_ACCESS_KEY": "secret-access-key-value",
    "AWS_SESSION_TOKEN": "session-token-value",
    "AWS_SECURITY_TOKEN": "security-token-value",
    "AWS_PROFILE": "prod-admin",
    "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token",
    "AZURE_STORAGE_KEY": "azure-account-key-value",
    "AZURE_STORAGE_ACCOUNT_KEY": "azure-account-key-value-2",
    "AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=https;AccountKey=abc",
    "AZURE_STORAGE_SAS_TOKEN": "sv=2024&sig=abc",
    "AZURE_CLIENT_SECRET": "client-secret-value",
}
ENDPOINTS = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
    "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:5001",
    "AWS_DEFAULT_REGION": "eu-west-1",
    "AWS_REGION": "eu-west-1",
    "AZURE_STORAGE_BLOB_ENDPOINT": "http://127.0.0.1:10000/devstoreaccount1",
}


def settings(tmp_path: Path, master: str, **conf: str) -> Settings:
    return Settings(
        path=None,
        lake=LakeSettings(tmp_path / "lake", tmp_path / "state"),
        spark=SparkSettings(master=master, conf=tuple(conf.items())),
    )


CLUSTER_MASTERS = ["spark://10.0.0.5:7077", "yarn", "k8s://https://api:6443", "local-cluster[2,1,1024]"]


@pytest.mark.parametrize("master", CLUSTER_MASTERS)
def test_a_cluster_master_gets_endpoints_and_python_never_credentials(tmp_path: Path, master: str) -> None:
    environ = {**CREDENTIALS, **ENDPOINTS, "PATH": "/usr/bin", "HOME": "/root"}
    conf = spark_conf(settings(tmp_path, master), "eventlake", None, environ)

    assert conf["spark.master"] == master
    for name, value in ENDPOINTS.items():
        assert conf[f"spark.executorEnv.{name}"] == value
    assert conf["spark.pyspark.python"] == conf["spark.executorEnv.PYSPARK_PYTHON"] == sys.executable
    everything = "\n".join(f"{k}={v}" for k, v in conf.items())
    for name, value in CREDENTIALS.items():
        assert name not in everything and value not in everything
    assert {k for k in conf if k.startswith("spark.executorEnv.")} == {
        f"spark.executorEnv.{name}" for name in [*EXECUTOR_ENVIRONMENT, "PYSPARK_PYTHON"]
    }


def test_only_what_is_set_is_propagated(tmp_path: Path) -> None:
    environ = {"AWS_REGION": "us-east-2", "AWS_ENDPOINT_URL": "", **CREDENTIALS}
    conf = spark_conf(settings(tmp_path, "spark://h:7077"), "eventlake", None, environ)
    executor_env = {k: v for k, v in conf.items() if k.startswith("spark.executorEnv.")}
    assert executor_env == {
        "spark.executorEnv.AWS_REGION": "us-east-2",
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
    }


def test_a_local_master_gets_none_of_it(tmp_path: Path) -> None:
    for master in ("local", "local[*]", "local[2]", " local[4, 3] "):
        conf = spark_conf(settings(tmp_path, master), "eventlake", None, {**CREDENTIALS, **ENDPOINTS})
        assert not [k for k in conf if k.startswith("spark.executorEnv.") or k == "spark.pyspark.python"]
        assert is_local_master(master)
    assert not is_local_master("spark://localhost:7077") and not is_local_master("local-cluster[2,1,1024]")


def test_the_executors_python_is_configurable(tmp_path: Path) -> None:
    # a packed environment shipped with spark.archives, unpacked in each executor's directory
    shipped = settings(
        tmp_path, "yarn", **{"spark.archives": "hdfs:///envs/eventlake-env.tar.gz#env",
                             "spark.pyspark.python": "./env/bin/python"},
    )  # fmt: skip
    conf = spark_conf(shipped, "eventlake", None, {"PYSPARK_PYTHON": "/opt/other/python"})
    assert conf["spark.pyspark.python"] == conf["spark.executorEnv.PYSPARK_PYTHON"] == "./env/bin/python"
    assert conf["spark.archives"] == "hdfs:///envs/eventlake-env.tar.gz#env"
    assert executor_python(shipped, {}) == "./env/bin/python"
    # else the driver's PYSPARK_PYTHON (a Python installed at the same path on every node)
    plain = settings(tmp_path, "spark://h:7077")
    conf = spark_conf(plain, "eventlake", None, {"PYSPARK_PYTHON": "/opt/eventlake/bin/python"})
    assert conf["spark.executorEnv.PYSPARK_PYTHON"] == "/opt/eventlake/bin/python"
    # [spark.conf] comes last: an explicit executorEnv setting wins over the driver's environment
    overridden = settings(tmp_path, "spark://h:7077", **{"spark.executorEnv.AWS_REGION": "ap-south-1"})
    conf = spark_conf(overridden, "eventlake", None, ENDPOINTS)
    assert conf["spark.executorEnv.AWS_REGION"] == "ap-south-1"


def test_the_driver_address_is_not_pinned_for_a_cluster(tmp_path: Path) -> None:
    """Executors on other machines must reach the driver: no loopback address unless configured."""
    conf = spark_conf(settings(tmp_path, "spark://h:7077"), "eventlake", None, {})
    assert "spark.driver.host" not in conf and "spark.driver.bindAddress" not in conf
    pinned = settings(tmp_path, "spark://127.0.0.1:7077", **{"spark.driver.host": "127.0.0.1"})
    assert spark_conf(pinned, "eventlake", None, {})["spark.driver.host"] == "127.0.0.1"
