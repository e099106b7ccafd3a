"""Planning a run: each table's schema (existing columns kept, new ones appended) and the limit
on tables per database."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eventlake.catalog import Catalog
from eventlake.progress import Say
from eventlake.schema import Evolution, evolve
from eventlake.schema.table_names import TableNames
from eventlake.sync.pipeline.transform import SUPPRESSED


@dataclass(frozen=True)
class TablePlan:
    segment_type: str
    name: str
    is_new: bool
    evolution: Evolution
    collisions: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    tables: dict[str, TablePlan]  # by segment_type
    blocked: dict[str, str]  # segment type -> table name, of new tables past the table limit
    notices: tuple[str, ...]

    @property
    def schemas(self) -> dict[str, tuple[tuple[str, str], ...]]:
        """Each planned table's columns, by segment type (what the workers cast to)."""
        return {segment_type: t.evolution.columns for segment_type, t in self.tables.items()}


@dataclass(frozen=True)
class Observed:
    """What a run's deduplicated messages hold, from one aggregation (each Spark job costs a few
    hundred ms of scheduling however small the run)."""

    counts: dict[str, int]  # segment type -> messages
    types: dict[str, dict[str, set[str]]]  # segment type -> column -> the value types seen
    collisions: dict[str, list[str]]  # segment type -> the column name collisions seen

    @property
    def messages(self) -> int:
        return sum(self.counts.values())


# a kind of valid message, as the parse pass counts them: (segment type, shape, its name collisions)
Kind = tuple[str, str, tuple[str, ...]]


@dataclass(frozen=True)
class Parsed:
    """What a run's ``parsed`` rows hold (see :func:`count_parsed`)."""

    totals: dict[tuple[bool, bool], tuple[int, datetime | None]]  # (ok, dropped) -> (n, earliest)
    shapes: dict[str, dict[str, str]]  # shape name -> column types
    damaged: dict[str, str]  # a damaged archive file's location -> its problem (none of its lines read)
    kinds: dict[Kind, int]  # the valid messages (not a suppressed user's) by kind


def parsed_groups(parsed: DataFrame) -> DataFrame:
    """:func:`count_parsed`'s aggregation: a run's ``parsed`` rows grouped by ``ok``, ``dropped``
    (a suppressed user's message) and, for a valid message, its :data:`Kind`; a shape's row (``ok``
    null) is a group of its own (its name, its types as JSON), and so is a damaged file's (its
    ``reason`` and ``raw``: its location). Each group counts its rows and their earliest received
    time. Only fixed-width values are aggregated, so Spark runs a hash aggregate (an object
    aggregate, as ``collect_list`` wants, sorts a task's rows past 128 groups: a run has hundreds of
    kinds and shapes)."""
    dropped = F.coalesce(F.col("reason") == F.lit(SUPPRESSED), F.lit(False))
    valid = F.col("ok") & ~dropped
    of_shape = F.col("ok").isNull()  # a shape's row or a damaged file's
    return parsed.groupBy(
        "ok",
        dropped.alias("dropped"),
        *(F.when(valid, F.col(c)).alias(c) for c in ("segment_type", "collisions")),
        F.when(valid | of_shape, F.col("shape")).alias("shape"),
        *(F.when(of_shape, F.col(c)).alias(c) for c in ("reason", "raw")),
        F.when(of_shape, F.to_json("types")).alias("types"),
    ).agg(F.count("*").alias("n"), F.min("received_at").alias("first"))


def count_parsed(parsed: DataFrame) -> Parsed:
    """One aggregation of a run's ``parsed`` rows (see :mod:`.transform` and :func:`parsed_groups`):
    ``(ok, dropped)`` -> (messages, earliest received time), where ``dropped`` marks a suppressed
    user's messages; the valid messages by :data:`Kind` (what :func:`observe` needs once the
    dedupe's rows are taken out: no second pass over the messages); the run's shapes (name ->
    column types), from its shape rows; and its damaged archive files, from their rows (``ok`` and
    ``shape`` null)."""
    totals: dict[tuple[bool, bool], tuple[int, datetime | None]] = {}
    shapes: dict[str, dict[str, str]] = {}
    damaged: dict[str, str] = {}
    kinds: dict[Kind, int] = {}
    for row in parsed_groups(parsed).collect():
        if row["ok"] is None:
            if row["shape"] is None:  # a damaged file's row
                damaged[row["raw"]] = row["reason"]
            else:
                shapes[row["shape"]] = json.loads(row["types"])
            continue
        key = (row["ok"], row["dropped"])
        n, first = totals.get(key, (0, None))
        totals[key] = (n + row["n"], min((t for t in (first, row["first"]) if t is not None), default=None))
        if row["ok"] and not row["dropped"]:
            kind = (row["segment_type"], row["shape"], tuple(row["collisions"] or ()))
            kinds[kind] = kinds.get(kind, 0) + row["n"]
    return Parsed(totals, shapes, damaged, kinds)


def observe(kinds: dict[Kind, int], dropped: Iterable[Kind], shapes: dict[str, dict[str, str]]) -> Observed:
    """What the deduplicated messages hold: the valid messages by kind (:func:`count_parsed`)
    less those the dedupe drops (``dropped``: the kind of each row it drops, once), their counts by
    segment type, the value types of their shapes (see :func:`count_parsed`) and their name
    collisions."""
    left = dict(kinds)
    for one in dropped:
        left[one] = left.get(one, 0) - 1
    counts: dict[str, int] = {}
    types: dict[str, dict[str, set[str]]] = {}
    collisions: dict[str, list[str]] = {}
    for (segment_type, shape, found), n in sorted(left.items()):
        if n < 0:
            raise RuntimeError(
                f"the dedupe dropped more {segment_type!r} messages of shape {shape!r} than were read"
            )
        if n == 0:
            continue
        counts[segment_type] = counts.get(segment_type, 0) + n
        columns = types.setdefault(segment_type, {})
        for column, value_type in shapes[shape].items():
            columns.setdefault(column, set()).add(value_type)
        if found:
            seen = collisions.setdefault(segment_type, [])
            seen.extend(c for c in found if c not in seen)
    return Observed(counts, types, collisions)


def plan_tables(
    observed: Observed,
    catalog: Catalog,
    database: str,
    names: TableNames,
    limit: int,
    quarantine: str,
    say: Say,
) -> Plan:
    """Each table's schema and whether it is new; new tables past ``limit`` are blocked (their
    messages go to the ``quarantine`` table). ``names`` names each segment type's table."""
    collisions = observed.collisions
    present = catalog.table_schemas(database)
    room = limit - len(present)
    tables: dict[str, TablePlan] = {}
    blocked: dict[str, str] = {}
    for segment_type, columns in sorted(observed.types.items()):
        name = names.table(segment_type)
        existing = present.get(name)
        if existing is None:
            if room <= 0:
                blocked[segment_type] = name
                continue
            room -= 1
        tables[segment_type] = TablePlan(
            segment_type, name, existing is None, evolve(existing, columns, sorted(columns)),
            tuple(sorted(collisions.get(segment_type, ()))),
        )  # fmt: skip
    notices: tuple[str, ...] = ()
    if blocked:
        notices = (
            f"table limit reached: database {database} may hold {limit} tables; "
            f"{len(blocked)} new tables not created ({', '.join(list(blocked)[:10])}); their messages are "
            f"in {database}.{quarantine}",
        )
        say(notices[0])
    return Plan(tables, blocked, notices)
