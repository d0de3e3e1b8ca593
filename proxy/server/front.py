"""The one middleware: a request's whole way in and out, in one coroutine.

In: its id and ``RequestInfo``; the drain's count (``drain.Inflight``); the guard (paths, Host,
Origin); a CORS preflight answered; client keys; the overload limit (``overload``); the handler.
Out: every error rendered (``errors.render_error``), a whole answer written within the send timeout,
the access log line and the request metrics (``middleware``).

One frame, not one per concern: asyncio resumes a handler through every coroutine that awaits it, so
each stacked middleware cost every chunk of every stream a resumption (and a trip between modules).
The checks are plain functions, in the order the stacked middlewares ran them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from aiohttp import web

from ..observe.context import RequestInfo, current_request
from ..observe.logs import request_id_var
from ..wire.errors import ShuttingDown, UpstreamError, http_status_error, render_error
from .drain import INFLIGHT
from .middleware import Handler, check_guard, check_keys, cors_preflight, endpoint_of, finish
from .overload import admit, release
from .sending import send_whole
from .state import INFO_KEY

log = logging.getLogger("toolshim.server.middleware")  # the logger these records always came from


@web.middleware
async def front_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Request id, the checks, the handler; error mapping, the access log line and the metrics."""
    info = _identify(request)
    inflight, task = request.app[INFLIGHT], asyncio.current_task()
    assert task is not None  # a handler always runs in a task
    try:
        inflight.enter(task)
        place = None
        try:
            response = _refusal_or_preflight(request)
            if response is None:
                place = admit(request)
                response = await handler(request)
        except asyncio.CancelledError:
            if inflight.was_cut(task):
                raise ShuttingDown() from None  # one cut before it answered: a 503 (retry elsewhere)
            raise
        finally:
            if place is not None:
                release(place)
            inflight.leave(task)
    except asyncio.CancelledError:
        finish(request, info, 499)  # the client went away
        raise
    except Exception as exc:
        response = _error_answer(request, info, exc)
    if not response.prepared:
        response.headers["X-Request-Id"] = info.request_id
        await send_whole(request, response)  # here, not after the return: a non-reader is bounded too
    finish(request, info, response.status)
    return response


def _identify(request: web.Request) -> RequestInfo:
    """The request's id (the client's ``X-Request-Id``, cut, or a new one) and its ``RequestInfo``."""
    rid = request.headers.get("X-Request-Id", "")[:128] or uuid.uuid4().hex
    request_id_var.set(rid)
    info = RequestInfo(request_id=rid, endpoint=endpoint_of(request))
    request[INFO_KEY] = info
    current_request.set(info)  # the upstream clients count their calls on it
    return info


def _refusal_or_preflight(request: web.Request) -> web.StreamResponse | None:
    """The guard, then a CORS preflight's answer (browsers send no keys on one), then client keys:
    raises a refusal, returns the preflight's answer, or ``None`` to go on."""
    check_guard(request)
    preflight = cors_preflight(request)
    if preflight is None:
        check_keys(request)
    return preflight


def _error_answer(request: web.Request, info: RequestInfo, exc: Exception) -> web.Response:
    """An exception as the client's error answer, logged as its level says."""
    if isinstance(exc, web.HTTPException):  # the router's refusals (unknown path, wrong method)
        view = render_error(http_status_error(exc.status, exc.reason, request.method, request.path))
        info.error_code = info.error_code or view.label
        return web.json_response(view.body, status=view.status, headers=view.headers)
    view = render_error(exc, info.upstream_calls)
    if view.level >= logging.ERROR:
        log.exception("unhandled error serving %s %s", request.method, request.path)
    elif isinstance(exc, UpstreamError):
        log.warning(
            "upstream %s failed: %s (answered %d %s)",
            info.upstream or "-",
            view.error.message,
            view.status,
            view.label,
        )
    if info.error_code is None:
        info.error_code = view.label
    return web.json_response(view.body, status=view.status, headers=view.headers)
