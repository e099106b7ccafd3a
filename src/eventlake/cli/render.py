"""The one output renderer: ``--format table|json|csv``. Data goes to stdout, nothing else does."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import click
import orjson

FORMATS = ("table", "json", "csv")

# the option of every command that renders rows: ``fmt`` is one of FORMATS, for :func:`render`
format_option = click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True
)


def _json_default(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return str(value)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (list, dict)):
        return orjson.dumps(value, default=_json_default).decode()
    return str(value)


def render(columns: Sequence[str], rows: Sequence[Mapping[str, Any]], fmt: str) -> None:
    """Print rows: ``json`` is exactly one JSON array of objects with every column as a key."""
    out = sys.stdout
    if fmt == "json":
        data = [{c: row.get(c) for c in columns} for row in rows]
        out.write(orjson.dumps(data, default=_json_default, option=orjson.OPT_PASSTHROUGH_DATETIME).decode())
        out.write("\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_text(row.get(c)) for c in columns])
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(show_lines=False)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*[_text(row.get(c)) for c in columns])
        Console(file=out, width=max(120, len(columns) * 18)).print(table)
        noun = "row" if len(rows) == 1 else "rows"
        print(f"{len(rows)} {noun}", file=sys.stderr)
    out.flush()
