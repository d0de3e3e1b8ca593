"""Writing an answer to a client that may have stopped reading.

``StreamResponse.write`` waits while the socket's send buffer is full, which is as long as the client
does not read: one that stops reading a stream (a paused process, a proxy holding the connection)
would keep its in-flight slot, its upstream connection and the model's generation for ever.
``send`` bounds each write by ``TOOLSHIM_SEND_TIMEOUT``: past it the connection is dropped (nothing
more can reach that client), the request is labelled ``send_timeout`` and counted in
``toolshim_connection_drops{reason="send_timeout"}``, and ``SendTimeout`` tells the caller to close
its upstream. ``send_whole`` bounds a whole (non-streamed) answer the same way: aiohttp would write it
after the handler returned and wait as long as the client does not read, holding the task and the body.
It does not bound a whole answer's making (``max_request_seconds``) or a client's request
(``connections``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import aiohttp
from aiohttp import web

from .state import METRICS, SETTINGS, request_info

log = logging.getLogger(__name__)


class SendTimeout(Exception):
    """The client read nothing of a write for ``send_timeout`` seconds; its connection is dropped."""


async def send(request: web.Request, response: web.StreamResponse, data: bytes) -> None:
    """``response.write(data)`` within the send timeout; ``SendTimeout`` (the connection dropped) past it.

    A write that cannot wait is made without arming the timer (which cost a stream's every chunk a
    timer set and cancelled): see ``cannot_wait``."""
    if cannot_wait(request, len(data)):
        await response.write(data)
        return
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


# Room left for what aiohttp writes around the data: chunk framing, the head of the first write.
_FRAMING_ROOM = 16 * 1024


def cannot_wait(request: web.Request, size: int) -> bool:
    """Whether writing ``size`` bytes now returns without waiting for the client. A write waits only
    for flow control: the transport pauses its writer once its buffer passes the high-water mark, and
    resumes it below the low one. A writer not paused whose buffer stays under the mark with these
    bytes in it never waits; a transport that does not tell its buffer is assumed to."""
    transport, protocol = request.transport, request.protocol
    if transport is None or protocol is None or protocol.writing_paused:
        return False
    try:
        high = transport.get_write_buffer_limits()[1]
        buffered = transport.get_write_buffer_size()
    except (AttributeError, NotImplementedError):
        return False
    return buffered + size + _FRAMING_ROOM <= high


async def send_whole(request: web.Request, response: web.StreamResponse) -> None:
    """Write a not yet started answer (head and body) within the send timeout; past it the connection
    is dropped as ``send`` drops it. A client that hung up is labelled ``client_closed``. An answer of
    known size that cannot wait (``cannot_wait``) is written without arming the timer."""
    seconds = request.app[SETTINGS].send_timeout
    size = response.content_length
    scope = None if size is not None and cannot_wait(request, size) else asyncio.timeout(seconds)
    try:
        async with scope or contextlib.nullcontext():
            await response.prepare(request)
            await response.write_eof()
    except TimeoutError:
        if scope is None or not scope.expired():
            raise
        drop_slow_client(request, seconds)
    except (ConnectionResetError, aiohttp.ClientConnectionResetError):
        request_info(request).error_code = "client_closed"


def drop_slow_client(request: web.Request, seconds: float) -> None:
    """Close the connection of a client that stopped reading; label, count and log it once."""
    info = request_info(request)
    info.error_code = "send_timeout"
    request.app[METRICS].record_connection_drop("send_timeout")
    log.warning("the client read nothing for %gs (TOOLSHIM_SEND_TIMEOUT): connection closed", seconds)
    if request.transport is not None:
        request.transport.abort()
