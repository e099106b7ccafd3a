"""Serve the console: a uvicorn server and a thread that keeps the :class:`LakeWatch` fresh.

``eventlake up`` starts a :class:`Console` beside the collector (threads of its process: a page
view is a few milliseconds of Python, the lake is read by the refresh thread); ``eventlake
console`` runs one on its own until SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import signal
import threading
import time

import uvicorn

from eventlake.config import Settings, client_host, is_loopback
from eventlake.config.reload import SourcesWatch
from eventlake.console.app import create_console
from eventlake.console.lake import LakeWatch
from eventlake.errors import UsageError
from eventlake.progress import Say

REFRESH_SECONDS = 5.0  # how often the lake and the collector's counters are read again
START_SECONDS = 10.0


def check_access(settings: Settings) -> None:
    """Off loopback the console needs a token: refuse to start without one."""
    console = settings.console
    if not is_loopback(console.host) and not console.token.is_set:
        raise UsageError(
            f"the console would listen on {console.host}, which other machines can reach, without a token: "
            "set console.token (better: the environment variable EVENTLAKE__CONSOLE__TOKEN), or use "
            "--console-host 127.0.0.1"
        )


def collector_url(settings: Settings) -> str:
    """Where this machine reaches the collector (for its ``/metrics``)."""
    host = client_host(settings.collector.host)
    return f"http://{'[' + host + ']' if ':' in host else host}:{settings.collector.port}"


class Console:
    """The console's server and refresh threads, from :meth:`start` to :meth:`stop`."""

    def __init__(self, settings: Settings, say: Say) -> None:
        check_access(settings)
        self.settings, self.say = settings, say
        self.watch = LakeWatch(settings, collector_url(settings))
        self.sources = SourcesWatch(settings, say=say)  # sources added or removed while it runs
        config = uvicorn.Config(
            create_console(settings, self.watch), host=settings.console.host, port=settings.console.port,
            log_level="warning", access_log=False, lifespan="off",
        )  # fmt: skip
        self.server = uvicorn.Server(config)  # in a thread it leaves signals alone
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self.server.run, name="eventlake-console", daemon=True),
            threading.Thread(target=self._refresh, name="eventlake-console-refresh", daemon=True),
        ]

    @property
    def url(self) -> str:
        host = self.settings.console.host
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.port}/"

    @property
    def port(self) -> int:
        if self.server.servers and self.server.servers[0].sockets:
            return int(self.server.servers[0].sockets[0].getsockname()[1])
        return self.settings.console.port

    def start(self) -> None:
        """Listen (a :class:`UsageError` when the port cannot be had), then read the lake."""
        self._threads[0].start()
        deadline = time.monotonic() + START_SECONDS
        while not self.server.started and self._threads[0].is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not self.server.started:
            self.server.should_exit = True
            raise UsageError(
                f"the console cannot listen on {self.settings.console.host}:{self.settings.console.port} "
                "(in use?): set console.port or pass --console-port"
            )
        self._threads[1].start()
        token = " (every page needs the token: open it once with ?token=<console.token>)"
        self.say(f"eventlake console on {self.url}" + (token if self.settings.console.token.is_set else ""))

    def _refresh(self) -> None:
        while not self._stop.is_set():
            try:
                if self.sources.check():
                    self.watch.follow(self.sources.settings)
                self.watch.refresh()
            except Exception as exc:  # the lake's store may be away for a while: keep serving
                self.say(f"console: cannot read the lake ({type(exc).__name__}: {exc}); retrying")
            self._stop.wait(REFRESH_SECONDS)

    def stop(self) -> None:
        self._stop.set()
        self.server.should_exit = True
        for thread in self._threads:
            if thread.is_alive():
                thread.join(5)


def run_console(settings: Settings, say: Say) -> None:
    """Serve the console until SIGTERM or Ctrl-C. Blocking."""
    console = Console(settings, say)
    stopped = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stopped.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        console.start()
        stopped.wait()
    finally:
        console.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
