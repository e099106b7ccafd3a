"""HTML building blocks of the console's pages: escaping, the page frame, tables, SVG charts.

Pages are rendered on the server as plain HTML (no script, no build step, nothing from the
internet): the only asset is ``static/console.css``, served by the console itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import urlencode

from eventlake.sync.protocol.status import Status

NAV = (("/", "Overview"), ("/runs", "Sync history"), ("/schemas", "Schemas"), ("/quarantine", "Quarantine"),
       ("/query", "Query"))  # fmt: skip
COLORS = ("#2f6fdf", "#d9822b", "#3a9d5d", "#b8405e", "#7a5cc7", "#5b8c9a")
# the style (console.css) of a run's status; the others have none in a badge, "ok" in a chart
STATUS_STYLES: dict[str, str] = {Status.SUCCESS: "ok", Status.PARTIAL: "warn", Status.FAILED: "bad"}


def e(value: Any) -> str:
    """Text for HTML (None shows as empty)."""
    return "" if value is None else escape(str(value), quote=True)


def link(href: str, text: Any, **params: Any) -> str:
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f'<a href="{e(href + ("?" + query if query else ""))}">{e(text)}</a>'


def page(title: str, active: str, body: str, refreshed: str = "") -> str:
    nav = "".join(
        f'<a href="{href}"{" class=active" if href == active else ""}>{e(name)}</a>' for href, name in NAV
    )
    foot = f"<footer>lake read {e(refreshed)}</footer>" if refreshed else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{e(title)} · eventlake</title>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        '<link rel=stylesheet href="/static/console.css"></head><body>'
        f'<header><a class=brand href="/">eventlake</a><nav>{nav}</nav></header>'
        f"<main><h1>{e(title)}</h1>{body}</main>{foot}</body></html>"
    )


def int_param(value: Any, default: int, low: int = 0, high: int = 10**9) -> int:
    """A number from a query string or a form, kept within ``[low, high]``; ``default`` when it is none.

    >>> int_param("50", 0), int_param("-3", 0), int_param("x", 7), int_param(None, 7)
    (50, 0, 7, 7)
    >>> int_param("999", 1, 1, 100)
    100
    """
    try:
        return max(low, min(high, int(value)))
    except (TypeError, ValueError):
        return default


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], css: str = "") -> str:
    """A table of already escaped cells (build them with :func:`e` and :func:`link`)."""
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    if not body:
        body = f'<tr><td colspan="{len(headers)}" class=empty>nothing yet</td></tr>'
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def select_options(values: Iterable[str], chosen: str) -> str:
    """A ``<select>``'s options: "all" (the empty value) then ``values``, ``chosen`` selected.

    >>> select_options(["web"], "web")
    '<option value="">all</option><option value="web" selected>web</option>'
    """
    return "".join(
        f'<option value="{e(v)}"{" selected" if v == chosen else ""}>{e(v or "all")}</option>'
        for v in ["", *values]
    )


def status_badge(status: str) -> str:
    """A run's status as a badge styled by :data:`STATUS_STYLES`.

    >>> status_badge(Status.FAILED)
    '<span class="badge bad">Failed</span>'
    >>> status_badge("Partial Success"), status_badge(Status.NOTHING)
    ('<span class="badge warn">Partial Success</span>', '<span class="badge ">Nothing to do</span>')
    """
    kind = STATUS_STYLES.get(status, "")
    return f'<span class="badge {kind}">{e(status)}</span>'


def pager(href: str, offset: int, limit: int, total: int, **params: Any) -> str:
    parts = [f"<span>{min(total, offset + 1)}–{min(total, offset + limit)} of {total}</span>"]
    if offset > 0:
        parts.insert(0, link(href, "« newer", offset=max(0, offset - limit), **params))
    if offset + limit < total:
        parts.append(link(href, "older »", offset=offset + limit, **params))
    return f"<p class=pager>{' '.join(parts)}</p>"


def line_chart(title: str, series: Mapping[str, Sequence[tuple[str, float]]], unit: str) -> str:
    """An SVG line chart: one line per series over shared x labels (e.g. days)."""
    width, height, pad = 720, 200, 40
    labels = next(iter(series.values()), [])
    if not labels:
        return f"<figure><figcaption>{e(title)}</figcaption><p class=empty>nothing yet</p></figure>"
    top = max((v for points in series.values() for _, v in points), default=0) or 1
    step = (width - 2 * pad) / max(1, len(labels) - 1)
    parts = [f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" class=axis />',
             f'<text x="{pad - 4}" y="{pad}" class=tick text-anchor=end>{_short(top)}</text>',
             f'<text x="{pad - 4}" y="{height - pad}" class=tick text-anchor=end>0</text>',
             f'<text x="{pad}" y="{height - pad + 16}" class=tick>{e(labels[0][0])}</text>',
             f'<text x="{width - pad}" y="{height - pad + 16}" class=tick text-anchor=end>'
             f"{e(labels[-1][0])}</text>"]  # fmt: skip
    legend = []
    for index, (name, points) in enumerate(series.items()):
        color = COLORS[index % len(COLORS)]
        xy = [
            (pad + i * step, height - pad - (v / top) * (height - 2 * pad)) for i, (_, v) in enumerate(points)
        ]
        parts.append(
            f'<polyline fill=none stroke="{color}" stroke-width=2 points="'
            + " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
            + '" />'
        )
        parts += [
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r=2.5 fill="{color}"><title>{e(name)} {e(label)}: '
            f"{_short(v)} {e(unit)}</title></circle>"
            for (x, y), (label, v) in zip(xy, points, strict=True)
            if v
        ]
        legend.append(f'<span><i style="background:{color}"></i>{e(name)}</span>')
    return (
        f'<figure><figcaption>{e(title)}</figcaption><svg viewBox="0 0 {width} {height}" role=img '
        f'aria-label="{e(title)}">{"".join(parts)}</svg><div class=legend>{"".join(legend)}</div></figure>'
    )


def bar_chart(title: str, bars: list[tuple[str, float, str]], unit: str) -> str:
    """An SVG bar chart: ``(label, value, status)`` bars, oldest first; failed runs in red."""
    width, height, pad = 720, 160, 40
    if not bars:
        return f"<figure><figcaption>{e(title)}</figcaption><p class=empty>nothing yet</p></figure>"
    top = max(v for _, v, _ in bars) or 1
    slot = min(40.0, (width - 2 * pad) / len(bars))
    parts = [f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" class=axis />',
             f'<text x="{pad - 4}" y="{pad}" class=tick text-anchor=end>{_short(top)} '
             f"{e(unit)}</text>"]  # fmt: skip
    for index, (label, value, status) in enumerate(bars):
        h = (value / top) * (height - 2 * pad)
        kind = STATUS_STYLES.get(status, "ok")
        parts.append(
            f'<rect class="bar {kind}" x="{pad + index * slot + 1:.1f}" y="{height - pad - h:.1f}" '
            f'width="{max(1.0, slot - 2):.1f}" height="{h:.1f}"><title>{e(label)}: {value:.1f} {e(unit)} '
            f"({e(status)})</title></rect>"
        )
    return (
        f'<figure><figcaption>{e(title)}</figcaption><svg viewBox="0 0 {width} {height}" role=img '
        f'aria-label="{e(title)}">{"".join(parts)}</svg></figure>'
    )


def _short(value: float) -> str:
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.1f}{suffix}"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"
