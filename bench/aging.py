"""Aging benchmark: a warm micro-batch on a lake holding D days of `eventlake up`'s state (issue 25, item 1).

For each store (a local lake; a lake on S3, a moto server in server mode with Glue on the same
server), the script builds a project, syncs a base batch on one kept Spark session and catalog (as
`up`'s engine does), then lays into it the durable state `up` leaves after D days at a steady R
messages/s on default settings (5 s seals, 30 s syncs, hourly compaction), written directly with the
layout functions of ``eventlake.layout``:

- the raw archive: 17,280 files per closed day (one collector), and today's folder holding
  ``--today-hours`` of files (8,640 by default); tiny gzip files of a few messages (only their
  listing matters: a sync never reads a synced file);
- the ledger in the checkpoint format: the checkpoint (``closed_through``, the open days' names), a
  day file per closed day, ``--run-entries`` run entries since the last fold;
- the dedupe index after the hourly merge: one merged file per day (in the folder of its newest
  run) and today's unmerged run folders since the last compaction, ``R`` x 86,400 ids a day times
  ``--index-scale`` (days outside the dedupe window, whose files a sync never reads, hold a few ids);
- report files (one per run under ``segment-data/reports/day=...``) and the reports' index;
- table files after compaction (one ``part-compact-*`` file and its marker per table and hour).

Then it measures warm micro-batches of ``--batch`` new messages (one archive file in today's
folder, synced by ``eventlake.sync.run_sync``): a warm-up batch, not counted, then ``--runs``
batches: the median wall time, the ledger/listing step's time (``selection.NewFiles.files``) and the
storage requests by kind. On S3 every request moto served is counted from its request log (the
driver's and Spark's Python workers' alike); on the local lake the driver's calls of the storage
(``LocalStorage`` methods; Spark's workers read archive files by path and are not counted).

D grows in one project (the days are added to the history laid before); R changes the dedupe index
(laid anew for each R) and the size of archive files, which no step of a micro-batch reads.

With ``--old-format`` (local store), a second source gets one day of state in the ledger format
before checkpoints (one ledger file per run, no checkpoint): its first sync is the one-time upgrade.

    .venv/bin/python bench/aging.py                               # both stores, D = 0 1 7 30, R = 30 2000
    .venv/bin/python bench/aging.py --stores local --days 0 1 --rates 30
    .venv/bin/python bench/aging.py --stores s3 --s3-density 0.05
"""

from __future__ import annotations

import argparse
import collections
import gzip
import io
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from s3_sync import AWS_ENV, BUCKET, Moto, with_settings  # noqa: E402

from sync import EVENTLAKE, _message  # noqa: E402

DAY_MS = 86_400_000
SEAL_SECONDS = 5
SYNC_SECONDS = 30
FILES_PER_DAY = 86_400 // SEAL_SECONDS  # 17,280 archive files a day per collector
RUNS_PER_DAY = 86_400 // SYNC_SECONDS  # 2,880 syncs a day
WINDOW_DAYS = 7  # the default dedupe window
PREFIX = "lake"
QUIET = lambda line: None  # noqa: E731
KINDS = ("LIST", "GET", "PUT", "DELETE", "HEAD", "Glue")
TINY = gzip.compress(b"".join(b'{"type":"track","messageId":"m%d","event":"x"}\n' % i for i in range(3)))


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# -- counting requests ------------------------------------------------------------------------------


class MotoCounter:
    """Requests moto served, by kind, from its request log (read incrementally)."""

    LINE = re.compile(r'"(?:\x1b\[[0-9;]*m)*(\w+) (\S+) HTTP')

    def __init__(self, moto: Moto) -> None:
        self.path, self.offset, self.total = moto.log, 0, collections.Counter()

    @staticmethod
    def kind(method: str, path: str) -> str:
        if method == "POST" and path.split("?", 1)[0] == "/":
            return "Glue"
        if method == "POST" and "delete" in path.split("?", 1)[-1]:
            return "DELETE"  # DeleteObjects
        if method == "GET" and ("list-type=" in path or "?prefix=" in path or "&prefix=" in path):
            return "LIST"
        return {"GET": "GET", "PUT": "PUT", "DELETE": "DELETE", "HEAD": "HEAD"}.get(method, method)

    def snapshot(self) -> collections.Counter:
        time.sleep(0.3)  # moto writes its log line after the response
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].decode(errors="replace").splitlines():
            found = self.LINE.search(line)
            if found:
                self.total[self.kind(found.group(1), found.group(2))] += 1
        return collections.Counter(self.total)


class LocalCounter:
    """Calls of the local storage in this process, by kind (the driver's requests)."""

    KIND = {"list": "LIST", "read": "GET", "read_lines": "GET", "write": "PUT", "write_new": "PUT",
            "open_write": "PUT", "publish": "PUT", "delete": "DELETE", "delete_tree": "DELETE",
            "exists": "HEAD"}  # fmt: skip

    def __init__(self) -> None:
        from eventlake.storage.local import LocalStorage

        self.total: collections.Counter = collections.Counter()
        for name, kind in self.KIND.items():
            original = getattr(LocalStorage, name)

            def counted(*args: Any, _original: Any = original, _kind: str = kind, **kwargs: Any) -> Any:
                self.total[_kind] += 1
                return _original(*args, **kwargs)

            setattr(LocalStorage, name, counted)

    def snapshot(self) -> collections.Counter:
        return collections.Counter(self.total)


def delta(after: collections.Counter, before: collections.Counter) -> dict[str, int]:
    return {k: after[k] - before[k] for k in KINDS}


# -- laying state fast --------------------------------------------------------------------------------


class Layer:
    """Writes many small files under the lake, by key relative to its root: files on a local disk,
    objects on S3 (puts from a few threads)."""

    def __init__(self, lake: Any, s3: Any = None) -> None:
        self.lake, self.s3, self.count, self.seconds = lake, s3, 0, 0.0
        self.made: set[Path] = set()

    def rel(self, location: Any) -> str:
        from eventlake import layout

        return layout.lake_relative(self.lake, location)

    def put(self, items: list[tuple[Any, bytes]]) -> None:
        started = time.monotonic()
        if self.s3 is None:
            for location, data in items:
                path = Path(str(location))
                if path.parent not in self.made:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    self.made.add(path.parent)
                path.write_bytes(data)
        else:
            keys = [(f"{PREFIX}/{self.rel(location)}", data) for location, data in items]
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda kd: self.s3.put_object(Bucket=BUCKET, Key=kd[0], Body=kd[1]), keys))
        self.count += len(items)
        self.seconds += time.monotonic() - started

    def delete(self, locations: list[Any]) -> None:
        if self.s3 is None:
            for location in locations:
                Path(str(location)).unlink(missing_ok=True)
        else:
            keys = [f"{PREFIX}/{self.rel(location)}" for location in locations]
            for i in range(0, len(keys), 1000):
                chunk = [{"Key": k} for k in keys[i : i + 1000]]
                self.s3.delete_objects(Bucket=BUCKET, Delete={"Objects": chunk, "Quiet": True})


def run_id_at(ms: int, salt: int = 0) -> str:
    start = datetime.fromtimestamp(ms / 1000, timezone.utc)
    return start.strftime("%Y%m%dT%H%M%S") + f"{start.microsecond // 1000:03d}Z-{salt % 65536:04x}"


def index_file(rng: np.random.Generator, n: int, start_ms: int, end_ms: int) -> bytes:
    """A dedupe index key file (sync/index/index_keys.py) of ``n`` random ids received in [start, end):
    random 128-bit keys stand for the BLAKE2b hashes of random message ids."""
    from eventlake.sync.index.index_keys import RECORD, write_keys

    records = np.empty(n, RECORD)
    records["hi"] = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    records["lo"] = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    records["at"] = rng.integers(start_ms * 1000, end_ms * 1000, n)
    sink = io.BytesIO()
    write_keys(sink, records)
    return sink.getvalue()


class History:
    """The state of D days of `up` laid into one project's source, grown day by day."""

    def __init__(self, ctx: Context, slug: str, density: float) -> None:
        self.ctx, self.density = ctx, density
        self.source = ctx.settings.source(slug)
        self.lake = ctx.settings.lake.root
        self.today = ctx.now_ms - ctx.now_ms % DAY_MS
        self.closed: list[int] = []  # days laid before today
        self.names: dict[int, list[str]] = {}  # day -> archive file names laid
        self.index_files: list[Any] = []
        self.tables = self._sample_tables()
        self.report = self._sample_report()

    def _sample_tables(self) -> dict[str, bytes]:
        from eventlake import layout

        storage, found = self.ctx.storage, {}
        for info in storage.list(layout.source_data_dir(self.lake, self.source.dir_name), "*/*/*/*.parquet"):
            table = info.path.parent.parent.parent.name
            if table not in found:
                found[table] = storage.read(info.path)
        return found

    def _sample_report(self) -> bytes:
        """The base sync's report as a steady-state run writes it: its tables existed before, so no
        table is new and no column is added (the base, a first sync, lists every column as new:
        four times the bytes of a later run's report)."""
        from eventlake import partitions

        for path in partitions.every_report_file(self.ctx.storage, self.lake):
            rows = [orjson.loads(line) for line in self.ctx.storage.read(path).splitlines() if line]
            for row in rows:
                row.update(new_columns=[], is_new=False if row.get("type") == "event" else row.get("is_new"))
            return b"".join(orjson.dumps(row) + b"\n" for row in rows)
        return b"{}\n"

    def file_names(self, day: int, count: int, every: int = 1) -> list[str]:
        from eventlake import layout, state_layout

        token = f"{day // DAY_MS % 65536:08x}"
        return [
            state_layout.spool_segment_name(day, day + i * SEAL_SECONDS * 1000, token, i)
            + layout.ARCHIVE_SUFFIX
            for i in range(0, count, every)
        ]

    def lay_today(self, hours: float) -> None:
        from eventlake import state_layout

        names = self.file_names(self.today, int(hours * 3600 / SEAL_SECONDS))
        self.names[self.today] = names
        self._archive(self.today, names)
        self._reports(self.today, int(hours * 3600 / SYNC_SECONDS), 1)
        self.ctx.storage.write(
            state_layout.reports_index_file(self.lake), orjson.dumps({"first_day": _day(self.today)})
        )

    def lay_closed(self, day: int) -> None:
        from eventlake import layout, partitions, state_layout

        every = max(1, round(1 / self.density))
        names = self.file_names(day, FILES_PER_DAY, every)
        self.names[day] = names
        self._archive(day, names)
        self.ctx.layer.put(
            [(state_layout.closed_day_file(self.lake, self.source.id, day), orjson.dumps(sorted(names)))]
        )
        self._reports(day, RUNS_PER_DAY, every)
        items = []
        for hour in range(0, 24, max(1, min(24, every))):
            for table, data in self.tables.items():
                cid = f"compact-{run_id_at(day + hour * 3_600_000 + 3_700_000, hour)}"
                folder = layout.source_data_dir(self.lake, self.source.dir_name) / table
                folder = folder / f"day={_day(day)}" / f"hr={hour:02d}"
                name = layout.part_file_name(cid, 0)
                items.append((folder / name, data))
                marker = partitions.marker_document(cid, [name], [layout.part_file_name(run_id_at(day), 0)])
                items.append((folder / layout.compaction_marker_name(cid), marker))
        self.ctx.layer.put(items)
        self.closed.append(day)
        first = _day(min(self.closed))
        self.ctx.storage.write(state_layout.reports_index_file(self.lake), orjson.dumps({"first_day": first}))

    def _archive(self, day: int, names: list[str]) -> None:
        from eventlake import layout

        folder = layout.archive_day_dir(self.lake, self.source.id, day)
        self.ctx.layer.put([(folder / name, TINY) for name in names])

    def _reports(self, day: int, runs: int, every: int) -> None:
        from eventlake import layout

        items = [
            (layout.report_file(self.lake, _day(day), self.source.id, run), self.report)
            for i in range(0, runs, every)
            for run in [run_id_at(day + i * SYNC_SECONDS * 1000 + 20, i)]
        ]  # fmt: skip
        self.ctx.layer.put(items)

    def reset_ledger(self, run_entries: int) -> dict[str, int]:
        """The ledger as `up` leaves it: the checkpoint over every closable day, the open days' names
        (today's, and the real batches synced so far) and ``run_entries`` entries since the last fold."""
        from eventlake import layout, state_layout
        from eventlake.archive.days import REOPEN_MARGIN_MS
        from eventlake.sync.protocol.ledger import FORMAT, Ledger

        storage, ledger = self.ctx.storage, Ledger(self.ctx.storage, self.lake, self.source.id)
        view = ledger.read()
        through = self.today - DAY_MS
        while through + DAY_MS + REOPEN_MARGIN_MS > self.ctx.now_ms:
            through -= DAY_MS
        today = self.names[self.today]
        per_run = SYNC_SECONDS // SEAL_SECONDS
        in_runs = today[len(today) - run_entries * per_run :] if run_entries else []
        open_days: dict[int, set[str]] = {d: set(n) for d, n in view.synced.items() if d > through}
        for day in [*self.closed, self.today]:
            if day > through:
                open_days.setdefault(day, set()).update(self.names[day])
        open_days[self.today] = open_days.get(self.today, set()) - set(in_runs)
        read_delete = [p for p in view.runs]
        for path in read_delete:
            storage.delete(path)
        document = {"format": FORMAT, "closed_through": through,
                    "open": {str(d): sorted(n) for d, n in sorted(open_days.items()) if n}}  # fmt: skip
        storage.write(state_layout.ledger_checkpoint_file(self.lake, self.source.id), orjson.dumps(document))
        root = layout.lake_relative(self.lake, layout.archive_source_dir(self.lake, self.source.id))
        entries = []
        for i in range(run_entries):
            files = [f"{root}/{self.today}/{name}" for name in in_runs[i * per_run : (i + 1) * per_run]]
            run = run_id_at(self.today + 12 * 3_600_000 + i * SYNC_SECONDS * 1000, i)
            entries.append((state_layout.ledger_file(self.lake, self.source.id, run),
                            orjson.dumps({"run_id": run, "files": sorted(files)})))  # fmt: skip
        self.ctx.layer.put(entries)
        return {"closed_through": through, "open_names": sum(len(n) for n in open_days.values())}

    def lay_index(self, rate: int, scale: float, hours: float) -> int:
        """The dedupe index after the hourly merge; returns the ids laid in the dedupe window."""
        from eventlake import layout, state_layout
        from eventlake.sync.index.index_merge import merge_index

        if self.index_files:
            self.ctx.layer.delete(self.index_files)
            self.index_files = []
        index = state_layout.dedupe_index_dir(self.lake, self.source.id)
        merge_index(self.ctx.storage, index)  # the bench's own runs so far, as `up`'s hourly compaction
        rng = np.random.default_rng(rate)
        per_day = int(rate * 86_400 * scale)
        floor = self.ctx.now_ms - (WINDOW_DAYS + 2) * DAY_MS
        in_window, items = 0, []
        merged_until = self.today + int((hours - 0.5) * 3_600_000)  # the last hourly compaction
        for day in [*self.closed, self.today]:
            end = day + DAY_MS if day != self.today else merged_until
            run = run_id_at(end - SYNC_SECONDS * 1000, day // DAY_MS)
            rows = per_day * (end - day) // DAY_MS if end >= floor else 100
            in_window += rows if end >= floor else 0
            path = index / layout.run_folder(run) / layout.index_file_name(run, 0, "merged-")
            items.append((path, index_file(rng, max(rows, 1), day, end)))
        for i in range(int(1_800 / SYNC_SECONDS)):  # today's runs since the last compaction
            started = merged_until + i * SYNC_SECONDS * 1000
            run = run_id_at(started + 20, i)
            rows = int(rate * SYNC_SECONDS * scale)
            in_window += rows
            path = index / layout.run_folder(run) / layout.index_file_name(run, 0)
            items.append((path, index_file(rng, max(rows, 1), started - SYNC_SECONDS * 1000, started)))
        self.ctx.layer.put(items)
        self.index_files = [location for location, _ in items]
        return in_window


def _day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d")


class Laying:
    """What :class:`History` needs of a :class:`Context` (settings, storage, layer, clock), without
    the Spark session: for laying state into a project synced by another process (bench/freshness.py)."""

    def __init__(self, config: Path) -> None:
        from eventlake.config import load_settings

        self.settings = load_settings(config, environ={})
        self.storage = self.settings.lake.storage()
        self.layer = Layer(self.settings.lake.root)
        self.now_ms = int(time.time() * 1000)


def lay_aged(
    config: Path, slug: str, days: int, rate: int, scale: float, run_entries: int = 12
) -> dict[str, Any]:
    """Lays ``days`` closed days of `up`'s state at ``rate`` messages/s into a synced local project,
    and today's folder up to now (at least half an hour), as :func:`child` does for one D and R;
    returns what was laid."""
    ctx = Laying(config)
    history = History(ctx, slug, 1.0)  # type: ignore[arg-type]
    hours = max(0.5, (ctx.now_ms - history.today) / 3_600_000)
    history.lay_today(hours)
    for k in range(1, days + 1):
        history.lay_closed(history.today - k * DAY_MS)
    ids = history.lay_index(rate, scale, hours)
    ledger = history.reset_ledger(run_entries)
    started = time.monotonic()
    console_summaries(ctx.settings)
    return {"files": ctx.layer.count, "archive_files": sum(len(n) for n in history.names.values()),
            "index_ids": ids, "today_hours": hours, "tables": sorted(history.tables), **ledger,
            "console_summaries_s": round(time.monotonic() - started, 1)}  # fmt: skip


def console_summaries(settings: Any) -> None:
    """The web console's summaries of the closed days, made by the console's own reading of the
    reports (``LakeWatch``), as a console that ran through those days leaves them in the state folder
    (it reads each day's reports once, when the day is no longer recent)."""
    from eventlake.console.lake import LakeWatch

    LakeWatch(settings, collector_url=None).refresh()


# -- one store: project, engine, micro-batches --------------------------------------------------------


class Context:
    def __init__(self, args: argparse.Namespace, store: str, work: Path) -> None:
        self.args, self.store, self.work = args, store, work
        self.now_ms = int(time.time() * 1000)
        self.moto: Moto | None = None
        self.s3: Any = None
        self.seq = 0

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("EVENTLAKE", "AWS_"))}
        env.update(AWS_ENV)
        os.environ.update(AWS_ENV)
        project = self.work / "project"
        subprocess.run([EVENTLAKE, "init", str(project)], check=True, env=env, stdout=subprocess.DEVNULL)
        for slug in ("bench", "old"):
            subprocess.run([EVENTLAKE, "sources", "add", slug, "--write-key", f"wk_{slug}"], cwd=project,
                           check=True, env=env, stdout=subprocess.DEVNULL)  # fmt: skip
        config = project / "eventlake.toml"
        if self.store == "s3":
            import boto3

            self.moto = Moto(self.work / "moto.log").start()
            self.s3 = boto3.client("s3", endpoint_url=self.moto.endpoint)
            self.s3.create_bucket(Bucket=BUCKET)
            text = with_settings(config.read_text(), root=f"s3://{BUCKET}/{PREFIX}",
                                 endpoint=self.moto.endpoint, glue=True)  # fmt: skip
            config.write_text(text)
        from eventlake.catalog import load_catalog
        from eventlake.config import load_settings
        from eventlake.jvm.session import spark_session

        os.chdir(project)
        self.settings = load_settings(config, environ={})
        self.storage = self.settings.lake.storage()
        self.layer = Layer(self.settings.lake.root, self.s3)
        self.counter = MotoCounter(self.moto) if self.moto else LocalCounter()
        started = time.monotonic()
        self.spark = spark_session(self.settings, "eventlake-bench-aging", QUIET)
        self.catalog = load_catalog(self.settings, self.spark)
        log(f"[{self.store}] session and catalog in {time.monotonic() - started:.1f} s")
        self._instrument()

    def _instrument(self) -> None:
        """Times the listing step: the sync's ``NewFiles.files`` (ledger, open days, checkpoint)."""
        from eventlake.sync.pipeline.selection import NewFiles

        original, ctx = NewFiles.files, self
        ctx.step: dict[str, Any] = {}

        def timed(selection: Any, run: Any) -> Any:
            before = ctx.counter.snapshot()
            started = time.monotonic()
            found = original(selection, run)
            ctx.step = {
                "seconds": time.monotonic() - started,
                "requests": delta(ctx.counter.snapshot(), before),
            }
            return found

        NewFiles.files = timed  # type: ignore[method-assign]

    def stop(self) -> None:
        spark = getattr(self, "spark", None)
        if spark is not None:
            spark.stop()
        if self.moto is not None:
            try:
                self.moto.stop()
            except subprocess.TimeoutExpired:  # a busy moto: end it
                assert self.moto.process is not None
                self.moto.process.kill()
                self.moto.process.wait(20)

    def add_batch(self, slug: str, messages: int) -> None:
        """One archive file of ``messages`` new messages received in the last minutes, in today's folder."""
        from eventlake import layout, state_layout

        self.seq += 1
        source = self.settings.source(slug)
        now = datetime.now(timezone.utc)
        rng = random.Random(9_000 + self.seq)
        received0 = now - timedelta(seconds=90)
        lines = [orjson.dumps(_message(rng, i, received0 + timedelta(milliseconds=i), source.id))
                 for i in range(messages)]  # fmt: skip
        now_ms = int(now.timestamp() * 1000)
        day = now_ms - now_ms % DAY_MS
        name = state_layout.spool_segment_name(day, now_ms, "benchbat", self.seq)
        path = layout.archive_file(self.settings.lake.root, source.id, day, name)
        self.storage.write(path, gzip.compress(b"".join(line + b"\n" for line in lines), compresslevel=1))

    def sync(self, slug: str) -> dict[str, Any]:
        from eventlake.sync import run_sync

        before = self.counter.snapshot()
        started = time.monotonic()
        lines: list[tuple[float, str]] = []
        record = lambda line: lines.append((time.monotonic() - started, line))  # noqa: E731
        [result] = run_sync(self.settings, [slug], spark=self.spark, catalog=self.catalog, say=record)
        wall = time.monotonic() - started
        if result.status == "Nothing to do" or result.input_messages <= 0:
            raise SystemExit(f"{slug}: the micro-batch synced nothing: {result.status}")
        return {"wall": wall, "requests": delta(self.counter.snapshot(), before), "step": self.step,
                "messages": result.input_messages, "status": result.status, "phases": phases(lines, wall),
                "load": os.getloadavg()[0]}  # fmt: skip

    def batches(self, slug: str) -> list[dict[str, Any]]:
        runs = []
        for i in range(1 + self.args.runs):
            self.add_batch(slug, self.args.batch)
            run = self.sync(slug)
            spent = {k: round(v, 2) for k, v in run["phases"].items()}
            log(f"  {'warm-up' if i == 0 else f'batch {i}'}: {run['wall']:.2f} s, listing step "
                f"{run['step']['seconds']:.3f} s, requests {run['requests']}, phases {spent}, "
                f"load {run['load']:.1f}")  # fmt: skip
            if i:
                runs.append(run)
        return runs


PHASES = ("start + listing", "parse + dedupe", "plan + write", "commit")


def phases(lines: list[tuple[float, str]], wall: float) -> dict[str, float]:
    """A micro-batch's phases from the sync's progress lines: up to "syncing N archive files" (lease,
    pending commits, stage cleanup, the ledger and listing), up to "duplicates dropped", up to the
    first table's line (plan, write), then the commit (publish, catalog, report, ledger)."""
    marks = [
        next((at for at, line in lines if " syncing " in line and "archive files" in line), None),
        next((at for at, line in lines if "duplicates dropped" in line), None),
        next((at for at, line in lines if re.search(r": \d+ rows", line)), None),
    ]
    if None in marks:
        return {}
    edges = [0.0, *marks, wall]
    return {name: edges[i + 1] - edges[i] for i, name in enumerate(PHASES)}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "wall": statistics.median(r["wall"] for r in runs),
        "walls": [round(r["wall"], 3) for r in runs],
        "step": statistics.median(r["step"]["seconds"] for r in runs),
        "requests": {k: statistics.median(r["requests"][k] for r in runs) for k in KINDS},
        "step_requests": {k: statistics.median(r["step"]["requests"][k] for r in runs) for k in KINDS},
        "phases": {p: statistics.median(r["phases"].get(p, 0.0) for r in runs) for p in PHASES},
        "load": statistics.mean(r["load"] for r in runs),
    }


def emit(record: dict[str, Any]) -> None:
    print("RESULT " + json.dumps(record), flush=True)


def child(args: argparse.Namespace) -> None:
    store = args.child
    work = Path(tempfile.mkdtemp(prefix=f"eventlake-aging-{store}-", dir=args.workdir))
    ctx = Context(args, store, work)
    try:
        ctx.start()
        if ctx.s3 is not None:  # the PUT rate of this moto, before deciding nothing: reported
            started = time.monotonic()
            ctx.layer.put([(ctx.settings.lake.root / "probe" / f"{i}.gz", TINY) for i in range(2_000)])
            rate = 2_000 / (time.monotonic() - started)
            full = 30 * (FILES_PER_DAY + RUNS_PER_DAY) / rate
            log(f"[s3] moto PUT rate {rate:,.0f}/s (8 threads): 30 full days would take {full / 60:.0f} min")
            emit({"store": store, "put_rate": rate})
        ctx.add_batch("bench", args.batch)  # the base batch: creates the tables (not counted)
        ctx.sync("bench")
        density = 1.0 if store == "local" else args.s3_density
        history = History(ctx, "bench", density)
        history.lay_today(args.today_hours)
        for days in sorted(args.days):
            started = time.monotonic()
            laid_before = ctx.layer.count
            for k in range(len(history.closed) + 1, days + 1):
                history.lay_closed(history.today - k * DAY_MS)
            log(f"[{store}] D={days}: laid {ctx.layer.count - laid_before:,} files in "
                f"{time.monotonic() - started:.1f} s")  # fmt: skip
            for rate in args.rates:
                scale = args.index_scale.get((store, rate), 1.0)
                started = time.monotonic()
                ids = history.lay_index(rate, scale, args.today_hours)
                ledger = history.reset_ledger(args.run_entries)
                log(f"[{store}] D={days} R={rate}: index {ids:,} ids in the window (scale {scale:g}) laid in "
                    f"{time.monotonic() - started:.1f} s; measuring")  # fmt: skip
                runs = ctx.batches("bench")
                archive = sum(len(n) for n in history.names.values())
                state = len(history.closed) + 1 + args.run_entries + len(history.index_files)
                emit({"store": store, "D": days, "R": rate, "archive_files": archive, "state_files": state,
                      "index_ids": ids, "index_scale": scale,
                      "density": density, **ledger, **summarize(runs)})  # fmt: skip
        if store == "local" and args.old_format:
            old_format(ctx, args)
    finally:
        ctx.stop()


def old_format(ctx: Context, args: argparse.Namespace) -> None:
    """One day of state in the ledger format before checkpoints; its first sync is the upgrade."""
    from eventlake import layout, state_layout
    from eventlake.sync.protocol.ledger import Ledger

    ctx.add_batch("old", args.batch)
    ctx.sync("old")  # creates its tables
    source, lake = ctx.settings.source("old"), ctx.settings.lake.root
    view = Ledger(ctx.storage, lake, source.id).read()
    history = History(ctx, "old", 1.0)
    history.lay_today(args.today_hours)
    yesterday = history.today - DAY_MS
    history.lay_closed(yesterday)
    # back to the old format: no checkpoint, no day files, one entry per run
    ctx.storage.delete(state_layout.ledger_checkpoint_file(lake, source.id))
    ctx.storage.delete(state_layout.closed_day_file(lake, source.id, yesterday))
    for path in view.runs:
        ctx.storage.delete(path)
    root = layout.lake_relative(lake, layout.archive_source_dir(lake, source.id))
    per_run = SYNC_SECONDS // SEAL_SECONDS
    entries, count = [], 0
    for day in (yesterday, history.today):
        names = history.names[day]
        for i in range(0, len(names), per_run):
            run = run_id_at(day + (i // per_run) * SYNC_SECONDS * 1000 + 20, count)
            files = [f"{root}/{day}/{n}" for n in names[i : i + per_run]]
            entries.append(
                (
                    state_layout.ledger_file(lake, source.id, run),
                    orjson.dumps({"run_id": run, "files": files}, option=orjson.OPT_INDENT_2),
                )
            )
            count += 1
    real = sorted(f"{root}/{day}/{name}" for day, names in view.synced.items() for name in names)
    run = run_id_at(ctx.now_ms - 60_000, 0)
    entries.append(
        (state_layout.ledger_file(lake, source.id, run), orjson.dumps({"run_id": run, "files": real}))
    )
    ctx.layer.put(entries)
    history.lay_index(30, 1.0, args.today_hours)
    archive = sum(map(len, history.names.values()))
    log(f"[local] old format: {len(entries):,} run entries, {archive:,} archive files")
    ctx.add_batch("old", args.batch)
    upgrade = ctx.sync("old")
    log(f"  upgrade sync: {upgrade['wall']:.2f} s, listing step {upgrade['step']['seconds']:.3f} s")
    after = ctx.batches("old")
    emit({"store": "local", "old_format": True, "run_entries": len(entries),
          "archive_files": sum(map(len, history.names.values())), "upgrade": upgrade,
          "after": summarize(after)})  # fmt: skip


# -- the parent: runs each store in a process of its own, prints the tables ---------------------------


def parent(args: argparse.Namespace) -> None:
    records = []
    for store in args.stores:
        command = [sys.executable, __file__, "--child", store, *sys.argv[1:]]
        log(f"== {store} ==")
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        try:
            assert process.stdout is not None
            for line in process.stdout:
                if line.startswith("RESULT "):
                    records.append(json.loads(line[7:]))
                else:
                    sys.stdout.write(line)
            if process.wait():
                log(f"{store}: the benchmark's process exited with {process.returncode}")
        finally:
            if process.poll() is None:
                process.terminate()
                process.wait(30)
    report(records, args)


def report(records: list[dict[str, Any]], args: argparse.Namespace) -> None:
    rows = [r for r in records if "D" in r]
    for store in args.stores:
        for rate in args.rates:
            mine = sorted((r for r in rows if r["store"] == store and r["R"] == rate), key=lambda r: r["D"])
            if not mine:
                continue
            base = mine[0]
            print(f"\n{store} lake, R = {rate:,} messages/s ({args.runs} warm micro-batches of "
                  f"{args.batch:,} messages; medians)")  # fmt: skip
            print("| D | archive files | state files | index ids in window | micro-batch | ratio to D="
                  f"{base['D']} | listing step | requests per micro-batch (LIST/GET/PUT/DELETE/HEAD/Glue) "
                  "| of which the listing step |")  # fmt: skip
            print("|---|---|---|---|---|---|---|---|---|")
            for r in mine:
                req = "/".join(f"{r['requests'][k]:g}" for k in KINDS)
                step = "/".join(f"{r['step_requests'][k]:g}" for k in KINDS)
                print(f"| {r['D']} | {r['archive_files']:,} | {r['state_files']:,} | {r['index_ids']:,} "
                      f"(x{r['index_scale']:g}) | {r['wall']:.2f} s | {r['wall'] / base['wall']:.2f} | "
                      f"{r['step']:.3f} s | {req} | {step} |")  # fmt: skip
            print("phases (median s): " + "; ".join(
                f"D={r['D']}: " + ", ".join(f"{p} {r.get('phases', {}).get(p, 0):.2f}" for p in PHASES)
                + f" (load {r.get('load', 0):.1f})" for r in mine))  # fmt: skip
            total = [sum(r["requests"].values()) for r in mine]
            print(f"year model: {total[-1]:g} requests per micro-batch x {RUNS_PER_DAY:,} a day x 365 = "
                  f"{total[-1] * RUNS_PER_DAY * 365:,.0f} requests a year; by D: "
                  + ", ".join(f"D={r['D']}: {t:g}" for r, t in zip(mine, total, strict=True)))  # fmt: skip
    for r in records:
        if "put_rate" in r:
            print(f"\nmoto PUT rate: {r['put_rate']:,.0f} objects/s")
        if r.get("old_format"):
            up, after = r["upgrade"], r["after"]
            print(f"\nold ledger format, 1 day ({r['run_entries']:,} run entries, {r['archive_files']:,} "
                  f"archive files): upgrade sync {up['wall']:.2f} s (listing step "
                  f"{up['step']['seconds']:.3f} s, "
                  f"requests {up['requests']}); then micro-batches {after['wall']:.2f} s (listing step "
                  f"{after['step']:.3f} s); ratio {up['wall'] / after['wall']:.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stores", nargs="+", choices=("local", "s3"), default=["local", "s3"])
    parser.add_argument("--days", nargs="+", type=int, default=[0, 1, 7, 30])
    parser.add_argument("--rates", nargs="+", type=int, default=[30, 2000])
    parser.add_argument("--batch", type=int, default=2_000, help="messages per micro-batch")
    parser.add_argument("--runs", type=int, default=3, help="counted micro-batches (after one warm-up)")
    parser.add_argument("--today-hours", type=float, default=12.0, help="hours of files in today's folder")
    parser.add_argument("--run-entries", type=int, default=12, help="ledger run entries since the last fold")
    parser.add_argument("--s3-density", type=float, default=1 / 16,
                        help="share of a closed day's archive files, reports, hours laid on S3")  # fmt: skip
    parser.add_argument("--index-scale", nargs="*", default=["local:30=1", "local:2000=0.03125",
                        "s3:30=0.25", "s3:2000=0.0078125"],
                        help="share of the dedupe index's ids laid, as STORE:R=SCALE")  # fmt: skip
    parser.add_argument("--no-old-format", dest="old_format", action="store_false")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--child", choices=("local", "s3"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    scales = {}
    for item in args.index_scale:
        store, _, rest = item.partition(":")
        rate, _, scale = rest.partition("=")
        scales[(store, int(rate))] = float(scale)
    args.index_scale = scales
    if args.child:
        child(args)
    else:
        parent(args)


if __name__ == "__main__":
    main()
