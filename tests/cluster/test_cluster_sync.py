"""`eventlake sync` on a real Spark standalone cluster (master + two workers on 127.0.0.1) gives
the lake a `local[*]` sync of the same archive gives: the same rows in every table, the same
quarantine, the same duplicates dropped; and the work ran on the cluster's executors."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from eventlake import layout
from eventlake.config import add_source, write_initial_config
from eventlake.spec import enrich
from eventlake.timestamps import day_start_ms, parse_timestamp

from .conftest import LocalLakeStore, SparkCluster

pytestmark = pytest.mark.integration

EVENTLAKE = Path(sys.executable).parent / "eventlake"

SYNC_TIMEOUT = 900  # a bound against a hang, not a speed check: on a busy 2-core machine (the other
# test workers running, or other jobs) a cluster sync took over 150 s
FIRST_RECEIVED = parse_timestamp("2026-11-20T07:10:00Z")
# written by each run: not part of what the two lakes must share
VOLATILE = {"uuid_ts", "loaded_at", "run_id"}


def messages(hour: int, count: int) -> list[dict[str, Any]]:
    """``count`` messages of six kinds (four types, two track events); ids unique per hour."""
    out: list[dict[str, Any]] = []
    for n in range(count):
        user, anonymous = f"u{n % 17}", f"a{n}"
        kinds = [
            {"type": "track", "userId": user, "event": "Order Completed",
             "properties": {"revenue": round(n * 1.25, 2), "items": n % 5 + 1, "coupon": f"C{n % 3}"}},
            {"type": "track", "anonymousId": anonymous, "event": "Product Viewed",
             "properties": {"sku": f"sku-{n % 11}", "price": n % 40}},
            {"type": "identify", "userId": user,
             "traits": {"email": f"{user}@example.com", "age": 20 + n % 50}},
            {"type": "page", "anonymousId": anonymous, "name": "Home", "properties": {"path": f"/p/{n % 7}"}},
            {"type": "screen", "userId": user, "name": "Cart"},
            {"type": "group", "userId": user, "groupId": f"g{n % 4}", "traits": {"employees": n}},
        ]  # fmt: skip
        out.append({**kinds[n % len(kinds)], "messageId": f"h{hour}-m{n}"})
    return out


def archive_files(source_id: str) -> dict[str, bytes]:
    """Three archive files (three received hours), keyed by their key in the lake: 304 lines, with
    a duplicate, an invalid message, a line that is not JSON and a column of mixed types."""
    files: dict[str, bytes] = {}
    for number, hour in enumerate((7, 8, 9), 1):
        received = FIRST_RECEIVED + timedelta(hours=hour - 7)
        batch = messages(hour, 100)
        if hour == 8:
            batch.append(dict(batch[0]))  # the same message twice: one row
            batch.append({"type": "track", "userId": "u1", "messageId": "no-event"})  # invalid: no event
            properties = {"revenue": 1.5, "items": "many", "coupon": "C1"}  # items becomes a string
            batch.append(
                {"type": "track", "userId": "u2", "event": "Order Completed", "messageId": "bad-items",
                 "properties": properties}
            )  # fmt: skip
        lines = [orjson.dumps(enrich(m, received_at=received, source_id=source_id)) for m in batch]
        if hour == 9:
            lines.append(b'{"type": "track", "messageId": ')  # not JSON
        day = day_start_ms(received)
        key = f"{layout.ARCHIVE}/{source_id}/{day}/cluster-{number:06d}{layout.ARCHIVE_SUFFIX}"
        files[key] = gzip.compress(b"".join(line + b"\n" for line in lines))
    return files


def make_projects(root: Path) -> tuple[Path, Path, str]:
    """Two project directories with the same source (one config, copied): each its own lake
    root and state dir, so each sync has its own ledger and metastore."""
    cluster_config = write_initial_config(root / "on-cluster")
    source_id = add_source(cluster_config, "web", write_key="wk_cluster_web")["id"]
    local_config = root / "local" / cluster_config.name
    local_config.parent.mkdir(parents=True)
    shutil.copy(cluster_config, local_config)
    return cluster_config, local_config, source_id


def sync(config: Path, name: str, store: LocalLakeStore, **spark: str) -> tuple[list[dict], str]:
    """``eventlake sync --format json`` as a subprocess; its table rows and stderr."""
    env = {k: v for k, v in os.environ.items() if k != "EVENTLAKE_CONFIG" and not k.startswith("EVENTLAKE__")}
    env.update(store.environment(name))
    env["EVENTLAKE__LAKE__ROOT"] = store.root(name)
    for key, value in spark.items():
        env[f"EVENTLAKE__SPARK__{key.upper()}"] = value
    result = subprocess.run(
        [str(EVENTLAKE), "--config", str(config), "sync", "--format", "json"],
        capture_output=True, text=True, timeout=SYNC_TIMEOUT, env=env, cwd=config.parent,
    )  # fmt: skip
    assert result.returncode == 0, f"sync failed ({result.returncode}):\n{result.stderr[-4000:]}"
    return json.loads(result.stdout), result.stderr


def toml_table(conf: dict[str, str]) -> str:
    return "{" + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in conf.items()) + "}"


def index_keys(store: LocalLakeStore, name: str, prefix: str) -> list[tuple[int, int]]:
    """The (hi, lo) keys of every dedupe index key file under ``prefix``
    (sync/index/index_keys.py), sorted."""
    from eventlake.sync.index.index_keys import RECORD, SUFFIX, TRAILER

    base = store.path(name, prefix)
    selector = pafs.FileSelector(base, recursive=True, allow_not_found=True)
    found = []
    for info in store.filesystem.get_file_info(selector):
        if info.type == pafs.FileType.File and info.base_name.endswith(SUFFIX):
            with store.filesystem.open_input_file(info.path) as handle:
                data = handle.read()
            count = TRAILER.unpack(data[-TRAILER.size :])[2]
            records = np.frombuffer(data[: count * RECORD.itemsize], RECORD)
            found.extend(zip(records["hi"].tolist(), records["lo"].tolist(), strict=True))
    return sorted(found)


def parquet_rows(store: LocalLakeStore, name: str, prefix: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of every Parquet file under ``prefix``, by the folder under ``prefix`` (the table;
    "" for files in run folders), with its partition values, without what differs from run to
    run (run ids, load times); sorted."""
    base = store.path(name, prefix)
    selector = pafs.FileSelector(base, recursive=True, allow_not_found=True)
    tables: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for info in store.filesystem.get_file_info(selector):
        if info.type != pafs.FileType.File or not info.base_name.endswith(".parquet"):
            continue
        folders = info.path[len(base) :].strip("/").split("/")[:-1]
        parts = [p for p in folders if p.partition("=")[0] not in VOLATILE]  # not run_id=...
        partition = dict(p.split("=", 1) for p in parts[1:])
        table = pq.read_table(info.path, filesystem=store.filesystem)
        for row in table.to_pylist():
            rows = tables[parts[0] if parts else ""]
            rows.append({**{k: v for k, v in row.items() if k not in VOLATILE}, **partition})
    return {t: sorted(rows, key=repr) for t, rows in tables.items()}


def reports(store: LocalLakeStore, name: str) -> list[dict[str, Any]]:
    base = store.path(name, f"{layout.DATA}/reports")
    selector = pafs.FileSelector(base, recursive=True, allow_not_found=True)
    found = []
    for info in store.filesystem.get_file_info(selector):
        if info.type == pafs.FileType.File and layout.is_run_report_name(info.base_name):
            with store.filesystem.open_input_stream(info.path) as handle:
                found += [orjson.loads(line) for line in handle.read().splitlines() if line.strip()]
    return found


def test_a_sync_on_the_cluster_equals_a_local_sync(
    spark_cluster: SparkCluster, lake_store: LocalLakeStore, tmp_path: Path
) -> None:
    cluster_config, local_config, source_id = make_projects(tmp_path)
    for key, data in archive_files(source_id).items():
        lake_store.put("on-cluster", key, data)
        lake_store.put("local", key, data)

    # both at once (they share nothing): the machine's two cores are mostly waiting on JVMs
    shuffle = {"spark.sql.shuffle.partitions": "2"}  # the same in both: a few hundred messages
    with ThreadPoolExecutor(2) as pool:
        cluster_run = pool.submit(
            sync, cluster_config, "on-cluster", lake_store,
            master=spark_cluster.url, conf=toml_table({**spark_cluster.conf(), **shuffle}),
        )  # fmt: skip
        local_run = pool.submit(
            sync, local_config, "local", lake_store,
            master="local[*]", conf=toml_table(shuffle),
        )  # fmt: skip
        (on_cluster, said), (local, _) = cluster_run.result(), local_run.result()

    # the same tables with the same row counts, the same rows, the same quarantine
    assert on_cluster == local
    assert {r["table"]: r["rows"] for r in on_cluster} == {
        "web.group": 48, "web.identify": 51, "web.page": 51, "web.screen": 48,
        "web.track_order_completed": 52, "web.track_product_viewed": 51,
    }  # fmt: skip
    assert "1 duplicates dropped" in said
    data = f"{layout.DATA}/data"
    cluster_tables = parquet_rows(lake_store, "on-cluster", data + f"/{source_id}")
    assert cluster_tables == parquet_rows(lake_store, "local", data + f"/{source_id}")
    assert sum(len(rows) for rows in cluster_tables.values()) == 301
    quarantine = f"{layout.DATA}/quarantine/{source_id}"
    cluster_quarantine = parquet_rows(lake_store, "on-cluster", quarantine)
    assert cluster_quarantine == parquet_rows(lake_store, "local", quarantine)
    rejected = [(r["kind"], r["message_id"]) for rows in cluster_quarantine.values() for r in rows]
    assert sorted(rejected, key=repr) == [("message", "no-event"), ("message", None)]  # None: not JSON
    dedupe = f"{layout.DATA}/_state/dedupe/{source_id}"
    cluster_ids, local_ids = (index_keys(lake_store, name, dedupe) for name in ("on-cluster", "local"))
    assert cluster_ids == local_ids and len(set(cluster_ids)) == len(cluster_ids) == 301

    # the job ran on the cluster: its application finished on the master, with executors on workers
    [report] = [r for r in reports(lake_store, "on-cluster") if r["type"] == "source"]
    app_id = report["emr_cluster_id"]
    assert app_id and app_id.startswith("app-"), app_id
    completed = {app["id"]: app for app in spark_cluster.state()["completedapps"]}
    assert app_id in completed, (app_id, list(completed))
    assert completed[app_id]["state"] == "FINISHED"
    executors = spark_cluster.executor_dirs(app_id)  # <worker dir>/<app id>/<executor id>
    # one on each worker (a master may start one more as the application stops: seen under load,
    # an executor directory holding only its launch command)
    assert len(executors) >= 2 and {p.parent.parent for p in executors} == set(spark_cluster.work_dirs)
    [local_report] = [r for r in reports(lake_store, "local") if r["type"] == "source"]
    assert local_report["emr_cluster_id"].startswith("local-")
    for field in ("row_count", "duplicates_dropped", "rejected_messages", "rejected_values", "input_files"):
        assert report[field] == local_report[field], field
