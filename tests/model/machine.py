"""The model: what happens to a lake in production, as Hypothesis rules on a clock the test
controls, and the README's promises as invariants checked after every step.

Every rule calls the product (the sealer, ``import``, ``run_sync`` with its ledger, runner and
commit, compaction, retention, ``users delete``, replay, the kill points of a crash); only the
sync's parse and write passes run in process (:mod:`.standin`). The model itself only remembers
what was acknowledged (a message in a sealed archive file or in an imported file, a row a foreign
writer put into a partition), what was erased, and when a sync last ran to its end.
"""

from __future__ import annotations

import contextlib
import itertools
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from eventlake import layout, state_layout
from eventlake.storage.lease import Lease
from eventlake.sync import run_sync
from eventlake.sync.maintenance.adopt import adopt_source
from eventlake.sync.maintenance.compact import compact_sources
from eventlake.sync.maintenance.erase import delete_user
from eventlake.sync.maintenance.replay import ReplayRange, run_replay
from eventlake.sync.maintenance.retention import apply_retention
from eventlake.sync.maintenance.retype import set_column_type
from eventlake.sync.pipeline import job as sync_job
from eventlake.sync.protocol.lock import SyncBusyError
from eventlake.sync.protocol.status import Status
from tests.sync.sdl import TRACK_COLUMNS, track_row, write_partition

from .importing import Import
from .standin import InProcessStager
from .world import RETENTION, USERS, Clock, Killed, World, calls_fail, day_ms, quiet, segment_archive

HOUR = 3600
DAY = 24 * HOUR
START_DAY = datetime(2026, 11, 20, tzinfo=timezone.utc)
# where the clock starts: seconds after midnight (a collector behind then still seals into yesterday:
# issue 34's defect 5 needs such a start, a first sync, a seal), seconds before it, or mid-morning
MORNING = 10 * HOUR
STARTS = (DAY + 3, DAY - 5, MORNING)
ADVANCES = (10, 60, 10 * 60, HOUR, 3 * HOUR, 9 * HOUR, DAY + 2 * HOUR)
SKEWS = (-10, 0, 10)  # the collector's clock against the lake's, seconds
LATE = (0, 0, 3 * HOUR, 26 * HOUR)  # how long before its sealing a segment's messages were received
DONE = (Status.SUCCESS, Status.NOTHING, Status.PARTIAL)

# (module or class, attribute, call) where a sync dies: the commit's steps (as tests/sync/test_sync.py's
# CRASH_POINTS), the ledger's checkpoint, the stage
SYNC_CRASHES: dict[str, tuple[str, str, int]] = {
    "staging": ("eventlake.sync.pipeline.job.SourceSync", "_stage", 1),
    "before applying": ("eventlake.sync.protocol.runner", "apply", 1),
    "before the report": ("eventlake.sync.protocol.commit", "write_report_rows", 1),
    "registering partitions": ("eventlake.catalog.glue.GlueCatalog", "add_partitions", 1),
    "before the ledger": ("eventlake.sync.protocol.state.SyncState", "record_synced", 1),
    "before dropping the manifest": ("eventlake.sync.protocol.state.SyncState", "drop_pending", 1),
    "ledger checkpoint": ("eventlake.sync.protocol.ledger.Ledger", "checkpoint", 1),
    "after the checkpoint's write": ("eventlake.sync.protocol.ledger", "read_many", 3),
}
COMPACT_CRASHES: dict[str, tuple[str, str, int]] = {
    "before the manifest": ("eventlake.sync.protocol.state.SyncState", "write_pending", 1),
    "before applying": ("eventlake.sync.protocol.runner", "apply", 1),
    "before dropping replaced files": ("eventlake.sync.protocol.rewrite", "drop_replaced", 1),
    "before dropping the manifest": ("eventlake.sync.protocol.state.SyncState", "drop_pending", 1),
}
SDL_FOLDER = "order_completed"  # Segment Data Lakes' folder of the track event "Order Completed"
STORAGE_CALLS = ("write", "publish", "delete", "list", "read")


def target(path: str) -> Any:
    import importlib

    try:
        return importlib.import_module(path)
    except ImportError:
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)


@dataclass
class Message:
    message_id: str
    user: str
    received: datetime
    # a row another writer put into a partition: eventlake's readers read it at once, catalog readers
    # once a compaction took it into a version (docs/sync.md, "versioned + foreign files")
    foreign: bool = False
    in_catalog: bool = True


class LakeModel(RuleBasedStateMachine):
    """Configured by :func:`machine` (the lake's kind, where worlds go, moto's endpoint)."""

    kind: ClassVar[str] = "local"
    base: ClassVar[Path] = Path(tempfile.gettempdir())
    endpoint: ClassVar[str] = ""
    # known defects whose triggers the run steers clear of, until their fixes are merged: "1" (files
    # eventlake did not write in a partition: foreign files, SDL still writing after an adoption,
    # adopt reruns), "2" (syncs during a long import), "5" (a first sync just after midnight),
    # "adopt-after-delete" (an adopt rerun once users delete rewrote SDL's files)
    avoid: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        super().__init__()
        self.world = World.create(self.base, self.kind, self.endpoint)
        self.clock = Clock(START_DAY)
        self.installed = self.clock.installed()
        self.installed.__enter__()
        # nothing waits for a lease: one left behind (its release failed) expires on the model's
        # clock, which does not move while a job waits; the job is skipped instead ("busy")
        self.acquire = Lease.acquire
        Lease.acquire = lambda lease, wait, *args, **kwargs: self.acquire(lease, False, *args, **kwargs)  # type: ignore[method-assign]
        self.stager = InProcessStager()
        self.numbers = itertools.count(1)
        self.acked: dict[str, list[Message]] = {}  # archive key -> its messages
        self.foreign: list[Message] = []
        self.due: set[str] = set()  # archive keys acknowledged before the last sync that ran to its end
        self.erased: set[str] = set()  # users whose deletion ran to its end: nowhere in the lake
        self.suppressed: set[str] = set()  # users whose deletion was asked for (perhaps not done)
        self.importing: Import | None = None
        self.collector_skew = 0  # the collector's clock against the lake's (set by start)
        self.import_days: list[int] = []
        self.steps: list[str] = []
        self.sdl = False  # the lake began as Segment Data Lakes': adopted before eventlake syncs it
        self.adopted = False
        self.sdl_pending: list[Message] = []  # written by SDL, data once an adoption found them
        self.read_files: dict[str, tuple[datetime, tuple[str, ...]]] = {}  # catalog reader: when, partition

    def say(self, step: str) -> None:
        self.steps.append(f"{self.clock.now:%Y-%m-%d %H:%M:%S} {step}")

    def teardown(self) -> None:
        try:
            if self.importing is not None and not self.importing.finished:
                self.importing.abandon()
        finally:
            Lease.acquire = self.acquire  # type: ignore[method-assign]
            self.installed.__exit__(None, None, None)

    @initialize(
        start=st.sampled_from(STARTS), sdl=st.booleans(), skew=st.sampled_from(SKEWS),
        synced=st.sampled_from((True, False)),
    )  # fmt: skip
    def start(self, start: int, sdl: bool = False, skew: int = 0, synced: bool = False) -> None:
        """The lake's clock starts at ``start`` seconds after START_DAY; the collector's clock is
        ``skew`` seconds off it for the run (a machine's clock drifts one way, not at each seal);
        ``synced``: the new source's first sync runs at once (``eventlake up`` as it is added)."""
        if "5" in self.avoid:
            start = MORNING
        self.clock.now = START_DAY + timedelta(seconds=start)
        self.collector_skew = skew
        self.say(f"start{' on an SDL lake' if sdl else ''}, the collector's clock {skew:+d} s")
        if sdl:  # SDL synced two hours before the move: its files in the source's data folder
            self.sdl = True
            for hours in (26, 2):
                self.sdl_write(self.clock.now - timedelta(hours=hours))
        if synced and self.ready():
            self.sync_once()

    def ready(self) -> bool:
        return not self.sdl or self.adopted

    def sdl_write(self, received: datetime) -> None:
        hour = (f"{received:%Y-%m-%d}", f"{received:%H}")
        registered = any(values == hour for _, values, _ in self.world.partition_folders())
        message = Message(
            f"s{next(self.numbers)}", self.users()[0], received, foreign=True, in_catalog=not registered
        )
        row = {**track_row(message.message_id, received, "Order Completed"), "user_id": message.user}
        write_partition(
            self.world.storage, self.world.lake, self.world.source.id, SDL_FOLDER, TRACK_COLUMNS, [row]
        )
        self.sdl_pending.append(message)

    @precondition(lambda self: self.sdl and not ("1" in self.avoid and self.adopted))
    @rule(hours=st.sampled_from((1, 3)))
    def sdl_syncs(self, hours: int) -> None:
        """Segment Data Lakes still syncs (the migration guide's overlap): a file of an hour that
        ended ``hours`` ago, in its partition folder (new, or one eventlake wrote to too)."""
        self.sdl_write(self.clock.now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=hours))
        self.say(f"SDL writes an hour {hours} h ago")

    @precondition(
        lambda self: (
            self.sdl
            and not ("1" in self.avoid and self.adopted)
            and not ("adopt-after-delete" in self.avoid and self.adopted and self.erased)
        )
    )
    @rule()
    def adopt(self) -> None:
        """``eventlake adopt``: SDL's tables and partitions become the source's (rerun: what is new)."""
        try:
            adopt_source(self.world.settings, self.world.slug, catalog=self.world.catalog, wait=False)
        except SyncBusyError:
            self.say("adopt: busy")
            return
        self.say("adopt")
        self.adopted = True
        self.foreign += self.sdl_pending
        self.sdl_pending = []

    # -- the collector ----------------------------------------------------------------------------

    def users(self) -> list[str]:
        """The users whose messages the collector takes (not those a deletion was asked for)."""
        return [u for u in USERS if u not in self.suppressed]

    @precondition(lambda self: bool(self.users()))
    @rule(
        count=st.integers(1, 3), late=st.sampled_from(LATE), skew=st.sampled_from((None, *SKEWS)),
        kind=st.sampled_from(("track", "page")), data=st.data(),
    )  # fmt: skip
    def seal(self, count: int, late: int, skew: int | None, kind: str, data: st.DataObject) -> None:
        """The collector seals a segment: on time, or late (it was down: its messages were received
        ``late`` seconds ago, perhaps in a day that ended), on a clock ``skew`` seconds off (None:
        the run's collector, :meth:`start`; another number: a second collector)."""
        if skew is None:
            skew = self.collector_skew
        with self.clock.skewed(skew):
            received = self.clock.utc() - timedelta(seconds=late)
            messages = [
                Message(f"m{next(self.numbers)}", data.draw(st.sampled_from(self.users())), received)
                for _ in range(count)
            ]
            lines = [self.world.message(m.message_id, m.user, kind, m.received) for m in messages]
            key = self.world.seal(lines, received, self.clock, next(self.numbers))
        self.acked[key] = messages
        self.say(f"seal {key.rsplit('/', 2)[-2:]} {count} {kind} late={late} skew={skew}")

    # -- syncs --------------------------------------------------------------------------------------

    def sync(self, what: str = "sync") -> Any:
        before = set(self.acked)
        world = self.world
        [result] = run_sync(world.settings, [world.slug], catalog=world.catalog, say=quiet, wait=False,
                            stager=self.stager)  # fmt: skip
        self.say(f"{what}: {result.status} {result.error}")
        if result.status in DONE:
            self.due |= before
        return result

    @precondition(lambda self: self.ready())
    @rule()
    def sync_once(self) -> None:
        result = self.sync()
        assert result.status in (*DONE, Status.SKIPPED), (
            f"a sync failed with nothing injected: {result.error}"
        )

    @precondition(lambda self: self.ready())
    @rule(point=st.sampled_from(sorted(SYNC_CRASHES)))
    def sync_killed(self, point: str) -> None:
        """A sync dies at one of its steps (the process is gone: no handler runs)."""
        where, attribute, number = SYNC_CRASHES[point]
        with calls_fail(target(where), attribute, number, Killed()):
            try:
                self.sync(f"sync killed {point}")
            except Killed:
                self.say(f"sync killed at {point}")

    @precondition(lambda self: self.ready())
    @rule(
        job=st.sampled_from(("sync", "compact", "retention")), call=st.sampled_from(STORAGE_CALLS),
        number=st.integers(1, 15), dies=st.booleans(),
    )  # fmt: skip
    def storage_trouble(self, job: str, call: str, number: int, dies: bool) -> None:
        """Storage call ``number`` (of its kind ``call``) of a job fails (the store throttles, the disk
        is full), or the job's process dies there (``dies``): a crash at any step."""
        error: BaseException = Killed() if dies else OSError("injected: the store failed")
        what = f"{job} with {call} #{number} {'dying' if dies else 'failing'}"
        with calls_fail(type(self.world.storage), call, number, error):
            try:
                if job == "sync":
                    self.sync(what)
                    return
                run = compact_sources if job == "compact" else apply_retention
                [result] = run(self.world.settings, [self.world.slug], catalog=self.world.catalog, say=quiet,
                               wait=False)  # fmt: skip
                self.say(f"{what}: {result.status}")
            except Killed:
                self.say(f"{what}: died")

    @rule(seconds=st.sampled_from(ADVANCES))
    def advance(self, seconds: int) -> None:
        self.clock.advance(seconds)
        self.say(f"advance {seconds} s")

    # -- rewrites, retention ---------------------------------------------------------------------

    @precondition(lambda self: self.ready())
    @rule()
    def compact(self) -> None:
        [result] = compact_sources(
            self.world.settings, [self.world.slug], catalog=self.world.catalog, say=quiet, wait=False
        )
        self.say(f"compact: {result.status} {result.error}")
        if result.status in DONE:  # the partitions whose hour ended compact.older_than_hours ago
            ended = self.clock.now - timedelta(hours=self.world.settings.compact.older_than_hours)
            for message in self.foreign:
                if message.received.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1) <= ended:
                    message.in_catalog = True

    @precondition(lambda self: self.ready())
    @rule(point=st.sampled_from(sorted(COMPACT_CRASHES)))
    def compact_killed(self, point: str) -> None:
        where, attribute, number = COMPACT_CRASHES[point]
        with calls_fail(target(where), attribute, number, Killed()):
            try:
                compact_sources(
                    self.world.settings, [self.world.slug], catalog=self.world.catalog, say=quiet, wait=False
                )
                self.say(f"compact (not killed: {point} not reached)")
            except Killed:
                self.say(f"compact killed at {point}")

    @precondition(lambda self: self.ready())
    @rule()
    def retention(self) -> None:
        [result] = apply_retention(
            self.world.settings, [self.world.slug], catalog=self.world.catalog, say=quiet, wait=False
        )
        self.say(f"retention: {result.status} {getattr(result, 'error', '')}")

    @precondition(lambda self: self.ready() and len(self.users()) > 1)
    @rule(data=st.data(), dies_at_write=st.sampled_from((0, 0, 1, 3, 6)))
    def users_delete(self, data: st.DataObject, dies_at_write: int = 0) -> None:
        """``eventlake users delete`` of a user (again, for one whose deletion died before its end);
        ``dies_at_write``: its process dies at that storage write (0: it does not)."""
        user = data.draw(st.sampled_from([u for u in USERS if u not in self.erased]))
        self.suppressed.add(user)  # the first thing a deletion does, before it takes the lock
        what = f"users delete {user}" + (f" dying at write #{dies_at_write}" if dies_at_write else "")
        with contextlib.ExitStack() as stack:
            if dies_at_write:
                stack.enter_context(calls_fail(type(self.world.storage), "write", dies_at_write, Killed()))
            try:
                [result] = delete_user(self.world.settings, user, [self.world.slug], requested_by="model",
                                       catalog=self.world.catalog, say=quiet, wait=False)  # fmt: skip
            except Killed:
                self.say(f"{what}: died")
                return
        self.say(f"{what}: {result.status} {getattr(result, 'error', '')}")
        if result.status in DONE:
            self.erased.add(user)

    @precondition(lambda self: self.ready() and bool(self.acked))
    @rule(days_back=st.integers(0, 2), table=st.sampled_from(((), ("page",))))
    def replay(self, days_back: int, table: tuple[str, ...]) -> None:
        """``eventlake replay`` of one day (whole, or ``--table page``)."""
        day = (self.clock.now - timedelta(days=days_back)).date()
        try:
            result = run_replay(self.world.settings, self.world.slug, ReplayRange(day, day, table),
                                catalog=self.world.catalog, say=quiet, wait=False,
                                stager=self.stager)  # fmt: skip
            self.say(f"replay {day} {table}: {result.status} {result.error}")
        except Exception as exc:  # refused (nothing synced in the range, ...): changes nothing
            self.say(f"replay {day} {table} refused: {type(exc).__name__}: {exc}")

    @precondition(lambda self: self.ready())
    @rule(kind=st.sampled_from(("string", "decimal(38,6)")))
    def set_type(self, kind: str) -> None:
        """``eventlake schema set-type`` of the revenue column (every file of the table rewritten)."""
        if "track_order_completed" not in self.world.catalog.list_tables(self.world.database):
            return
        qualified = f"{self.world.database}.track_order_completed"
        try:
            result = set_column_type(self.world.settings, None, qualified, "properties_revenue", kind, quiet)
            self.say(f"set-type revenue {kind}: {result.files_rewritten} files rewritten")
        except Exception as exc:  # refused (a narrowing change, ...): changes nothing
            self.say(f"set-type revenue {kind} refused: {type(exc).__name__}: {exc}")

    @precondition(lambda self: self.ready() and self.kind != "local")
    @rule()
    def lease_taken_over(self) -> None:
        """A sync stalls before publishing (a GC pause, a network partition) past its lease; a second
        machine takes the source's lease meanwhile. The stalled sync must publish nothing."""
        original = sync_job.publish
        stalls: list[int] = []

        def stalled(*args: Any, **kwargs: Any) -> Any:
            stalls.append(1)
            self.clock.advance(self.world.settings.sync.lease_seconds + 1)
            lease_dir = state_layout.sync_lease_dir(self.world.lake, self.world.source.id)
            other = Lease(self.world.storage, lease_dir,
                          self.world.settings.sync.lease_seconds)  # fmt: skip
            assert other.try_acquire(), "the second machine could not take an expired lease"
            try:
                return original(*args, **kwargs)
            finally:
                other.release()

        sync_job.publish = stalled  # type: ignore[assignment]
        try:
            result = self.sync("sync stalled, its lease taken over")
        finally:
            sync_job.publish = original  # type: ignore[assignment]
        if stalls:  # (a sync with nothing new publishes nothing: it only completed interrupted runs)
            assert result.status not in (Status.SUCCESS, Status.PARTIAL), "lost its lease, published"

    # -- foreign writers, imports -------------------------------------------------------------------

    @precondition(lambda self: self.ready() and bool(self.users()) and "1" not in self.avoid)
    @rule(data=st.data(), narrow=st.just(False))
    def foreign_file(self, data: st.DataObject, narrow: bool = False) -> None:
        """Another writer (Segment Data Lakes during the migration's overlap) puts a Parquet file
        into a partition folder of a table."""
        folders = [f for f in self.world.partition_folders() if f[0] == "track_order_completed"]
        if not folders:
            return
        table, values, folder = data.draw(st.sampled_from(folders))
        start, _ = layout.partition_period(layout.partition_columns(self.world.source.date_partition), values)
        user = data.draw(st.sampled_from(self.users()))
        message = Message(
            f"f{next(self.numbers)}", user, start + timedelta(seconds=1), foreign=True, in_catalog=False
        )
        self.world.write_foreign(folder, table, message.message_id, message.user, message.received, narrow)
        self.foreign.append(message)
        self.say(f"foreign file into {table} {values}")

    @precondition(
        lambda self: self.ready() and self.importing is None and bool(self.users()) and "2" not in self.avoid
    )
    @rule(days=st.integers(2, 3), data=st.data())
    def import_start(self, days: int, data: st.DataObject) -> None:
        """``eventlake import`` of a Segment archive of the ``days`` days before yesterday starts:
        it lists, marks its days, then copies a file at a time (:meth:`import_step`)."""
        today = day_ms(self.clock.now)
        self.import_days = [today - (days - i) * 86_400_000 for i in range(days)]
        folder = self.world.directory / f"segment-export-{next(self.numbers)}"
        self.import_messages: list[list[Message]] = []
        lines = []
        for day in self.import_days:
            received = datetime.fromtimestamp(day / 1000 + HOUR, timezone.utc)
            messages = [Message(f"i{next(self.numbers)}", data.draw(st.sampled_from(self.users())), received)]
            self.import_messages.append(messages)
            lines.append([self.world.message(m.message_id, m.user, "track", m.received) for m in messages])
        sources = segment_archive(folder, self.import_days, lines)
        self.importing = Import(self.world, folder, sources)
        self.say(f"import of {days} days starts")

    @precondition(lambda self: self.importing is not None and not self.importing.finished)
    @rule()
    def import_step(self) -> None:
        assert self.importing is not None
        path = self.importing.step()
        key = str(layout.lake_relative(self.world.lake, path))
        day = int(key.rsplit("/", 2)[-2])
        self.acked[key] = self.import_messages[self.import_days.index(day)]
        self.say(f"import writes {key.rsplit('/', 2)[-2:]}")

    # -- invariants ----------------------------------------------------------------------------------

    def required(self) -> dict[str, Message]:
        """Every message the lake must hold now: acknowledged before the last completed sync (or
        written by a foreign writer), of a user not erased, in a partition retention keeps."""
        cutoff = self.clock.now - timedelta(days=RETENTION.table_days)
        wanted = [m for key in self.due for m in self.acked.get(key, [])] + self.foreign
        return {
            m.message_id: m
            for m in wanted
            if m.user not in self.suppressed
            and m.received.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1) > cutoff
        }

    @invariant()
    def every_acknowledged_message_once(self) -> None:
        if not hasattr(self, "world"):
            return
        required = self.required()
        read: dict[str, tuple[str, ...]] = {}
        catalog_rows = self.world.catalog_rows(read)
        for where, values in read.items():
            self.read_files[where] = (self.clock.now, values)
        for reader, rows in (("duckdb", self.world.duckdb_rows()), ("catalog", catalog_rows)):
            counts: dict[str, int] = {}
            for message_id, user in rows:
                counts[message_id] = counts.get(message_id, 0) + 1
                assert user not in self.erased, (
                    f"{reader}: erased user {user} still in the lake ({message_id})"
                )
            twice = sorted(m for m, n in counts.items() if n > 1)
            assert not twice, f"{reader}: messages in the lake more than once: {twice}\n" + self.story()
            wanted = {m for m, message in required.items() if reader == "duckdb" or message.in_catalog}
            missing = sorted(wanted - set(counts))
            assert not missing, f"{reader}: acknowledged messages not in the lake: {missing}\n" + self.story()

    @invariant()
    def no_file_deleted_under_a_reader(self) -> None:
        """On an object store, a file a catalog reader read stays for ``sync.rewrite_grace_minutes``
        after it was last read (a query that planned on it may still read it), also when retention
        dropped its partition."""
        if not hasattr(self, "world") or self.kind == "local":
            return
        grace = timedelta(minutes=self.world.settings.sync.rewrite_grace_minutes)
        for where, (when, _) in sorted(self.read_files.items()):
            if when + grace <= self.clock.now:
                del self.read_files[where]
                continue
            assert self.world.exists(where), (
                f"{where}: deleted {self.clock.now - when} after a catalog reader read it (grace {grace})\n"
                + self.story()
            )

    @invariant()
    def nothing_acknowledged_left_in_a_closed_day(self) -> None:
        """A sealed or imported file not synced yet lies in a day the ledger lists (so the next sync
        reads it), and is still in the archive."""
        if not hasattr(self, "world") or not self.acked:
            return
        synced = self.world.synced_keys()
        archive = self.world.archive_keys()
        for key in sorted(set(self.acked) - synced):
            day = int(key.rsplit("/", 2)[-2])
            assert key in archive, (
                f"{key}: acknowledged, never synced, gone from the archive\n" + self.story()
            )
            assert self.world.ledger_open(day), (
                f"{key}: acknowledged, not synced, in a day the ledger has closed: no sync will list it\n"
                + self.story()
            )

    def story(self) -> str:
        return "steps:\n  " + "\n  ".join(self.steps)


def machine(kind: str, base: Path, endpoint: str, avoid: frozenset[str] = frozenset()) -> type[LakeModel]:
    return type(
        f"LakeModel_{kind}", (LakeModel,), {"kind": kind, "base": base, "endpoint": endpoint, "avoid": avoid}
    )
