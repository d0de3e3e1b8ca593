"""What every upstream client offers, and the stream object the response side reads.

Streams yield payloads: the ``data`` text of the upstream's SSE events (``[DONE]`` is consumed,
not yielded), or chunk dicts where the client library already built them (litellm). Closing a
stream closes its connection, which is how a model server learns to stop generating.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from ..delta import Payload
from ..errors import (
    ProxyError,
    UpstreamBusy,
    UpstreamDisconnected,
    UpstreamHTTPError,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnavailable,
)

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
    """Tell the observer how an upstream call ended: outcome, seconds since ``started``, HTTP status."""
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

    def __aiter__(self) -> AsyncIterator[Payload]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Payload]:
        try:
            async for payload in self._payloads:
                yield payload
            self._report(None)
        except ProxyError as exc:
            self._report(exc)
            raise

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

    async def forward(self, method: str, path: str, body: bytes, content_type: str | None) -> Any:
        """Pass another ``/v1/*`` call through (OpenAI-compatible upstreams only)."""
        ...
