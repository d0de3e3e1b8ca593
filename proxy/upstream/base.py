"""What every upstream client offers, and the stream object the response side reads.

Streams yield payloads: the ``data`` text of the upstream's SSE events (``[DONE]`` is consumed,
not yielded), or chunk dicts where the client library already built them (litellm). Closing a
stream closes its connection, which is how a model server learns to stop generating.

A stream also paces its reader (``pace``): an upstream that sends faster than the answer is parsed
always has the next payload buffered, so reading it never waits and the loop would run this one
request until its end, holding /healthz and every other request. After each payload the reader has
handled, and wherever it calls ``pace`` inside one, the stream yields to the event loop once
``PACE_SECONDS`` of work have gone by since it last did.

``open_stream`` adds the rule's ``first_token_timeout``: the headers and then the first token
(content, reasoning, a call, or the finish) must come within it, else ``FirstTokenTimeout``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
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


class UpstreamStream:
    """A started upstream stream: iterate for event payloads; always ``aclose`` it."""

    def __init__(
        self,
        name: str,
        payloads: AsyncIterator[Payload],
        closer: Callable[[], Any],
        observer: Observer | None,
        started: float,
    ) -> None:
        self.name = name
        self._payloads = payloads
        self._closer = closer
        self._observer = observer
        self._started = started
        self._finished = False
        self._first_token_by: float | None = None  # loop time by which a token must have come
        self._first_token_timeout = 0.0
        self._paced_at = time.perf_counter()

    def expect_first_token(self, deadline: float, seconds: float) -> None:
        """Until a payload starts the answer, waiting past ``deadline`` (loop time) is a ``FirstTokenTimeout``."""
        self._first_token_by, self._first_token_timeout = deadline, seconds

    def __aiter__(self) -> AsyncIterator[Payload]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Payload]:
        try:
            while True:
                try:  # no first-token wait: the payloads at first hand, a frame less to resume per event
                    payload = await (self._next() if self._first_token_by is not None else anext(self._payloads))
                except StopAsyncIteration:
                    break
                yield payload
                await self.pace()
            self._report(None)
        except ProxyError as exc:
            self._report(exc)
            raise

    async def _next(self) -> Payload:
        if self._first_token_by is None:
            return await anext(self._payloads)
        scope = asyncio.timeout_at(self._first_token_by)
        try:
            async with scope:
                payload = await anext(self._payloads)
        except TimeoutError:
            if scope.expired():
                raise _first_token_error(self.name, self._first_token_timeout) from None
            raise
        if _starts_answer(payload):
            self._first_token_by = None
        return payload

    async def pace(self) -> None:
        """Yield to the event loop when ``PACE_SECONDS`` have passed since the last yield here.

        Wall time, not CPU time: it also counts waits for the network, which only makes the yield a
        little more frequent (one ``sleep(0)`` costs microseconds)."""
        if time.perf_counter() - self._paced_at >= PACE_SECONDS:
            await asyncio.sleep(0)
            self._paced_at = time.perf_counter()

    async def aclose(self) -> None:
        """Close the connection now (stops generation upstream); idempotent."""
        if not self._finished:
            self._report(_Cancelled())
        result = self._closer()
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
