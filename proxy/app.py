"""The aiohttp application: routes, middlewares, typed app state and its life cycle.

``create_app`` wires everything; ``Runtime`` (rules + upstream clients) is swapped atomically
on reload, so a request keeps the runtime it started with.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from .context import RequestInfo
from .errors import NotFound, ProxyError, Unauthorized
from .logs import request_id_var
from .metrics import Metrics
from .rules import RuleSet, UpstreamConfig
from .settings import Settings
from .upstream import Upstream, build_upstream

log = logging.getLogger(__name__)
access_log = logging.getLogger("toolshim.access")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(slots=True)
class Runtime:
    """The rules and one client per upstream; replaced whole on reload."""

    rules: RuleSet
    upstreams: dict[str, Upstream]


@dataclass(slots=True)
class AppState:
    runtime: Runtime
    draining: bool = False
    auto_emulate_until: dict[str, float] = field(default_factory=dict)  # tool_mode auto memory


SETTINGS = web.AppKey("settings", Settings)
METRICS = web.AppKey("metrics", Metrics)
STATE = web.AppKey("state", AppState)
INFO_KEY = web.RequestKey("toolshim.info", RequestInfo)


def build_runtime(rules: RuleSet, metrics: Metrics, reuse: dict[str, tuple[UpstreamConfig, Upstream]] | None = None,
                  ) -> Runtime:
    """Clients for every upstream; unchanged configs keep their existing (warm) client."""
    upstreams: dict[str, Upstream] = {}
    for name, config in rules.upstreams.items():
        previous = (reuse or {}).get(name)
        if previous is not None and previous[0] == config:
            upstreams[name] = previous[1]
        else:
            upstreams[name] = build_upstream(name, config, metrics.observe_upstream)
    return Runtime(rules, upstreams)


def reload_rules(app: web.Application) -> tuple[bool, str]:
    """Load and validate the rules again and swap them in atomically; on error keep the old ones.

    Clients of unchanged upstreams are kept (warm pools); replaced ones are closed after the drain
    grace, so requests that started on them can finish.
    """
    from .rules import RulesError, load_rules

    settings, metrics, state = app[SETTINGS], app[METRICS], app[STATE]
    try:
        rules = load_rules(settings.rules_path)
    except RulesError as exc:
        metrics.rules_reloads.labels("error").inc()
        log.error("rules reload rejected, the old rules keep serving: %s", exc)
        return False, str(exc)
    old = state.runtime
    reuse = {name: (old.rules.upstreams[name], client) for name, client in old.upstreams.items()}
    state.runtime = build_runtime(rules, metrics, reuse)
    state.auto_emulate_until.clear()
    retired = [c for name, c in old.upstreams.items() if state.runtime.upstreams.get(name) is not c]
    if retired:
        asyncio.get_running_loop().call_later(settings.drain_seconds, _close_later, retired)
    metrics.rules_reloads.labels("ok").inc()
    log.info("rules reloaded: %d model rules, %d upstreams", len(rules.models), len(rules.upstreams))
    return True, "reloaded"


_background: set[asyncio.Task[None]] = set()


def _close_later(clients: list[Upstream]) -> None:
    for client in clients:
        task = asyncio.ensure_future(client.close())
        _background.add(task)
        task.add_done_callback(_background.discard)


def request_info(request: web.Request) -> RequestInfo:
    return request[INFO_KEY]


def _error_response(err: ProxyError) -> web.Response:
    return web.json_response(err.body(), status=err.status)


@web.middleware
async def observe_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Request id, error mapping, the access log line and the request metrics, in one place."""
    rid = request.headers.get("X-Request-Id", "")[:128] or uuid.uuid4().hex
    request_id_var.set(rid)
    info = RequestInfo(request_id=rid)
    request[INFO_KEY] = info
    status = 500
    try:
        response = await handler(request)
        status = response.status
    except ProxyError as err:
        response, status = _error_response(err), err.status
        info.extra.setdefault("error_code", err.code)
    except web.HTTPException as exc:
        err = _http_exception_error(exc)
        response, status = _error_response(err), err.status
    except asyncio.CancelledError:
        status = 499  # the client went away
        _finish(request, info, status)
        raise
    except Exception:
        log.exception("unhandled error serving %s %s", request.method, request.path)
        err = ProxyError("The server had an error while processing your request.")
        response, status = _error_response(err), 500
    if not response.prepared:
        response.headers["X-Request-Id"] = rid
    _finish(request, info, status)
    return response


def _http_exception_error(exc: web.HTTPException) -> ProxyError:
    if exc.status == 404:
        return NotFound("Unknown path; see /v1/chat/completions, /v1/models, /healthz, /metrics")
    if exc.status == 405:
        return ProxyError("Method not allowed for this path", status=405, type="invalid_request_error",
                          code="method_not_allowed")
    return ProxyError(exc.reason or "HTTP error", status=exc.status, type="invalid_request_error", code=None)


def _finish(request: web.Request, info: RequestInfo, status: int) -> None:
    duration = time.perf_counter() - info.started
    metrics = request.app[METRICS]
    if info.in_flight is not None:
        metrics.in_flight.labels(info.in_flight).dec()
        info.in_flight = None
    if info.counted:
        label = info.extra.get("error_code") or f"{status // 100}xx"
        stream = "true" if info.stream else "false"
        metrics.requests.labels(info.model, info.tool_mode, stream, str(label)).inc()
        metrics.request_duration.labels(info.model, info.tool_mode, stream).observe(duration)
        if info.stream and info.first_token is not None:
            metrics.ttft.labels(info.model, info.tool_mode).observe(info.first_token - info.started)
        if info.prompt_tokens:
            metrics.prompt_tokens.labels(info.model).inc(info.prompt_tokens)
        if info.completion_tokens:
            metrics.completion_tokens.labels(info.model).inc(info.completion_tokens)
        fields = {"method": request.method, "path": request.path, **info.summary(status, duration)}
        access_log.info("request", extra={"fields": fields, "request_id": info.request_id})


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Client keys (``TOOLSHIM_API_KEYS``) guard /v1/*; compared in constant time."""
    keys = request.app[SETTINGS].api_keys
    if keys and request.path.startswith("/v1/"):
        presented = _bearer(request)
        if presented is None or not _matches_any(presented, keys):
            raise Unauthorized("Incorrect or missing API key: send 'Authorization: Bearer <key>'.")
    return await handler(request)


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("api-key") or None


def _matches_any(presented: str, keys: tuple[str, ...]) -> bool:
    found = False
    for key in keys:
        found |= hmac.compare_digest(presented.encode(), key.encode())
    return found


async def _upstream_lifecycle(app: web.Application) -> AsyncIterator[None]:
    state = app[STATE]
    for upstream in state.runtime.upstreams.values():
        await upstream.start()
    yield
    for upstream in app[STATE].runtime.upstreams.values():
        await upstream.close()


def create_app(settings: Settings, rules: RuleSet, metrics: Metrics | None = None) -> web.Application:
    """The whole server, ready for ``web.AppRunner`` (or the aiohttp test fixtures)."""
    from . import handlers

    app = web.Application(middlewares=[observe_middleware, auth_middleware], client_max_size=settings.max_body_bytes)
    metrics = metrics or Metrics()
    app[SETTINGS] = settings
    app[METRICS] = metrics
    app[STATE] = AppState(build_runtime(rules, metrics))
    app.cleanup_ctx.append(_upstream_lifecycle)
    handlers.add_routes(app)
    return app


async def start_site(app: web.Application, host: str, port: int, *, reuse_port: bool = False,
                     shutdown_timeout: float = 30.0) -> web.AppRunner:
    """Serve ``app``; handler cancellation is on so a client that leaves cancels its upstream at once."""
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_port=reuse_port or None, backlog=1024)
    await site.start()
    return runner
