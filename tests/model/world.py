"""One lake for the model (tests/model/machine.py) to drive: a project on a local folder or an S3
bucket (moto), its tables in Glue (moto), a clock the test sets, and the readers the invariants
use. Every action calls the product's own entry points; only the sync's parse and write passes run
in process (:mod:`.standin`)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gzip
import inspect
import io
import itertools
import os
import secrets
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

import eventlake.archive.days
import eventlake.archive.importer
import eventlake.archive.seal
import eventlake.catalog.glue
import eventlake.query.duckdb_engine
import eventlake.query.engine
import eventlake.storage.lease
import eventlake.sync.maintenance.adopt
import eventlake.sync.maintenance.compact
import eventlake.sync.maintenance.erase
import eventlake.sync.maintenance.replay
import eventlake.sync.maintenance.retention
import eventlake.sync.maintenance.retype
import eventlake.sync.pipeline.job
import eventlake.sync.protocol.commit
import eventlake.sync.protocol.ledger
import eventlake.sync.protocol.rewrite
import eventlake.timestamps
from eventlake import layout, state_layout
from eventlake.catalog import load_catalog
from eventlake.config import RetentionSettings, add_source, load_settings, write_initial_config
from eventlake.spec import enrich
from eventlake.storage import LocalStorage, to_location
from eventlake.storage.lease import Lease
from eventlake.sync.protocol.ledger import Ledger
from eventlake.timestamps import day_start_ms

BUCKET = "eventlake-model"
USERS = ("u1", "u2", "u3")
TABLES = ("track_order_completed", "page")
RETENTION = RetentionSettings(archive_days=0, table_days=20)
_worlds = itertools.count(1)


class Killed(BaseException):
    """The process dying at that instant (not an Exception: nothing in the product handles it)."""


class Clock:
    """The time every eventlake module reads while :meth:`installed`: ``now_utc`` (each module's
    own binding of it too) and ``time.time`` of the modules that read it (archive days, leases).
    :meth:`skewed` runs a block on the clock of a machine that is off by some seconds."""

    def __init__(self, start: datetime) -> None:
        self.now = start
        self.offset = timedelta(0)

    def utc(self) -> datetime:
        return self.now + self.offset

    def time(self) -> float:
        return self.utc().timestamp()

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    @contextlib.contextmanager
    def skewed(self, seconds: float) -> Iterator[None]:
        self.offset = timedelta(seconds=seconds)
        try:
            yield
        finally:
            self.offset = timedelta(0)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        original = eventlake.timestamps.now_utc
        patched = [
            m
            for n, m in list(sys.modules.items())
            if n.startswith("eventlake") and getattr(m, "now_utc", None) is original
        ]
        fake_time = SimpleNamespace(time=self.time, sleep=time.sleep, monotonic=time.monotonic)
        timed = [
            m
            for m in (eventlake.archive.days, eventlake.sync.maintenance.erase)
            if getattr(m, "time", 0) is time
        ]
        for module in patched:
            module.now_utc = self.utc  # type: ignore[attr-defined]
        for module in timed:
            module.time = fake_time  # type: ignore[attr-defined]
        lease_init = Lease.__init__  # a lease's expiries: on its clock argument, this one by default

        def on_this_clock(lease: Lease, *args: Any, **options: Any) -> None:
            lease_init(lease, *args, **{"clock": self.time, **options})

        if "clock" in inspect.signature(lease_init).parameters:
            Lease.__init__ = on_this_clock  # type: ignore[method-assign]
        try:
            yield
        finally:
            Lease.__init__ = lease_init  # type: ignore[method-assign]
            for module in patched:
                module.now_utc = original  # type: ignore[attr-defined]
            for module in timed:
                module.time = time  # type: ignore[attr-defined]


@contextlib.contextmanager
def calls_fail(target: Any, attribute: str, number: int, error: BaseException) -> Iterator[list[int]]:
    """Call ``number`` of ``target.attribute`` (a module's function or a class's method) raises
    ``error`` instead of running (:class:`Killed`: the process dies there); the others run."""
    original = getattr(target, attribute)
    calls: list[int] = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == number:
            raise error
        return original(*args, **kwargs)

    setattr(target, attribute, failing)
    try:
        yield calls
    finally:
        setattr(target, attribute, original)


def quiet(line: str) -> None:
    pass


@dataclasses.dataclass
class World:
    """A project with one source, on a ``kind`` lake ("local" or "s3")."""

    kind: str
    directory: Path
    settings: Any
    slug: str
    endpoint: str

    @classmethod
    def create(cls, base: Path, kind: str, endpoint: str) -> World:
        number = next(_worlds)
        directory = base / f"world-{number}"
        config = write_initial_config(directory)
        text = config.read_text()
        glue = f'kind = "glue"\nregion = "us-east-1"\nendpoint_url = "{endpoint}"'
        text = text.replace('kind = "hive"', glue, 1)
        if kind == "s3":
            root = f"s3://{BUCKET}/m{number}-{uuid.uuid4().hex[:8]}"
            text = text.replace('root = "lake"', f'root = "{root}"\nendpoint_url = "{endpoint}"', 1)
        config.write_text(text)
        slug = f"model{number}{secrets.token_hex(3)}"
        add_source(config, slug, write_key=f"wk_{slug}")
        settings = load_settings(config, environ={})
        settings = dataclasses.replace(settings, retention=RETENTION)
        return cls(kind, directory, settings, slug, endpoint)

    @property
    def source(self) -> Any:
        return self.settings.source(self.slug)

    @property
    def lake(self) -> Any:
        return self.settings.lake.root

    @functools.cached_property
    def storage(self) -> Any:
        return self.settings.lake.storage()

    @functools.cached_property
    def catalog(self) -> Any:
        return load_catalog(self.settings, None)

    @property
    def database(self) -> str:
        return str(self.settings.database_name(self.source))

    # -- what happens to a lake -------------------------------------------------------------------

    def seal(self, lines: list[bytes], received: datetime, clock: Clock, name_seq: int) -> str:
        """A spool segment of ``lines`` (received on the collector's clock at ``received``) sealed
        by the product's sealer; the archive key."""
        from eventlake.archive.seal import Segment, seal_segment

        spool = self.directory / ".eventlake" / "spool" / self.source.id
        spool.mkdir(parents=True, exist_ok=True)
        day = day_start_ms(received)
        name = state_layout.spool_segment_name(day, int(received.timestamp() * 1000), "a1b2c3d4", name_seq)
        path = state_layout.spool_segment_file(spool.parent, self.source.id, name)
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        segment = Segment.from_path(path)
        assert segment is not None
        result = seal_segment(segment, self.storage, self.lake)
        assert result.archive_path is not None
        return str(layout.lake_relative(self.lake, result.archive_path))

    def message(self, message_id: str, user: str, kind: str, received: datetime) -> bytes:
        body: dict[str, Any] = (
            {"type": "track", "event": "Order Completed", "userId": user, "messageId": message_id,
             "properties": {"revenue": 1}}
            if kind == "track"
            else {"type": "page", "userId": user, "messageId": message_id, "name": "Home"}
        )  # fmt: skip
        return orjson.dumps(enrich(body, received_at=received, source_id=self.source.id))

    # -- readers ----------------------------------------------------------------------------------

    def duckdb_rows(self) -> list[tuple[str, str]]:
        """(message_id, user_id) of every row of the source's tables, as eventlake's DuckDB engine
        reads them (through the schema files: the tables it knows, which a commit killed after
        creating a table in the catalog has not written yet)."""
        from eventlake.query import run_query
        from eventlake.query.duckdb_engine import lake_tables

        known = {t.name for t in lake_tables(self.settings) if t.database == self.database}
        tables = [t for t in TABLES if t in known]
        if not tables:
            return []
        sql = " UNION ALL ".join(f"SELECT message_id, user_id FROM {self.database}.{t}" for t in tables)
        result = run_query(self.settings, sql, engine="duckdb")
        return [(r["message_id"], r["user_id"]) for r in result.rows]

    def catalog_rows(self, read: dict[str, tuple[str, ...]] | None = None) -> list[tuple[str, str]]:
        """The same, as a reader that knows only the catalog does (Athena): Glue's partitions, each
        location listed, names starting with ``_`` or ``.`` skipped, every file read as Parquet.
        ``read``: filled with each file read (its location -> its partition's values)."""
        glue = boto3.client("glue", endpoint_url=self.endpoint, region_name="us-east-1")
        found: list[tuple[str, str]] = []
        for table in TABLES:
            try:
                pages = list(
                    glue.get_paginator("get_partitions").paginate(DatabaseName=self.database, TableName=table)
                )
            except glue.exceptions.EntityNotFoundException:
                continue
            for page in pages:
                for partition in page["Partitions"]:
                    for where, data in self._files_at(partition["StorageDescriptor"]["Location"]):
                        if read is not None:
                            read[where] = tuple(partition["Values"])
                        columns = pq.read_table(io.BytesIO(data)).to_pydict()
                        found += zip(
                            columns["message_id"],
                            columns.get("user_id") or [None] * len(columns["message_id"]),
                            strict=True,
                        )
        return found

    def _files_at(self, location: str) -> Iterator[tuple[str, bytes]]:
        if location.startswith("s3://"):
            s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")
            bucket, _, prefix = location.removeprefix("s3://").partition("/")
            prefix = prefix.rstrip("/") + "/"
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    if not _hidden(item["Key"][len(prefix) :]):
                        yield (
                            f"s3://{bucket}/{item['Key']}",
                            s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read(),
                        )
            return
        root = Path(location.removeprefix("file:"))
        for folder, _dirs, files in os.walk(root):
            for name in sorted(files):
                path = Path(folder) / name
                if not _hidden(str(path.relative_to(root))):
                    yield str(path), path.read_bytes()

    def exists(self, where: str) -> bool:
        if where.startswith("s3://"):
            s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")
            bucket, _, key = where.removeprefix("s3://").partition("/")
            return bool(s3.list_objects_v2(Bucket=bucket, Prefix=key).get("KeyCount"))
        return Path(where).exists()

    def ledger_open(self, day: int) -> bool:
        return Ledger(self.storage, self.lake, self.source.id).read().is_open(day)

    def synced_keys(self) -> set[str]:
        return Ledger(self.storage, self.lake, self.source.id).synced_keys()

    def archive_keys(self) -> set[str]:
        from eventlake.archive import list_archive_files

        return {f.key for f in list_archive_files(self.storage, self.lake, self.source.id)}

    def archive_lines(self, key: str) -> list[bytes]:
        data = self.storage.read(to_location(f"{self.lake}/{key}") if self.kind == "s3" else self.lake / key)
        return [line for line in gzip.decompress(data).splitlines() if line.strip()]

    def partition_folders(self) -> list[tuple[str, tuple[str, ...], Any]]:
        """(table, values, base folder) of every partition the catalog has."""
        keys = layout.partition_columns(self.source.date_partition)
        locations = self.catalog.table_locations(self.database)
        found = []
        for table in TABLES:
            if table not in locations:
                continue
            for values in self.catalog.partitions(self.database, table):
                base = to_location(locations[table].rstrip("/"))
                folder = base / layout.partition_subdir(keys, tuple(values))
                found.append((table, tuple(values), folder))
        return sorted(found, key=lambda f: (f[0], f[1]))

    def write_foreign(
        self, folder: Any, table: str, message_id: str, user: str, received: datetime, narrow: bool = False
    ) -> None:
        """A Parquet file as Segment Data Lakes names its own (``part-00000-<uuid>.c000.snappy
        .parquet``) in a partition's folder of ``table``: the migration guide's overlap, or any other
        writer. It has the table's columns (nulls but the id, user and received time), as SDL writes
        its rows; ``narrow``: only those three columns."""
        from eventlake.schema.arrow import arrow_schema

        values = {"message_id": message_id, "user_id": user, "received_at": received}
        if narrow:
            schema = pa.schema(
                [
                    ("message_id", pa.string()),
                    ("user_id", pa.string()),
                    ("received_at", pa.timestamp("us", tz="UTC")),
                ]
            )
        else:
            schema = arrow_schema(self.catalog.table_columns(self.database, table) or ())
        rows = pa.Table.from_pylist([{name: values.get(name) for name in schema.names}], schema=schema)
        sink = io.BytesIO()
        pq.write_table(rows, sink, compression="snappy")
        self.storage.write(folder / f"part-00000-{uuid.uuid4()}.c000.snappy.parquet", sink.getvalue())


def _hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


def day_ms(moment: datetime) -> int:
    return day_start_ms(moment)


def segment_archive(folder: Path, days: list[int], per_file: list[list[bytes]]) -> list[str]:
    """A Segment S3 destination's archive in ``folder``: one file of lines per day; their paths, in
    the order ``eventlake import`` takes them."""
    paths = []
    for day, lines in zip(days, per_file, strict=True):
        path = folder / "segment-logs" / "SegSrc" / str(day) / f"{day + 3_600_000}.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(b"".join(line + b"\n" for line in lines)))
        paths.append(str(path))
    return sorted(paths)


def local_storage() -> LocalStorage:
    return LocalStorage()


UTC = timezone.utc
