"""A recording relay between toolshim and the model server, so tests can see the upstream side.

toolshim talks to this relay as its upstream; the relay forwards each request unchanged to the
real model server and streams the answer back chunk by chunk, keeping a copy of both. Tests then
assert protocol facts that are invisible from the client side: which ``stop`` sequences toolshim
sent, and what raw text the model server returned (so whether it honoured them).

It runs an aiohttp server on its own event loop in a daemon thread, on loopback only.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "content-length",
        "content-encoding",
        "host",
        "upgrade",
        "te",
        "trailer",
        "proxy-authorization",
        "proxy-authenticate",
    }
)


@dataclass(slots=True)
class Exchange:
    """One request the relay forwarded and the raw bytes the model server answered."""

    path: str
    request: dict[str, Any]
    status: int = 0
    raw: bytearray = field(default_factory=bytearray)
    client_closed: bool = False

    def choices(self) -> list[dict[str, Any]]:
        """The ``choices`` entries of the answer: one per SSE chunk when streamed, else the body's."""
        text = self.raw.decode("utf-8", errors="replace")
        if not self.request.get("stream"):
            return list(json.loads(text).get("choices") or [])
        found: list[dict[str, Any]] = []
        for line in text.replace("\r\n", "\n").split("\n"):
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                found.extend(json.loads(line[5:]).get("choices") or [])
        return found

    def text(self) -> str:
        """The generated text, joined from the message or from every content delta."""
        parts = []
        for choice in self.choices():
            body = choice.get("message") or choice.get("delta") or {}
            parts.append(body.get("content") or "")
        return "".join(parts)

    def finish_reason(self) -> str | None:
        """The last non-null ``finish_reason`` the model server sent (None if the stream was cut)."""
        reasons = [c["finish_reason"] for c in self.choices() if c.get("finish_reason")]
        return reasons[-1] if reasons else None


class RecordingRelay:
    """Forward ``/v1/*`` to ``upstream_root`` and record every exchange (thread-safe list appends)."""

    def __init__(self, upstream_root: str) -> None:
        self.upstream_root = upstream_root.rstrip("/")
        self.exchanges: list[Exchange] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="recording-relay", daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def base_url(self) -> str:
        """What toolshim's rules use as this upstream's ``base_url``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        """Start the loop thread and bind a free loopback port."""
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)

    def stop(self) -> None:
        """Close the listener and the client session, then end the loop thread."""
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()  # else its self-pipe sockets leak (ResourceWarning at the end of the session)

    def clear(self) -> None:
        """Forget earlier exchanges (each test looks only at its own)."""
        self.exchanges.clear()

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_read=300))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/v1/{tail:.*}", self._relay)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))  # bind first, so the port is known and cannot be taken meanwhile
        self.port = int(sock.getsockname()[1])
        await web.SockSite(self._runner, sock).start()

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        body = await request.read()
        exchange = Exchange(path=request.path, request=json.loads(body) if body else {})
        self.exchanges.append(exchange)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        url = self.upstream_root + request.path_qs
        async with self._session.request(request.method, url, data=body, headers=headers) as upstream:
            exchange.status = upstream.status
            response = web.StreamResponse(status=upstream.status)
            for name, value in upstream.headers.items():
                if name.lower() not in HOP_BY_HOP:
                    response.headers[name] = value
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    exchange.raw.extend(chunk)
                    await response.write(chunk)
                await response.write_eof()
            except ConnectionResetError:
                # toolshim hung up (e.g. its cut at a second tool call); leaving this block closes
                # the upstream connection too, just as toolshim's own would have been closed.
                exchange.client_closed = True
            return response
