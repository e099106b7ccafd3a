"""User deletion on a real lake: afterwards no file of the lake or the archive holds the user's ids
(every file scanned), the other users' rows are intact on both engines, a rerun deletes nothing,
and a deletion killed at any step is finished by the next run."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from eventlake import state_layout
from eventlake.archive import SuppressionList
from eventlake.query import run_query
from eventlake.storage import LocalStorage
from eventlake.sync import run_sync
from eventlake.sync.maintenance.erase import delete_user
from eventlake.timestamps import parse_timestamp
from tests.conftest import Lake
from tests.sync.test_sync import Killed, kill_on_call, track

pytestmark = pytest.mark.spark
USER, LINKED, ALIASED = "u-erase", "anon-77", "old-anon-5"
RECEIVED = parse_timestamp("2026-11-20T07:30:00Z")


def quiet(line: str) -> None:
    pass


@pytest.fixture
def synced(lake: Lake, spark) -> Lake:
    """Two syncs: the user's tracks, identify (linking anon-77), alias (linking old-anon-5), the
    linked ids' anonymous pages, a quarantined value and a quarantined message of the user, and
    another user's messages."""
    lake.archive([track("t0", user="u-other", revenue=1.5)], RECEIVED)
    [first] = run_sync(lake.settings, [lake.slug], spark=spark, say=quiet)
    lake.archive(
        [
            {"type": "page", "anonymousId": LINKED, "messageId": "p-anon", "name": "Home"},
            {"type": "identify", "userId": USER, "anonymousId": LINKED, "messageId": "i1",
             "traits": {"email": "erase@example.com"}},
            track("t1", user=USER, revenue=2.5),
            track("t-bad", user=USER, revenue="lots"),  # a value that does not fit: quarantined
            {"type": "track", "userId": USER, "messageId": "no-event"},  # quarantined whole
            {"type": "alias", "userId": USER, "previousId": ALIASED, "messageId": "a1"},
            {"type": "page", "anonymousId": ALIASED, "messageId": "p-old", "name": "Pricing"},
            track("t2", user="u-other", revenue=3.0),
            {"type": "page", "anonymousId": "anon-other", "messageId": "p-other", "name": "Home"},
        ],
        RECEIVED,
    )  # fmt: skip
    [second] = run_sync(lake.settings, [lake.slug], spark=spark, say=quiet)
    assert first.status == second.status == "Success" and second.rejected_values == 1
    return lake


def erase(lake: Lake, spark):
    [result] = delete_user(
        lake.settings, USER, [lake.slug], requested_by="dpo@example.com", spark=spark, say=quiet
    )
    return result


def files_naming_the_user(lake: Lake) -> list[str]:
    """Every file under the lake root that holds one of the user's ids (Parquet values, gzip text,
    any other bytes), but the suppression list and the audit records, which name the user by design."""
    root = Path(lake.settings.lake.root)
    audit = Path(state_layout.deletion_audit_file(root, lake.source.id, "x")).parent
    suppression = Path(state_layout.suppression_file(root, lake.source.id))
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path == suppression or path.parent == audit:
            continue
        if path.suffix == ".parquet":
            text = orjson.dumps(pq.read_table(path).to_pylist(), default=str).decode()
        elif path.suffix == ".gz":
            text = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
        else:
            text = path.read_bytes().decode("utf-8", "replace")
        if any(identifier in text for identifier in (USER, LINKED, ALIASED, "erase@example.com")):
            found.append(str(path.relative_to(root)))
    return found


def rows(lake: Lake, spark, table: str, engine: str) -> list[str]:
    qualified = f"{lake.source.database}.{table}"
    if engine == "spark":
        spark.catalog.refreshTable(qualified)
    found = run_query(
        lake.settings, f"SELECT message_id FROM {qualified} ORDER BY 1", engine=engine, spark=spark
    )
    return [row["message_id"] for row in found.rows]


def assert_only_the_others_remain(lake: Lake, spark) -> None:
    assert files_naming_the_user(lake) == []
    for engine in ("duckdb", "spark"):
        assert rows(lake, spark, "track_order_completed", engine) == ["t0", "t2"]
        assert rows(lake, spark, "page", engine) == ["p-other"]
        assert rows(lake, spark, "identify", engine) == []
        assert rows(lake, spark, "_quarantine", engine) == []
    suppressed = SuppressionList(LocalStorage(), lake.settings.lake.root, lake.source.id).user_ids()
    assert USER in suppressed


def test_every_file_loses_the_users_and_linked_ids_and_the_rest_stays(synced: Lake, spark) -> None:
    assert files_naming_the_user(synced)  # the check can fail: before, the ids are everywhere
    result = erase(synced, spark)
    assert result.status == "Success", result.error
    assert (result.linked_anonymous_ids, result.archive_messages_deleted, result.archive_files_rewritten) == (
        2,
        7,
        1,
    )
    assert (result.rows_deleted, result.quarantine_rows_deleted) == (6, 2)
    assert_only_the_others_remain(synced, spark)
    [record] = Path(
        state_layout.deletion_audit_file(synced.settings.lake.root, synced.source.id, "x")
    ).parent.glob("*.json")
    audit = orjson.loads(record.read_bytes())
    assert (audit["user_id"], audit["requested_by"], audit["rows_deleted"]) == (USER, "dpo@example.com", 6)
    assert LINKED not in record.read_text() and ALIASED not in record.read_text()  # no other personal data

    again = erase(synced, spark)
    assert (again.status, again.rows_deleted, again.archive_messages_deleted) == ("Nothing to do", 0, 0)
    [later] = run_sync(synced.settings, [synced.slug], spark=spark, say=quiet)
    assert later.status == "Nothing to do"  # the rewritten archive files are not synced again


KILL_POINTS = {
    "with the first partitions staged": ("eventlake.sync.protocol.runner", "apply", 1),
    "between two tables": ("eventlake.sync.protocol.runner", "apply", 2),
    "with the tables done, before the archive": (
        "eventlake.sync.maintenance.erase.SourceErasure",
        "archive",
        1,
    ),
    "before the audit record": ("eventlake.state_layout", "deletion_audit_file", 1),
}


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_deletion_killed_at_any_step_is_finished_by_the_next(
    synced: Lake, spark, monkeypatch, point
) -> None:
    with monkeypatch.context() as patch:
        kill_on_call(patch, *KILL_POINTS[point])
        with pytest.raises(Killed):
            erase(synced, spark)
    result = erase(synced, spark)
    assert result.status in ("Success", "Nothing to do"), result.error
    assert_only_the_others_remain(synced, spark)


def test_a_shared_device_keeps_the_other_users_signed_in_messages() -> None:
    """A linked anonymous id's messages are the user's only while no one is signed in."""
    import pyarrow as pa

    from eventlake.sync.maintenance.erase import Identity, _rows_to_keep

    identity = Identity(USER, frozenset({LINKED}), frozenset({"t1"}))
    assert identity.owns({"type": "page", "anonymousId": LINKED})
    assert identity.owns({"type": "track", "userId": USER, "anonymousId": "elsewhere"})
    assert not identity.owns({"type": "track", "userId": "u-other", "anonymousId": LINKED})
    assert not identity.owns({"type": "page", "anonymousId": "anon-other"})
    table = pa.table({
        "message_id": ["t1", "p-anon", "t3", "t4"],
        "user_id": [USER, None, "u-other", "u-other"],
        "anonymous_id": [None, LINKED, LINKED, "anon-other"],
    })  # fmt: skip
    assert table.filter(_rows_to_keep(table, identity))["message_id"].to_pylist() == ["t3", "t4"]
    assert _rows_to_keep(table.slice(2), identity) is None  # nothing of the user: no rewrite
