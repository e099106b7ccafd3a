"""Run the collector: recover the spool, serve the Tracking API with uvicorn, seal on shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import uvicorn
from starlette.types import ASGIApp
from uvicorn.server import HANDLED_SIGNALS

from eventlake import state_layout
from eventlake.archive import Spool, SuppressionCache
from eventlake.collect.app import create_app
from eventlake.collect.errors import ListenError
from eventlake.config import Settings

# requests still running this long after SIGTERM are cancelled (unacknowledged: clients retry)
_GRACEFUL_SHUTDOWN_SECONDS = 10


class _Server(uvicorn.Server):
    """uvicorn's server and signal handling, except that a SIGTERM/SIGINT stop returns normally.

    uvicorn re-raises the captured signal once it has stopped, which would kill the process (exit
    -15) before the spool is sealed; here the caller gets control back and exits 0 after sealing.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in HANDLED_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


def run_collector(settings: Settings) -> None:
    """Serve the collector until SIGTERM or Ctrl-C, then seal every spool segment. Blocking.

    The spool is recovered before the server listens: segments a killed collector left are sealed
    into the archive (or, while the lake's store is unreachable, kept and retried in the
    background: the collector serves anyway, durable in its spool)."""
    collector = settings.collector
    storage = settings.lake.storage()  # one store (one client) for the sealer and the suppression lists
    spool = Spool(
        state_layout.spool_dir(settings.lake.state_dir),
        settings.lake.root,
        collector.seal_max_bytes,
        collector.seal_max_age_seconds,
        storage=storage,
        max_spool_bytes=collector.max_spool_bytes,
    )
    try:
        spool.recover()
        app = create_app(settings, spool, SuppressionCache(storage, settings.lake.root))
        serve_app(app, settings)
    finally:
        spool.close()


def serve_app(app: ASGIApp, settings: Settings) -> None:
    """Serve ``app`` on ``[collector] host/port`` with the collector's server stack until a signal."""
    collector = settings.collector
    config = uvicorn.Config(
        app,
        host=collector.host,
        port=collector.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=_GRACEFUL_SHUTDOWN_SECONDS,
    )
    sockets = [_reuse_port_socket(collector.host, collector.port)] if collector.reuse_port else None
    # uvloop and httptools when installed (they are dependencies), as `uvicorn` itself would pick
    _run(_serve(_Server(config), collector.host, sockets), config.get_loop_factory())


def _reuse_port_socket(host: str, port: int) -> socket.socket:
    """A listening socket other processes may bind too (``SO_REUSEPORT``): the kernel spreads the
    connections over every collector listening on ``host:port``."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ListenError(host, port, str(exc)) from None
    return sock


def _run(
    main: Coroutine[Any, Any, None], loop_factory: Callable[[], asyncio.AbstractEventLoop] | None
) -> None:
    if sys.version_info >= (3, 11):
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(main)
        return
    loop = loop_factory() if loop_factory else asyncio.new_event_loop()  # pragma: no cover (3.10)
    try:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(main)
    finally:
        asyncio.set_event_loop(None)
        loop.close()


async def _serve(server: uvicorn.Server, host: str, sockets: list[socket.socket] | None = None) -> None:
    serving = asyncio.create_task(server.serve(sockets=sockets))
    while not server.started and not serving.done():
        await asyncio.sleep(0.02)
    if server.started:
        port = server.servers[0].sockets[0].getsockname()[1] if server.servers else server.config.port
        print(f"eventlake collector listening on http://{host}:{port}", file=sys.stderr, flush=True)
    await serving
