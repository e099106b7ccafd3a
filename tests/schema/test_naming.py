from __future__ import annotations

import re

import pytest

from eventlake.schema.naming import (
    MAX_COLUMN_NAME_LENGTH,
    MAX_SEGMENT_TYPE_LENGTH,
    column_name,
    is_safe_identifier,
    segment_type,
    short_hash,
    snake_case,
    table_name,
)

SAFE = re.compile(r"[a-z0-9_]+")

# segmentio/go-snakecase's test table (latest version), plus the product doc's examples.
GO_SNAKECASE_VECTORS = [
    ("@49L0S145_¬fwHƒ0TSLNVp", "49l0s145_fw_h_0tslnvp"),
    ("lk0B@bFmjrLQ_Z6YL", "lk0_b_b_fmjr_lq_z6yl"),
    ("samPLE text", "sam_ple_text"),
    ("sample text", "sample_text"),
    ("sample-text", "sample_text"),
    ("sample_text", "sample_text"),
    ("sample___text", "sample_text"),
    ("sampleText", "sample_text"),
    ("inviteYourCustomersAddInvites", "invite_your_customers_add_invites"),
    ("sample 2 Text", "sample_2_text"),
    ("   sample   2    Text   ", "sample_2_text"),
    ("  sample   2    Text   ", "sample_2_text"),
    ("   $#$sample   2    Text   ", "sample_2_text"),
    ("SAMPLE 2 TEXT", "sample_2_text"),
    ("___$$Base64Encode", "base64_encode"),
    ("FOO:BAR$BAZ", "foo_bar_baz"),
    ("FOO#BAR#BAZ", "foo_bar_baz"),
    ("something.com", "something_com"),
    ("$something%", "something"),
    ("•¶§ƒ˚foo˙∆˚¬", "foo"),
    ("•¶§ƒ˚foo˙∆˚¬bar", "foo_bar"),
    ("CStringRef", "cstring_ref"),
    ("5test", "5test"),
    ("test5", "test5"),
    ("THE5r", "the5r"),
    ("5TEst", "5test"),
    ("_5TEst", "5test"),
    ("@%#&5TEst", "5test"),
    ("edf_6N", "edf_6n"),
    ("f_pX9", "f_p_x9"),
    ("p_z9Rg", "p_z9_rg"),
    ("2FA Enabled", "2fa_enabled"),
    ("Enabled 2FA", "enabled_2fa"),
    ("here\nis\na\nmultiline\nstring", "here_is_a_multiline_string"),
    ('"hello world"', "hello_world"),
    ("FOO:BAR$BAZ__Sample    Text___", "foo_bar_baz_sample_text"),
    ("När såg du en kråka väl bita en man?", "n_r_s_g_du_en_kr_ka_v_l_bita_en_man"),
    ("super long sentence that is not really necessary", "super_long_sentence_that_is_not_really_necessary"),
]

SEGMENT_FIELDS = [
    ("messageId", "message_id"),
    ("anonymousId", "anonymous_id"),
    ("userId", "user_id"),
    ("receivedAt", "received_at"),
    ("originalTimestamp", "original_timestamp"),
    ("sentAt", "sent_at"),
    ("projectId", "project_id"),
    ("previousId", "previous_id"),
    ("groupId", "group_id"),
    ("userAgent", "user_agent"),
    ("adTrackingEnabled", "ad_tracking_enabled"),
    ("AddressLine1", "address_line1"),
    ("address_line_1", "address_line_1"),
    ("Order Completed", "order_completed"),
    ("All", "all"),
    ("", ""),
    ("_", ""),
    ("日本語", ""),
]


@pytest.mark.parametrize(("name", "expected"), GO_SNAKECASE_VECTORS + SEGMENT_FIELDS)
def test_snake_case(name: str, expected: str) -> None:
    assert snake_case(name) == expected


@pytest.mark.parametrize("name", [name for name, _ in GO_SNAKECASE_VECTORS + SEGMENT_FIELDS])
def test_snake_case_is_idempotent_and_safe(name: str) -> None:
    once = snake_case(name)
    assert snake_case(once) == once
    assert once == "" or SAFE.fullmatch(once)
    assert "__" not in once and not once.startswith("_") and not once.endswith("_")


def test_column_name_joins_snake_cased_parts() -> None:
    assert column_name(["context", "library", "name"]) == "context_library_name"
    assert column_name(["context", "page", "url"]) == "context_page_url"
    assert column_name(["properties", "revenue"]) == "properties_revenue"
    assert column_name(["traits", "email"]) == "traits_email"
    assert column_name(["integrations", "All"]) == "integrations_all"
    assert column_name(["context", "device", "adTrackingEnabled"]) == "context_device_ad_tracking_enabled"


def test_column_name_drops_empty_parts() -> None:
    assert column_name(["properties", "$$", "价格", "total"]) == "properties_total"


def test_column_name_empty_is_hashed_and_stable() -> None:
    name = column_name(["$$"])
    assert name == "_d3dfb9de"
    assert is_safe_identifier(name)
    assert column_name(["%%"]) != name
    assert column_name(["$", "$"]) != name


def test_column_name_limit_and_hash() -> None:
    long_name = "a" * 300
    name = column_name([long_name])
    assert len(name) == MAX_COLUMN_NAME_LENGTH
    assert name == "a" * 241 + "_" + short_hash(long_name)
    assert column_name([long_name]) == name
    other = column_name(["a" * 299 + "b"])
    assert other != name and len(other) == MAX_COLUMN_NAME_LENGTH


def test_column_name_at_limit_is_kept() -> None:
    exact = ["p" * 124, "q" * 125]
    assert column_name(exact) == "p" * 124 + "_" + "q" * 125
    assert len(column_name(exact)) == 250


def test_column_name_truncation_never_leaves_double_underscore() -> None:
    name = column_name(["a" * 240, "b" * 30])
    assert len(name) <= MAX_COLUMN_NAME_LENGTH
    assert "__" not in name
    assert name.startswith("a" * 240 + "_")


@pytest.mark.parametrize("message_type", ["identify", "page", "screen", "group", "alias"])
def test_segment_type_of_non_track(message_type: str) -> None:
    assert segment_type(message_type, None) == message_type
    assert segment_type(message_type, "Ignored Event") == message_type


def test_segment_type_of_track() -> None:
    assert segment_type("track", "Order Completed") == "track_order_completed"
    assert segment_type("track", "orderCompleted") == "track_order_completed"
    assert segment_type("track", "identify") == "track_identify"


@pytest.mark.parametrize(
    "event",
    ["../../etc", "a'b\"c", "x=y/z", "  ", "日本語", "a" * 1000, "", None, "; DROP TABLE x; --", "\x00"],
)
def test_segment_type_of_hostile_events_is_safe(event: str | None) -> None:
    result = segment_type("track", event)
    assert is_safe_identifier(result)
    assert result.startswith("track_")
    assert len(result) <= MAX_SEGMENT_TYPE_LENGTH
    assert segment_type("track", event) == result


def test_segment_type_hashes_empty_names_distinctly() -> None:
    assert segment_type("track", "日本語") != segment_type("track", "中文")
    assert segment_type("track", "日本語") == "track_" + short_hash("日本語")
    assert segment_type("track", "  ") != segment_type("track", " ")


def test_segment_type_long_event_is_truncated_with_hash() -> None:
    first = segment_type("track", "a" * 1000)
    second = segment_type("track", "a" * 999)
    assert len(first) == MAX_SEGMENT_TYPE_LENGTH
    assert first != second


@pytest.mark.parametrize("message_type", ["batch", "Track", "", "import"])
def test_segment_type_rejects_unknown_types(message_type: str) -> None:
    with pytest.raises(ValueError, match="unknown message type"):
        segment_type(message_type, "x")


def test_table_name() -> None:
    assert table_name("track_order_completed") == "track_order_completed"
    assert table_name("identify", prefix="web_") == "web_identify"
    with pytest.raises(ValueError):
        table_name("identify; drop", prefix="")


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("abc_123", True),
        ("_x", True),
        ("", False),
        ("A", False),
        ("a-b", False),
        ("a\n", False),
        ("a b", False),
        ("é", False),
        (None, False),
        (12, False),
    ],
)
def test_is_safe_identifier(name: object, safe: bool) -> None:
    assert is_safe_identifier(name) is safe
