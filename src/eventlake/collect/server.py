"""Run the collector: recover the spool, serve the Tracking API with uvicorn, seal on shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

import uvicorn
from uvicorn.server import HANDLED_SIGNALS

from eventlake import layout
from eventlake.archive import Spool
from eventlake.collect.app import create_app
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
    """Serve the collector until SIGTERM or Ctrl-C, then seal every spool segment. Blocking."""
    collector = settings.collector
    spool = Spool(
        layout.spool_dir(settings.lake.state_dir),
        settings.lake.root,
        collector.seal_max_bytes,
        collector.seal_max_age_seconds,
    )
    try:
        spool.recover()
        config = uvicorn.Config(
            create_app(settings, spool),
            host=collector.host,
            port=collector.port,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=_GRACEFUL_SHUTDOWN_SECONDS,
        )
        asyncio.run(_serve(_Server(config), collector.host))
    finally:
        spool.close()


async def _serve(server: uvicorn.Server, host: str) -> None:
    serving = asyncio.create_task(server.serve())
    while not server.started and not serving.done():
        await asyncio.sleep(0.02)
    if server.started:
        port = server.servers[0].sockets[0].getsockname()[1] if server.servers else server.config.port
        print(f"eventlake collector listening on http://{host}:{port}", file=sys.stderr, flush=True)
    await serving
