"""The Glue catalog against moto's Glue emulator (server mode), through the boto3 calls a user's
eventlake makes: no needless UpdateTable, partitions in batches of 100, Athena-style table
definitions, and a whole `eventlake sync` registering its tables in Glue."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from eventlake import state_layout
from eventlake.catalog import TableSpec, load_catalog
from eventlake.catalog.glue import GlueCatalog, GlueError
from eventlake.config import (
    CatalogSettings,
    LakeSettings,
    Settings,
    add_source,
    load_settings,
    write_initial_config,
)
from eventlake.errors import ConfigError, DependencyError, PermissionsError
from eventlake.schema.warehouse import LakeTable, View, warehouse_views
from eventlake.storage import LocalStorage
from eventlake.sync.protocol.commit import apply
from eventlake.sync.protocol.manifest import ADD_COLUMNS, CREATE, NONE, Manifest, TableChange, TableEntry
from eventlake.sync.protocol.state import SyncState
from eventlake.timestamps import parse_timestamp

from .conftest import clean_env, write_archive
from .servers import AWS_ENV

COLUMNS = (("message_id", "string"), ("received_at", "timestamp"))
_numbers = itertools.count(1)


@pytest.fixture
def calls(glue: GlueCatalog) -> Iterator[Counter[str]]:
    """How many times each Glue API operation was called during the test."""
    counts: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        counts[model.name] += 1

    glue.client.meta.events.register("before-call.glue.*", count)
    yield counts
    glue.client.meta.events.unregister("before-call.glue.*", count)


@pytest.fixture
def database(glue: GlueCatalog) -> str:
    return f"glue_{next(_numbers)}"


@pytest.mark.integration
def test_column_appends_call_update_table_only_when_columns_are_missing(
    glue: GlueCatalog, database: str, calls: Counter[str], tmp_path: Path
) -> None:
    spec = TableSpec(database, "page", COLUMNS, ("day", "hr"), str(tmp_path / "page"))
    glue.ensure_table(spec)
    glue.ensure_table(spec)
    glue.add_columns(database, "page", [("message_id", "string")])  # already there
    assert calls["UpdateTable"] == 0
    glue.ensure_table(
        TableSpec(database, "page", (*COLUMNS, ("name", "string")), ("day", "hr"), spec.location)
    )
    assert calls["UpdateTable"] == 1
    table = glue.client.get_table(DatabaseName=database, Name="page")["Table"]
    assert [c["Name"] for c in table["StorageDescriptor"]["Columns"]] == ["message_id", "received_at", "name"]
    assert table["PartitionKeys"] == [{"Name": "day", "Type": "string"}, {"Name": "hr", "Type": "string"}]
    assert table["TableType"] == "EXTERNAL_TABLE" and table["Parameters"]["classification"] == "parquet"
    serde = table["StorageDescriptor"]["SerdeInfo"]["SerializationLibrary"]
    assert serde == "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"


@pytest.mark.integration
def test_a_type_change_updates_one_column_once(
    glue: GlueCatalog, database: str, calls: Counter[str], tmp_path: Path
) -> None:
    glue.ensure_table(TableSpec(database, "page", COLUMNS, ("day", "hr"), str(tmp_path / "page")))
    glue.set_column_type(database, "page", "received_at", "string")
    glue.set_column_type(database, "page", "received_at", "string")  # already: no new table version
    assert calls["UpdateTable"] == 1
    assert glue.table_columns(database, "page") == (("message_id", "string"), ("received_at", "string"))


@pytest.mark.integration
def test_partitions_are_created_100_per_call_with_their_locations(
    glue: GlueCatalog, database: str, calls: Counter[str], tmp_path: Path
) -> None:
    spec = TableSpec(database, "track_signed_up", COLUMNS, ("day", "hr"), str(tmp_path / "t"))
    glue.ensure_table(spec)
    partitions = [(f"2026-11-{day:02d}", f"{hour:02d}") for day in range(1, 12) for hour in range(24)][:250]
    glue.add_partitions(spec, partitions)
    assert calls["BatchCreatePartition"] == 3
    assert calls["BatchGetPartition"] == 1
    glue.add_partitions(spec, partitions[:10])  # all exist: looked up, nothing created
    assert calls["BatchCreatePartition"] == 3
    assert calls["BatchGetPartition"] == 2
    assert glue.partitions(database, "track_signed_up") == sorted(partitions)
    found = glue.client.get_partition(
        DatabaseName=database, TableName="track_signed_up", PartitionValues=["2026-11-01", "07"]
    )["Partition"]
    assert found["StorageDescriptor"]["Location"] == f"{spec.location}/day=2026-11-01/hr=07"


@pytest.mark.integration
def test_only_missing_partitions_are_created_1000_looked_up_per_call(
    glue: GlueCatalog, database: str, calls: Counter[str], tmp_path: Path
) -> None:
    spec = TableSpec(database, "page", COLUMNS, ("day", "hr"), str(tmp_path / "page"))
    glue.ensure_table(spec)
    days = [f"2026-{month:02d}-{day:02d}" for month in (1, 2) for day in range(1, 29)]
    partitions = [(day, f"{hour:02d}") for day in days for hour in range(24)][:1100]
    glue.add_partitions(spec, partitions[:150])
    calls.clear()
    glue.add_partitions(spec, partitions)  # 150 exist, 950 to create
    assert calls["BatchGetPartition"] == 2
    assert calls["BatchCreatePartition"] == 10
    assert glue.partitions(database, "page") == sorted(partitions)


@pytest.mark.integration
def test_a_replays_partitions_move_to_their_version_folders_100_per_call(
    glue: GlueCatalog, database: str, calls: Counter[str], tmp_path: Path
) -> None:
    """A replay of a week switches thousands of partitions: looked up 1,000 per call, moved 100 per
    BatchUpdatePartition, the missing ones created at their version folder, those already there
    (a rerun after a crash) left alone; a missing table is said (False) with nothing changed."""
    spec = TableSpec(database, "track_signed_up", COLUMNS, ("day", "hr"), str(tmp_path / "t"))
    partitions = [(f"2026-11-{day:02d}", f"{hour:02d}") for day in range(1, 12) for hour in range(24)][:250]
    moves = [(values, f"{spec.partition_location(values)}/_v-000001-replay-1") for values in partitions]
    assert not glue.set_partition_locations(database, spec.name, spec.partition_keys, moves)
    glue.ensure_table(spec)
    glue.add_partitions(spec, partitions[:230])  # 20 are not registered yet
    calls.clear()
    assert glue.set_partition_locations(database, spec.name, spec.partition_keys, moves)
    assert (calls["BatchGetPartition"], calls["BatchUpdatePartition"], calls["BatchCreatePartition"]) == (
        1,
        3,
        1,
    )
    assert "UpdatePartition" not in calls and "GetPartition" not in calls
    for values, location in moves[::37] + moves[-3:]:
        found = glue.client.get_partition(
            DatabaseName=database, TableName=spec.name, PartitionValues=list(values)
        )
        assert found["Partition"]["StorageDescriptor"]["Location"] == location
        assert found["Partition"]["StorageDescriptor"]["Columns"] == [
            {"Name": n, "Type": t} for n, t in COLUMNS
        ]  # fmt: skip
    calls.clear()
    assert glue.set_partition_locations(database, spec.name, spec.partition_keys, moves)  # a rerun
    assert dict(calls) == {"BatchGetPartition": 1}
    assert glue.partitions(database, spec.name) == sorted(partitions)


def test_without_batch_get_partition_permission_every_partition_is_created() -> None:
    """A policy that allows BatchCreatePartition but not BatchGetPartition (the README's before
    the look-up): Glue is asked once, then partitions are created as before, existing ones kept."""
    glue, stubber = _stubbed("batch_get_partition", "AccessDeniedException")
    spec = TableSpec("db", "page", COLUMNS, ("day", "hr"), "s3://bucket/lake/page")
    exists = {"PartitionValues": ["2026-11-22", "07"], "ErrorDetail": {"ErrorCode": "AlreadyExistsException"}}
    stubber.add_response("batch_create_partition", {"Errors": [exists]})
    stubber.add_response("batch_create_partition", {})
    glue.add_partitions(spec, [("2026-11-22", "07"), ("2026-11-22", "08")])
    glue.add_partitions(spec, [("2026-11-22", "09")])  # no second BatchGetPartition
    stubber.assert_no_pending_responses()


def test_without_batch_update_partition_permission_partitions_move_one_call_each() -> None:
    """A policy from before BatchUpdatePartition (glue:UpdatePartition only): asked once, then a
    partition at a time, as before."""
    glue, stubber = _stubbed("batch_update_partition", "AccessDeniedException")
    stubber.deactivate()
    stubber = Stubber(glue.client)  # (the answers in call order: the look-up first)
    descriptor = {"Location": "s3://bucket/lake/page/day=2026-11-22/hr=07", "Columns": []}
    found = [
        {"Values": [d, h], "StorageDescriptor": dict(descriptor)}
        for d, h in [("2026-11-22", "07"), ("2026-11-22", "08")]
    ]
    stubber.add_response("batch_get_partition", {"Partitions": found})
    stubber.add_client_error(
        "batch_update_partition", service_error_code="AccessDeniedException", http_status_code=400
    )
    stubber.add_response("update_partition", {})
    stubber.add_response("update_partition", {})
    stubber.add_response("batch_get_partition", {"Partitions": found[:1]})
    stubber.add_response("update_partition", {})  # no second BatchUpdatePartition
    stubber.activate()
    moves = [(tuple(p["Values"]), p["StorageDescriptor"]["Location"] + "/_v-000001-replay-1") for p in found]
    assert glue.set_partition_locations("db", "page", ("day", "hr"), moves)
    assert glue.set_partition_locations("db", "page", ("day", "hr"), moves[:1])
    stubber.assert_no_pending_responses()


@pytest.mark.integration
def test_json_tables_with_their_own_partition_paths(glue: GlueCatalog, database: str, tmp_path: Path) -> None:
    spec = TableSpec(
        database,
        "sync_reports",
        (("status", "string"), ("row_count", "bigint")),
        ("source_id", "day"),
        str(tmp_path / "reports"),
        format="json",
        partition_path="day={day}/source={source_id}",
    )
    glue.ensure_table(spec)
    glue.add_partitions(spec, [("src1", "2026-11-22")])
    table = glue.client.get_table(DatabaseName=database, Name="sync_reports")["Table"]
    assert (
        table["StorageDescriptor"]["SerdeInfo"]["SerializationLibrary"]
        == "org.openx.data.jsonserde.JsonSerDe"
    )
    found = glue.client.get_partition(
        DatabaseName=database, TableName="sync_reports", PartitionValues=["src1", "2026-11-22"]
    )["Partition"]
    assert found["StorageDescriptor"]["Location"] == f"{spec.location}/day=2026-11-22/source=src1"


def test_a_missing_region_names_the_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(ConfigError) as error:
        GlueCatalog.from_settings(CatalogSettings(kind="glue"))
    assert error.value.setting == "catalog.region"


def test_without_boto3_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 -> ImportError
    settings = Settings(
        path=None,
        lake=LakeSettings(tmp_path / "lake", tmp_path / "state"),
        catalog=CatalogSettings(kind="glue", region="us-east-1"),
    )
    with pytest.raises(DependencyError, match=r"pip install 'eventlake\[glue\]'"):
        load_catalog(settings)


@pytest.mark.integration
def test_eventlake_sync_registers_its_tables_in_glue(glue_settings: CatalogSettings, tmp_path: Path) -> None:
    """The user's path: `eventlake sync` with [catalog] kind = "glue" (Spark writes Parquet, boto3
    registers databases, tables, columns and partitions)."""
    config = write_initial_config(tmp_path / "project")
    text = config.read_text()
    glue_lines = f'kind = "glue"\nregion = "us-east-1"\nendpoint_url = "{glue_settings.endpoint_url}"\n'
    config.write_text(text.replace('kind = "hive"', glue_lines.rstrip("\n"), 1))
    source = add_source(config, "shop", write_key="wk_shop")
    settings = load_settings(config, environ={})
    received = parse_timestamp("2026-11-22T07:30:00Z")
    messages = [
        {
            "type": "track",
            "userId": "u1",
            "event": "Order Completed",
            "messageId": "o1",
            "properties": {"revenue": 9.5},
        },
        {"type": "identify", "userId": "u1", "messageId": "i1", "traits": {"plan": "pro"}},
    ]
    write_archive(settings.lake.root, source["id"], messages, received)

    result = subprocess.run(
        [str(Path(sys.executable).parent / "eventlake"), "--config", str(config), "sync", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=600,
        env=clean_env(**AWS_ENV),
    )
    assert result.returncode == 0, result.stderr
    assert {row["table"]: row["rows"] for row in json.loads(result.stdout)} == {
        "shop.identify": 1,
        "shop.track_order_completed": 1,
    }
    glue = boto3.client("glue", region_name="us-east-1", endpoint_url=glue_settings.endpoint_url)
    tables = {t["Name"]: t for t in glue.get_tables(DatabaseName="shop")["TableList"]}
    assert {"identify", "track_order_completed"} <= set(tables)
    columns = [c["Name"] for c in tables["track_order_completed"]["StorageDescriptor"]["Columns"]]
    assert {"message_id", "user_id", "properties_revenue", "received_at"} <= set(columns)
    partitions = glue.get_partitions(DatabaseName="shop", TableName="identify")["Partitions"]
    assert [p["Values"] for p in partitions] == [["2026-11-22", "07"]]
    location = partitions[0]["StorageDescriptor"]["Location"]
    assert list(Path(location).glob("*.parquet")), f"no Parquet files at {location}"
    assert state_layout.schema_file(settings.lake.root, "shop", "identify").exists()


def _stubbed(operation: str, code: str) -> tuple[GlueCatalog, Stubber]:
    """A catalog whose client answers ``operation`` with the AWS error ``code`` (botocore's Stubber:
    the client builds its modeled exception from the code, as it does for a real answer)."""
    client = boto3.client(
        "glue", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    stubber = Stubber(client)
    stubber.add_client_error(operation, service_error_code=code, http_status_code=400)
    stubber.activate()
    return GlueCatalog(client), stubber


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("AccessDeniedException", PermissionsError),
        ("UnrecognizedClientException", PermissionsError),  # not in Glue's model
        ("InternalServiceException", GlueError),
    ],
)
def test_glue_errors_are_mapped_by_the_clients_exception_classes(code: str, error: type) -> None:
    glue, stubber = _stubbed("get_table", code)
    with pytest.raises(error, match="reading table db.t"):
        glue.table_columns("db", "t")
    stubber.assert_no_pending_responses()


def test_answers_that_mean_nothing_to_do_are_not_errors() -> None:
    glue, stubber = _stubbed("get_table", "EntityNotFoundException")
    assert glue.table_columns("db", "t") is None
    stubber.add_client_error("get_tables", service_error_code="EntityNotFoundException")
    assert glue.list_tables("db") == []
    stubber.add_client_error("get_tables", service_error_code="EntityNotFoundException")  # no database
    stubber.add_client_error("create_database", service_error_code="AlreadyExistsException")  # now there
    glue.ensure_database("db")
    stubber.assert_no_pending_responses()


def test_missing_credentials_are_a_permissions_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    glue = GlueCatalog.from_settings(
        CatalogSettings(kind="glue", region="us-east-1", endpoint_url="http://127.0.0.1:9")
    )
    with pytest.raises(PermissionsError, match="Glue refused listing tables of db"):
        glue.list_tables("db")


@pytest.mark.integration
def test_views_are_written_only_when_their_definition_changed(
    glue: GlueCatalog, database: str, calls: Counter[str], tmp_path: Path
) -> None:
    tables = {"page": COLUMNS, "track_signed_up": (*COLUMNS, ("event", "string"))}

    def views() -> list[View]:
        return list(warehouse_views([LakeTable(n, n, c) for n, c in tables.items()]).views)

    for name, columns in tables.items():
        glue.ensure_table(TableSpec(database, name, columns, ("day", "hr"), str(tmp_path / name)))
    calls.clear()
    assert glue.replace_views(database, views()) == []
    assert calls["CreateTable"] == len(views()) and calls["GetTable"] == 0
    calls.clear()
    assert glue.replace_views(database, views()) == []  # nothing changed: one listing, no write
    assert dict(calls) == {"GetTables": 1}
    calls.clear()
    tables["track_signed_up"] += (("properties_plan", "string"),)  # only the event's view changes
    glue.add_columns(database, "track_signed_up", [("properties_plan", "string")])
    calls.clear()
    glue.replace_views(database, views())
    assert dict(calls) == {"GetTables": 1, "UpdateTable": 1}
    view = glue.client.get_table(DatabaseName=database, Name="signed_up")["Table"]
    assert "plan" in [c["Name"] for c in view["StorageDescriptor"]["Columns"]]


@pytest.mark.integration
def test_a_commit_asks_glue_only_for_what_changed(
    glue: GlueCatalog, database: str, calls: Counter[str], tmp_path: Path
) -> None:
    """A sync's commit (``apply``) of a micro-batch with nothing new for the catalog reads the
    partitions once and writes nothing; a new property writes the table and the one view reading it."""
    lake = tmp_path / "lake"
    storage = LocalStorage()
    folder = lake / "segment-data" / "data" / "src" / "segment_type=track_signed_up"
    columns = (*COLUMNS, ("event", "string"))
    hour = (("2026-11-01", "00"),)

    def commit(run: str, change: TableChange, columns: tuple[tuple[str, str], ...]) -> None:
        spec = TableSpec(database, "track_signed_up", columns, ("day", "hr"), str(folder))
        stage = str(lake / "segment-stage" / run)
        entry = TableEntry(spec, hour, change)
        manifest = Manifest(run, "src", (), (), (entry,), "", (), stage)
        apply(manifest, glue, SyncState(storage, lake, "src"), storage, lake)

    commit("r1", CREATE, columns)
    assert calls["CreateTable"] == 1 + 8  # the table and its 8 warehouse views
    calls.clear()
    commit("r2", NONE, columns)  # the same hour again, no new column
    assert dict(calls) == {"BatchGetPartition": 1}
    calls.clear()
    commit("r3", ADD_COLUMNS, (*columns, ("properties_plan", "string")))
    assert calls["UpdateTable"] == 2 and calls["CreateTable"] == 0  # the table, the signed_up view
    view = glue.client.get_table(DatabaseName=database, Name="signed_up")["Table"]
    assert "plan" in [c["Name"] for c in view["StorageDescriptor"]["Columns"]]
