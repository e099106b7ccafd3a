"""One sync per source across machines on a lake in a bucket: the lease (conditional put with an
expiry) on a real moto S3 server, and two `eventlake sync` processes of two project directories
("machines") sharing one lake, started at once."""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest

from eventlake.config import load_settings
from eventlake.query import run_query
from eventlake.storage import ObjectPath
from eventlake.storage.lease import Lease, LeaseLostError
from eventlake.storage.s3 import S3Storage
from tests.catalog.conftest import clean_env
from tests.catalog.servers import AWS_ENV
from tests.collect.harness import EVENTLAKE
from tests.conftest import Lake

from .conftest import BUCKET, s3_project

pytestmark = pytest.mark.integration


def test_one_holder_at_a_time_and_an_expired_lease_is_taken_over(moto):
    storage = S3Storage(endpoint_url=moto.endpoint)
    folder = ObjectPath("s3", BUCKET, f"leases/{uuid.uuid4().hex}")
    first, second = Lease(storage, folder, seconds=1.0), Lease(storage, folder, seconds=1.0)
    assert first.try_acquire()
    assert not second.try_acquire()
    time.sleep(1.2)
    assert not second.try_acquire(), "a renewed lease stays held"
    first._stop.set()  # the holder hangs: it stops renewing, but never releases
    first._renewer.join()
    deadline = time.monotonic() + 10
    while not second.try_acquire():
        assert time.monotonic() < deadline, "the expired lease was never taken over"
        time.sleep(0.2)
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
