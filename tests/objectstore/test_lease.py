"""One sync per source across machines on a lake in a bucket: the lease (conditional put with an
expiry) on a real moto S3 server, and two `eventlake sync` processes of two project directories
("machines") sharing one lake, started at once."""

from __future__ import annotations

import dataclasses
import importlib
import json
import subprocess
import time
import uuid
from datetime import timedelta

import orjson
import pytest

from eventlake import layout, state_layout
from eventlake.catalog import load_catalog
from eventlake.config import RetentionSettings, load_settings
from eventlake.query import run_query
from eventlake.storage import ObjectPath
from eventlake.storage.lease import LEASE_NAME, Lease, LeaseLostError, lease_name
from eventlake.storage.s3 import S3Storage
from eventlake.sync import run_sync
from eventlake.sync.maintenance.erase import delete_user
from eventlake.sync.maintenance.retention import apply_retention
from eventlake.timestamps import now_utc
from tests.catalog.conftest import clean_env
from tests.catalog.servers import AWS_ENV
from tests.collect.harness import EVENTLAKE
from tests.conftest import Lake
from tests.sync.test_sync import track

from .conftest import BUCKET, s3_project

pytestmark = pytest.mark.integration


def quiet(line: str) -> None:
    pass


def test_one_holder_at_a_time_and_an_expired_lease_is_taken_over(moto):
    """The holder renews from its thread on the wall clock; the contender's clock is driven, so
    that the test does not depend on how fast a loaded machine reaches moto (a 1-second lease
    judged by the wall clock expired between two calls in CI)."""
    storage = S3Storage(endpoint_url=moto.endpoint)
    folder = ObjectPath("s3", BUCKET, f"leases/{uuid.uuid4().hex}")
    now = [time.time()]
    first = Lease(storage, folder, seconds=1.0)
    second = Lease(storage, folder, seconds=1.0, clock=lambda: now[0], background=False)

    def expires() -> float:
        return float(second.look().holder["expires"])  # type: ignore[index]

    assert first.try_acquire()
    written = expires()
    assert not second.try_acquire()
    deadline = time.monotonic() + 30
    while expires() < written + 0.6:  # the renewer pushes the expiry on (a third each time)
        assert time.monotonic() < deadline, "the holder never renewed its lease"
        time.sleep(0.1)
    now[0] = written + 0.5  # past the first expiry, before the renewed one
    assert not second.try_acquire(), "a renewed lease stays held"
    first._stop.set()  # the holder hangs: it stops renewing, but never releases
    first._renewer.join()
    now[0] = expires() + 0.1
    assert second.try_acquire(), "the expired lease is taken over"
    with pytest.raises(LeaseLostError, match="another process took the lease over"):
        first.check()  # the old holder must not publish
    second.check()
    second.release()
    assert Lease(storage, folder, seconds=1.0).try_acquire()


def test_two_machines_syncing_one_source_at_once_keep_the_lake_exact(tmp_path, moto):
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    first = s3_project(tmp_path / "machine-a", moto, prefix, "shop")
    # the second machine: its own project directory (state dir) on the same lake, the same source id
    settings = load_settings(first, environ={})
    second = tmp_path / "machine-b"
    second.mkdir()
    (second / "eventlake.toml").write_text(first.read_text())
    lake = Lake(tmp_path / "machine-a", first, settings, "shop")
    messages = [
        {"type": "track", "userId": f"u{i}", "event": "Signed Up", "messageId": f"m{i}"} for i in range(50)
    ]
    lake.archive(messages[:30])
    lake.archive(messages[20:])  # 10 retries

    env = clean_env(**AWS_ENV, AWS_DEFAULT_REGION="us-east-1")
    runs = [
        subprocess.Popen(
            [str(EVENTLAKE), "--config", str(config), "sync", "--format", "json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )  # fmt: skip
        for config in (first, second / "eventlake.toml")
    ]
    outputs = [run.communicate(timeout=400) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    synced = sorted(sum(row["rows"] for row in json.loads(out)) for out, _ in outputs)
    assert synced == [0, 50], [err[-2000:] for _, err in outputs]  # one synced, the other waited
    assert any("Nothing to do" in err for _, err in outputs)
    query = "SELECT count(*) AS n, count(DISTINCT message_id) AS ids FROM shop.track_signed_up"
    counted = run_query(settings, query, engine="duckdb")
    assert counted.rows == ({"n": 50, "ids": 50},)


def steal_the_lease(lake: Lake) -> None:
    """Another machine takes the source's lease over, as after an expiry: the next number."""
    storage = lake.settings.lake.storage()
    folder = state_layout.sync_lease_dir(lake.settings.lake.root, lake.source.id)
    held = [int(m.group(1)) for f in storage.list(folder, "*.json") if (m := LEASE_NAME.match(f.path.name))]
    document = {"host": "machine-b", "pid": 1, "token": "b", "expires": time.time() + 600}
    storage.write(folder / lease_name(max(held) + 1), orjson.dumps(document))


def lake_objects(lake: Lake) -> set[tuple[str, int]]:
    """The source's archive files and table files (path, size)."""
    storage, root, source = lake.settings.lake.storage(), lake.settings.lake.root, lake.source
    folders = (layout.archive_source_dir(root, source.id), layout.source_data_dir(root, source.dir_name))
    return {(str(f.path), f.size) for folder in folders for f in storage.list(folder, "**/*")}


# each job, and a function it calls once it holds the source (users delete reads the archive
# before taking the lease: its catch-up under the lease is the first step that holds it)
JOBS = {
    "retention": ("eventlake.sync.maintenance.retention", "list_archive_files",
                  lambda lake, spark: apply_retention(lake.settings, [lake.slug], spark=spark, say=quiet)),
    "users delete": ("eventlake.sync.maintenance.erase", "catch_up", lambda lake, spark: delete_user(
        lake.settings, "u-gone", [lake.slug], spark=spark, say=quiet)),
}  # fmt: skip


@pytest.mark.parametrize("job", list(JOBS))
def test_a_retention_or_user_deletion_that_lost_its_lease_deletes_nothing(
    s3_lake: Lake, spark, monkeypatch, job: str
) -> None:
    retention = RetentionSettings(archive_days=7, table_days=7)
    settings = dataclasses.replace(s3_lake.settings, retention=retention)
    lake = dataclasses.replace(s3_lake, settings=settings)
    old = now_utc() - timedelta(days=30)
    lake.archive([track("m1", user="u-gone"), track("m2", user="u-stays")], old)
    lake.archive([track("m3", user="u-gone")])
    [synced] = run_sync(lake.settings, [lake.slug], spark=spark, say=quiet)
    assert synced.rows == 3, synced.error
    catalog = load_catalog(lake.settings, spark)
    database = lake.source.database
    before = lake_objects(lake), catalog.partitions(database, "track_order_completed")

    module, held_step, run = JOBS[job]
    # the lease is taken over once the job holds it (as when it stalled past its expiry)
    original = getattr(importlib.import_module(module), held_step)

    def taken_over(*args, **kwargs):
        steal_the_lease(lake)
        return original(*args, **kwargs)

    monkeypatch.setattr(f"{module}.{held_step}", taken_over)
    [result] = run(lake, spark)
    assert result.status == "Failed" and "lost the lease" in result.error, result
    assert (lake_objects(lake), catalog.partitions(database, "track_order_completed")) == before
