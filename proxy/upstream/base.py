"""What every upstream client offers, and the stream object the response side reads.

Streams yield payloads: the ``data`` text of the upstream's SSE events (``[DONE]`` is consumed,
not yielded), or chunk dicts where the client library already built them (litellm). Closing a
stream closes its connection, which is how a model server learns to stop generating.

A client hands its stream a ``Body``: the pieces its library reads off the connection and a sans-IO
``PayloadReader`` that undoes their framing (``wire.sse.PayloadReader`` for event streams). The stream
is the one loop between the network and its reader: the payloads of a piece are handed on from here,
not through a generator of each client's own (one frame less to resume for every piece).

A stream also paces its reader (``pace``): an upstream that sends faster than the answer is parsed
always has the next payload buffered, so reading it never waits and the loop would run this one
request until its end, holding /healthz and every other request. After each payload the reader has
handled, and wherever it calls ``pace`` inside one, the stream yields to the event loop once
``PACE_SECONDS`` have gone by since the loop last ran others: since its last yield here, or since a
read that had to wait for the network (a callback queued before the read has run by then). A
stream whose every read waits, a model generating token by token, never yields twice for one.

``open_stream`` adds the rule's ``first_token_timeout``: the headers and then the first token
(content, reasoning, a call, or the finish) must come within it, else ``FirstTokenTimeout``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..observe.context import count_upstream_call
from ..wire.errors import (
    FirstTokenTimeout,
    ProxyError,
    UpstreamBusy,
    UpstreamDisconnected,
    UpstreamHTTPError,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from .delta import Payload, decode_payload

PACE_SECONDS = 0.005  # at most this long on one request's stream before the others get the loop

# observer(upstream_name, outcome, seconds, http_status_or_None)
Observer = Callable[[str, str, float, int | None], None]


def outcome_of(error: BaseException | None) -> str:
    """The bounded ``outcome`` label for an upstream call that ended with ``error``."""
    if error is None:
        return "ok"
    if isinstance(error, UpstreamTimeout):
        return "timeout"
    if isinstance(error, UpstreamBusy):
        return "pool_full"
    if isinstance(error, UpstreamUnavailable):
        return "connect_error"
    if isinstance(error, UpstreamDisconnected):
        return "disconnected"
    if isinstance(error, UpstreamHTTPError):
        return "http_error"
    if isinstance(error, UpstreamProtocolError):
        return "protocol_error"
    return "error"


def report(
    observer: Observer | None, name: str, started: float, error: BaseException | None, outcome: str | None = None
) -> None:
    """Tell the observer how an upstream call ended: outcome, seconds since ``started``, HTTP status;
    count it on the request being served (its retry budget, ``errors.retry_headers``)."""
    count_upstream_call()
    if observer is not None:
        status = error.status if isinstance(error, UpstreamHTTPError) else None
        observer(name, outcome or outcome_of(error), time.perf_counter() - started, status)


class PayloadReader(Protocol):
    """Sans-IO: the pieces of an upstream's answer in, its payloads out (see ``wire.sse.PayloadReader``)."""

    over: bool  # the answer ended (its end marker, or a failure): nothing after this is read

    def feed(self, piece: Any) -> Sequence[Payload]: ...

    def end(self) -> Sequence[Payload]:
        """The connection's end: what was still held."""
        ...

    def failure(self) -> ProxyError | None:
        """What the answer ended in, when not a clean end."""
        ...


def _nothing() -> None:
    return None


def _not_ours(_exc: Exception) -> ProxyError | None:
    return None


@dataclass(frozen=True, slots=True)
class Body:
    """Where a stream's payloads come from."""

    pieces: AsyncIterator[Any]  # what the client library reads off the connection
    reader: PayloadReader
    close: Callable[[], Any]  # drop the connection (may return an awaitable): generation stops
    release: Callable[[], None] = _nothing  # after a clean end: the connection may be used again
    error: Callable[[Exception], ProxyError | None] = _not_ours  # the library's failure as ours


class UpstreamStream:
    """A started upstream stream: iterate for event payloads; always ``aclose`` it."""

    def __init__(self, name: str, body: Body, observer: Observer | None, started: float) -> None:
        self.name = name
        self._body = body
        self._observer = observer
        self._started = started
        self._finished = False
        self._first_token_by: float | None = None  # loop time by which a token must have come
        self._first_token_timeout = 0.0
        self._paced_at = time.perf_counter()
        self._loop_ran: list[None] = []  # filled by a callback queued before a read: the loop ran meanwhile

    def expect_first_token(self, deadline: float, seconds: float) -> None:
        """Until a payload starts the answer, waiting past ``deadline`` (loop time) is a ``FirstTokenTimeout``."""
        self._first_token_by, self._first_token_timeout = deadline, seconds

    def __aiter__(self) -> AsyncIterator[Payload]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Payload]:
        body, reader, loop_ran = self._body, self._body.reader, self._loop_ran
        call_soon = asyncio.get_running_loop().call_soon
        try:
            while not reader.over:
                call_soon(loop_ran.append, None)  # list.append: no frame of ours for the loop to run
                try:  # no first-token wait: the library's pieces at first hand
                    piece = await (anext(body.pieces) if self._first_token_by is None else self._first_piece())
                except StopAsyncIteration:
                    break
                if loop_ran:  # the read waited: others ran, a new slice of time starts here
                    loop_ran.clear()
                    self._paced_at = time.perf_counter()
                for payload in reader.feed(piece):
                    if self._first_token_by is not None and _starts_answer(payload):
                        self._first_token_by = None
                    yield payload
                    await self.pace()
            for payload in reader.end():
                yield payload
            failure = reader.failure()
            if failure is not None:
                raise failure
            body.release()
            self._report(None)
        except ProxyError as exc:
            self._report(exc)
            raise
        except Exception as exc:
            mapped = body.error(exc)
            if mapped is None:
                raise
            self._report(mapped)
            raise mapped from None

    async def _first_piece(self) -> Any:
        assert self._first_token_by is not None
        scope = asyncio.timeout_at(self._first_token_by)
        try:
            async with scope:
                return await anext(self._body.pieces)
        except TimeoutError:
            if scope.expired():
                raise _first_token_error(self.name, self._first_token_timeout) from None
            raise

    async def pace(self) -> None:
        """Yield to the event loop when ``PACE_SECONDS`` have passed since the last yield here.

        Wall time, not CPU time: it also counts waits for the network, which only makes the yield a
        little more frequent (one ``sleep(0)`` costs microseconds)."""
        if time.perf_counter() - self._paced_at >= PACE_SECONDS:
            await asyncio.sleep(0)
            self._loop_ran.clear()
            self._paced_at = time.perf_counter()

    async def aclose(self) -> None:
        """Close the connection now (stops generation upstream); idempotent."""
        if not self._finished:
            self._report(_Cancelled())
        result = self._body.close()
        if hasattr(result, "__await__"):
            await result

    def _report(self, error: BaseException | None) -> None:
        if self._finished:
            return
        self._finished = True
        report(self._observer, self.name, self._started, error, "cancelled" if isinstance(error, _Cancelled) else None)


def _starts_answer(payload: Payload) -> bool:
    """A token (or the finish) ends the first-token wait; so does a bad payload, which its reader reports."""
    try:
        delta = decode_payload(payload)
    except ProxyError:
        return True
    return delta.has_output or delta.finish_reason is not None


def _first_token_error(name: str, seconds: float) -> FirstTokenTimeout:
    return FirstTokenTimeout(
        f"upstream '{name}' sent no token within {seconds:g} seconds (the rule's first_token_timeout)"
    )


async def open_stream(upstream: Upstream, body: dict[str, Any], first_token_timeout: float | None) -> UpstreamStream:
    """``upstream.stream(body)`` under the rule's first-token limit (``None``: no limit of its own).

    The limit counts from the request: a server that sends headers at once and then thinks for
    minutes is caught as surely as one that sends nothing. Expiry closes the upstream connection."""
    if first_token_timeout is None:
        return await upstream.stream(body)
    deadline = asyncio.get_running_loop().time() + first_token_timeout
    scope = asyncio.timeout_at(deadline)
    try:
        async with scope:
            stream = await upstream.stream(body)
    except TimeoutError:
        if scope.expired():
            raise _first_token_error(upstream.name, first_token_timeout) from None
        raise
    stream.expect_first_token(deadline, first_token_timeout)
    return stream


class _Cancelled(Exception):
    """Marker: the stream was closed by us before the upstream finished it."""


class Upstream(Protocol):
    name: str

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """A non-streaming chat completion; raises a ``ProxyError`` subclass on failure."""
        ...

    async def stream(self, body: dict[str, Any]) -> UpstreamStream:
        """Start a streaming chat completion; errors before the first event raise here."""
        ...

    async def count_tokens(self, text: str, model: str) -> int | None:
        """Tokens in ``text`` by the upstream's tokenizer; ``None`` when it has none or it failed."""
        ...

    async def forward(self, method: str, path: str, body: bytes, content_type: str | None) -> Any:
        """Pass another ``/v1/*`` call through (OpenAI-compatible upstreams only)."""
        ...
