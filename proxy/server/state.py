"""Typed application state: the keys, the swappable runtime (rules + upstream clients), reloads.

``Runtime`` is swapped atomically on reload, so a request keeps the runtime it started with.
Handlers and middlewares read state through these keys; nothing here knows about routes.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from aiohttp import web

from ..config.loading import load_rules
from ..config.rules import RulesError, RuleSet, UpstreamConfig
from ..config.settings import Settings
from ..observe.context import RequestInfo
from ..observe.metrics import Metrics
from ..observe.redact import REDACTOR
from ..responses.store import ResponseStore
from ..upstream import Upstream, build_upstream
from .catalog import ModelCatalog
from .reloads import Fleet, ReloadBoard

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Runtime:
    """The rules and one client per upstream; replaced whole on reload."""

    rules: RuleSet
    upstreams: dict[str, Upstream]
    catalog: ModelCatalog = field(default_factory=ModelCatalog)  # GET /v1/models, cached upstream lists


@dataclass(slots=True)
class AppState:
    runtime: Runtime
    draining: bool = False
    in_flight: int = 0  # /v1 requests being served by this worker (overload)
    auto_emulate_until: dict[str, float] = field(default_factory=dict)  # tool_mode auto memory
    fleet: Fleet | None = None  # set in a supervised worker: /admin/reload reaches every worker through it


SETTINGS = web.AppKey("settings", Settings)
METRICS = web.AppKey("metrics", Metrics)
STATE = web.AppKey("state", AppState)
RESPONSES_STORE = web.AppKey("responses_store", ResponseStore)
INFO_KEY = web.RequestKey("toolshim.info", RequestInfo)
# Who stored responses belong to, set by ``auth_middleware`` for /v1 (``responses.ids.owner_of_key``).
OWNER_KEY = web.RequestKey("toolshim.owner", str)


def build_runtime(
    rules: RuleSet,
    metrics: Metrics,
    reuse: dict[str, tuple[UpstreamConfig, Upstream]] | None = None,
    max_event_bytes: int | None = None,
) -> Runtime:
    """Clients for every upstream; unchanged configs keep their existing (warm) client."""
    upstreams: dict[str, Upstream] = {}
    for name, config in rules.upstreams.items():
        previous = (reuse or {}).get(name)
        if previous is not None and previous[0] == config:
            upstreams[name] = previous[1]
        else:
            upstreams[name] = build_upstream(name, config, metrics.observe_upstream, max_event_bytes)
    return Runtime(rules, upstreams)


def configured_secrets(rules: RuleSet, settings: Settings) -> list[str | None]:
    """Every secret the operator configured: upstream keys, header values and credentials inside base_urls,
    client, admin and metrics keys."""
    secrets: list[str | None] = [*settings.api_keys, settings.admin_key, settings.metrics_key, settings.redis_url]
    for config in rules.upstreams.values():
        secrets.extend(config.secrets())
    return secrets


def reload_rules(app: web.Application) -> tuple[bool, str]:
    """Load and validate the rules again and swap them in atomically; on error keep the old ones.

    Clients of unchanged upstreams are kept (warm pools); replaced ones are closed after the drain
    grace, so requests that started on them can finish.
    """
    settings, metrics, state = app[SETTINGS], app[METRICS], app[STATE]
    try:
        rules = load_rules(settings.rules_path)
    except RulesError as exc:
        metrics.record_reload(ok=False)
        log.error("rules reload rejected, the old rules keep serving: %s", exc)
        return False, str(exc)
    old = state.runtime
    reuse = {name: (old.rules.upstreams[name], client) for name, client in old.upstreams.items()}
    state.runtime = build_runtime(rules, metrics, reuse, settings.max_upstream_event_bytes)
    REDACTOR.update(configured_secrets(rules, settings))
    state.auto_emulate_until.clear()
    retired = [c for name, c in old.upstreams.items() if state.runtime.upstreams.get(name) is not c]
    if retired:
        asyncio.get_running_loop().call_later(settings.drain_seconds, _close_later, retired)
    metrics.record_reload(ok=True)
    log.info("rules reloaded: %d model rules, %d upstreams", len(rules.models), len(rules.upstreams))
    return True, "reloaded"


def reload_and_report(app: web.Application, board: ReloadBoard) -> None:
    """A supervised worker's SIGHUP: reload, and tell the board for the generation read first."""
    generation = board.current().number
    ok, message = reload_rules(app)
    board.report(generation, ok, message)


_background: set[asyncio.Task[None]] = set()


def _close_later(clients: list[Upstream]) -> None:
    for client in clients:
        task = asyncio.ensure_future(client.close())
        _background.add(task)
        task.add_done_callback(_background.discard)


def request_info(request: web.Request) -> RequestInfo:
    return request[INFO_KEY]
