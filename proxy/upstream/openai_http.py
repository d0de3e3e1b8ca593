"""Client for OpenAI-compatible servers (OpenAI, vLLM, llama.cpp, Ollama, LM Studio, ...).

One pooled ``aiohttp.ClientSession`` per upstream. Timeouts: connect, and idle time between
bytes (``sock_read``); no overall cap unless the rule sets one, because aiohttp's default
5-minute total would kill long streams. Streams are read with ``iter_any`` into our own SSE
decoder (``async for line in content`` fails on lines over 128 KiB: big tool arguments).
One event, and one whole non-streamed body, may hold at most ``max_event_bytes``
(``TOOLSHIM_MAX_UPSTREAM_EVENT_BYTES``): past it the answer is a 502 ``upstream_event_too_large``
(an error event once a stream has started) and the connection is dropped without reading on.
A request that waited for a free pooled connection (``max_connections`` all busy) for the whole
connect timeout ends in a 503 ``upstream_pool_full`` with ``Retry-After``, not in a 504: aiohttp's
tracing tells us it was queued for the pool rather than connecting.
"""

from __future__ import annotations

import io
import json
import os
import re
import time
from functools import partial
from types import SimpleNamespace
from typing import Any

import aiohttp

from ..config.allowlist import chat_body
from ..config.fields import for_upstream
from ..config.rules import UpstreamConfig
from ..observe.redact import REDACTOR
from ..wire.errors import (
    ProxyError,
    UpstreamBusy,
    UpstreamDisconnected,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnavailable,
    upstream_http_error,
    upstream_too_large,
)
from ..wire.headers import relayable
from ..wire.jsoncodec import dumps
from ..wire.sse import PayloadReader
from .base import Body, Observer, UpstreamStream, report

DEFAULT_MAX_EVENT_BYTES = 32 * 1024 * 1024
# The tokenizer endpoints that count usage (at the server's root, not under /v1): path and text field.
_TOKENIZERS = {"llama.cpp": ("/tokenize", "content"), "llama-cpp-python": ("/extras/tokenize", "input")}
_NO_TOKENIZER = frozenset({400, 404, 405, 422, 501})  # the server has no such endpoint (or another one)
_TOKENIZE_TIMEOUT = aiohttp.ClientTimeout(total=5)

_LARGE_BODY = 1024 * 1024  # aiohttp writes bytes bodies in one go; a file-like one in pieces
_ERROR_BODY_BYTES = 64 * 1024  # what is read of an upstream error body (its message is cut to 2,000 characters)
_PLAIN_PATH = re.compile(r"(/[a-z][a-z_]*)+")


def _payload(data: bytes) -> bytes | io.BytesIO:
    """A request body as aiohttp should send it: a large one in pieces, so the loop is not stalled."""
    return data if len(data) < _LARGE_BODY else io.BytesIO(data)


def _map_client_error(exc: BaseException, name: str, *, connected: bool = False) -> ProxyError:
    """aiohttp/asyncio failures → our errors. The message names the upstream, not its URL or key.

    ``connected``: the failure came while reading an answer, so the upstream was reachable and
    dropped the connection; that is not "unreachable"."""
    if isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError):
        return UpstreamTimeout(f"upstream '{name}' timed out")
    if connected:
        return UpstreamDisconnected(f"upstream '{name}' dropped the connection mid-answer: {_cause(exc)}")
    return UpstreamUnavailable(f"upstream '{name}' is unreachable: {_cause(exc)}")


class _PoolWait:
    """Whether one request is waiting for a free pooled connection (set by the trace hooks)."""

    __slots__ = ("queued",)

    def __init__(self) -> None:
        self.queued = False


async def _queued_start(_session: aiohttp.ClientSession, ctx: SimpleNamespace, _params: object) -> None:
    if isinstance(ctx.trace_request_ctx, _PoolWait):
        ctx.trace_request_ctx.queued = True


async def _queued_end(_session: aiohttp.ClientSession, ctx: SimpleNamespace, _params: object) -> None:
    if isinstance(ctx.trace_request_ctx, _PoolWait):
        ctx.trace_request_ctx.queued = False


def _pool_tracing() -> aiohttp.TraceConfig:
    trace = aiohttp.TraceConfig()
    trace.on_connection_queued_start.append(_queued_start)
    trace.on_connection_queued_end.append(_queued_end)
    return trace


def _map_send_error(exc: BaseException, name: str, wait: _PoolWait, pool_size: int) -> Exception:
    """Like ``_map_client_error``; a timeout while still queued for the pool is "busy", not "timed out"."""
    if wait.queued and isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError):
        return UpstreamBusy(
            f"upstream '{name}' is busy: all {pool_size} connections (max_connections) stayed in use "
            "while this request waited for one; retry shortly"
        )
    return _map_client_error(exc, name)


def _cause(exc: BaseException) -> str:
    """What went wrong, without the address: "connection refused", "name does not resolve", ..."""
    os_error = getattr(exc, "os_error", exc)
    if isinstance(os_error, OSError) and os_error.errno:  # the errno's text: strerror may hold the address
        return f"{os.strerror(os_error.errno).lower()} ({type(exc).__name__})"
    return type(exc).__name__


class OpenAIUpstream:
    """An OpenAI-compatible HTTP upstream."""

    def __init__(
        self,
        name: str,
        config: UpstreamConfig,
        observer: Observer | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self.name = name
        self.max_event_bytes = max_event_bytes
        self.config = config
        self._observer = observer
        self._session: aiohttp.ClientSession | None = None
        self._base = (config.base_url or "").rstrip("/")
        self._allowed = config.allowed_fields
        self._tokenizer: str | None = None  # the tokenizer endpoint found to work
        self._no_tokenizer: set[str] = set()  # the endpoints this server does not have

    async def start(self) -> None:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self.config.max_connections, limit_per_host=0, keepalive_timeout=30)
            timeout = aiohttp.ClientTimeout(
                total=self.config.total_timeout, connect=self.config.connect_timeout, sock_read=self.config.read_timeout
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=timeout,
                headers=self._headers(),
                skip_auto_headers=("User-Agent",),
                trace_configs=[_pool_tracing()],
            )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _headers(self) -> dict[str, str]:
        headers = {"User-Agent": "toolshim", **self.config.headers}
        key = self.config.api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    async def _session_ready(self) -> aiohttp.ClientSession:
        if self._session is None:
            await self.start()
        assert self._session is not None
        return self._session

    async def _post_chat(self, body: dict[str, Any]) -> aiohttp.ClientResponse:
        """POST the allowlisted fields of ``body``, in the upstream's field dialect, to the chat endpoint."""
        session = await self._session_ready()
        data = dumps(for_upstream(chat_body(body, self._allowed), self.config.dialect))
        wait = _PoolWait()
        try:
            return await session.post(
                self._base + "/chat/completions",
                data=_payload(data),
                headers={"Content-Type": "application/json"},
                trace_request_ctx=wait,
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _map_send_error(exc, self.name, wait, self.config.max_connections) from None

    async def _raise_for_status(self, resp: aiohttp.ClientResponse) -> None:
        if resp.status < 400:
            return
        raw = bytearray()
        try:  # the message is cut to 2,000 characters later: a huge error body is not read whole
            async for piece in resp.content.iter_any():
                raw += piece
                if len(raw) >= _ERROR_BODY_BYTES:
                    break
        except (TimeoutError, aiohttp.ClientError):
            pass
        finally:
            resp.release()
        # some servers echo the key they rejected; no configured secret may reach the client
        raise upstream_http_error(resp.status, REDACTOR.redact_bytes(bytes(raw[:_ERROR_BODY_BYTES])), resp.headers)

    def _observe(self, started: float, error: BaseException | None) -> None:
        report(self._observer, self.name, started, error)

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            resp = await self._post_chat(body)
            await self._raise_for_status(resp)
            raw = await _read_capped(resp, self.name, self.max_event_bytes)
            try:
                result = json.loads(raw)
            except ValueError:
                raise UpstreamProtocolError(f"upstream '{self.name}' returned a body that is not JSON") from None
            if not isinstance(result, dict):
                raise UpstreamProtocolError(f"upstream '{self.name}' returned JSON that is not an object")
        except Exception as exc:
            self._observe(started, exc)
            raise
        self._observe(started, None)
        return result

    async def stream(self, body: dict[str, Any]) -> UpstreamStream:
        started = time.perf_counter()
        try:
            resp = await self._post_chat(body)
            await self._raise_for_status(resp)
            reader = self._reader(resp)
        except Exception as exc:
            self._observe(started, exc)
            raise
        read = Body(resp.content.iter_any(), reader, resp.close, resp.release, partial(_read_error, name=self.name))
        return UpstreamStream(self.name, read, self._observer, started)

    def _reader(self, resp: aiohttp.ClientResponse) -> PayloadReader | _WholeBody:
        """Event streams are read as such; some servers ignore ``stream: true`` and send one JSON body."""
        if "text/event-stream" in resp.headers.get("Content-Type", "text/event-stream"):
            return PayloadReader(self.name, self.max_event_bytes)
        if resp.content_length is not None and resp.content_length > self.max_event_bytes:
            resp.close()
            raise upstream_too_large(self.name, self.max_event_bytes)
        return _WholeBody(self.name, self.max_event_bytes)

    async def count_tokens(self, text: str, model: str) -> int | None:
        """Tokens in ``text`` by the server's tokenizer endpoint (the rule's ``tokenizer``; ``auto``
        tries llama.cpp's and llama-cpp-python's and remembers which one answers, or that none does).
        ``None`` when there is none, or it failed this time."""
        for kind in self._tokenizer_candidates():
            count = await self._tokenize(kind, text, model)
            if count is False:
                self._no_tokenizer.add(kind)
                continue
            if count is not None:
                self._tokenizer = kind
            return count
        return None

    def _tokenizer_candidates(self) -> list[str]:
        chosen = self.config.tokenizer
        if chosen != "auto":
            return [] if chosen == "none" else [chosen]
        if self._tokenizer is not None:
            return [self._tokenizer]
        return [kind for kind in _TOKENIZERS if kind not in self._no_tokenizer]

    async def _tokenize(self, kind: str, text: str, model: str) -> int | bool | None:
        """The count; ``False``: the server has no such endpoint; ``None``: it failed this time."""
        path, field = _TOKENIZERS[kind]
        session = await self._session_ready()
        root = self._base.removesuffix("/v1")
        try:
            async with session.post(
                root + path,
                data=_payload(dumps({field: text, "model": model})),
                timeout=_TOKENIZE_TIMEOUT,
                headers={"Content-Type": "application/json"},
            ) as resp:
                if resp.status in _NO_TOKENIZER:
                    return False
                if resp.status != 200:
                    return None
                body = await resp.json(content_type=None)
        except (TimeoutError, aiohttp.ClientError, ValueError):
            return None
        tokens = body.get("tokens") if isinstance(body, dict) else None
        return len(tokens) if isinstance(tokens, list) else False

    async def forward(self, method: str, path: str, body: bytes, content_type: str | None) -> aiohttp.ClientResponse:
        """Send another /v1 call as-is; the caller relays and releases the response.

        ``path`` is one of the handler's fixed pass-through paths; anything else is refused here
        too, so no path from a request can reach the upstream with its key attached."""
        if not _PLAIN_PATH.fullmatch(path):
            raise ValueError(f"not a plain endpoint path: {path!r}")
        session = await self._session_ready()
        headers = {"Content-Type": content_type} if content_type else {}
        wait = _PoolWait()
        try:
            resp = await session.request(
                method,
                self._base + path,
                data=_payload(body) if body else None,
                headers=headers,
                trace_request_ctx=wait,
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _map_send_error(exc, self.name, wait, self.config.max_connections) from None
        await self._raise_for_status(resp)  # errors in OpenAI's shape, with any echoed key masked
        return resp


def _read_error(exc: Exception, name: str) -> ProxyError | None:
    """A failure while reading an answer: the upstream was reachable and dropped or stalled."""
    if isinstance(exc, TimeoutError | aiohttp.ClientError):
        return _map_client_error(exc, name, connected=True)
    return None


class _WholeBody:
    """Sans-IO: a stream request answered with one JSON body, relayed as one event (``PayloadReader``).

    Only a chat completion (or an error) is: any other 200 body (an HTML page, ``{}``, text) would
    read as an empty answer, so it is an ``UpstreamProtocolError``. A body past ``limit`` bytes fails
    as soon as it does, as one event past it would."""

    def __init__(self, name: str, limit: int) -> None:
        self._name, self._limit = name, limit
        self._body = bytearray()
        self._failure: ProxyError | None = None
        self.over = False

    def feed(self, piece: bytes) -> list[str]:
        self._body += piece
        if len(self._body) > self._limit:
            self._failure, self.over = upstream_too_large(self._name, self._limit), True
        return []

    def end(self) -> list[str]:
        if self.over:
            return []
        self.over = True
        text = self._body.decode("utf-8", "replace")
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if isinstance(body, dict) and (isinstance(body.get("choices"), list) or "error" in body):
            return [text]
        self._failure = UpstreamProtocolError(
            f"upstream '{self._name}' answered a stream request with a body that is not a chat completion"
        )
        return []

    def failure(self) -> ProxyError | None:
        return self._failure


async def _read_capped(resp: aiohttp.ClientResponse, name: str, limit: int) -> bytes:
    """The whole body, refused (connection dropped) as soon as it passes ``limit`` bytes."""
    body = bytearray()
    try:
        if resp.content_length is not None and resp.content_length > limit:
            resp.close()
            raise upstream_too_large(name, limit)
        async for piece in resp.content.iter_any():
            body += piece
            if len(body) > limit:
                resp.close()
                raise upstream_too_large(name, limit)
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise _map_client_error(exc, name, connected=True) from None
    finally:
        resp.release()
    return bytes(body)


def relay_headers(resp: aiohttp.ClientResponse) -> dict[str, str]:
    """The upstream response headers a client may see (``wire.headers``: no cookies, CORS or hop-by-hop)."""
    return relayable(resp.headers.items())
