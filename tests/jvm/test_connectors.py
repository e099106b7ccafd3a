"""``[spark] jars_dir`` and the S3A settings: the jars go on the driver's class path (and to a
cluster's executors), the lake's bucket gets its endpoint, never a credential; the pinned jar set
is hadoop-aws 3.5.0 with the SDK's modules, not its bundle nor a second Netty."""

from __future__ import annotations

from pathlib import Path

import pytest

from eventlake.config import LakeSettings, Settings, SparkSettings, load_settings, write_initial_config
from eventlake.errors import ConfigError
from eventlake.jvm.session import spark_conf
from eventlake.storage import ObjectPath

PROJECT = Path(__file__).resolve().parents[2]
ENVIRON = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEYID0001", "AWS_SECRET_ACCESS_KEY": "secret-value"}


def s3_settings(tmp_path: Path, jars_dir: Path, master: str = "local[*]") -> Settings:
    lake = LakeSettings(ObjectPath.parse("s3://bk/lake"), tmp_path / "state", "http://127.0.0.1:5000")
    return Settings(path=None, lake=lake, spark=SparkSettings(master=master, jars_dir=str(jars_dir)))


@pytest.fixture
def jars(tmp_path: Path) -> Path:
    folder = tmp_path / "jars"
    folder.mkdir()
    for name in ("hadoop-aws-3.5.0.jar", "s3-2.35.4.jar"):
        (folder / name).write_bytes(b"PK")
    return folder


@pytest.mark.parametrize("master", ["local[*]", "spark://10.0.0.5:7077"])
def test_the_jars_go_on_the_class_path_and_the_bucket_gets_its_endpoint(tmp_path, jars, master):
    conf = spark_conf(s3_settings(tmp_path, jars, master), "eventlake", None, ENVIRON)

    expected = [str(jars / "hadoop-aws-3.5.0.jar"), str(jars / "s3-2.35.4.jar")]
    assert conf["spark.driver.extraClassPath"].split(":") == expected
    assert conf.get("spark.jars", "").split(",") == (expected if master.startswith("spark:") else [""])
    assert conf["spark.hadoop.fs.s3a.bucket.bk.endpoint"] == "http://127.0.0.1:5000"
    assert conf["spark.hadoop.fs.s3a.bucket.bk.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.bucket.bk.connection.ssl.enabled"] == "false"
    everything = "\n".join(f"{k}={v}" for k, v in conf.items())
    assert "secret-value" not in everything and "AKIAEXAMPLEKEYID0001" not in everything


def test_a_lake_on_aws_itself_needs_no_s3a_setting(tmp_path, jars):
    settings = s3_settings(tmp_path, jars)
    lake = LakeSettings(settings.lake.root, tmp_path / "state")  # no endpoint: AWS itself
    on_aws = Settings(path=None, lake=lake, spark=settings.spark)
    assert not [k for k in spark_conf(on_aws, "eventlake", None, {}) if "fs.s3a" in k]


def test_a_jars_dir_without_jars_is_refused_naming_the_fix(tmp_path):
    with pytest.raises(ConfigError, match=r"spark\.jars_dir.*holds no jars.*scripts/ensure-jars\.sh"):
        spark_conf(s3_settings(tmp_path, tmp_path / "missing"), "eventlake", None, {})


def test_a_relative_jars_dir_is_relative_to_the_config_file(tmp_path):
    config = write_initial_config(tmp_path / "project")
    config.write_text(config.read_text().replace("[spark]\n", '[spark]\njars_dir = "jars/s3a"\n', 1))
    assert load_settings(config, environ={}).spark.jars_dir == str(tmp_path / "project" / "jars" / "s3a")


def test_the_pinned_s3a_set_is_hadoop_aws_with_the_sdk_modules_and_nothing_spark_has():
    sums = (PROJECT / "scripts" / "jars" / "s3a" / "SHA256SUMS").read_text().split("\n")
    names = [line.split("  ", 1)[1] for line in sums if line]
    assert "hadoop-aws-3.5.0.jar" in names and "s3-2.35.4.jar" in names
    spark_has = ("bundle-", "netty-4", "netty-common", "httpclient", "slf4j")
    assert not [n for n in names if n.startswith(spark_has)]
