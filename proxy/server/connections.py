"""Bounds on client connections, below the app: head and body read time, idle time, how many.

aiohttp's server has an idle keep-alive timer and nothing else: a client sending one header line
every few seconds, or a body at a byte a second, holds its socket for ever, and enough of them
exhaust the worker's file descriptors. ``GuardedAppRunner`` serves the app through
``GuardedServer`` / ``GuardedRequestHandler``, which add, per connection and per worker:

* head timeout: from a request's first byte to the end of its head; past it: 408, closed;
* body timeout: from the end of the head to the end of the body; past it the body read fails
  with ``RequestTimeout`` (the middleware answers 408) and the connection closes;
* idle timeout: aiohttp's own keep-alive timer (``keepalive_timeout``), for connections with no
  request started;
* a cap on open connections. At the cap a new connection closes the one that has waited longest
  for a request (idle keep-alive, a fresh connection that sent nothing, a head still arriving);
  when every connection is busy with a request, a small overflow band still admits connections,
  whose /v1 requests are shed with 503 (``overload``) while /healthz, /readyz and /metrics answer;
  past the band a connection gets 503 and is closed at once;
* JSON bodies for the HTTP parser's own 400s (malformed request line, header too long, bad
  chunked encoding, ...), which aiohttp sends as ``text/plain``.

It relies on four of ``RequestHandler``'s attributes (``_messages``, ``_request_in_progress``,
``_close``, ``_force_close``); tests/test_connections.py fails if aiohttp changes them.
Its own answers (the 408, the 503 at the cap, the parser's 400s) are counted and logged like the app's
(``middleware.record_answer``).
It does not limit requests in flight (``overload``) or touch the upstream side.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus
from itertools import islice
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMethod
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler

from ..observe.context import RequestInfo
from ..observe.metrics import Metrics
from ..wire.errors import ErrorView, Overloaded, ProxyError, RequestTimeout, bad_http_request, render_error
from ..wire.jsoncodec import dumps
from .middleware import record_answer

log = logging.getLogger(__name__)

FD_RESERVE = 256  # descriptors kept for upstream connections, files and the listener
OVERFLOW_BAND = 32  # connections admitted past the cap while none is idle (health checks, metrics)
# After a 408 we send FIN and keep reading (and dropping) what the client still sends for this long:
# closing with its bytes unread would answer them with a reset, which can cut our 408 short.
LINGER = 2.0


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The per-worker connection bounds (from ``Settings``)."""

    head_timeout: float
    body_timeout: float
    keepalive_timeout: float
    max_connections: int
    overflow: int = OVERFLOW_BAND  # admitted past the cap while no connection is idle


def raw_error(error: ProxyError, request_id: str | None = None) -> bytes:
    """A whole HTTP/1.1 answer carrying ``error`` in OpenAI's shape, then ``Connection: close``:
    for connections that are closed before (or instead of) reaching the app."""
    view = render_error(error)
    body = dumps(view.body)
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "Content-Length": str(len(body)),
        "Connection": "close",
        **view.headers,
        **({"X-Request-Id": request_id} if request_id else {}),
    }
    head = f"HTTP/1.1 {view.status} {HTTPStatus(view.status).phrase}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return head.encode("latin-1") + b"\r\n" + body


class GuardedRequestHandler(RequestHandler):
    """aiohttp's protocol with the head and body timers and JSON protocol errors."""

    __slots__ = ("_body", "_body_late", "_guard", "_head_timer", "overflow")

    def __init__(self, manager: GuardedServer, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._guard = manager
        self._head_timer: asyncio.TimerHandle | None = None
        self._body: StreamReader | None = None  # the last request's body, while it is being received
        self._body_late = False
        self.overflow = False  # admitted past the cap: /v1 requests on it are shed (see overload)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._guard.admit(self)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_head_timer()
        self._guard.forget(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Start the head timer when bytes of a head arrive and it is not complete yet (a head that
        comes whole, the usual case, needs no timer); stop it when the parser has the head."""
        queued, head_bytes = len(self._messages), not self._receiving_body()
        super().data_received(data)
        if len(self._messages) > queued:
            self._heads_parsed(payload for _, payload in islice(self._messages, queued, None))
        elif data and head_bytes and self._head_timer is None and not (self._close or self._force_close):
            self._head_timer = self._loop.call_later(self._guard.limits.head_timeout, self._head_overdue)

    def _receiving_body(self) -> bool:
        return self._body is not None and not self._body.is_eof()

    def _heads_parsed(self, payloads: Iterable[StreamReader]) -> None:
        """Heads are complete: the connection is busy; each unfinished body gets its deadline."""
        self._cancel_head_timer()
        self._guard.busy(self)
        for payload in payloads:
            if payload.is_eof():
                continue
            self._body = payload
            timer = self._loop.call_later(self._guard.limits.body_timeout, self._body_overdue, payload)
            payload.on_eof(timer.cancel)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_overdue(self) -> None:
        self._head_timer = None
        if self.transport is None:
            return
        if self._request_in_progress or self._messages:  # an answer is on its way: close after it
            self.close()
            return
        self._guard.metrics.record_connection_drop("head_timeout")
        seconds = self._guard.limits.head_timeout
        self._guard.write_refusal(self, RequestTimeout(f"The request head did not arrive within {seconds:g}s."))
        self.close()  # parse nothing more: what still arrives is dropped
        self._half_close()
        self._loop.call_later(LINGER, self.force_close)

    def _half_close(self) -> None:
        """Send FIN after what is written; the socket stays open for reading (see ``LINGER``)."""
        if self.transport is not None and self.transport.can_write_eof():
            self.transport.write_eof()

    def _body_overdue(self, payload: StreamReader) -> None:
        """The body is late: its reader fails (the handler's read answers 408), then we close."""
        if payload.is_eof() or self.transport is None:
            return
        self._guard.metrics.record_connection_drop("body_timeout")
        seconds = self._guard.limits.body_timeout
        payload.set_exception(RequestTimeout(f"The request body did not arrive within {seconds:g}s."))
        self._body_late = True
        self.close()  # parse nothing more: what still arrives is dropped; close once the answer is out

    async def finish_response(
        self, request: web.BaseRequest, resp: web.StreamResponse, start_time: float | None
    ) -> tuple[web.StreamResponse, bool]:
        """After an answer the connection waits for the next request: it can give way at the cap.
        After the 408 for a late body it lingers (``LINGER``) before aiohttp closes it."""
        result = await super().finish_response(request, resp, start_time)
        if self._body_late:
            self._half_close()
            await asyncio.sleep(LINGER)  # cut short when the client closes (handler cancellation)
        elif not self._messages and not self._close and not self._force_close:
            self._guard.idle(self)
        return result

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """The parser's refusals (and anything that escaped the app) in OpenAI's shape, not text/plain."""
        if request.writer.output_size > 0:  # part of an answer is out: nothing more can be said
            raise ConnectionError("Response is sent already, cannot send another response with the error message")
        view = _protocol_error_view(status, exc, message)
        if view.level >= logging.ERROR:
            log.error("unhandled error serving a request", exc_info=exc)
        else:  # TLS or other non-HTTP bytes on the port are everyday internet noise: DEBUG
            level = logging.DEBUG if isinstance(exc, BadHttpMethod) else logging.INFO
            log.log(level, "refused a malformed HTTP request: %s", view.error.message)
        request_id = self._guard.record_refusal(view)
        resp = web.json_response(view.body, status=view.status, headers={**view.headers, "X-Request-Id": request_id})
        resp.force_close()
        return resp


def _protocol_error_view(status: int, exc: BaseException | None, message: str | None) -> ErrorView:
    if status == 400:
        return render_error(bad_http_request(message or str(exc or "bad request")))
    if status == 504:
        return render_error(ProxyError("The server timed out serving the request.", status=504, code="timeout"))
    return render_error(exc if isinstance(exc, ProxyError) else RuntimeError("unhandled"))


class GuardedServer(web.Server):
    """aiohttp's low-level server with the connection cap, the idle-first eviction and the gauge."""

    def __init__(
        self,
        handler: Any,
        *,
        limits: ConnectionLimits,
        metrics: Metrics,
        request_factory: Any,
        handler_cancellation: bool,
        **handler_kwargs: Any,
    ) -> None:
        super().__init__(handler, request_factory=request_factory, handler_cancellation=handler_cancellation)
        self.limits = limits
        self.metrics = metrics
        self._open: set[GuardedRequestHandler] = set()  # counted against the cap
        self._idle: dict[GuardedRequestHandler, None] = {}  # insertion order: waiting longest first
        self._handler_kwargs = handler_kwargs

    def __call__(self) -> GuardedRequestHandler:
        return GuardedRequestHandler(self, loop=self._loop, **self._handler_kwargs)

    def admit(self, handler: GuardedRequestHandler) -> None:
        """A new connection: count it; at the cap make room by closing the longest-idle one."""
        self.metrics.connection_opened()
        self._open.add(handler)
        cap = self.limits.max_connections
        if len(self._open) > cap:
            self._evict_idle()
        if len(self._open) > cap + self.limits.overflow:
            self._refuse(handler)
            return
        handler.overflow = len(self._open) > cap
        self._idle[handler] = None

    def _evict_idle(self) -> None:
        for victim in self._idle:
            self.metrics.record_connection_drop("idle_evicted")
            self._uncount(victim)
            victim.force_close()
            return

    def _refuse(self, handler: GuardedRequestHandler) -> None:
        self.metrics.record_connection_drop("refused")
        self.metrics.record_shed("connection_limit")
        busy = Overloaded("This server has too many open connections; retry shortly.", code="too_many_connections")
        self.write_refusal(handler, busy)
        self._uncount(handler)
        handler.force_close()

    def write_refusal(self, handler: GuardedRequestHandler, error: ProxyError) -> None:
        """Answer on the raw connection (no request reached the app), counted and logged like any answer."""
        if handler.transport is not None:
            handler.transport.write(raw_error(error, self.record_refusal(render_error(error))))

    def record_refusal(self, view: ErrorView) -> str:
        """Count and log an answer the guard gave itself, as the middleware does for the app's; its request id."""
        info = RequestInfo(request_id=uuid.uuid4().hex, endpoint="unknown", counted=True, error_code=view.label)
        record_answer(self.metrics, info, view.status, "-", "-", "-")
        return info.request_id

    def busy(self, handler: GuardedRequestHandler) -> None:
        self._idle.pop(handler, None)

    def idle(self, handler: GuardedRequestHandler) -> None:
        if handler in self._open:
            self._idle.pop(handler, None)
            self._idle[handler] = None

    def forget(self, handler: GuardedRequestHandler) -> None:
        """The connection is gone (closed by either side); called once per connection."""
        self.metrics.connection_closed()
        self._uncount(handler)

    def _uncount(self, handler: GuardedRequestHandler) -> None:
        """No longer counted against the cap (closing, or gone)."""
        self._open.discard(handler)
        self._idle.pop(handler, None)


class GuardedAppRunner(web.AppRunner):
    """``web.AppRunner`` serving through ``GuardedServer``."""

    def __init__(
        self, app: web.Application, *, limits: ConnectionLimits, metrics: Metrics, shutdown_timeout: float
    ) -> None:
        # auto_decompress off: a compressed body is refused unread (handlers.read_json), never inflated
        super().__init__(
            app, handler_cancellation=True, access_log=None, shutdown_timeout=shutdown_timeout, auto_decompress=False
        )
        self._limits = limits
        self._metrics = metrics

    async def _make_server(self) -> web.Server:
        """The plain server's handler and request factory (the app's start-up runs here, once), served
        through ``GuardedServer``. Handler cancellation: a client that leaves cancels its upstream."""
        plain = await super()._make_server()
        return GuardedServer(
            plain.request_handler,
            request_factory=plain.request_factory,
            handler_cancellation=True,
            limits=self._limits,
            metrics=self._metrics,
            keepalive_timeout=self._limits.keepalive_timeout,
            access_log=None,
            auto_decompress=False,
        )


def raise_fd_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit; return the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            log.warning("could not raise the open-files limit from %d to %d", soft, target)
    return soft


def connection_cap(wanted: int, fd_limit: int) -> int:
    """``max_connections``, lowered (with a warning) so client sockets cannot exhaust the descriptors."""
    if fd_limit == resource.RLIM_INFINITY:
        return wanted
    usable = max(16, fd_limit - FD_RESERVE - OVERFLOW_BAND)
    if wanted <= usable:
        return wanted
    log.warning(
        "TOOLSHIM_MAX_CONNECTIONS=%d does not fit the open-files limit (%d): serving at most %d connections",
        wanted,
        fd_limit,
        usable,
    )
    return usable
