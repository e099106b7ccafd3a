"""The Spark driver's class-data archive (AppCDS): made once per machine, mapped by every start.

A Spark driver JVM loads, parses and verifies some thousands of classes from the pyspark wheel's
jars at every start. A dynamic class-data archive (``-XX:ArchiveClassesAtExit``, JDK 13 and later)
holds them ready; a JVM started with ``-XX:SharedArchiveFile`` maps it instead, and a driver's
start and first query cost about a third less CPU (``bench/jvm_startup.py``, ``bench/README.md``).

- **Where**: ``[spark] class_archive_dir``, by default the machine's cache folder
  (``$XDG_CACHE_HOME/eventlake/jvm``, else ``~/.cache/eventlake/jvm``); ``[spark] class_archive =
  false`` turns it off. One archive per key: the pyspark version, the Java version and a hash of the
  java binary, the wheel's folder and the driver's extra class path with its jars' sizes and times
  (a dynamic archive serves only a JVM whose class path begins as the one it was made with, from
  the same jars: :func:`archive_name`). The JVM checks it all again (and its own build) and
  ignores an archive that does not match: ``-Xlog:cds=off`` keeps its warning off the output.
- **How it is made**: the first session for a key starts its JVM with ``-XX:ArchiveClassesAtExit``
  into a temporary file of its own; when the process exits (``atexit``; its JVM then exits on the
  end of its input) a detached process waits for the JVM to end, checks that a JVM maps the
  archive, and renames it into place: no process waits for the writing. A JVM never sees a
  half-written archive, which would crash it (SIGBUS while relocating). One process makes an
  archive at a time (a marker file with its pid); the others start without one meanwhile.
- **How long it is kept**: a session that maps an archive marks it used (its time, once a day at
  most); making a new one deletes the folder's archives unused for :data:`UNUSED_DAYS` days (an
  upgrade's old ones: about 200 MB each). A project idle that long makes its archive again at its
  next start (Linux keeps a file a running JVM maps until it ends).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eventlake.config import Settings
from eventlake.jvm.java import java_executable, pyspark_home
from eventlake.storage.local import process_alive

__all__ = ["ArchivePlan", "default_folder", "ensure", "plan"]

# the JVM's class-data-sharing messages: a mismatched archive's warning, the dump's preload warnings
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
# how long a process's exit waits for its JVM to write a new archive (it is written once)
WRITE_TIMEOUT_SECONDS = 300.0
# a marker older than this is a creator that died without removing it
MARKER_MAX_AGE_SECONDS = 3600.0
# an archive no session mapped for this long is deleted when another one is made
UNUSED_DAYS = 30
DAY_SECONDS = 86400.0


def default_folder(environ: dict[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/eventlake/jvm``, else ``~/.cache/eventlake/jvm``."""
    environ = dict(os.environ) if environ is None else environ
    cache = environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(cache) if cache else Path.home() / ".cache") / "eventlake" / "jvm"


@dataclass(frozen=True)
class ArchivePlan:
    """What a session's JVM does with the archive: map ``path`` (``creating`` False), or write it
    at exit (``creating`` True: into ``temporary``, renamed to ``path`` by :meth:`started`)."""

    path: Path
    creating: bool = False
    temporary: Path | None = None
    marker: Path | None = None

    def java_options(self) -> list[str]:
        if self.creating:
            return [f"-XX:ArchiveClassesAtExit={self.temporary}", *QUIET]
        return [f"-XX:SharedArchiveFile={self.path}", *QUIET]

    def started(self, jvm_process: Any) -> None:
        """After the session started: when creating, publish the archive after this process's exit
        (``jvm_process``: PySpark's ``Popen`` of the driver JVM; None when the JVM was already
        running, whose options the plan did not reach)."""
        if not self.creating:
            return
        if jvm_process is None:
            self.abandon()
            return
        atexit.register(self.hand_over, jvm_process.pid)

    def hand_over(self, jvm_pid: int) -> None:
        """At exit: a detached process publishes the archive once the JVM (which exits with this
        process, on the end of its input) wrote it; this process does not wait for it."""
        command = [sys.executable, "-m", "eventlake.jvm.class_archive", "--publish", str(jvm_pid),
                   str(self.path), str(self.temporary), str(self.marker)]  # fmt: skip
        try:
            subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        except OSError:
            self.abandon()

    def publish(self, jvm_pid: int, timeout: float = WRITE_TIMEOUT_SECONDS) -> bool:
        """Wait for the JVM ``jvm_pid`` to end, check that a JVM maps its archive (a JVM killed
        while writing it leaves a damaged one), rename it into place."""
        assert self.temporary is not None
        deadline = time.monotonic() + timeout
        try:
            while process_alive(jvm_pid):
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.2)
            if self.temporary.is_file() and maps(self.temporary):
                os.replace(self.temporary, self.path)
                return True
            return False
        except OSError:
            return False
        finally:
            self.abandon()

    def abandon(self) -> None:
        """Remove the temporary file (a JVM still writing it writes into nothing) and the marker."""
        for leftover in (self.temporary, self.marker):
            if leftover is not None:
                leftover.unlink(missing_ok=True)


def maps(archive: Path, java: str | None = None) -> bool:
    """Whether a JVM starts with ``archive`` mapped (a damaged one crashes it while relocating)."""
    crash_log = archive.with_name(archive.name + ".crash.log")  # not hs_err_pid*.log in the working folder
    command = [
        java or java_executable(),
        f"-XX:SharedArchiveFile={archive}",
        *QUIET,
        f"-XX:ErrorFile={crash_log}",
        "-version",
    ]
    try:
        done = subprocess.run(command, capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        crash_log.unlink(missing_ok=True)
    return done.returncode == 0


def plan(settings: Settings, extra_classpath: str, *, pid: int | None = None) -> ArchivePlan | None:
    """The archive a new driver JVM maps or makes; None when ``[spark] class_archive`` is off, the
    class path holds a folder of the project's state, the folder cannot be made, or another
    process is making this key's archive right now."""
    if not settings.spark.class_archive:
        return None
    state = settings.lake.state_dir.resolve()
    if any(
        Path(entry).resolve().is_relative_to(state) for entry in extra_classpath.split(os.pathsep) if entry
    ):
        # a class path with the project's private hive-site.xml (a metastore database's password)
        # begins differently in every project: an archive made for it would serve that one alone
        return None
    folder = Path(settings.spark.class_archive_dir) if settings.spark.class_archive_dir else default_folder()
    try:
        path = folder / archive_name(extra_classpath)
        if path.is_file():
            _mark_used(path)
            return ArchivePlan(path)
        folder.mkdir(parents=True, exist_ok=True)
        pid = os.getpid() if pid is None else pid
        marker = path.with_name(path.name + ".creating")
        if not _take_marker(marker, pid):
            return None
        _remove_leftovers(folder, path.name)
        _remove_unused(folder)
        temporary = path.with_name(f"{path.name}.{pid}.tmp")
        return ArchivePlan(path, creating=True, temporary=temporary, marker=marker)
    except OSError:
        return None


# what the session that makes an archive ahead of use runs: the Spark parts a sync and a query use
# (the Hive catalog, JSON, partitioned Parquet, a Python function on Arrow batches), in a child
# process whose exit publishes the archive
_WORKLOAD = """
import sys
from pathlib import Path
from eventlake.config import LakeSettings, Settings, SparkSettings
from eventlake.jvm.session import spark_session

state, folder = Path(sys.argv[1]), sys.argv[2]
lake = LakeSettings(root=state / "lake", state_dir=state)
session = spark_session(Settings(path=None, lake=lake, spark=SparkSettings(master="local[2]",
                        class_archive_dir=folder)), "eventlake-class-archive", say=lambda *_: None)
(state / "in.json").write_text('{"type": "track", "n": 1}\\n{"type": "page", "n": 2}\\n')
frame = session.read.json(str(state / "in.json"))
frame = frame.mapInArrow(lambda batches: batches, frame.schema)
frame.write.partitionBy("type").parquet(str(state / "out"))
session.sql("CREATE DATABASE IF NOT EXISTS archive")
session.sql(f"CREATE TABLE archive.t (n BIGINT) PARTITIONED BY (type STRING) STORED AS PARQUET "
            f"LOCATION '{state / 'out'}'")
session.sql("MSCK REPAIR TABLE archive.t")
assert session.sql("SELECT sum(n) FROM archive.t").collect()[0][0] == 3
session.stop()
"""


def ensure(folder: Path, timeout: float = 900.0) -> Path | None:
    """Make the archive of a session on the embedded Derby metastore (the default catalog: its
    extra class path is the metastore's ORM jar, see :mod:`eventlake.jvm.metastore.derby_schema`)
    in ``folder`` now, unless it is there: a session in a child process that runs a small sync-like
    workload and publishes the archive at its exit. The archive's path, None when it could not be
    made (the starts then go without it). Other class paths (Glue's none, a JDBC driver's) get
    theirs from their first session."""
    from eventlake.jvm.metastore.derby_schema import orm_jar

    path = folder / archive_name(orm_jar())
    marker = path.with_name(path.name + ".creating")
    if not path.is_file():
        deadline = time.monotonic() + timeout
        with tempfile.TemporaryDirectory(prefix="eventlake-class-archive-") as state:
            command = [sys.executable, "-c", _WORKLOAD, state, str(folder)]
            subprocess.run(command, capture_output=True, timeout=timeout, check=False)
            while marker.exists() and time.monotonic() < deadline:  # published after the JVM's exit
                time.sleep(0.5)
    return path if path.is_file() else None


def archive_name(extra_classpath: str, java: str | None = None, home: Path | None = None) -> str:
    """``spark-<pyspark>-java-<version>-<hash>.jsa``: the hash covers the java binary, the
    pyspark wheel's folder (and its ``jars`` folder's time: a reinstall) and the driver's extra
    class path with each jar's size and time. The JVM maps an archive only with the jars it was
    made from: a jar replaced where it was (eventlake upgraded, whose metastore jar is in its
    package; a JDBC driver updated) gets an archive of its own, where the old one would be
    ignored at every start and never made again (5 s more CPU a sync's start-up here)."""
    java_path = os.path.realpath(java or java_executable())
    home = home or pyspark_home()
    version = _java_version(java_path)
    stamps = [_stamp(Path(entry)) for entry in extra_classpath.split(os.pathsep) if entry]
    key = "\0".join([java_path, str(home), _stamp(home / "jars"), extra_classpath, *stamps])
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return f"spark-{_pyspark_version(home)}-java-{version}-{digest}.jsa"


def _stamp(path: Path) -> str:
    """A file's (or folder's) size and modification time, as the JVM compares a jar's; empty
    when it is missing."""
    try:
        found = path.stat()
    except OSError:
        return ""
    return f"{found.st_size}:{found.st_mtime_ns}"


def _java_version(java_path: str) -> str:
    """JAVA_VERSION of the JDK's ``release`` file (no JVM started for it), else ``unknown``."""
    release = Path(java_path).parent.parent / "release"
    try:
        found = re.search(r'^JAVA_VERSION="([^"]+)"', release.read_text(), re.MULTILINE)
    except OSError:
        found = None
    return re.sub(r"[^0-9A-Za-z.+_-]", "_", found.group(1)) if found else "unknown"


def _pyspark_version(home: Path) -> str:
    try:
        found = re.search(r'__version__[^"\']*["\']([^"\']+)', (home / "version.py").read_text())
    except OSError:
        found = None
    return found.group(1) if found else "unknown"


def _take_marker(marker: Path, pid: int, alive: Callable[[int], bool] | None = None) -> bool:
    """Create ``marker`` holding ``pid``; a marker of a dead process, or an old one, is taken over."""
    alive = alive or process_alive
    for _ in range(2):
        try:
            descriptor = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                owner = int(marker.read_text().strip() or 0)
                age = time.time() - marker.stat().st_mtime
            except (OSError, ValueError):
                owner, age = 0, 0.0
            if owner and alive(owner) and age < MARKER_MAX_AGE_SECONDS:
                return False
            marker.unlink(missing_ok=True)
            continue
        with os.fdopen(descriptor, "w") as out:
            out.write(str(pid))
        return True
    return False


def _remove_leftovers(folder: Path, name: str) -> None:
    """Temporary archives of creators that died (``<name>.<pid>.tmp`` whose pid is gone)."""
    for leftover in folder.glob(f"{name}.*.tmp"):
        try:
            owner = int(leftover.name[len(name) + 1 : -len(".tmp")])
        except ValueError:
            continue
        if not process_alive(owner):
            leftover.unlink(missing_ok=True)


def _mark_used(archive: Path) -> None:
    """Set the archive's time to now when it is a day old or more (what :func:`_remove_unused`
    goes by); an archive of another user's is left as it is."""
    now = time.time()
    try:
        if now - archive.stat().st_mtime >= DAY_SECONDS:
            os.utime(archive, (now, now))
    except OSError:
        pass


def _remove_unused(folder: Path) -> None:
    """The folder's archives no session marked used for :data:`UNUSED_DAYS` days."""
    oldest = time.time() - UNUSED_DAYS * DAY_SECONDS
    for archive in folder.glob("spark-*.jsa"):
        try:
            if archive.stat().st_mtime < oldest:
                archive.unlink()
        except OSError:
            pass


if __name__ == "__main__":
    if sys.argv[1:2] == ["--publish"]:  # ArchivePlan.hand_over's detached process
        pid, final, temporary, marker = sys.argv[2:6]
        ArchivePlan(Path(final), True, Path(temporary), Path(marker)).publish(int(pid))
    else:  # python -m eventlake.jvm.class_archive [FOLDER]: make it now
        made = ensure(Path(sys.argv[1]) if len(sys.argv) > 1 else default_folder())
        print(f"class archive: {made}" if made else "class archive: not made (Spark starts without it)")
