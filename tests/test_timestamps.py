"""Timestamps as clients send them: every form parses to the same aware UTC datetime."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from eventlake.timestamps import day_start_ms, format_timestamp, parse_timestamp

EXPECTED = datetime(2026, 11, 22, 10, 47, 1, 123456, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-22T10:47:01.123456Z",
        "2026-11-22T10:47:01.123456+00:00",
        "2026-11-22T12:47:01.123456+02:00",
        "2026-11-22T12:47:01.123456+0200",
        "2026-11-22T08:47:01.123456-02:00",
        "2026-11-22T10:47:01.123456789Z",
        "2026-11-22 10:47:01.123456Z",
        "2026-11-22T10:47:01.123456",
        "2026-11-22T10:47:01,123456Z",
        "2026-11-22t10:47:01.123456z",
    ],
)
def test_every_form_clients_send(text: str) -> None:
    assert parse_timestamp(text) == EXPECTED


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-22T10:47:01Z", datetime(2026, 11, 22, 10, 47, 1, tzinfo=timezone.utc)),
        ("2026-11-22T10:47:01.1Z", datetime(2026, 11, 22, 10, 47, 1, 100000, tzinfo=timezone.utc)),
        ("2026-11-22T10:47:01.123Z", datetime(2026, 11, 22, 10, 47, 1, 123000, tzinfo=timezone.utc)),
        ("2026-11-22T10:47Z", datetime(2026, 11, 22, 10, 47, tzinfo=timezone.utc)),
        ("2026-01-01T00:30:00+01:00", datetime(2025, 12, 31, 23, 30, tzinfo=timezone.utc)),
    ],
)
def test_precision_and_offsets(text: str, expected: datetime) -> None:
    assert parse_timestamp(text) == expected


@pytest.mark.parametrize(
    "bad",
    ["", "yesterday", "2026-11-22", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-11-22T25:00:00Z",
     "2026-11-22T10:00:00+24:00", "0001-01-01T00:00:00+01:00", 1795305600, None, ["2026-11-22T10:00:00Z"],
     "2026-11-22T10:00:00Z" + " " * 40],
)  # fmt: skip
def test_what_is_not_a_timestamp(bad: object) -> None:
    assert parse_timestamp(bad) is None


def test_format_and_day() -> None:
    assert format_timestamp(EXPECTED) == "2026-11-22T10:47:01.123Z"
    assert format_timestamp(datetime(5, 1, 2, tzinfo=timezone.utc)) == "0005-01-02T00:00:00.000Z"
    assert day_start_ms(EXPECTED) == 1795305600000
