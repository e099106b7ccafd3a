"""Segment's warehouse schema as views over the lake's tables (pure: names, columns, SQL).

Segment Warehouses hold, per source, ``tracks``, ``pages``, ``screens``, ``identifies``,
``groups``, ``aliases``, ``users`` and one table per track event (``order_completed`` for "Order
Completed"), with columns such as ``id``, ``anonymous_id``, ``user_id``, ``received_at``,
``sent_at``, ``timestamp``, ``event``, ``event_text``, ``context_page_url`` and ``uuid_ts``, and
the call's ``properties`` or ``traits`` as un-prefixed columns (``revenue``, ``plan``). The lake
keeps Segment Data Lakes' shape: ``track_order_completed`` with ``message_id`` and
``properties_revenue``. :func:`warehouse_views` maps one to the other; :func:`view_sql` writes a
view's ``SELECT`` in SQL both Spark and DuckDB run (the caller quotes identifiers its way).

The mapping, where the warehouse and the lake differ:

- ``id`` is the lake's ``message_id``; ``uuid_ts`` (when the warehouse loaded the row) is
  ``received_at``: the lake does not record when a sync wrote a row.
- ``event`` is the snake_case event (the track table's name without ``track_``), ``event_text``
  the event as sent (the lake's ``event``).
- ``properties_x`` (tracks, pages, screens) and ``traits_x`` (identifies, groups) become ``x``;
  one that would take the name of one of the view's own columns (``id``, ``user_id``, ``event``,
  ``name``, ...) is left out, as Segment discards it.
- ``users``: one row per ``user_id`` of the identify calls, keyed ``id``: each trait's latest
  non-null value by ``timestamp`` (``received_at`` when a call has none); ``received_at`` and
  ``uuid_ts`` of the user's last identify.
- ``tracks`` is every track table's common columns (``UNION ALL``); a context column missing
  from a table reads NULL there, and one typed differently in two tables is a string in
  ``tracks``.
- Every view carries Segment's standard columns of its call type (:data:`STANDARD_COLUMNS`:
  ``context_page_url``, ``context_campaign_source``, ... everywhere; ``url``, ``path``, ``referrer``,
  ``search``, ``title`` in ``pages``), NULL of their type when no data has them: SQL written for any
  Segment warehouse (the dbt package ``dbt-labs/segment``) runs on a source that never sent them.
- A per-event view whose name a lake table or a standard view takes or could take (``page``,
  ``track_x``, ``tracks``, ``users``, names starting with ``_``) is not made: it is listed in
  :attr:`Views.skipped`.

The lake's types stay as they are (``bigint``, ``decimal(38,6)``, ``boolean``, ``string``,
``timestamp`` in UTC); see docs/querying.md for the warehouse's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from eventlake.schema.types import STRING, TIMESTAMP

TRACKS, PAGES, SCREENS, IDENTIFIES, GROUPS, ALIASES, USERS = (
    "tracks", "pages", "screens", "identifies", "groups", "aliases", "users",
)  # fmt: skip
STANDARD_VIEWS = (TRACKS, PAGES, SCREENS, IDENTIFIES, GROUPS, ALIASES, USERS)
# the lake table (segment type) each standard view reads, and what its calls carry un-prefixed
_KINDS = {
    PAGES: ("page", "properties_", ("name", "category")),
    SCREENS: ("screen", "properties_", ("name", "category")),
    IDENTIFIES: ("identify", "traits_", ()),
    GROUPS: ("group", "traits_", ("group_id",)),
    ALIASES: ("alias", None, ("previous_id",)),
}
_LAKE_KINDS = ("page", "screen", "identify", "group", "alias")
_TRACK = "track_"
# every view's first columns: (view column, lake column, type when the lake has none)
_HEAD = (
    ("id", "message_id", STRING),
    ("anonymous_id", "anonymous_id", STRING),
    ("user_id", "user_id", STRING),
)
_TAIL = (
    ("received_at", "received_at", TIMESTAMP),
    ("sent_at", "sent_at", TIMESTAMP),
    ("original_timestamp", "original_timestamp", TIMESTAMP),
    ("timestamp", "timestamp", TIMESTAMP),
    ("uuid_ts", "received_at", TIMESTAMP),
)


def _strings(*names: str) -> tuple[tuple[str, str], ...]:
    return tuple((name, STRING) for name in names)


# The context fields Segment's libraries collect on every call (Segment Spec, "Common Fields" /
# "Context": analytics.js's page, campaign, ip, library, locale and user agent; the mobile libraries'
# app, device, os, network and timezone), as Segment's warehouses flatten them (``context_<key>``).
_STANDARD_CONTEXT = tuple(
    sorted(
        _strings(
            "context_campaign_content", "context_campaign_medium", "context_campaign_name",
            "context_campaign_source", "context_campaign_term",
            "context_page_path", "context_page_referrer", "context_page_search", "context_page_title",
            "context_page_url",
            "context_ip", "context_library_name", "context_library_version", "context_locale",
            "context_user_agent", "context_timezone",
            "context_app_build", "context_app_name", "context_app_namespace", "context_app_version",
            "context_device_id", "context_device_manufacturer", "context_device_model", "context_device_type",
            "context_os_name", "context_os_version", "context_network_carrier",
        )
    )
)  # fmt: skip
# Segment's standard warehouse columns of each view beyond ``_HEAD`` and ``_TAIL`` (which every view
# has): a view carries each of them, NULL of this type when no data has it, as SQL written for any
# Segment warehouse expects. Sources: Segment's "Warehouse Schemas" page (segment-docs,
# src/connections/storage/warehouses/schema.md: ``id``, ``anonymous_id``, ``user_id``, ``context_<key>``,
# ``event``, ``event_text``, ``group_id``, the four timestamps, ``uuid_ts``), the properties analytics.js
# sends with every ``page`` call (Segment Spec, "Page": ``name``, ``path``, ``referrer``, ``search``,
# ``title``, ``url``), and the columns the dbt package dbt-labs/segment selects from ``pages``
# (models/base/segment_web_page_views.sql: ``url``, ``path``, ``title``, ``search``, ``referrer``,
# ``context_campaign_{source,medium,name,term,content}``, ``context_ip``, ``context_user_agent``).
# Per-event views have the ``tracks`` columns. Types are the lake's (``string``, ``timestamp``).
STANDARD_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    TRACKS: _STANDARD_CONTEXT,
    PAGES: _strings("name", "category", "path", "referrer", "search", "title", "url") + _STANDARD_CONTEXT,
    SCREENS: _strings("name", "category") + _STANDARD_CONTEXT,
    IDENTIFIES: _STANDARD_CONTEXT,
    GROUPS: _strings("group_id") + _STANDARD_CONTEXT,
    ALIASES: _strings("previous_id") + _STANDARD_CONTEXT,
    USERS: (),
}
_USER_COLUMNS = frozenset({"id", "received_at", "uuid_ts"})  # the users view's own columns


@dataclass(frozen=True)
class LakeTable:
    """A lake table as the views need it: its name, its segment type and its columns."""

    name: str
    segment_type: str
    columns: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Column:
    """A view column: a lake column, a text literal, or NULL, of ``type``."""

    name: str
    type: str
    source: str | None = None  # the lake column
    literal: str | None = None  # a constant text (``event`` of a per-event view)


@dataclass(frozen=True)
class Select:
    table: str  # the lake table
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class View:
    name: str
    selects: tuple[Select, ...]  # UNION ALL of these; none: an empty view of ``columns``
    columns: tuple[tuple[str, str], ...]  # the view's columns and types, in order
    # ``users``: one row per user_id, each column's latest value by the first non-null of these
    latest_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class Views:
    views: tuple[View, ...]
    skipped: tuple[str, ...]  # per-event views not made: their names are a lake table's


def event_view_name(segment_type: str) -> str:
    """
    >>> event_view_name("track_order_completed")
    'order_completed'
    """
    return segment_type[len(_TRACK) :]


def warehouse_views(tables: Sequence[LakeTable], prefix: str = "") -> Views:
    """The warehouse views over one source's lake tables (named ``prefix`` + the warehouse name).

    >>> t = LakeTable("track_signed_up", "track_signed_up", (("message_id", "string"), ("event", "string"),
    ...     ("properties_plan", "string"), ("properties_user_id", "string"), ("received_at", "timestamp")))
    >>> views = {v.name: v for v in warehouse_views([t]).views}
    >>> [c for c, _ in views["signed_up"].columns][:6]
    ['id', 'anonymous_id', 'user_id', 'event', 'event_text', 'plan']
    >>> sorted(views)
    ['aliases', 'groups', 'identifies', 'pages', 'screens', 'signed_up', 'tracks', 'users']
    """
    by_type = {t.segment_type: t for t in tables}
    tracks = sorted((t for t in tables if t.segment_type.startswith(_TRACK)), key=lambda t: t.segment_type)
    views: list[View] = [_tracks(tracks, prefix)]
    for name, (kind, carried, own) in _KINDS.items():
        views.append(_single(prefix + name, by_type.get(kind), carried, own, STANDARD_COLUMNS[name]))
    views.append(_users(prefix + USERS, by_type.get("identify")))
    skipped = []
    for table in tracks:
        name = event_view_name(table.segment_type)
        if _taken(name):
            skipped.append(prefix + name)
            continue
        views.append(_single(prefix + name, table, "properties_", (), STANDARD_COLUMNS[TRACKS], event=True))
    return Views(tuple(views), tuple(skipped))


def _taken(name: str) -> bool:
    """A per-event view name that a lake table or a standard view has, or could have."""
    return not name or name in STANDARD_VIEWS or name in _LAKE_KINDS or name.startswith((_TRACK, "_"))


def _common(
    table: LakeTable | None, event: bool, standard: Sequence[tuple[str, str]] = ()
) -> tuple[list[Column], list[Column], list[Column]]:
    """The head, the context columns (the table's and the ``standard`` ones, NULL when it has none)
    and the tail of a view over ``table``."""
    have = dict(table.columns) if table else {}

    def column(name: str, source: str, kind: str) -> Column:
        return Column(name, have.get(source, kind), source if source in have else None)

    head = [column(*c) for c in _HEAD]
    if event:
        event_name = event_view_name(table.segment_type) if table else None
        head += [Column("event", STRING, literal=event_name), column("event_text", "event", STRING)]
    context = {n: Column(n, t, n) for n, t in have.items() if n.startswith("context_")}
    for n, t in standard:
        if n.startswith("context_"):
            context.setdefault(n, Column(n, t))
    return head, [context[n] for n in sorted(context)], [column(*c) for c in _TAIL]


def _single(
    name: str,
    table: LakeTable | None,
    carried: str | None,
    own: Sequence[str],
    standard: Sequence[tuple[str, str]],
    event: bool = False,
) -> View:
    head, context, tail = _common(table, event, standard)
    have = dict(table.columns) if table else {}
    middle = [Column(n, have.get(n, STRING), n if n in have else None) for n in own]
    taken = {c.name for c in head + middle + context + tail}  # the view's own columns win
    if carried:
        for column, kind in table.columns if table else ():
            short = column[len(carried) :]
            if column.startswith(carried) and short and short not in taken:
                middle.append(Column(short, kind, column))
                taken.add(short)
    for short, kind in standard:  # a standard column no data has: NULL
        if short not in taken and not short.startswith("context_"):
            middle.append(Column(short, kind))
            taken.add(short)
    columns = tuple(head + middle + context + tail)
    selects = (Select(table.name, columns),) if table else ()
    return View(name, selects, tuple((c.name, c.type) for c in columns))


def _tracks(tables: Sequence[LakeTable], prefix: str) -> View:
    """Every track table's common columns, one ``SELECT`` each, ``UNION ALL``."""
    per_table = [_common(t, event=True) for t in tables]
    context: dict[str, str] = {}
    for _, columns, _ in per_table:
        for c in columns:
            context[c.name] = c.type if context.get(c.name, c.type) == c.type else STRING
    for n, t in STANDARD_COLUMNS[TRACKS]:  # the standard ones no table has: NULL
        context.setdefault(n, t)
    head, _, tail = _common(None, event=True)
    names = sorted(context)
    shape = (
        [(c.name, c.type) for c in head] + [(n, context[n]) for n in names] + [(c.name, c.type) for c in tail]
    )
    selects = []
    for table, (head_cols, context_cols, tail_cols) in zip(tables, per_table, strict=True):
        have = {c.name: c for c in context_cols}
        columns = head_cols + [have.get(n, Column(n, context[n])) for n in names] + tail_cols
        typed = (Column(c.name, t, c.source, c.literal) for c, (_, t) in zip(columns, shape, strict=True))
        selects.append(Select(table.name, tuple(typed)))
    return View(prefix + TRACKS, tuple(selects), tuple(shape))


def _users(name: str, identify: LakeTable | None) -> View:
    have = dict(identify.columns) if identify else {}
    columns = [Column("id", have.get("user_id", STRING), "user_id" if "user_id" in have else None)]
    for column, kind in identify.columns if identify else ():
        short = column[len("traits_") :]
        if column.startswith("traits_") and short and short not in _USER_COLUMNS:
            columns.append(Column(short, kind, column))
    received = "received_at" if "received_at" in have else None
    columns += [Column("received_at", TIMESTAMP, received), Column("uuid_ts", TIMESTAMP, received)]
    selects = (Select(identify.name, tuple(columns)),) if identify and "user_id" in have else ()
    latest = tuple(c for c in ("timestamp", "received_at") if c in have) or ("received_at",)
    return View(name, selects, tuple((c.name, c.type) for c in columns), latest_by=latest)


def view_sql(
    view: View, database: str, quote: Callable[[str], str], type_name: Callable[[str], str] = str
) -> str:
    """The view's ``SELECT`` over ``database``'s lake tables, in SQL Spark, DuckDB and Athena run;
    ``quote`` quotes an identifier (backticks for Spark, double quotes for DuckDB and Athena),
    ``type_name`` spells a column type (Athena says ``varchar`` for ``string``)."""
    if not view.selects:  # no lake table yet: an empty view of the standard columns
        nulls = ", ".join(f"CAST(NULL AS {type_name(kind)}) AS {quote(name)}" for name, kind in view.columns)
        return f"SELECT {nulls} WHERE 1 = 0"
    if view.latest_by:
        (select,) = view.selects
        parts = []
        for c in select.columns:
            if c.source is None:
                parts.append(f"CAST(NULL AS {type_name(c.type)}) AS {quote(c.name)}")
            elif c.name == "id":
                parts.append(f"{quote(c.source)} AS {quote('id')}")
            elif c.name in ("received_at", "uuid_ts"):
                parts.append(f"max({quote(c.source)}) AS {quote(c.name)}")
            else:
                source = quote(c.source)
                key = ", ".join(quote(k) for k in view.latest_by)
                key = f"coalesce({key})" if len(view.latest_by) > 1 else key
                latest = f"max_by({source}, {key}) FILTER (WHERE {source} IS NOT NULL)"
                parts.append(f"{latest} AS {quote(c.name)}")
        user = quote("user_id")
        table = f"{quote(database)}.{quote(select.table)}"
        return f"SELECT {', '.join(parts)} FROM {table} WHERE {user} IS NOT NULL GROUP BY {user}"
    return " UNION ALL ".join(_select_sql(s, database, quote, type_name) for s in view.selects)


def _select_sql(
    select: Select, database: str, quote: Callable[[str], str], type_name: Callable[[str], str]
) -> str:
    parts = []
    for c in select.columns:
        if c.literal is not None:
            value = "'" + c.literal.replace("'", "''") + "'"
            parts.append(f"CAST({value} AS {type_name(c.type)}) AS {quote(c.name)}")
        elif c.source is None:
            parts.append(f"CAST(NULL AS {type_name(c.type)}) AS {quote(c.name)}")
        else:
            parts.append(f"CAST({quote(c.source)} AS {type_name(c.type)}) AS {quote(c.name)}")
    return f"SELECT {', '.join(parts)} FROM {quote(database)}.{quote(select.table)}"
