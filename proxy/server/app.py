"""The aiohttp application: ``create_app`` wires routes, middlewares, state and the life cycle.

Nothing imports this module but the entry points (``server``) and tests: handlers and
middlewares read the typed state from ``state``.
"""

from __future__ import annotations

import asyncio
import resource
import socket
from collections.abc import AsyncIterator, Sequence

from aiohttp import web

from ..config.rules import RuleSet
from ..config.settings import Settings
from ..observe.metrics import PROCESS_SAMPLE_SECONDS, Metrics
from ..observe.redact import REDACTOR, install_log_redaction
from ..responses.store import open_store
from .connections import ConnectionLimits, GuardedAppRunner, connection_cap
from .drain import INFLIGHT, Inflight
from .front import front_middleware
from .handlers import add_routes
from .listener import BACKLOG
from .middleware import add_cors_headers
from .state import METRICS, RESPONSES_STORE, SETTINGS, STATE, AppState, build_runtime, configured_secrets


async def _upstream_lifecycle(app: web.Application) -> AsyncIterator[None]:
    state = app[STATE]
    for upstream in state.runtime.upstreams.values():
        await upstream.start()
    yield
    for upstream in app[STATE].runtime.upstreams.values():
        await upstream.close()


async def _process_sampler(app: web.Application) -> AsyncIterator[None]:
    """Multiprocess metrics: keep this worker's process figures current for scrapes any worker answers."""
    metrics = app[METRICS]
    task = asyncio.create_task(_sample_every(metrics, PROCESS_SAMPLE_SECONDS)) if metrics.worker_gauges else None
    yield
    if task is not None:
        task.cancel()


async def _sample_every(metrics: Metrics, seconds: float) -> None:
    while True:
        metrics.sample_process()
        await asyncio.sleep(seconds)


async def _store_lifecycle(app: web.Application) -> AsyncIterator[None]:
    yield
    await app[RESPONSES_STORE].close()


def create_app(settings: Settings, rules: RuleSet, metrics: Metrics | None = None) -> web.Application:
    """The whole server, ready for ``web.AppRunner`` (or the aiohttp test fixtures)."""
    app = web.Application(
        middlewares=[front_middleware],  # one coroutine: a stream is resumed through each middleware
        client_max_size=settings.max_body_bytes,
    )
    metrics = metrics or Metrics()
    app[SETTINGS] = settings
    app[METRICS] = metrics
    app[STATE] = AppState(build_runtime(rules, metrics, max_event_bytes=settings.max_upstream_event_bytes))
    app[INFLIGHT] = Inflight()
    REDACTOR.update(configured_secrets(rules, settings))
    install_log_redaction()
    app[RESPONSES_STORE] = open_store(
        settings.responses_store, settings.data_dir, settings.responses_ttl, settings.redis_url
    )
    app.cleanup_ctx.append(_upstream_lifecycle)
    app.cleanup_ctx.append(_process_sampler)
    app.on_response_prepare.append(add_cors_headers)
    app.cleanup_ctx.append(_store_lifecycle)
    add_routes(app)
    return app


async def start_site(
    app: web.Application,
    host: str,
    port: int,
    *,
    sockets: Sequence[socket.socket] = (),
    shutdown_timeout: float = 30.0,
) -> web.AppRunner:
    """Serve ``app`` on ``sockets`` (listeners bound by ``listener.bind``) or else on ``host:port``,
    within the connection bounds of its settings (``connections``); handler cancellation is on so
    a client that leaves cancels its upstream at once."""
    settings = app[SETTINGS]
    limits = ConnectionLimits(
        head_timeout=settings.head_timeout,
        body_timeout=settings.body_timeout,
        keepalive_timeout=settings.keepalive_timeout,
        max_connections=connection_cap(settings.max_connections, resource.getrlimit(resource.RLIMIT_NOFILE)[0]),
    )
    runner = GuardedAppRunner(app, limits=limits, metrics=app[METRICS], shutdown_timeout=shutdown_timeout)
    await runner.setup()
    sites: list[web.BaseSite] = [web.SockSite(runner, sock, backlog=BACKLOG) for sock in sockets]
    for site in sites or [web.TCPSite(runner, host, port, backlog=BACKLOG)]:
        await site.start()
    return runner
