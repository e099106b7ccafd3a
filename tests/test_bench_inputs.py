"""The inputs of ``bench/sync.py`` (issue 37): each is deterministic from its seed, and the demanding
one (``analytics``) has the mix the issue describes: 70% track over 30 event names with 5-15
properties each (nested objects, a few arrays), 15% page, 10% identify, the rest screen, group and
alias, a full analytics.js-style context on every message, received over 3 days, 1% duplicates."""

from __future__ import annotations

import collections
import gzip
import hashlib
import sys
from datetime import datetime
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import sync  # noqa: E402 - bench/sync.py

MESSAGES = 4000


def _archive(directory: Path, kind: str, seed: int = 7) -> tuple[tuple[int, int], str, list[bytes]]:
    written = sync.generate(directory, "src1", MESSAGES, files=10, seed=seed, kind=kind)
    digest = hashlib.sha256()
    lines: list[bytes] = []
    for path in sorted(directory.rglob("*.gz")):
        digest.update(path.relative_to(directory).as_posix().encode())
        with gzip.open(path, "rb") as archive:
            content = archive.read()
        digest.update(content)
        lines += content.splitlines()
    return written, digest.hexdigest(), lines


@pytest.mark.parametrize("kind", sorted(sync.INPUTS))
def test_an_input_is_the_same_for_a_seed_and_differs_for_another(tmp_path: Path, kind: str) -> None:
    first = _archive(tmp_path / "a", kind)
    again = _archive(tmp_path / "b", kind)
    other = _archive(tmp_path / "c", kind, seed=8)
    assert first[:2] == again[:2]
    assert first[1] != other[1]
    assert first[0] == (MESSAGES, sum(len(line) + 1 for line in first[2]))
    assert len(list((tmp_path / "a").rglob("*.gz"))) == 10


def test_the_analytics_input_has_the_issues_mix(tmp_path: Path) -> None:
    _, _, lines = _archive(tmp_path, "analytics")
    messages = [orjson.loads(line) for line in lines]
    unique = {m["messageId"]: m for m in messages}
    duplicates = len(messages) - len(unique)
    assert 0.005 * MESSAGES <= duplicates <= 0.015 * MESSAGES

    types = collections.Counter(m["type"] for m in unique.values())
    share = {kind: count / len(unique) for kind, count in types.items()}
    assert share["track"] == pytest.approx(0.70, abs=0.01)
    assert share["page"] == pytest.approx(0.15, abs=0.01)
    assert share["identify"] == pytest.approx(0.10, abs=0.01)
    assert {"screen", "group", "alias"} <= set(types)
    assert share["screen"] + share["group"] + share["alias"] == pytest.approx(0.05, abs=0.01)

    tracks = [m for m in unique.values() if m["type"] == "track"]
    assert len({m["event"] for m in tracks}) == 30
    assert {len(m["properties"]) for m in tracks} <= set(range(5, 16))
    assert any(isinstance(v, dict) for m in tracks for v in m["properties"].values())
    assert any(isinstance(v, list) for m in tracks for v in m["properties"].values())

    for message in unique.values():
        context = message["context"]
        assert set(context["campaign"]) == {"name", "source", "medium", "term", "content"}
        assert {"ip", "locale", "timezone", "library"} <= set(context)
        if message["type"] == "screen":
            assert {"device", "os", "screen", "app"} <= set(context)
        else:
            assert set(context["page"]) == {"path", "referrer", "search", "title", "url"}
            assert context["userAgent"].startswith("Mozilla/5.0")
        if message["type"] == "identify":
            assert context["traits"]["email"] == message["traits"]["email"]
        if message["type"] in ("identify", "alias"):
            assert message["userId"]

    received = sorted(datetime.fromisoformat(m["receivedAt"]) for m in unique.values())
    assert (received[-1] - received[0]).total_seconds() == pytest.approx(3 * 86400, rel=0.01)


def test_the_analytics_input_is_the_more_demanding(tmp_path: Path) -> None:
    """More bytes and more flattened values per message than the basic input: what issue 37's gap
    comes from."""
    from eventlake.schema.flatten import flatten

    def per_message(kind: str) -> tuple[float, float]:
        _, _, lines = _archive(tmp_path / kind, kind)
        values = sum(len(flatten(orjson.loads(line)).values) for line in lines)
        return sum(len(line) for line in lines) / len(lines), values / len(lines)

    basic, analytics = per_message("basic"), per_message("analytics")
    assert analytics[0] > 1.3 * basic[0]
    assert analytics[1] > 1.2 * basic[1]
