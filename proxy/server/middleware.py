"""What the one middleware (``front``) checks and records: the request guard (paths, Host, Origin),
a CORS preflight, client keys; the access log line and the request metrics of an answer.

Plain functions, not middlewares of their own: stacked middlewares are a coroutine each, and a
streaming handler is resumed through all of them for every chunk.
"""

from __future__ import annotations

import hmac
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import unquote

from aiohttp import web

from ..config.settings import is_loopback
from ..observe.context import RequestInfo
from ..responses.ids import ANONYMOUS_OWNER, owner_of_key
from ..wire.errors import Forbidden, InvalidRequest, Unauthorized
from .state import METRICS, OWNER_KEY, SETTINGS

if TYPE_CHECKING:
    from ..observe.metrics import Metrics

access_log = logging.getLogger("toolshim.access")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def finish(request: web.Request, info: RequestInfo, status: int) -> None:
    """Count and log the answer: every /v1 and /admin one and every error (a refusal by the guard,
    the keys, the router or the overload limit included); successful probes and scrapes are not."""
    if status >= 400 or request.path.startswith(_GUARDED):
        info.counted = True
    record_answer(request.app[METRICS], info, status, request.method, request.path, route_of(request))


def record_answer(metrics: Metrics, info: RequestInfo, status: int, method: str, path: str, route: str) -> None:
    """The request metrics and the access log line for one answer (``info.counted`` ones only).

    Also called for the answers the connection guard writes itself (``connections``)."""
    duration = time.perf_counter() - info.started
    metrics.request_finished(info, status, duration)
    if info.counted:
        fields = {"method": method, "path": path[:200], "route": route, **info.summary(status, duration)}
        access_log.info("request", extra={"fields": fields, "request_id": info.request_id})


# The ``endpoint`` label of a request, from its route (bounded: these values and "unknown").
_ENDPOINTS = (
    ("/v1/chat/completions", "chat"),
    ("/v1/responses", "responses"),
    ("/v1/models", "models"),
    ("/v1/", "passthrough"),
    ("/admin/", "admin"),
    ("/", "probe"),  # /healthz, /readyz, /metrics
)


def route_of(request: web.Request) -> str:
    """The route that matched (``/v1/models/{model}``), or ``-``: a bounded value, unlike the path."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "-"


def endpoint_of(request: web.Request) -> str:
    """The ``endpoint`` label for the route that matched; ``unknown`` when none did."""
    route = route_of(request)
    if route == "-":
        return "unknown"
    return next((name for prefix, name in _ENDPOINTS if route.startswith(prefix)), "unknown")


def check_guard(request: web.Request) -> None:
    """Refuse before anything runs: dot segments in the path (encoded or not), a ``Host`` this
    listener does not serve (DNS rebinding), a browser ``Origin`` that is not allowed (cross-site
    requests with the operator's upstream keys behind them)."""
    if has_dot_segments(request.raw_path):
        raise InvalidRequest("The path may not contain '.' or '..' segments.", code="invalid_path")
    settings = request.app[SETTINGS]
    if not host_allowed(request.host, settings.allowed_hosts, settings.loopback_only):
        raise Forbidden(
            f"Host {request.host[:100]!r} is not served here (see TOOLSHIM_ALLOWED_HOSTS).", code="host_not_allowed"
        )
    origin = request.headers.get("Origin")
    if origin is not None and request.path.startswith(_GUARDED) and not settings.origin_allowed(origin):
        raise Forbidden(
            "Requests from this web origin are not allowed (see TOOLSHIM_CORS_ORIGINS / --cors-origins).",
            code="origin_not_allowed",
        )


_CORS_METHODS = "GET, POST, OPTIONS"
_CORS_HEADERS = "Authorization, Content-Type, X-Request-Id, OpenAI-Organization, OpenAI-Project, api-key"


def cors_preflight(request: web.Request) -> web.Response | None:
    """The answer to a CORS preflight for /v1/* from an allowed origin (``check_guard`` has already
    refused any other origin), before client keys are checked: browsers send no keys on a preflight.
    ``None`` for any other request."""
    origin = request.headers.get("Origin")
    if (
        request.method == "OPTIONS"
        and origin is not None
        and request.path.startswith("/v1/")
        and "Access-Control-Request-Method" in request.headers
    ):
        asked = request.headers.get("Access-Control-Request-Headers", "")
        return web.Response(
            status=204,
            headers={
                "Access-Control-Allow-Origin": origin,
                "Access-Control-Allow-Methods": _CORS_METHODS,
                "Access-Control-Allow-Headers": asked or _CORS_HEADERS,
                "Access-Control-Max-Age": "600",
                "Vary": "Origin",
            },
        )
    return None


async def add_cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: an allowed origin may read the answer (streams and errors too)."""
    origin = request.headers.get("Origin")
    settings = request.app[SETTINGS]
    if (
        origin is None
        or not settings.allowed_origins
        or not request.path.startswith(_GUARDED)
        or not settings.origin_allowed(origin)
        or "Access-Control-Allow-Origin" in response.headers
    ):
        return
    response.headers["Access-Control-Allow-Origin"] = origin
    response.headers["Access-Control-Expose-Headers"] = "X-Request-Id"
    response.headers.add("Vary", "Origin")


_GUARDED = ("/v1/", "/admin/")
_SEPARATORS = re.compile(r"[/\\]")


def has_dot_segments(raw_path: str) -> bool:
    """``.`` or ``..`` as a path segment, as sent or after percent-decoding (up to three times)."""
    path = raw_path.split("?", 1)[0]
    for _ in range(3):
        if any(segment in (".", "..") for segment in _SEPARATORS.split(path)):
            return True
        decoded = unquote(path)
        if decoded == path:
            return False
        path = decoded
    return True  # still encoded after three rounds: nobody sends that in good faith


def host_allowed(host: str, allowed: tuple[str, ...], loopback_only: bool) -> bool:
    """The ``Host`` header's name against the allowed names (``*``: any). With none configured, a
    loopback listener serves only loopback names, so a web page cannot reach it by DNS rebinding."""
    name = host_name(host)
    if allowed:
        return "*" in allowed or name in {a.lower() for a in allowed}
    return not loopback_only or is_loopback(name)


def host_name(host: str) -> str:
    """``Host`` without its port, lower-cased: ``[::1]:8000`` → ``::1``, ``a.b:80`` → ``a.b``."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.index("]")] if "]" in host else host
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() and ":" not in name else host


def check_keys(request: web.Request) -> None:
    """Client keys (``TOOLSHIM_API_KEYS``) guard /v1/*, the metrics key (``TOOLSHIM_METRICS_KEY``, where
    set) guards /metrics: its figures (models served, traffic, errors) are for the operator; compared in
    constant time. The request's owner
    of stored responses is the key it was let in with (its HMAC), or the anonymous owner without keys."""
    settings = request.app[SETTINGS]
    if settings.metrics_key and request.path == "/metrics":
        presented = _bearer(request)
        if presented is None or not secret_matches(presented, settings.metrics_key):
            raise Unauthorized("Incorrect or missing metrics key: send 'Authorization: Bearer <TOOLSHIM_METRICS_KEY>'.")
    keys = settings.api_keys
    if keys and request.path.startswith("/v1/"):
        presented = _bearer(request)
        if presented is None or not _matches_any(presented, keys):
            raise Unauthorized("Incorrect or missing API key: send 'Authorization: Bearer <key>'.")
        request[OWNER_KEY] = owner_of_key(presented)
    elif not keys:
        request[OWNER_KEY] = ANONYMOUS_OWNER


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("api-key") or None


def _matches_any(presented: str, keys: tuple[str, ...]) -> bool:
    found = False
    for key in keys:
        found |= secret_matches(presented, key)
    return found


def secret_matches(presented: str, secret: str) -> bool:
    """Constant-time comparison of a header value with a configured secret. Header bytes that are
    not UTF-8 arrive as surrogate escapes: compared as the bytes sent, never an encoding error."""
    return hmac.compare_digest(presented.encode("utf-8", "surrogateescape"), secret.encode())
