# ruff: noqa: E501 (the payloads and edge lines read best whole)
"""Archive lines for the differential test of the two parse paths (tests/sync/test_columnar.py) and
for ``bench/parse_readers.py``: Segment's documented payloads, every edge the type rules know, and
seeded random messages built from those edges."""

from __future__ import annotations

import json
import random
from typing import Any

import orjson

RECEIVED = "2026-11-01T10:00:00.000Z"


def documented_messages() -> list[dict[str, Any]]:
    """The examples of Segment's spec (segment.com/docs/connections/spec), one per call, with
    the common fields and context they show, as the collector archives them (``receivedAt``)."""
    context = {
        "active": True,
        "app": {"name": "InitechGlobal", "version": "545", "build": "3.0.1.545", "namespace": "com.production.segment"},
        "campaign": {"name": "TPS Innovation Newsletter", "source": "Newsletter", "medium": "email",
                     "term": "tps reports", "content": "image link"},
        "device": {"id": "B5372DB0-C21E-11E4-8DFC-AA07A5B093DB", "advertisingId": "7A3CBEA0-BDF5-11E4-8DFC-AA07A5B093DB",
                   "adTrackingEnabled": True, "manufacturer": "Apple", "model": "iPhone7,2", "name": "maguro",
                   "type": "ios", "token": "ff15bc0c20c4aa6cd50854ff165fd265c838e5405bfeb9571066395b8c9da449"},
        "ip": "8.8.8.8",
        "library": {"name": "analytics.js", "version": "2.11.1"},
        "locale": "en-US",
        "location": {"city": "San Francisco", "country": "United States", "latitude": 40.2964197,
                     "longitude": -76.9411617, "speed": 0},
        "network": {"bluetooth": False, "carrier": "T-Mobile US", "cellular": True, "wifi": False},
        "os": {"name": "iPhone OS", "version": "8.1.3"},
        "page": {"path": "/academy/", "referrer": "", "search": "", "title": "Analytics Academy",
                 "url": "https://segment.com/academy/"},
        "referrer": {"id": "ABCD582CDEFFFF01919", "type": "dataxu"},
        "screen": {"width": 320, "height": 568, "density": 2},
        "groupId": "12345",
        "timezone": "Europe/Amsterdam",
        "userAgent": "Mozilla/5.0 (iPhone; CPU iPhone OS 9_1 like Mac OS X) AppleWebKit/601.1.46",
    }  # fmt: skip
    common = {
        "anonymousId": "507f191e810c19729de860ea",
        "context": context,
        "integrations": {"All": True, "Mixpanel": False, "Salesforce": False},
        "receivedAt": "2015-02-23T22:28:55.387Z",
        "sentAt": "2015-02-23T22:28:55.111Z",
        "timestamp": "2015-02-23T22:28:55.111Z",
        "userId": "97980cfea0067",
        "version": 2,
    }
    messages = [
        {"type": "identify", "messageId": "022bb90c-bbac-11e4-8dfc-aa07a5b093db",
         "traits": {"name": "Peter Gibbons", "email": "peter@example.com", "plan": "premium", "logins": 5,
                    "address": {"street": "6th St", "city": "San Francisco", "state": "CA", "postalCode": "94103",
                                "country": "USA"}}},
        {"type": "track", "event": "Registered", "messageId": "ajs-f8ca1e4de5024d9430b3928bd8ac6b96",
         "properties": {"plan": "Pro Annual", "accountType": "Facebook"}},
        {"type": "track", "event": "Order Completed", "messageId": "ajs-order-1",
         "properties": {"checkout_id": "fksdjfsdjfisjf9sdfjsd9f", "order_id": "50314b8e9bcf000000000000",
                        "affiliation": "Google Store", "total": 27.5, "subtotal": 22.5, "revenue": 25.0,
                        "shipping": 3, "tax": 2, "discount": 2.5, "coupon": "hasbros", "currency": "USD",
                        "products": [{"product_id": "507f1f77bcf86cd799439011", "sku": "45790-32",
                                      "name": "Monopoly: 3rd Edition", "price": 19, "quantity": 1}]}},
        {"type": "page", "messageId": "ajs-page-1", "name": "Home",
         "properties": {"title": "Welcome | Initech", "url": "http://www.initech.com", "path": "/",
                        "referrer": "", "search": "", "keywords": ["initech", "tps"]}},
        {"type": "screen", "messageId": "screen-1", "name": "Home",
         "properties": {"Feed Type": "private", "variation": "blue signup button"}},
        {"type": "group", "messageId": "group-1", "groupId": "0e8c78ea9d97a7b8185e8632",
         "traits": {"name": "Initech", "industry": "Technology", "employees": 329, "plan": "enterprise",
                    "total billed": 830}},
        {"type": "alias", "messageId": "alias-1", "previousId": "39239-239239-239239-23923"},
    ]  # fmt: skip
    return [{**common, **message} for message in messages]


def edge_lines() -> list[bytes]:
    """Messages with every edge the type rules know, as archive lines (some are not valid JSON,
    some not valid messages)."""
    base = (
        '{"type":"track","event":"Edge Case","userId":"u1","messageId":"edge-%d",'
        '"receivedAt":"2026-11-01T10:00:00.000Z","properties":%s}'
    )
    properties = [
        '{"n":1}', '{"n":1.0}', '{"n":2.5}', '{"big":100000000000000000000000000000000000000001}',
        '{"big":18446744073709551615}', '{"big":-9223372036854775809}', '{"big":9223372036854775807}',
        '{"s":"\\ud800"}', '{"t":"2026-11-01T10:00:00Z"}',
        '{"t":"2026-11-01"}', '{"t":"2026-11-01 10:00:00+0200"}', '{"t":" 2026-11-01T10:00:00Z"}',
        '{"t":"2026-02-30T10:00:00Z"}', '{"t":"2026-11-01T10:00:00.123456789Z"}', '{"t":"2026-11-01T10:00"}',
        '{"t":"2026-11-01T10:00:00+05:30"}', '{"t":"9999-12-31T23:59:59-01:00"}', '{"t":"0001-01-01T00:00:00Z"}',
        '{"a":[[1,2],[3]]}', '{"a":[{"b":1,"a":null}]}', '{"a":[1.5,2]}', '{"a":["x\\"y"]}', '{"a":[]}',
        '{"a":[null]}', '{"a":[true,false]}', '{"a":["é","\\u0001"]}',
        '{"itemCount":1,"item_count":2}', '{"itemCount":null,"item_count":2}', '{"$$":1}',
        '{"%s":1}' % ("k" * 300), '{"v":NaN}', '{"v":Infinity}', '{"v":1e999}',
        '{"c":"x"}', '{"c":5}', '{"d":-0.0}', '{"e":{}}', '{"f":"\\u00e9\\ud83d\\ude00"}',
        '{"m":99999999999999999999999999999999.999999}', '{"m":12345678901234567890123456789012.1234567}',
        '{"m":1e31}', '{"m":1e30}', '{"m":0.0000001}', '{"m":123456.1234567}', '{"m":19.99}',
        '{"dup":1,"dup":2}', '{"year":"y","hr":3,"segment_type":"x"}', '{"a.b":1,"a":{"b":2}}',
        '{"x":{"y":{"z":{"w":1}}}}', '{"Año":1,"ano":2}', '{"nul":null}',
    ]  # fmt: skip
    lines = [(base % (n, p)).encode() for n, p in enumerate(properties)]
    lines += [
        b'{"type":"track","event":"Edge Case","userId":"u1","messageId":"edge-y","year":2026,'
        b'"hr":"x","writeKey":"k","_eventlakeX":1,"receivedAt":"2026-11-01T10:00:00.000Z"}',
        b'{"type":"bogus","userId":"u1","messageId":"edge-b","receivedAt":"2026-11-01T10:00:00.000Z"}',
        b'{"type":"page","messageId":"edge-p","receivedAt":"2026-11-01T10:00:00.000Z"}',
        b'{"type":"page","userId":"u1","messageId":"edge-q","receivedAt":"yesterday"}',
        b'{"type":"page","userId":"  ","messageId":"edge-blank","receivedAt":"2026-11-01T10:00:00.000Z"}',
        b'{"type":"page","userId":7,"anonymousId":"a","messageId":"edge-n","receivedAt":"2026-11-01T10:00:00Z"}',
        b'{"type":"page","userId":"u1","messageId":"","receivedAt":"2026-11-01T10:00:00.000Z"}',
        b'{"type":"page","userId":"u1","messageId":"' + b"m" * 101 + b'","receivedAt":"2026-11-01T10:00:00Z"}',
        b'{"type":"page","userId":"u1","messageId":"edge-ts","timestamp":"nope","receivedAt":"2026-11-01T10:00:00Z"}',
        b'{"type":"track","userId":"u1","messageId":"edge-noevent","receivedAt":"2026-11-01T10:00:00Z"}',
        b'{"type":"alias","userId":"u1","messageId":"edge-alias","receivedAt":"2026-11-01T10:00:00Z"}',
        b'{"type":"group","userId":"u1","messageId":"edge-group","receivedAt":"2026-11-01T10:00:00Z"}',
        b'{"type":"track","event":"\xe6\x97\xa5\xe6\x9c\xac","userId":"u1","messageId":"edge-jp",'
        b'"receivedAt":"2026-11-01T10:00:00Z"}',
        b'{"type":"track","event":"a\\u0000b","userId":"u1","messageId":"edge-nul","receivedAt":"2026-11-01T10:00:00Z"}',
        b'{"type":"track","event":"x","userId":"u1","messageId":"edge-two","receivedAt":"2026-11-01T10:00:00Z"} {"a":1}',
        b"{nope}",
        b"[1,2]",
        b'"text"',
        b"   ",
        b"\xff\xfe{}",
        b'{"type":"identify","userId":"u1","messageId":"edge-crlf","receivedAt":"2026-11-01T10:00:00Z"}\r',
        b'{"type":"identify","userId":"u1","messageId":"edge-late","receivedAt":"2026-11-01T11:59:59.999999Z"}',
        b'{"type":"identify","userId":"u1","messageId":"edge-old","receivedAt":"1969-12-31T23:30:00Z"}',
        b'{"type":"identify","userId":"u1","messageId":"edge-rz","receivedAt":"2026-11-01T12:00:00+02:00"}',
    ]  # fmt: skip
    return lines


def fuzz_lines(count: int, seed: int = 37) -> list[bytes]:
    """Seeded random track messages whose properties mix the edges of the type rules: keys that
    collide after snake_case, numbers at the edges of bigint and decimal(38,6), timestamps of
    every form, lists, nested and empty objects; a few duplicates of earlier messages, some with
    other values at the same instant (the dedupe's tie-break), and a few users to suppress."""
    rng = random.Random(seed)
    keys = ["a", "A", "a_b", "aB", "ab", "AB", "$$", "a.b", "Año", "x1", "X1", "_a", "year", "hr"]
    values: list[Any] = [
        0, -1, 2**63 - 1, -(2**63), 2**63, 2**64, 10**40, 0.5, 1.0, -0.0, 1e20, 1e31, 1e-7, 19.99,
        123456.1234567, True, False, None, "x", "", "é", "\U0001f600", "2026-11-01T10:00:00.123456789Z",
        "2026-11-01T10:00", " 2026-11-01T10:00:00Z ", "2026-13-01T00:00:00Z",
        "\u0662\u0660\u0662\u0666-11-01T10:00:00Z",
        "0000-01-01T00:00:00Z", "9999-12-31T23:59:59-01:00", "2026-11-01T10:00:00+05:30", "2026-11-01",
        [], [1, "a"], [1.0], [[1]], ["a", "b"], [True], [None], [{"a": 1}], {}, {"b": {"c": 1}},
    ]  # fmt: skip
    lines: list[bytes] = []
    for number in range(count):
        if lines and rng.random() < 0.03:  # a client's retry: the same line again
            lines.append(rng.choice(lines))
            continue
        properties: dict[str, Any] = {}
        for _ in range(rng.randrange(1, 6)):
            value = rng.choice(values)
            if rng.random() < 0.2:
                value = {rng.choice(keys): rng.choice(values)}
            properties[rng.choice(keys)] = value
        message_id = f"fuzz-{number}" if rng.random() > 0.03 else f"fuzz-{rng.randrange(max(1, number))}"
        message = {
            "type": "track", "event": rng.choice(["Fuzz A", "Fuzz B"]), "userId": f"u{rng.randrange(5)}",
            "messageId": message_id, "receivedAt": RECEIVED, "properties": properties,
        }  # fmt: skip
        lines.append(json.dumps(message, ensure_ascii=False).encode())
    return lines


# the edge values of each JSON type, as typed_lines draws them (a key keeps its type in an event)
TYPED_EDGES: dict[str, list[Any]] = {
    "int": [0, -1, 1, 7, 2**31, 2**53 + 1, 2**63 - 1, -(2**63), 10**17],
    "double": [
        0.5,
        -0.25,
        19.99,
        1e-7,
        123456.1234567,
        0.1 + 0.2,
        2.5e20,
        1.5e30,
        999999999.999999,
        1e9 + 0.5,
        3.0,
        -0.0,
    ],
    "string": [
        "x",
        "",
        "é",
        "\U0001f600",
        'a"b',
        "tab\there",
        "2026-11-01T10:00:00.123Z",
        "2026-11-01T10:00:00Z",
        "2026-11-01T10:00:00+05:30",
        "2026-11-01",
        "2026-11-01 10:00:00",
        " 2026-11-01T10:00:00Z",
        "2026-02-30T10:00:00Z",
        "2026-11-01T10:00:00.123456789Z",
        "0999-01-01T00:00:00Z",
        "9999-12-31T23:59:59-01:00",
        "2026-11-01T25:00:00Z",
        "\u0662\u0660\u0662\u0666-11-01T10:00:00Z",
        "x" * 39 + "-",
        "1234-" + "y" * 20,
        "Año nuevo",
        None,
    ],
    "bool": [True, False, None],
    "strings": [[], ["a"], ["a", "b", "é"], ['q"uote'], ["back\\slash"], ["ctl\u0001"], None, [""]],
    "ints": [[], [1], [1, 2, 3], [-(2**63)], None],
    "bools": [[True], [False, True], []],
    "nested": [[[1, 2], [3]], [["a"]], [[]], None],
    "object": [{"a": 1}, {"b": "x", "c": {"d": True}}, {}, None],
}


def typed_lines(count: int, seed: int = 41) -> list[bytes]:
    """Seeded random track messages of a few events, each key of an event holding one JSON type
    (so that a group of lines reads) with values from :data:`TYPED_EDGES`; keys that collide after
    snake_case now and then, shadowed partition names, nulls, absent keys, integral doubles."""
    rng = random.Random(seed)
    events = {}
    for event in ("Typed A", "Typed B", "Typed C", "Typed D"):
        keys = [f"k{n}" for n in range(8)] + ["fooBar", "year", "Hr", "a.b"]
        events[event] = {key: rng.choice(sorted(TYPED_EDGES)) for key in keys}
    lines: list[bytes] = []
    for number in range(count):
        event = rng.choice(sorted(events))
        properties: dict[str, Any] = {}
        for key, kind in events[event].items():
            if rng.random() < 0.7:
                properties[key] = rng.choice(TYPED_EDGES[kind])
        if rng.random() < 0.02:  # collides with fooBar
            properties["foo_bar"] = properties.get("fooBar")
        message = {
            "type": "track", "event": event, "userId": f"u{rng.randrange(5)}", "messageId": f"typed-{number % (count - 50)}",
            "receivedAt": f"2026-11-01T{rng.randrange(9, 12):02d}:{rng.randrange(60):02d}:00.000Z", "properties": properties,
        }  # fmt: skip
        lines.append(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode())
    return lines


def line(message: dict[str, Any]) -> bytes:
    return orjson.dumps({"receivedAt": RECEIVED, **message})
