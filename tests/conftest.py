"""Shared fixtures: one Spark session for the whole run, and lake projects to sync into.

Tests never read a developer's eventlake.toml or EVENTLAKE_* environment.

In parallel (``pytest -n 4 --dist loadgroup``, as ``make test`` runs them) each worker process has
its own session-scoped fixtures: its own Spark session, servers and temporary folders. Tests that
share an expensive server of a few (the catalog's PostgreSQL and MariaDB metastores, the Spark
standalone cluster) or a module-scoped fixture are kept on one worker: :func:`xdist_group_of`.
"""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import os
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from eventlake import layout
from eventlake.archive.days import reopen_days
from eventlake.config import Settings, add_source, load_settings, write_initial_config
from eventlake.spec import enrich
from eventlake.timestamps import day_start_ms, now_utc
from tests.catalog.servers import AZURITE_KEY

for _name in [n for n in os.environ if n == "EVENTLAKE_CONFIG" or n.startswith("EVENTLAKE__")]:
    del os.environ[_name]
# moto's fake credentials, before the shared Spark session starts: its Python workers inherit the
# JVM's environment, and lakes on the test S3 server (moto) reach it through that chain
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_DEFAULT_REGION": "us-east-1",
        # Azurite's published development key (lakes on the test Azure server)
        "AZURE_STORAGE_KEY": AZURITE_KEY,
    }
)

# the Spark drivers' class-data archive (eventlake.jvm.class_archive) in the project's cache, made
# by the first session on this machine: the tests' session and every `eventlake` subprocess map it
CLASS_ARCHIVE_DIR = Path(__file__).resolve().parents[1] / ".cache" / "jvm"
os.environ["EVENTLAKE__SPARK__CLASS_ARCHIVE_DIR"] = str(CLASS_ARCHIVE_DIR)

# fixtures whose servers are started once per worker: the tests that use one stay on one worker
# (named by fixture, or by a parameter whose value is the fixture's name: the catalog contract)
SHARED_SERVERS = {
    "catalog-thrift": {"metastore_command", "hive_thrift"},  # with a PostgreSQL server of its own
    "catalog-postgres": {"postgres", "postgres_project", "hive_postgres"},
    "catalog-mariadb": {"mariadb", "mariadb_project", "hive_mariadb"},
    "spark-cluster": {"spark_cluster", "cluster_moto", "lake_store"},
    "trino": {"trino"},  # one Trino server for the tier (tests/trino)
}


def xdist_group_of(item: pytest.Item) -> str | None:
    """The worker group of a test under ``--dist loadgroup``: a shared server's, else its
    module's when it uses a module-scoped fixture, else none (any worker)."""
    names = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        names |= {value for value in callspec.params.values() if isinstance(value, str)}
    for group, fixtures in SHARED_SERVERS.items():
        if names & fixtures:
            return group
    info = getattr(item, "_fixtureinfo", None)
    if info is not None:
        for definitions in info.name2fixturedefs.values():
            if any(definition.scope == "module" for definition in definitions):
                return item.nodeid.split("::", 1)[0]
    return None


# what `make check` leaves out: the costliest tests it would run (Spark, no subprocess), marked
# `slow` here and nowhere else; each is in `make test`. Why each: tests/README.md, "make check"
SLOW = {
    "tests/catalog/test_repair.py::test_a_lost_metastore_is_rebuilt_and_queries_return_the_same_rows",
    "tests/model/test_standin.py::test_the_stand_in_writes_what_the_spark_job_writes",
    "tests/query/test_cookbook.py::test_the_cookbook_runs",
    "tests/query/test_engines_agree.py::test_spark_and_duckdb_agree",
    "tests/query/test_warehouse_views.py::test_the_warehouse_views_on_both_engines",
    "tests/sync/test_retype.py::test_a_type_change_killed_at_any_step_completes_exactly_once",  # each step
    "tests/sync/test_retype.py::test_widening_a_column_rewrites_old_files_and_later_values_fit",
    "tests/sync/test_shared_database.py::test_two_sources_in_one_database",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.split("[", 1)[0] in SLOW:
            item.add_marker(pytest.mark.slow)
    if getattr(config.option, "loadgroup", False):  # set in xdist's workers by --dist loadgroup
        for item in items:
            group = xdist_group_of(item)
            if group is not None:
                _join_group(item, group)


def _join_group(item: pytest.Item, group: str) -> None:
    """Give ``item`` the node id ``<id>@<group>``, which is how xdist's loadgroup scheduler groups
    tests. (xdist 3.8 sets that suffix for an ``xdist_group`` mark on ``Item._nodeid``, which
    pytest 9.2 no longer reads: its node ids are ``Item._id``, a ``NodeId``.)"""
    nodeid = f"{item.nodeid}@{group}"
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # pytest before 9.2
        item._nodeid = nodeid
    else:
        item._id = NodeId.parse(nodeid)


_source_numbers = itertools.count(1)
_file_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def spark_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The state dir (embedded metastore) of the shared Spark session."""
    return tmp_path_factory.mktemp("spark state")  # a space: paths must survive spark-submit


@pytest.fixture(scope="session")
def spark(spark_state: Path) -> Iterator[Any]:
    """One local Spark session with a Hive metastore for every Spark test (local[2])."""
    from eventlake.config import LakeSettings, SparkSettings
    from eventlake.jvm.session import spark_session

    settings = Settings(
        path=None,
        lake=LakeSettings(root=spark_state / "unused-lake", state_dir=spark_state),
        spark=SparkSettings(
            master="local[2]",
            conf=(("spark.sql.shuffle.partitions", "2"),),
            class_archive_dir=str(CLASS_ARCHIVE_DIR),
        ),
    )
    session = spark_session(settings, "eventlake-tests")
    yield session
    session.stop()


@dataclasses.dataclass
class Lake:
    """A project directory with one source; ``settings`` share the test session's metastore."""

    root: Path
    config: Path
    settings: Settings
    slug: str

    @property
    def source(self):
        return self.settings.source(self.slug)

    def archive(self, messages: Iterable[Mapping[str, Any]], received_at: datetime | None = None) -> Path:
        """Write messages, enriched as the collector does, as one sealed archive file."""
        received_at = received_at or now_utc()
        lines = [orjson.dumps(enrich(m, received_at=received_at, source_id=self.source.id)) for m in messages]
        return self.archive_lines(lines, received_at)

    def archive_lines(self, lines: Iterable[bytes], received_at: datetime | None = None) -> Path:
        received_at = received_at or now_utc()
        name = f"test-{next(_file_numbers):06d}"
        day, storage = day_start_ms(received_at), self.settings.lake.storage()
        reopen_days(storage, self.settings.lake.root, self.source.id, [day])  # as the sealer: an ended day
        path = layout.archive_file(self.settings.lake.root, self.source.id, day, name)
        data = gzip.compress(b"".join(line + b"\n" for line in lines))
        storage.write(path, data)  # a local folder or a bucket
        return path


@pytest.fixture
def lake(tmp_path: Path, spark_state: Path) -> Lake:
    """A fresh lake with a uniquely named source (databases live in the shared metastore)."""
    config = write_initial_config(tmp_path / "project")
    slug = f"src{next(_source_numbers)}"
    add_source(config, slug, write_key=f"wk_{slug}")
    settings = load_settings(config, environ={})
    settings = dataclasses.replace(settings, lake=dataclasses.replace(settings.lake, state_dir=spark_state))
    return Lake(tmp_path / "project", config, settings, slug)


@pytest.fixture
def fsynced_dirs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The folders this test fsyncs, in order: a power cut cannot be simulated, so durability is
    observed as the fsyncs made (the real ``os.fsync`` still runs)."""
    synced: list[Path] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        target = Path(os.readlink(f"/proc/self/fd/{fd}"))
        if target.is_dir():
            synced.append(target)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    return synced
