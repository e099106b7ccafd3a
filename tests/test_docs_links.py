"""Every relative link of README.md and docs/*.md leads somewhere: the file exists and, when the
link names an anchor, the page has a heading with that anchor (GitHub's rule: lower case,
punctuation dropped, spaces turned into ``-``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^[ \t]*```.*?^[ \t]*```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+?)\s*#*$", re.MULTILINE)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings (code blocks left out; a repeated one gets ``-1``, ...)."""
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        name, n = anchor(heading), 1
        while name in found:
            name, n = f"{anchor(heading)}-{n}", n + 1
        found.add(name)
    return found


def links(page: Path) -> list[str]:
    """The relative links of a page, outside code blocks and inline code."""
    text = re.sub(r"`[^`\n]*`", "", FENCE.sub("", page.read_text(encoding="utf-8")))
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("Segment-warehouse SQL: the warehouse views", "segment-warehouse-sql-the-warehouse-views"),
        ("How `eventlake adopt` works", "how-eventlake-adopt-works"),
        ("A funnel: Product Viewed → Order Completed", "a-funnel-product-viewed--order-completed"),
        ("JDBC, ODBC, dbt and BI tools", "jdbc-odbc-dbt-and-bi-tools"),
    ],
)
def test_anchor_is_githubs(heading: str, expected: str) -> None:
    assert anchor(heading) == expected


def test_the_pages_have_links() -> None:
    assert len(PAGES) >= 8
    assert any(target.startswith("docs/") for target in links(ROOT / "README.md"))


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, name = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif name and file.suffix == ".md" and name not in anchors(file):
            broken.append(f"{target}: no heading with that anchor in {file.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"
