"""The [catalog] settings: each back end's settings, validated with messages naming the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from eventlake.config import Secret, load_settings
from eventlake.errors import ConfigError


def load(tmp_path: Path, catalog: str, environ: dict[str, str] | None = None):
    path = tmp_path / "eventlake.toml"
    path.write_text("[catalog]\n" + catalog)
    return load_settings(path, environ=environ or {})


@pytest.mark.parametrize(
    ("catalog", "setting"),
    [
        ('kind = "glue"\njdbc_url = "jdbc:postgresql://db/hms"\n', "catalog.jdbc_url"),
        ('kind = "glue"\nuri = "thrift://h:9083"\n', "catalog.uri"),
        ('region = "us-east-1"\n', "catalog.region"),
        ('uri = "http://h:9083"\n', "catalog.uri"),
        ('uri = "thrift://a:9083,thrift://b"\n', "catalog.uri"),
        ('jdbc_url = "postgresql://db/hms"\n', "catalog.jdbc_url"),
        ('jdbc_url = "jdbc:oracle:thin:@db:1521/hms"\n', "catalog.jdbc_url"),
        ('user = "hive"\n', "catalog.user"),
        ('password = "pw"\n', "catalog.password"),
        ('jdbc_url = "jdbc:postgresql://db/hms"\npassword = 3\n', "catalog.password"),
        ('kind = "glue"\nregion = "US East"\n', "catalog.region"),
        ('kind = "glue"\nendpoint_url = "localhost:5000"\n', "catalog.endpoint_url"),
        ('kind = "glue"\ncatalog_id = "abc"\n', "catalog.catalog_id"),
    ],
)
def test_bad_catalog_settings_are_named(tmp_path: Path, catalog: str, setting: str) -> None:
    with pytest.raises(ConfigError) as error:
        load(tmp_path, catalog)
    assert error.value.setting == setting and setting in str(error.value)


def test_a_jdbc_metastore_with_a_secret_password(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        'jdbc_url = "jdbc:mariadb://db:3306/hms"\nuser = "hive"\npassword = "pw-in-file"\n'
        'jdbc_driver_jar = "drivers/mariadb.jar"\n',
        environ={"EVENTLAKE__CATALOG__PASSWORD": "pw-from-env"},
    )
    catalog = settings.catalog
    assert catalog.kind == "hive" and catalog.user == "hive"
    assert catalog.password == Secret("pw-from-env")  # the environment wins over the file
    assert "pw-from-env" not in repr(settings)
    assert catalog.jdbc_driver_jar == str(tmp_path / "drivers" / "mariadb.jar")  # relative to the file


def test_glue_and_uri_settings(tmp_path: Path) -> None:
    glue = load(tmp_path, 'kind = "glue"\nregion = "eu-west-1"\nendpoint_url = "http://127.0.0.1:5000"\n')
    assert glue.catalog.kind == "glue" and glue.catalog.region == "eu-west-1"
    assert glue.catalog.catalog_id == "" and glue.catalog.password == Secret("")
    remote = load(tmp_path, 'uri = "thrift://metastore-1:9083,thrift://metastore-2:9083"\n')
    assert remote.catalog.uri.startswith("thrift://metastore-1")
