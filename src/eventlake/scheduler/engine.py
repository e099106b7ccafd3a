"""The engine of ``eventlake up`` (``eventlake engine``): one long-lived process holding one Spark
session and one catalog connection for its whole life.

- It syncs every source every ``[sync] interval_seconds`` (start to start; back to back when a
  sync takes longer), the sources as ``eventlake.toml`` has them at the start of each interval
  (:class:`eventlake.config.SourcesWatch`: added, removed, disabled and enabled sources without a
  restart; a disabled source is said once and not synced), through
  :func:`eventlake.sync.run_sync`, the entry point of ``eventlake sync``: the same locks, the same
  exactly-once commit, the same reports. It only saves the 5-10 s of JVM and metastore client
  start that a sync process pays. It never waits for a source's lock: a source that another
  process holds (a replay, a ``schema set-type``, a ``users delete``, a sync elsewhere) is skipped
  and said, the others go on, and the next interval tries it again.
- After each sync it counts each source's failures in a row and sends the failure and recovery
  alerts of ``[alerts]`` (:mod:`eventlake.scheduler.alerts`).
- It compacts every ``[compact] interval_seconds`` (after a sync; 0: never) through
  :func:`eventlake.sync.maintenance.compact.compact_sources`, the entry point of ``eventlake compact``.
- With ``[retention]`` set, it deletes old archive days and table partitions after the first sync
  and every ``[retention] interval_seconds`` through
  :func:`eventlake.sync.maintenance.retention.apply_retention`, the entry point of ``eventlake retention``.
- It serves SQL: Spark's Thrift server (HiveServer2) inside the same session, on 127.0.0.1 and
  ``[query] thrift_port`` (or the first free port above it), recorded in
  ``state_dir/sql-service/<pid>.json`` so that ``eventlake sql --engine spark`` sends its queries
  here instead of starting a JVM. Syncs run in the ``sync`` pool of Spark's FAIR scheduler, so a
  query shares the cores with a running sync instead of queueing behind it.

With ``catalog.kind = "glue"`` it only syncs: Spark here cannot read Glue, and the in-memory tables
``eventlake sql`` registers for such a lake are Python data sources that a Thrift server's
per-connection sessions cannot see (see :mod:`eventlake.query.spark_engine`); ``eventlake sql`` starts
its own session there.

SIGTERM or SIGINT while idle: it stops the Thrift server and the session and exits 0. During a
sync (or while starting): the sync is unwound at once (:class:`EngineStopped`; locks are released,
nothing half-written is published) and the next run completes what it had committed to.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from eventlake import progress, state_layout
from eventlake.config import CatalogKind, Settings, SourcesWatch
from eventlake.progress import Say
from eventlake.storage.local import write_atomic

ENGINE_APP_NAME = "eventlake-engine"
SYNC_POOL = "sync"
THRIFT_HOST = "127.0.0.1"
# Spark settings of the engine's session (before [spark.conf], which wins)
ENGINE_CONF = (
    # jobs of different pools share the cores: a query (default pool) runs beside a sync (SYNC_POOL)
    ("spark.scheduler.mode", "FAIR"),
)


class Interval:
    """A task due every ``every`` seconds, whose clock survives the engine's restarts: the moment it
    was last done (or, before it ever was, the first start) is kept in ``path`` as wall-clock time,
    and a new engine counts on from there. Kept in memory only, the schedule began again at every
    start: an ``up`` restarted more often than ``[compact] interval_seconds`` (a crash loop, a
    deploy every half hour) never compacted, and its lake's small files grew without end (found by
    bench/chaos.py: five restarts in an hour, one compaction). Within a process the monotonic
    clock decides; across restarts the wall clock, clamped to ``[0, every]`` (a clock stepped back
    delays the next run by at most one interval, one stepped forward brings it forward)."""

    def __init__(self, path: Path, every: float) -> None:
        self.path, self.every = path, every
        recorded = self._recorded()
        now = time.time()
        if recorded is None:
            self._record(now)  # the first start begins the schedule
            recorded = now
        self.last = time.monotonic() - min(max(now - recorded, 0.0), every)

    def due(self) -> bool:
        return self.every > 0 and time.monotonic() - self.last >= self.every

    def done(self) -> None:
        self.last = time.monotonic()
        self._record(time.time())

    def _recorded(self) -> float | None:
        try:
            return float(self.path.read_text().strip())
        except (OSError, ValueError):  # none yet, or damaged: the schedule begins now
            return None

    def _record(self, at: float) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, f"{at:.3f}\n".encode())
        except OSError:  # a full disk: the schedule is kept in memory until the next record
            pass


class EngineStopped(BaseException):
    """SIGTERM or SIGINT while the engine works: unwinds the sync (not an ``Exception``, so that
    nothing on the way reports it as the sync's failure)."""


@dataclasses.dataclass
class _State:
    busy: bool = True  # starting or syncing: a signal unwinds; idle: a signal ends the wait
    stop: threading.Event = dataclasses.field(default_factory=threading.Event)


def engine_settings(settings: Settings) -> Settings:
    """``settings`` with the engine's Spark settings (:data:`ENGINE_CONF`, and the serving ones of
    :mod:`eventlake.jvm.thriftserver`) under the user's ``[spark.conf]``."""
    from eventlake.jvm.thriftserver import serving_settings

    settings = serving_settings(settings)
    spark = dataclasses.replace(settings.spark, conf=(*ENGINE_CONF, *settings.spark.conf))
    return dataclasses.replace(settings, spark=spark)


def run_engine(settings: Settings, say: Say = progress.say, max_syncs: int | None = None) -> int:
    """Sync every ``[sync] interval_seconds`` and serve SQL until SIGTERM or SIGINT (or ``max_syncs``
    runs); the exit code: 0 when stopped, 1 when the session died (``up`` then starts a new engine).
    Blocking; call it from the main thread."""
    state = _State()
    engine_say: Say = lambda line: say(f"engine: {line}")  # noqa: E731

    def _on_signal(signum: int, frame: object) -> None:
        state.stop.set()
        if state.busy:
            state.busy = False  # once: the unwinding must not be interrupted again
            raise EngineStopped()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    spark = server = None
    watch = SourcesWatch(settings, say=engine_say)  # the sources follow eventlake.toml
    disabled: set[str] = set()  # disabled sources already said
    try:
        spark, catalog, server = _start(engine_settings(settings), engine_say)
        syncs = 0
        # the first compaction one interval after the last one, or after the first start
        compaction = Interval(
            state_layout.compaction_clock_file(settings.lake.state_dir), settings.compact.interval_seconds
        )
        retained = float("-inf")  # retention (when set) after the first sync, then every interval
        while not state.stop.is_set():
            started = time.monotonic()
            watch.check(force=True)
            settings = watch.settings
            if not _sync_once(settings, spark, catalog, say, engine_say, disabled):
                engine_say("the Spark session is gone; exiting (up starts a new engine)")
                return 1
            syncs += 1
            compaction.every = settings.compact.interval_seconds
            if compaction.due() and _compact_once(settings, spark, catalog, say, engine_say):
                compaction.done()  # (a source found busy is tried again after the next sync)
            retention = settings.retention
            if (retention.archive_days or retention.table_days) and (
                time.monotonic() - retained >= retention.interval_seconds
            ):
                _retain_once(settings, spark, catalog, say, engine_say)
                retained = time.monotonic()
            if max_syncs is not None and syncs >= max_syncs:
                break
            state.busy = False
            if state.stop.wait(max(0.0, settings.sync.interval_seconds - (time.monotonic() - started))):
                break
            state.busy = True
        return 0
    except EngineStopped:
        engine_say("stopping (an interrupted sync is completed by the next one)")
        return 0
    finally:
        state.busy = False
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _shutdown(settings, spark, server, engine_say)


def _start(settings: Settings, say: Say) -> tuple[Any, Any, Any]:
    """The session, its catalog and (on a Hive catalog) the Thrift server in it, recorded."""
    from eventlake.catalog import load_catalog
    from eventlake.jvm.session import spark_session
    from eventlake.jvm.thriftserver import start_in_session, write_sql_service

    say(f"starting Spark (pid {os.getpid()}) ...")
    spark = spark_session(settings, ENGINE_APP_NAME, say)
    catalog = load_catalog(settings, spark)
    app_id = spark.sparkContext.applicationId
    if settings.catalog.kind != CatalogKind.HIVE:
        say(f"ready, Spark application {app_id}; no SQL service on a {settings.catalog.kind} catalog")
        return spark, catalog, None
    _quiet_thrift_logs(spark)
    server = start_in_session(spark, THRIFT_HOST, settings.query.thrift_port, say)
    write_sql_service(settings.lake.state_dir, server.host, server.port, os.getpid(), "engine", app_id)
    say(
        f"ready, Spark application {app_id}; SQL at jdbc:hive2://{server.host}:{server.port}/default, "
        f"a sync every {settings.sync.interval_seconds:g} s"
    )
    return spark, catalog, server


def _quiet_thrift_logs(spark: Any) -> None:
    """A failed query is the client's error (it gets the message): not a stack trace in up's log."""
    jvm = spark.sparkContext._jvm
    level = jvm.org.apache.logging.log4j.Level.OFF
    configurator = jvm.org.apache.logging.log4j.core.config.Configurator
    for logger in ("org.apache.spark.sql.hive.thriftserver", "org.apache.hive.service"):
        configurator.setLevel(logger, level)


def _sync_once(
    settings: Settings, spark: Any, catalog: Any, say: Say, engine_say: Say, disabled: set[str] | None = None
) -> bool:
    """One sync of every source, in the session; False when the session is gone. A disabled source
    is said once (``disabled`` holds those said, across intervals), not every interval."""
    from eventlake.scheduler.alerts import failed_results, notify_results
    from eventlake.sync import DISABLED, Status, run_sync

    disabled = set() if disabled is None else disabled
    now_disabled = {source.slug for source in settings.sources if not source.enabled}
    for slug in sorted(now_disabled - disabled):
        engine_say(f"{slug}: {DISABLED} (collected and archived; synced again once enabled)")
    disabled.intersection_update(now_disabled)
    disabled.update(now_disabled)
    if not any(source.enabled for source in settings.sources):
        return True  # nothing to sync (no sources yet, or all disabled): the next interval looks again

    spark.sparkContext.setLocalProperty("spark.scheduler.pool", SYNC_POOL)
    try:  # a source whose lock is held (a replay, a set-type ...) is skipped, not waited for
        results = run_sync(settings, spark=spark, catalog=catalog, wait=False, say=say)
    except Exception as exc:  # e.g. no sources configured; each source's own failure is a result
        engine_say(f"sync failed: {type(exc).__name__}: {exc}")
        notify_results(settings, failed_results(settings, exc), engine_say)  # failure alerts
        return _alive(spark)
    notify_results(settings, results, engine_say)  # failure alerts (see eventlake.scheduler.alerts)
    for result in results:
        if result.status in (Status.NOTHING, Status.DISABLED):
            continue
        if result.status == Status.SKIPPED:
            engine_say(f"{result.source}: {result.status} ({result.error}); retried next interval")
            continue
        engine_say(
            f"{result.source}: {result.status}, {result.rows} rows in {len(result.tables)} tables, "
            f"{result.duplicates_dropped} duplicates dropped, {result.duration_seconds:.1f} s"
            + (f" ({result.error})" if result.error else "")
        )
    return all(r.status != Status.FAILED for r in results) or _alive(spark)


def _compact_once(settings: Settings, spark: Any, catalog: Any, say: Say, engine_say: Say) -> bool:
    """Compact every source's closed partitions (``[compact]``), skipping a source being synced
    elsewhere; a failure is said, and the next interval tries again. False when a source was
    skipped because another process held it (a replay, a user deletion, another machine): the
    engine tries again after its next sync, not an interval later (found by bench/chaos.py: an hour
    of admin commands and a second machine, four tries, four skipped, no compaction)."""
    from eventlake.sync import Status
    from eventlake.sync.maintenance.compact import compact_sources

    try:
        results = compact_sources(settings, catalog=catalog, spark=spark, wait=False, say=say)
    except Exception as exc:
        engine_say(f"compaction failed: {type(exc).__name__}: {exc}")
        return True
    for result in results:
        if result.tables or result.error:
            engine_say(
                f"{result.source}: compaction {result.status}, {result.partitions} partitions"
                + (f" ({result.error})" if result.error else "")
            )
    return all(result.status != Status.SKIPPED for result in results)


def _retain_once(settings: Settings, spark: Any, catalog: Any, say: Say, engine_say: Say) -> None:
    """Apply ``[retention]`` to every source, skipping a source being synced elsewhere; a failure is
    said, and the next interval tries again."""
    from eventlake.sync.maintenance.retention import apply_retention

    try:
        results = apply_retention(settings, catalog=catalog, spark=spark, wait=False, say=say)
    except Exception as exc:
        engine_say(f"retention failed: {type(exc).__name__}: {exc}")
        return
    for result in results:
        if result.expired or result.error:
            archive = sum(1 for e in result.expired if e.kind == "archive")
            engine_say(
                f"{result.source}: retention {result.status}, {archive} archive days and "
                f"{len(result.expired) - archive} table partitions deleted"
                + (f" ({result.error})" if result.error else "")
            )


def _alive(spark: Any) -> bool:
    try:
        return not spark.sparkContext._jsc.sc().isStopped()
    except Exception:  # the JVM is gone
        return False


def _shutdown(settings: Settings, spark: Any, server: Any, say: Say) -> None:
    from eventlake.jvm.thriftserver import remove_sql_service

    remove_sql_service(settings.lake.state_dir, os.getpid())
    if server is not None:
        server.stop()
    if spark is not None:
        try:
            spark.stop()
        except Exception as exc:  # the JVM is gone already
            say(f"stopping Spark: {type(exc).__name__}")
