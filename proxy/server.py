"""Running the app in a process: the event loop, signals and the listening socket."""

from __future__ import annotations

import asyncio
import logging
import signal

from .app import create_app, start_site
from .logs import configure_logging
from .rules import load_rules
from .settings import Settings

log = logging.getLogger(__name__)


async def _serve_async(settings: Settings) -> None:
    rules = load_rules(settings.rules_path)
    app = create_app(settings, rules)
    runner = await start_site(app, settings.host, settings.port, shutdown_timeout=settings.drain_seconds)
    log.info("toolshim listening on http://%s:%s with %d model rules", settings.host, settings.port,
             len(rules.models))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    await runner.cleanup()


def serve(settings: Settings) -> int:
    configure_logging(settings.log_level)
    asyncio.run(_serve_async(settings))
    return 0
