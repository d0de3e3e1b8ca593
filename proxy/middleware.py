"""The middlewares: request id, error rendering, access log and request metrics; client keys.

Every error a handler raises, and every bug, is rendered by ``errors.render_error`` here;
streams that already started render theirs in ``handlers.send_stream`` with the same function.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
import uuid
from collections.abc import Awaitable, Callable

from aiohttp import web

from .context import RequestInfo
from .errors import ProxyError, Unauthorized, http_status_error, render_error
from .logs import request_id_var
from .state import INFO_KEY, METRICS, SETTINGS

log = logging.getLogger(__name__)
access_log = logging.getLogger("toolshim.access")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def observe_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Request id, error mapping, the access log line and the request metrics, in one place."""
    rid = request.headers.get("X-Request-Id", "")[:128] or uuid.uuid4().hex
    request_id_var.set(rid)
    info = RequestInfo(request_id=rid)
    request[INFO_KEY] = info
    try:
        response = await handler(request)
    except asyncio.CancelledError:
        _finish(request, info, 499)  # the client went away
        raise
    except web.HTTPException as exc:  # the router's refusals (unknown path, wrong method)
        view = render_error(http_status_error(exc.status, exc.reason))
        response = web.json_response(view.body, status=view.status)
    except Exception as exc:
        view = render_error(exc)
        if view.level >= logging.ERROR:
            log.exception("unhandled error serving %s %s", request.method, request.path)
        if isinstance(exc, ProxyError) and info.error_code is None:
            info.error_code = view.label
        response = web.json_response(view.body, status=view.status)
    if not response.prepared:
        response.headers["X-Request-Id"] = rid
    _finish(request, info, response.status)
    return response


def _finish(request: web.Request, info: RequestInfo, status: int) -> None:
    duration = time.perf_counter() - info.started
    request.app[METRICS].request_finished(info, status, duration)
    if info.counted:
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


