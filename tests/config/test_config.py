"""Settings: defaults, validation messages that name the setting, environment, documentation."""

from __future__ import annotations

import contextlib
import dataclasses
import hmac
import re
import resource
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from eventlake.config import (
    AlertsSettings,
    CatalogSettings,
    CollectorSettings,
    LakeSettings,
    Secret,
    SourceSettings,
    SparkSettings,
    SyncSettings,
    add_source,
    load_settings,
    write_initial_config,
)
from eventlake.errors import ConfigError, UsageError
from eventlake.storage import ObjectPath

CONFIGURATION = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_initial_config(tmp_path / "p")


def test_initial_config_loads_with_embedded_defaults(config: Path) -> None:
    settings = load_settings(config, environ={})
    assert settings.lake.root == config.parent / "lake"
    assert settings.lake.state_dir == config.parent / ".eventlake"
    assert settings.catalog.kind == "hive" and settings.spark.master == "local[*]"
    assert settings.collector.port == 8088 and settings.collector.seal_max_age_seconds == 5.0
    assert dict(settings.spark.conf) == {"spark.sql.shuffle.partitions": "4"}
    assert settings.sources == ()


def test_init_refuses_to_overwrite(config: Path) -> None:
    with pytest.raises(UsageError, match="already exists"):
        write_initial_config(config.parent)


def test_sources_add_keeps_comments_and_generates_ids(config: Path) -> None:
    first = add_source(config, "web", write_key="wk_web")
    second = add_source(config, "app")
    settings = load_settings(config, environ={})
    assert [s.slug for s in settings.sources] == ["web", "app"]
    assert settings.source("web").id == first["id"] and re.fullmatch(r"[A-Za-z0-9]{10}", first["id"])
    assert second["write_key"].startswith("wk_") and second["id"] != first["id"]
    assert settings.source_by_write_key("wk_web").slug == "web"
    assert "# eventlake configuration" in config.read_text()
    with pytest.raises(UsageError, match="already exists"):
        add_source(config, "web")
    with pytest.raises(ConfigError, match="slug"):
        add_source(config, "Bad Slug")


def test_the_config_file_is_private_to_its_owner(config: Path) -> None:
    assert stat.S_IMODE(config.stat().st_mode) == 0o600  # `eventlake init`
    config.chmod(0o644)  # as written by an earlier version
    add_source(config, "web")
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    # the lock file of the edits stays; no temporary is left
    assert sorted(p.name for p in config.parent.iterdir()) == [".eventlake.toml.lock", "eventlake.toml"]


@contextlib.contextmanager
def files_limited_to(size: int) -> Iterator[None]:
    """Writes past ``size`` bytes of any file fail with EFBIG, as on a full disk (a real failure
    in the middle of a write, not a replaced function)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def test_a_failed_write_of_the_config_file_leaves_the_old_one_whole(config: Path) -> None:
    add_source(config, "web")
    before = config.read_bytes()
    with pytest.raises(OSError), files_limited_to(len(before) + 10):
        add_source(config, "app")
    assert config.read_bytes() == before
    assert [s.slug for s in load_settings(config, environ={}).sources] == ["web"]
    assert sorted(p.name for p in config.parent.iterdir()) == [".eventlake.toml.lock", "eventlake.toml"]


def test_a_source_that_would_make_the_file_invalid_leaves_it_untouched(config: Path) -> None:
    before = config.read_bytes()
    with pytest.raises(ConfigError, match="date_partition"):
        add_source(config, "web", date_partition="weekly")
    assert config.read_bytes() == before


def test_write_keys_are_compared_in_constant_time(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add_source(config, "web", write_key="wk_web")
    add_source(config, "app", write_key="wk_app")
    settings = load_settings(config, environ={})
    compared: list[tuple[bytes, bytes]] = []
    real_compare = hmac.compare_digest

    def recording_compare(given: bytes, secret: bytes) -> bool:
        compared.append((given, secret))
        return real_compare(given, secret)

    monkeypatch.setattr(hmac, "compare_digest", recording_compare)
    assert settings.source_by_write_key("wk_web").slug == "web"
    assert settings.source_by_write_key("wk_nope") is None
    # every source's key, with the constant-time compare, also after the one that matched
    assert compared == [(b"wk_web", b"wk_web"), (b"wk_web", b"wk_app"), (b"wk_nope", b"wk_web"),
                        (b"wk_nope", b"wk_app")]  # fmt: skip


def test_unknown_source_names_the_known_ones(config: Path) -> None:
    add_source(config, "web")
    with pytest.raises(UsageError, match=r"unknown source 'nope' \(known: web"):
        load_settings(config, environ={}).source("nope")


def test_sources_share_a_database_when_their_prefixes_tell_their_tables_apart(config: Path) -> None:
    add_source(config, "ios", database="apps", table_prefix="ios")  # as SDL users wrote it
    add_source(config, "android", database="apps", table_prefix="android_")
    settings = load_settings(config, environ={})
    shared = [(s.database, s.table_prefix) for s in settings.sources]
    assert shared == [("apps", "ios_"), ("apps", "android_")]
    for prefix in ("", "ios_beta"):  # no prefix starts every name; ios_beta_ names start with ios_
        with pytest.raises(ConfigError) as error:
            add_source(config, "web", database="apps", table_prefix=prefix)
        assert error.value.setting == "sources.web.table_prefix"
        assert "with source ios's ('ios_') in database 'apps'" in str(error.value)
        assert 'table_prefix = "web_"' in str(error.value)
    assert len(load_settings(config, environ={}).sources) == 2  # the file was left as it was


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        ("[collector]\nport = 70000\n", "collector.port"),
        ('[collector]\nport = "8088"\n', "collector.port"),
        ("[collector]\nprot = 1\n", "collector.prot"),
        ('[catalog]\nkind = "glue2"\n', "catalog.kind"),
        ("[spark]\nconf = 3\n", "spark.conf"),
        ("[nonsense]\n", "nonsense"),
        ("[sync]\ninterval_seconds = 0\n", "sync.interval_seconds"),
        (
            '[[sources]]\nslug = "web"\nid = "a"\nwrite_key = "k"\ndate_partition = "weekly"\n',
            "sources.web.date_partition",
        ),
        ('[[sources]]\nslug = "web"\nid = "a"\n', "sources[0].write_key"),
        (
            '[[sources]]\nslug = "web"\nid = "a"\nwrite_key = "k"\n[[sources]]\nslug = "app"\nid = "b"\n'
            'write_key = "k"\n',
            "sources.app.write_key",
        ),
    ],
)
def test_bad_settings_are_named(tmp_path: Path, text: str, setting: str) -> None:
    path = tmp_path / "eventlake.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_settings(path, environ={})
    assert error.value.setting == setting
    assert setting in str(error.value)


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="eventlake init"):
        load_settings(tmp_path / "missing.toml", environ={})
    bad = tmp_path / "eventlake.toml"
    bad.write_text("[lake\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(bad, environ={})


def test_environment_overrides_the_file(config: Path) -> None:
    environ = {"EVENTLAKE__COLLECTOR__PORT": "9000", "EVENTLAKE__SPARK__MASTER": "local[2]"}
    settings = load_settings(config, environ=environ)
    assert settings.collector.port == 9000 and settings.spark.master == "local[2]"
    with pytest.raises(ConfigError, match="collector.port"):
        load_settings(config, environ={"EVENTLAKE__COLLECTOR__PORT": "many"})


def test_an_object_store_lake_root_is_a_uri(config: Path) -> None:
    settings = load_settings(config, environ={"EVENTLAKE__LAKE__ROOT": "s3://my-bucket/ev/"})
    assert settings.lake.root == ObjectPath("s3", "my-bucket", "ev")
    assert str(settings.lake.root / "segment-logs") == "s3://my-bucket/ev/segment-logs"
    azure = "abfss://lake@acct.dfs.core.windows.net/events"
    assert str(load_settings(config, environ={"EVENTLAKE__LAKE__ROOT": azure}).lake.root) == azure


def test_an_unsupported_lake_root_scheme_is_refused_clearly(config: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"invalid setting lake\.root: gs://bk/ev.*not supported.*s3://bucket"
    ):
        load_settings(config, environ={"EVENTLAKE__LAKE__ROOT": "gs://bk/ev"})
    with pytest.raises(ConfigError, match=r"lake\.root.*s3://bucket/prefix"):
        load_settings(config, environ={"EVENTLAKE__LAKE__ROOT": "s3://"})


def test_config_path_from_environment(config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings(None, environ={"EVENTLAKE_CONFIG": str(config)})
    assert settings.path == config


def test_secrets_never_show(config: Path) -> None:
    add_source(config, "web", write_key="wk_topsecret")
    settings = load_settings(config, environ={})
    assert "wk_topsecret" not in repr(settings) and "wk_topsecret" not in str(settings.sources[0])
    assert Secret("x").reveal() == "x"


def test_every_setting_is_documented() -> None:
    documented = CONFIGURATION.read_text()
    sections = {
        "lake": LakeSettings,
        "catalog": CatalogSettings,
        "spark": SparkSettings,
        "collector": CollectorSettings,
        "sync": SyncSettings,
        "alerts": AlertsSettings,
        "sources[]": SourceSettings,
    }
    missing = [
        f"{name}.{field.name}"
        for name, cls in sections.items()
        for field in dataclasses.fields(cls)
        if f"`{name}.{field.name}`" not in documented
    ]
    assert not missing, f"settings missing from docs/configuration.md: {missing}"


def test_environment_text_settings_are_taken_as_written(config: Path) -> None:
    environ = {
        "EVENTLAKE__LAKE__ROOT": "/data/lake 2",
        "EVENTLAKE__SPARK__MASTER": "'local[2]'",
        "EVENTLAKE__COLLECTOR__SEAL_MAX_AGE_SECONDS": "2",
        "EVENTLAKE__SPARK__CONF": '{"a.b" = 1}',
    }
    settings = load_settings(config, environ=environ)
    assert settings.lake.root == Path("/data/lake 2") and settings.spark.master == "'local[2]'"
    assert settings.collector.seal_max_age_seconds == 2.0 and dict(settings.spark.conf) == {"a.b": "1"}


def test_a_secret_is_never_shown_in_an_error(config: Path) -> None:
    config.write_text(config.read_text() + '\n[[sources]]\nslug = "web"\nid = "abc"\nwrite_key = 12345678\n')
    with pytest.raises(ConfigError) as error:
        load_settings(config, environ={})
    assert "12345678" not in str(error.value) and "(hidden)" in str(error.value)
