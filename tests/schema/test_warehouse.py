"""The warehouse views' rules (pure): names, columns, what is left out."""

from __future__ import annotations

from eventlake.schema.warehouse import STANDARD_COLUMNS, LakeTable, warehouse_views

ORDERS = LakeTable(
    "track_order_completed", "track_order_completed",
    (("message_id", "string"), ("event", "string"), ("user_id", "string"),
     ("properties_revenue", "decimal(38,6)"), ("properties_id", "string"), ("properties_user_id", "string"),
     ("context_ip", "string"),
     ("received_at", "timestamp"), ("timestamp", "timestamp")),
)  # fmt: skip
SIGNUP = LakeTable(
    "track_signed_up", "track_signed_up",
    (("message_id", "string"), ("event", "string"), ("context_ip", "bigint"), ("context_locale", "string"),
     ("received_at", "timestamp")),
)  # fmt: skip
IDENTIFY = LakeTable(
    "identify", "identify",
    (("message_id", "string"), ("user_id", "string"), ("traits_plan", "string"), ("traits_email", "string"),
     ("traits_id", "string"), ("traits_name", "string"), ("received_at", "timestamp"),
     ("timestamp", "timestamp")),
)  # fmt: skip


def _views(*tables: LakeTable, prefix: str = ""):
    found = warehouse_views(tables, prefix)
    return {v.name: v for v in found.views}, found.skipped


def test_per_event_views_carry_properties_unprefixed_and_drop_reserved_names() -> None:
    views, _ = _views(ORDERS)
    columns = dict(views["order_completed"].columns)
    assert columns["revenue"] == "decimal(38,6)" and "context_ip" in columns
    assert list(columns)[:5] == ["id", "anonymous_id", "user_id", "event", "event_text"]
    assert list(columns)[-1] == "uuid_ts"
    # properties.id and properties.user_id would shadow the view's own columns: left out, as Segment does
    (select,) = views["order_completed"].selects
    sources = {c.name: c.source for c in select.columns}
    assert (
        sources["id"] == "message_id" and sources["user_id"] == "user_id" and sources["event_text"] == "event"
    )
    assert sources["uuid_ts"] == "received_at" and sources["anonymous_id"] is None  # not in the table: NULL
    assert "properties_id" not in sources.values() and "properties_user_id" not in sources.values()


def test_tracks_is_every_track_table_and_types_that_differ_become_strings() -> None:
    views, _ = _views(ORDERS, SIGNUP)
    tracks = views["tracks"]
    assert [s.table for s in tracks.selects] == ["track_order_completed", "track_signed_up"]
    assert dict(tracks.columns)["context_ip"] == "string"  # string in one table, bigint in the other
    assert "revenue" not in dict(tracks.columns)  # properties stay in the per-event views
    locale = [next(c for c in s.columns if c.name == "context_locale") for s in tracks.selects]
    assert [c.source for c in locale] == [None, "context_locale"]
    events = [next(c for c in s.columns if c.name == "event").literal for s in tracks.selects]
    assert events == ["order_completed", "signed_up"]


def test_users_has_one_column_per_trait() -> None:
    views, _ = _views(IDENTIFY)
    users = views["users"]
    assert [c for c, _ in users.columns] == ["id", "plan", "email", "name", "received_at", "uuid_ts"]
    assert users.latest_by == ("timestamp", "received_at")
    assert dict(views["identifies"].columns)["plan"] == "string"
    assert "name" in dict(views["identifies"].columns)  # only the view's own columns are reserved


def test_every_standard_view_exists_even_without_its_table() -> None:
    views, _ = _views(prefix="web_")
    standard = ("tracks", "pages", "screens", "identifies", "groups", "aliases", "users")
    assert sorted(views) == sorted(f"web_{n}" for n in standard)
    assert all(not v.selects for v in views.values())  # empty views of the standard columns
    assert "id" in dict(views["web_pages"].columns) and "previous_id" in dict(views["web_aliases"].columns)


def test_events_named_like_lake_tables_get_no_view() -> None:
    tables = [LakeTable(f"track_{n}", f"track_{n}", (("message_id", "string"),))
              for n in ("page", "users", "track_x", "order_completed")]  # fmt: skip
    views, skipped = _views(*tables)
    assert skipped == ("page", "track_x", "users")
    assert "order_completed" in views and len(views["tracks"].selects) == 4


PAGE = LakeTable(
    "page", "page",
    (("message_id", "string"), ("name", "string"), ("properties_url", "string"),
     ("context_page_url", "string"), ("context_ip", "bigint"), ("received_at", "timestamp")),
)  # fmt: skip


def test_every_view_has_the_standard_columns_of_its_call_type_null_when_no_data_has_them() -> None:
    views, _ = _views(PAGE, SIGNUP, ORDERS, IDENTIFY)
    for name, view in views.items():
        have = dict(view.columns)
        kind = name if name in STANDARD_COLUMNS else "tracks"  # a per-event view has the tracks columns
        missing = [c for c, _ in STANDARD_COLUMNS[kind] if c not in have]
        assert not missing, (name, missing)
        assert have["received_at"] == have.get("sent_at", "timestamp") == "timestamp"  # users: no sent_at
    pages = views["pages"]
    (select,) = pages.selects
    sources = {c.name: c.source for c in select.columns}
    # the data's columns keep their values (and types); the ones no data has read NULL, typed
    assert sources["url"] == "properties_url" and sources["context_page_url"] == "context_page_url"
    assert (
        sources["search"] is None
        and sources["referrer"] is None
        and sources["context_campaign_source"] is None
    )
    assert dict(pages.columns)["context_ip"] == "bigint" and dict(pages.columns)["search"] == "string"
    # each column once; the context columns sorted, after the properties
    names = [c for c, _ in pages.columns]
    assert len(names) == len(set(names))
    context = [n for n in names if n.startswith("context_")]
    assert context == sorted(context) and names.index("url") < names.index(context[0])


def test_standard_columns_in_tracks_do_not_change_the_types_the_data_has() -> None:
    views, _ = _views(ORDERS, SIGNUP)
    tracks = dict(views["tracks"].columns)
    assert tracks["context_campaign_name"] == "string" and tracks["context_ip"] == "string"  # string + bigint
    views, _ = _views(SIGNUP)
    assert dict(views["tracks"].columns)["context_ip"] == "bigint"  # absent elsewhere: the data's type
    campaign = [
        next(c for c in s.columns if c.name == "context_campaign_name") for s in views["tracks"].selects
    ]
    assert [c.source for c in campaign] == [None]


def test_empty_views_carry_the_standard_columns() -> None:
    views, _ = _views()
    assert {"search", "referrer", "title", "context_campaign_medium"} <= set(dict(views["pages"].columns))
    assert "users" in views and not dict(views["users"].columns).keys() & {"search", "context_ip"}
