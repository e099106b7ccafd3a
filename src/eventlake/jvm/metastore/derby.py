"""The embedded Derby metastore: Derby admits one JVM, so a project's processes reach it through
the project's metastore service while one runs (its URI in ``state_dir/metastore/service.json``),
and otherwise open it themselves, one at a time, through a lock."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from eventlake import progress, state_layout
from eventlake.flock import LockFile
from eventlake.jvm.java import port_open
from eventlake.progress import Say
from eventlake.storage.local import process_alive, write_atomic

# how long a client waits for a lock or a starting service before it says so again
POLL_SECONDS = 0.5


def derby_properties(state: Path) -> dict[str, str]:
    return {
        "javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={state_layout.metastore_dir(state)};create=true"
        ),
        "hive.metastore.schema.verification": "false",
        "hive.metastore.disallow.incompatible.col.type.changes": "false",  # see jdbc.jdbc_properties
        "datanucleus.schema.autoCreateAll": "true",
        # package-derby.orm (derby_schema.orm_jar() on the class path): a view's texts in CLOB
        "datanucleus.mapping": "derby",
    }


# per state dir, held until the process exits (the kernel releases them, also after a crash)
_embedded_locks: dict[Path, LockFile] = {}


def running_service(state: Path) -> dict[str, Any] | None:
    """The project's metastore service, if one is running and accepts connections."""
    try:
        info: dict[str, Any] = json.loads(state_layout.metastore_service_file(state).read_text())
        port, pid = int(info["port"]), int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not process_alive(pid) or not port_open(port):
        return None
    return info


def _lock_or_service(state: Path, say: Say, waiting: str) -> tuple[str | None, LockFile | None]:
    """The URI of the project's service when one runs (nothing locked), else the embedded Derby's
    lock, held. Waits while another process has Derby open (saying ``waiting`` once, ``{holder}``:
    its pid), and switches to a service that starts meanwhile."""
    lock = LockFile(state_layout.metastore_lock_file(state))
    told = False
    try:
        while True:
            info = running_service(state)
            if info is not None:
                lock.close()
                return str(info["uri"]), None
            if lock.try_lock():
                lock.claim()
                return None, lock
            if not told:
                say(waiting.format(holder=lock.holder() or "?"))
                told = True
            time.sleep(POLL_SECONDS)
    except BaseException:
        lock.close()
        raise


def acquire_embedded(state: Path, say: Say = progress.say) -> str | None:
    """The project service's URI when one runs; otherwise the embedded Derby's lock, held for the
    life of this process (returns None). Waits while another process has Derby open, and switches
    to a service that starts meanwhile."""
    if state in _embedded_locks:
        return None
    waiting = "waiting for another eventlake process (pid {holder}) using the embedded metastore ..."
    uri, lock = _lock_or_service(state, say, waiting)
    if lock is not None:
        _embedded_locks[state] = lock
    return uri


@contextmanager
def embedded_lock(state: Path, say: Say = progress.say) -> Iterator[str | None]:
    """For a metastore service on Derby: the lock (yields None), or the URI of a service that is
    already running (yields it; nothing is locked). Released on exit."""
    waiting = "waiting for the eventlake process using the embedded metastore to finish ..."
    uri, lock = _lock_or_service(state, say, waiting)
    try:
        yield uri
    finally:
        if lock is not None:
            lock.close()


def write_service_file(state: Path, info: dict[str, Any]) -> None:
    path = state_layout.metastore_service_file(state)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(info).encode())


def remove_service_file(state: Path, pid: int) -> None:
    """Remove the service file if it still names the service ``pid``."""
    path = state_layout.metastore_service_file(state)
    try:
        if int(json.loads(path.read_text())["pid"]) == pid:
            path.unlink()
    except (OSError, ValueError, KeyError, TypeError):
        pass
