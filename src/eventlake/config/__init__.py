"""Settings: typed, frozen sections loaded once from ``eventlake.toml`` and the environment.

Precedence: defaults < ``eventlake.toml`` < environment (``EVENTLAKE__SECTION__KEY``) < CLI flags
(applied by the caller with :func:`dataclasses.replace`). Settings are passed down explicitly.
"""

from eventlake.config.loader import CONFIG_ENV, CONFIG_FILE, load_settings, resolve_config_path
from eventlake.config.reload import SourceChanges, SourcesWatch
from eventlake.config.settings import (
    DATE_PARTITIONS,
    AlertsSettings,
    CatalogKind,
    CatalogSettings,
    CollectorSettings,
    CompactSettings,
    ConsoleSettings,
    LakeSettings,
    QuerySettings,
    RetentionSettings,
    Secret,
    Settings,
    SourceSettings,
    SparkSettings,
    SyncSettings,
    client_host,
    is_loopback,
)
from eventlake.config.writer import (
    add_source,
    new_source_id,
    remove_source,
    set_source_enabled,
    write_initial_config,
)

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE",
    "DATE_PARTITIONS",
    "AlertsSettings",
    "CatalogKind",
    "CatalogSettings",
    "CollectorSettings",
    "CompactSettings",
    "ConsoleSettings",
    "LakeSettings",
    "QuerySettings",
    "RetentionSettings",
    "Secret",
    "Settings",
    "SourceChanges",
    "SourceSettings",
    "SourcesWatch",
    "SparkSettings",
    "SyncSettings",
    "client_host",
    "is_loopback",
    "add_source",
    "load_settings",
    "new_source_id",
    "remove_source",
    "set_source_enabled",
    "resolve_config_path",
    "write_initial_config",
]
