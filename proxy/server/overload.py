"""Overload control: a per-worker limit on /v1 requests in flight, shed at once with 503 + Retry-After.

Past the limit, queueing only turns into slow failures (a full upstream pool, then a misleading
timeout); a prompt 503 with ``Retry-After`` lets clients and load balancers back off or go
elsewhere. /healthz, /readyz, /metrics and /admin are never limited. Connections the connection
guard admitted past its cap (``connections``, ``overflow``) get the same 503 for /v1 and are
closed after their answer. The limit counts requests from the middleware to the handler's end,
so a stream holds its place until it finishes (``admit`` and ``release``, called by ``front``).
"""

from __future__ import annotations

from aiohttp import web

from ..wire.errors import Overloaded
from .connections import GuardedRequestHandler
from .state import METRICS, SETTINGS, STATE, AppState


def admit(request: web.Request) -> AppState | None:
    """Take a place for the request if this worker has room for it (the state to ``release`` it to at
    its end; ``None``: the request is not limited), else raise ``Overloaded`` (503 with Retry-After)."""
    overflow = _overflow_connection(request)
    if overflow is not None:
        overflow.close()  # after this answer: the place goes back to connections within the cap
    if not request.path.startswith("/v1/") or request.method == "OPTIONS":
        return None
    if overflow is not None:
        request.app[METRICS].record_shed("connection_limit")
        raise Overloaded("This server has too many open connections; retry shortly.", code="too_many_connections")
    state, limit = request.app[STATE], request.app[SETTINGS].max_in_flight
    if state.in_flight >= limit:
        request.app[METRICS].record_shed("in_flight_limit")
        raise Overloaded(f"This server is serving its limit of {limit} requests at once; retry shortly.")
    state.in_flight += 1
    return state


def release(state: AppState) -> None:
    """The request's place back, when its handler has ended (a stream when it finished)."""
    state.in_flight -= 1


def _overflow_connection(request: web.Request) -> GuardedRequestHandler | None:
    """The connection, if the guard admitted it past its cap."""
    protocol = request.protocol
    return protocol if isinstance(protocol, GuardedRequestHandler) and protocol.overflow else None
