"""A catalog in another process, for back ends that need their own JVM.

One Spark driver holds one Hive client configuration, so the test process (whose shared Spark
session uses embedded Derby) cannot also talk to PostgreSQL, MariaDB or a metastore service
through Spark. Each such back end gets a worker process: ``python -m tests.catalog.worker CONFIG``
builds its session exactly as eventlake does (``spark_session`` + ``load_catalog`` from the
project's eventlake.toml) and runs the catalog calls it reads on stdin, one JSON line each.
:class:`RemoteCatalog` is the test side: the same :class:`Catalog` interface, every call
forwarded. Two workers on one metastore are two Spark processes sharing it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eventlake.catalog import Catalog, Column, TableSpec

READY_TIMEOUT = 300.0
CALL_TIMEOUT = 180.0


def _encode(value: Any) -> Any:
    if isinstance(value, TableSpec):
        return {"__spec__": _encode(dataclasses.asdict(value))}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _decode(value: Any) -> Any:
    """An argument: a TableSpec, or a value with lists as tuples (partitions, columns)."""
    if isinstance(value, dict) and "__spec__" in value:
        return TableSpec(**{k: _tuples(v) for k, v in value["__spec__"].items()})
    return _tuples(value)


class RemoteCatalog(Catalog):
    """The catalog of a worker process (started here, stopped by :meth:`close`)."""

    def __init__(self, config: Path, log: Path, env: dict[str, str] | None = None) -> None:
        root = Path(__file__).resolve().parents[2]
        self.log = log
        self._out = open(log, "ab")  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.catalog.worker", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._out,
            cwd=root,
            env=env,
            text=True,
        )
        self._lock = threading.Lock()
        self._ready = False

    def wait_ready(self) -> None:
        with self._lock:
            if not self._ready:
                self._read(READY_TIMEOUT)
                self._ready = True

    def _read(self, timeout: float) -> Any:
        assert self.process.stdout is not None
        readable, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if readable else ""
        if not line:
            tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
            raise RuntimeError(f"catalog worker gave no answer (exit {self.process.poll()}): {tail}")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"in the catalog worker: {answer['error']}")
        return answer.get("result")

    def call(self, method: str, *args: Any) -> Any:
        self.wait_ready()
        with self._lock:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps({"method": method, "args": _encode(list(args))}) + "\n")
            self.process.stdin.flush()
            return self._read(CALL_TIMEOUT)

    def sql(self, statement: str) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.call("sql", statement)]

    def ensure_database(self, name: str) -> None:
        self.call("ensure_database", name)

    def table_columns(self, database: str, table: str) -> tuple[Column, ...] | None:
        found = self.call("table_columns", database, table)
        return None if found is None else tuple(tuple(c) for c in found)

    def list_tables(self, database: str) -> list[str]:
        return list(self.call("list_tables", database))

    def table_schemas(self, database: str) -> dict[str, tuple[Column, ...]]:
        found = self.call("table_schemas", database)
        return {name: tuple(tuple(c) for c in columns) for name, columns in found.items()}

    def table_locations(self, database: str) -> dict[str, str]:
        return dict(self.call("table_locations", database))

    def create_table(self, spec: TableSpec) -> None:
        self.call("create_table", spec)

    def ensure_table(self, spec: TableSpec) -> tuple[Column, ...]:
        return tuple(tuple(c) for c in self.call("ensure_table", spec))  # the worker's, as the sync calls it

    def add_columns(self, database: str, table: str, columns: Sequence[Column]) -> None:
        self.call("add_columns", database, table, list(columns))

    def set_column_type(self, database: str, table: str, column: str, kind: str) -> None:
        self.call("set_column_type", database, table, column, kind)

    def add_partitions(self, spec: TableSpec, partitions: Sequence[tuple[str, ...]]) -> None:
        self.call("add_partitions", spec, list(partitions))

    def drop_partitions(self, spec: TableSpec, partitions: Sequence[tuple[str, ...]]) -> None:
        self.call("drop_partitions", spec, list(partitions))

    def set_partition_location(self, database, table, partition_keys, values, location) -> bool:
        return bool(self.call("set_partition_location", database, table, partition_keys, values, location))

    def partitions(self, database: str, table: str) -> list[tuple[str, ...]]:
        return [tuple(p) for p in self.call("partitions", database, table)]

    def drop_table(self, database: str, table: str) -> None:
        self.call("drop_table", database, table)

    def drop_database(self, database: str) -> None:
        self.call("drop_database", database)

    def replace_views(self, database: str, views: Sequence[Any]) -> list[str]:
        raise NotImplementedError("the contract tests drive views in the worker's own process")

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._out.close()


def main(config: str) -> None:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed (Spark, py4j) goes to the log
    from eventlake.catalog import load_catalog
    from eventlake.config import load_settings
    from eventlake.jvm.session import spark_session

    settings = load_settings(config, environ={})
    spark = spark_session(settings, "eventlake-catalog-worker")
    catalog = load_catalog(settings, spark)
    spark.sql("SHOW DATABASES").collect()  # open the metastore before saying ready
    protocol.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            args = [_decode(arg) for arg in request["args"]]
            if request["method"] == "sql":
                result: Any = [list(row) for row in spark.sql(args[0]).collect()]
            else:
                result = getattr(catalog, request["method"])(*args)
            protocol.write(json.dumps({"result": _encode(result)}, default=str) + "\n")
        except Exception as exc:  # reported to the test, which raises it
            protocol.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
