"""Planning a run: each table's schema (existing columns kept, new ones appended) and the limit
on tables per database."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eventlake.catalog import Catalog
from eventlake.progress import Say
from eventlake.schema import Evolution, evolve, table_name


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


def observe(deduped: DataFrame, parsed: DataFrame) -> Observed:
    """Count the ``deduped`` messages and gather their types (each message names its shape, whose
    types are a shape row of ``parsed``, see :mod:`.transform`) and name collisions."""
    shapes = {
        row["shape"]: row["types"]
        for row in parsed.filter(F.col("ok").isNull()).select("shape", "types").collect()
    }
    groups = deduped.groupBy("segment_type", "shape").agg(
        F.count("*").alias("n"), F.array_distinct(F.flatten(F.collect_set("collisions"))).alias("collisions")
    )
    counts: dict[str, int] = {}
    types: dict[str, dict[str, set[str]]] = {}
    collisions: dict[str, list[str]] = {}
    for row in groups.collect():
        counts[row["segment_type"]] = counts.get(row["segment_type"], 0) + row["n"]
        columns = types.setdefault(row["segment_type"], {})
        for column, kind in shapes[row["shape"]].items():
            columns.setdefault(column, set()).add(kind)
        if row["collisions"]:
            seen = collisions.setdefault(row["segment_type"], [])
            seen.extend(c for c in row["collisions"] if c not in seen)
    return Observed(counts, types, collisions)


def plan_tables(
    observed: Observed,
    catalog: Catalog,
    database: str,
    table_prefix: str,
    limit: int,
    quarantine: str,
    say: Say,
) -> Plan:
    """Each table's schema and whether it is new; new tables past ``limit`` are blocked (their
    messages go to the ``quarantine`` table)."""
    collisions = observed.collisions
    present = catalog.table_schemas(database)
    room = limit - len(present)
    tables: dict[str, TablePlan] = {}
    blocked: dict[str, str] = {}
    for segment_type, columns in sorted(observed.types.items()):
        name = table_name(segment_type, table_prefix)
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
