from __future__ import annotations

import itertools
import json

import pytest

from eventlake.schema.flatten import Collision, Flattened, flatten
from eventlake.schema.naming import MAX_COLUMN_NAME_LENGTH, column_name, is_safe_identifier

TRACK = {
    "type": "track",
    "event": "Order Completed",
    "messageId": "m-1",
    "anonymousId": "anon-1",
    "userId": "u-1",
    "projectId": "src_1",
    "channel": "server",
    "version": 2,
    "timestamp": "2026-11-22T10:47:01.000Z",
    "originalTimestamp": "2026-11-22T10:47:00.000Z",
    "sentAt": "2026-11-22T10:47:00.500Z",
    "receivedAt": "2026-11-22T10:47:01.500Z",
    "context": {
        "library": {"name": "analytics-python", "version": "2.3.0"},
        "page": {"url": "https://example.com/?a=1"},
        "traits": {"email": "a@example.com"},
        "userAgent": "Mozilla/5.0",
    },
    "integrations": {"All": True, "Mixpanel": False},
    "properties": {"revenue": 19.99, "products": [{"sku": "x", "price": 1}], "coupon": None},
    "writeKey": "secret",
    "_eventlake_meta": {"file": "x.gz"},
}


def test_segment_message_columns() -> None:
    flat = flatten(TRACK)
    assert flat.collisions == ()
    assert flat.values == {
        "type": "track",
        "event": "Order Completed",
        "message_id": "m-1",
        "anonymous_id": "anon-1",
        "user_id": "u-1",
        "project_id": "src_1",
        "channel": "server",
        "version": 2,
        "timestamp": "2026-11-22T10:47:01.000Z",
        "original_timestamp": "2026-11-22T10:47:00.000Z",
        "sent_at": "2026-11-22T10:47:00.500Z",
        "received_at": "2026-11-22T10:47:01.500Z",
        "context_library_name": "analytics-python",
        "context_library_version": "2.3.0",
        "context_page_url": "https://example.com/?a=1",
        "context_traits_email": "a@example.com",
        "context_user_agent": "Mozilla/5.0",
        "integrations_all": True,
        "integrations_mixpanel": False,
        "properties_revenue": 19.99,
        "properties_products": '[{"price":1,"sku":"x"}]',
        "properties_coupon": None,
    }


def test_column_order_is_document_order() -> None:
    flat = flatten({"b": 1, "a": {"z": 1, "y": {"x": 2}}, "c": 3})
    assert list(flat.values) == ["b", "a_z", "a_y_x", "c"]


def test_identify_traits() -> None:
    flat = flatten(
        {"type": "identify", "traits": {"email": "e", "firstName": "F", "address": {"postalCode": "1"}}}
    )
    assert flat.values == {
        "type": "identify",
        "traits_email": "e",
        "traits_first_name": "F",
        "traits_address_postal_code": "1",
    }


def test_secrets_and_internal_keys_are_dropped() -> None:
    flat = flatten({"writeKey": "k", "_eventlake": 1, "_eventlakeSource": "x", "event": "e"})
    assert flat.values == {"event": "e"}


def test_nested_write_key_is_data() -> None:
    assert flatten({"properties": {"writeKey": "x"}}).values == {"properties_write_key": "x"}


def test_empty_objects_produce_nothing_and_empty_lists_are_json() -> None:
    flat = flatten({"context": {}, "properties": {"a": {}, "b": [], "c": ()}})
    assert flat.values == {"properties_b": "[]", "properties_c": "[]"}


def test_lists_are_compact_sorted_json() -> None:
    value = [{"b": 1, "a": [1.5, None, True]}, "ü", 3]
    flat = flatten({"properties": {"items": value}})
    text = flat.values["properties_items"]
    assert text == '[{"a":[1.5,null,true],"b":1},"ü",3]'
    assert json.loads(text) == value


def test_lists_with_huge_integers_still_serialise() -> None:
    assert flatten({"p": [2**70]}).values == {"p": f"[{2**70}]"}


def test_none_is_kept() -> None:
    assert flatten({"userId": None}).values == {"user_id": None}


def test_scalars_are_unchanged() -> None:
    flat = flatten({"a": 1, "b": 1.5, "c": "x", "d": False, "e": 2**70})
    assert flat.values == {"a": 1, "b": 1.5, "c": "x", "d": False, "e": 2**70}


def test_collision_winner_is_independent_of_order() -> None:
    one = flatten({"properties": {"itemCount": 1, "item_count": 2}})
    two = flatten({"properties": {"item_count": 2, "itemCount": 1}})
    assert one == two
    assert one.values == {"properties_item_count": 2}
    assert one.collisions == (
        Collision("properties_item_count", "properties.item_count", "properties.itemCount"),
    )


def test_non_null_beats_null_in_a_collision() -> None:
    for pairs in ([("itemCount", 1), ("item_count", None)], [("item_count", None), ("itemCount", 1)]):
        flat = flatten({"properties": dict(pairs)})
        assert flat.values == {"properties_item_count": 1}
        assert flat.collisions == (
            Collision("properties_item_count", "properties.itemCount", "properties.item_count"),
        )


def test_collision_between_nested_and_flat_keys() -> None:
    for message in ({"a": {"b": 1}, "a_b": 2}, {"a_b": 2, "a": {"b": 1}}):
        flat = flatten(message)
        assert flat.values == {"a_b": 2}
        assert flat.collisions == (Collision("a_b", "a_b", "a.b"),)


def test_dotted_key_tie_is_deterministic() -> None:
    first = flatten({"a.b": 1, "a": {"b": 2}})
    second = flatten({"a": {"b": 2}, "a.b": 1})
    assert first == second
    assert first.values == {"a_b": 1}


def test_three_way_collision_reports_every_loser() -> None:
    items = [("itemCount", 1), ("item_count", 2), ("ItemCount", 3)]
    results = [flatten({"p": dict(order)}) for order in itertools.permutations(items)]
    assert all(result == results[0] for result in results)
    assert results[0].values == {"p_item_count": 2}
    assert results[0].collisions == (
        Collision("p_item_count", "p.item_count", "p.itemCount"),
        Collision("p_item_count", "p.item_count", "p.ItemCount"),
    )


def test_collision_keeps_first_seen_position() -> None:
    flat = flatten({"x_y": None, "z": 0, "x": {"Y": 2}})
    assert list(flat.values) == ["x_y", "z"]
    assert flat.values["x_y"] == 2
    assert flat.collisions == (Collision("x_y", "x.Y", "x_y"),)


def test_keys_without_ascii_are_dropped_from_the_name() -> None:
    flat = flatten({"properties": {"价格": 3, "$": {"total": 1}}, "日本": "x"})
    assert flat.values["properties"] == 3
    assert flat.values["properties_total"] == 1
    assert flat.values[column_name(["日本"])] == "x"


def test_long_names_match_column_name() -> None:
    key = "veryLongKey" * 30
    message = {"properties": {key: {"inner": 1}}}
    flat = flatten(message)
    (name,) = flat.values
    assert name == column_name(["properties", key, "inner"])
    assert len(name) <= MAX_COLUMN_NAME_LENGTH


@pytest.mark.parametrize(
    "message",
    [
        {"$": {"%": 1}},
        {"a": {"$": {"B": {"": 1}}}},
        {"ÄÖ": {"x": {"日": 2}}},
        {"k" * 200: {"j" * 60: 1}},
        {"a": {"b" * 300: 1}},
        {"": {"": 1}},
    ],
)
def test_incremental_names_equal_column_name(message: dict) -> None:
    def leaves(value: object, path: tuple[str, ...]) -> list[tuple[str, ...]]:
        if isinstance(value, dict):
            return [leaf for key, child in value.items() for leaf in leaves(child, path + (key,))]
        return [path]

    flat = flatten(message)
    assert list(flat.values) == [column_name(path) for path in leaves(message, ())]
    assert all(is_safe_identifier(name) for name in flat.values)


def test_deep_nesting_does_not_recurse() -> None:
    message: dict = {"leaf": 1}
    for _ in range(3000):
        message = {"n": message}
    flat = flatten(message)
    (name,) = flat.values
    assert len(name) == MAX_COLUMN_NAME_LENGTH
    assert flat.values[name] == 1


def test_result_is_frozen() -> None:
    flat = flatten({"a": 1})
    assert isinstance(flat, Flattened)
    with pytest.raises(AttributeError):
        flat.values = {}  # type: ignore[misc]


def test_rejects_non_objects() -> None:
    with pytest.raises(TypeError):
        flatten([1, 2])  # type: ignore[arg-type]


def _random_message(rng, depth: int = 0):
    """A random JSON-like object whose keys collide, vanish, run long, nest deep or are not text."""
    keys = [
        "itemCount",
        "item_count",
        "ItemCount",
        "a",
        "b",
        "$$",
        "",
        "x" * 260,
        "writeKey",
        "_eventlake_x",
        1,
    ]
    message = {}
    for _ in range(rng.randrange(0 if depth else 1, 5)):
        key = rng.choice(keys)
        roll = rng.random()
        if roll < 0.3 and depth < 4:
            value = _random_message(rng, depth + 1)
        elif roll < 0.4:
            value = [rng.randrange(3), {"z": None, "a": 1.5}]
        elif roll < 0.45:
            value = (1, 2)
        else:
            value = rng.choice([None, True, 0, 2**70, 1.5, float("nan"), "text", "2026-11-22T10:47:01Z"])
        message[key] = value
    return message


def test_the_fast_walk_gives_what_the_full_walk_gives():
    """``flatten`` walks most messages without recording paths; whatever it meets (collisions,
    names to shorten or hash, tuples, keys that are not text, deep nesting), it must give exactly
    what the full walk gives, values in the same order."""
    import random

    from eventlake.schema.flatten import _flatten_slow

    rng = random.Random(11)
    deep: dict = {"leaf": 1}
    for _ in range(100):
        deep = {"k": deep}
    messages = [_random_message(rng) for _ in range(3000)] + [{"properties": deep}, TRACK]
    for message in messages:
        fast, full = flatten(message), _flatten_slow(message)
        assert fast == full, message
        assert list(fast.values) == list(full.values), message


def test_a_key_equal_to_a_text_key_is_named_as_the_full_walk_names_it():
    """A str enum member equals its value, but the full walk names it by str(key): the fast walk
    must not take the column its value has (cached by an earlier message)."""
    import enum

    from eventlake.schema.flatten import _flatten_slow

    class Key(str, enum.Enum):
        PLAN = "plan"

    flatten({"properties": {"plan": 1}})  # caches the column of "plan" under "properties"
    for message in ({"properties": {Key.PLAN: "pro"}}, {Key.PLAN: {"a": 1}}):
        assert flatten(message) == _flatten_slow(message)
