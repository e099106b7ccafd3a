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


def observed_types(deduped: DataFrame, parsed: DataFrame) -> dict[str, dict[str, set[str]]]:
    """The value types seen in the run's ``deduped`` messages, by segment type and column: each
    message names its shape, whose types are a shape row of ``parsed`` (see :mod:`.transform`)."""
    types = {
        row["shape"]: row["types"]
        for row in parsed.filter(F.col("ok").isNull()).select("shape", "types").collect()
    }
    observed: dict[str, dict[str, set[str]]] = {}
    for row in deduped.select("segment_type", "shape").distinct().collect():
        columns = observed.setdefault(row["segment_type"], {})
        for column, kind in types[row["shape"]].items():
            columns.setdefault(column, set()).add(kind)
    return observed


def observed_collisions(deduped: DataFrame) -> dict[str, list[str]]:
    collisions: dict[str, list[str]] = {}
    for row in deduped.select("segment_type", F.explode("collisions").alias("c")).distinct().collect():
        collisions.setdefault(row["segment_type"], []).append(row["c"])
    return collisions


def plan_tables(
    deduped: DataFrame,
    parsed: DataFrame,
    catalog: Catalog,
    database: str,
    table_prefix: str,
    limit: int,
    quarantine: str,
    say: Say,
) -> Plan:
    """Each table's schema and whether it is new; new tables past ``limit`` are blocked (their
    messages go to the ``quarantine`` table)."""
    observed = observed_types(deduped, parsed)
    collisions = observed_collisions(deduped)
    present = catalog.table_schemas(database)
    room = limit - len(present)
    tables: dict[str, TablePlan] = {}
    blocked: dict[str, str] = {}
    for segment_type, columns in sorted(observed.items()):
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
