"""Writing an answer to a client that may have stopped reading.

``StreamResponse.write`` waits while the socket's send buffer is full, which is as long as the client
does not read: one that stops reading a stream (a paused process, a proxy holding the connection)
would keep its in-flight slot, its upstream connection and the model's generation for ever.
``send`` bounds each write by ``TOOLSHIM_SEND_TIMEOUT``: past it the connection is dropped (nothing
more can reach that client), the request is labelled ``send_timeout`` and counted in
``toolshim_connection_drops{reason="send_timeout"}``, and ``SendTimeout`` tells the caller to close
its upstream. It does not bound a whole answer (``max_request_seconds``) or a client's request
(``connections``).
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from .state import METRICS, SETTINGS, request_info

log = logging.getLogger(__name__)


class SendTimeout(Exception):
    """The client read nothing of a write for ``send_timeout`` seconds; its connection is dropped."""


async def send(request: web.Request, response: web.StreamResponse, data: bytes) -> None:
    """``response.write(data)`` within the send timeout; ``SendTimeout`` (the connection dropped) past it."""
    seconds = request.app[SETTINGS].send_timeout
    scope = asyncio.timeout(seconds)
    try:
        async with scope:
            await response.write(data)
    except TimeoutError:
        if not scope.expired():
            raise
        drop_slow_client(request, seconds)
        raise SendTimeout from None


def drop_slow_client(request: web.Request, seconds: float) -> None:
    """Close the connection of a client that stopped reading; label, count and log it once."""
    info = request_info(request)
    info.error_code = "send_timeout"
    request.app[METRICS].record_connection_drop("send_timeout")
    log.warning("the client read nothing for %gs (TOOLSHIM_SEND_TIMEOUT): connection closed", seconds)
    if request.transport is not None:
        request.transport.abort()
