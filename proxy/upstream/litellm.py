"""Upstream through litellm, for providers that are not OpenAI-compatible (Anthropic, Bedrock, ...).

litellm is imported on first use only: the import costs seconds and ~140 MB. Its price-list
download is switched off (no network but the provider's), and so are its retries
(``num_retries`` / ``max_retries`` 0): the client's SDK is the one retry layer, so a call with
its default retries is 3 upstream requests, not 9, and a hung upstream fails in one timeout.
Responses and stream chunks are turned into OpenAI-shaped dicts, so the rest of the proxy
cannot tell the difference (native streams serialise them for the client; the emulated path
reads the dicts as they are).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Mapping
from functools import partial
from typing import Any

from ..config.allowlist import chat_body
from ..config.fields import for_upstream
from ..config.rules import UpstreamConfig
from ..observe.logs import route_library_logs
from ..observe.redact import short_upstream_message
from ..wire.errors import (
    InvalidRequest,
    ProxyError,
    UpstreamHTTPError,
    UpstreamTimeout,
    UpstreamUnavailable,
    retry_after_headers,
)
from .base import Body, Observer, UpstreamStream, report
from .delta import Payload

log = logging.getLogger(__name__)

_litellm: Any = None


def _import_litellm() -> Any:
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.drop_params = True  # providers reject OpenAI params they lack; drop rather than fail
        litellm.suppress_debug_info = True
        route_library_logs()  # its plain-text handlers would mix into our JSON lines
        _litellm = litellm
    return _litellm


def _map_error(exc: Exception, name: str) -> ProxyError:
    """litellm's exceptions carry ``status_code``; map them onto ours without leaking keys."""
    litellm = _import_litellm()
    status = getattr(exc, "status_code", None)
    text = str(getattr(exc, "message", "") or exc)
    message = short_upstream_message(text, status if isinstance(status, int) else 502)
    if isinstance(exc, litellm.exceptions.Timeout):
        return UpstreamTimeout(f"upstream '{name}' timed out")
    if isinstance(exc, litellm.exceptions.APIConnectionError):
        return UpstreamUnavailable(f"upstream '{name}' is unreachable: {message}")
    if isinstance(status, int) and 400 <= status < 600:
        return UpstreamHTTPError(status, message, upstream_retry=retry_after_headers(status, _headers_of(exc)))
    return UpstreamHTTPError(502, f"upstream '{name}' failed: {message}")


def _headers_of(exc: Exception) -> Mapping[str, str] | None:
    """The provider's response headers on a litellm exception (for ``Retry-After``), if it kept them."""
    headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers", None)
    return headers if isinstance(headers, Mapping) else None


class LiteLLMUpstream:
    """Any provider litellm reaches; ``upstream_model`` names it (e.g. ``anthropic/claude-...``)."""

    def __init__(self, name: str, config: UpstreamConfig, observer: Observer | None = None) -> None:
        self.name = name
        self.config = config
        self._observer = observer
        self._allowed = config.allowed_fields

    async def start(self) -> None:
        """Import litellm now, at app start-up: on the first request the seconds-long import would
        block the event loop and stall every other request. litellm manages its own clients."""
        _import_litellm()

    async def close(self) -> None:
        """Nothing to close: litellm owns its clients."""

    def _kwargs(self, body: dict[str, Any]) -> dict[str, Any]:
        """litellm's keyword arguments: the allowlisted body fields, then destination, credentials
        and headers from the rules only (a client-sent ``api_base`` never gets this far)."""
        kwargs = for_upstream(chat_body(body, self._allowed), self.config.dialect)
        if not body.get("stream"):
            kwargs.pop("stream_options", None)
        kwargs["api_key"] = self.config.api_key()
        kwargs["api_base"] = self.config.base_url
        kwargs["extra_headers"] = dict(self.config.headers)
        kwargs["timeout"] = self.config.total_timeout or self.config.read_timeout
        kwargs["num_retries"] = kwargs["max_retries"] = 0  # one retry layer: the client's
        return kwargs

    def _observe(self, started: float, error: BaseException | None) -> None:
        report(self._observer, self.name, started, error)

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        litellm = _import_litellm()
        started = time.perf_counter()
        try:
            response = await litellm.acompletion(**self._kwargs({**body, "stream": False}))
        except Exception as exc:
            error = _map_error(exc, self.name)
            self._observe(started, error)
            raise error from None
        self._observe(started, None)
        return _to_dict(response)

    async def count_tokens(self, text: str, model: str) -> int | None:
        """litellm's ``token_counter``: the model's tokenizer where litellm knows it, else cl100k."""
        litellm = _import_litellm()
        try:
            return int(await asyncio.to_thread(litellm.token_counter, model=model, text=text))
        except Exception as exc:  # a library call on any provider's model name: count by estimate instead
            log.info("litellm could not count tokens for %s: %s", model, type(exc).__name__)
            return None

    async def stream(self, body: dict[str, Any]) -> UpstreamStream:
        litellm = _import_litellm()
        started = time.perf_counter()
        try:
            response = await litellm.acompletion(**self._kwargs({**body, "stream": True}))
        except Exception as exc:
            error = _map_error(exc, self.name)
            self._observe(started, error)
            raise error from None
        read = Body(
            aiter(response), _Chunks(), getattr(response, "aclose", _noop), error=partial(_map_error, name=self.name)
        )
        return UpstreamStream(self.name, read, self._observer, started)

    async def forward(self, method: str, path: str, body: bytes, content_type: str | None) -> Any:
        raise InvalidRequest(
            f"{path} is not available for this model (its upstream is not OpenAI-compatible)",
            code="unsupported_endpoint",
        )


async def _noop() -> None:
    return None


class _Chunks:
    """The chunks as litellm built them, as dicts: the emulated path reads them without a JSON round trip."""

    over = False

    def feed(self, chunk: Any) -> list[Payload]:
        return [_to_dict(chunk)]

    def end(self) -> list[Payload]:
        return []

    def failure(self) -> ProxyError | None:
        return None


def _to_dict(obj: Any) -> dict[str, Any]:
    if isinstance(obj, dict):
        return obj
    dump = getattr(obj, "model_dump", None)
    data = dump(exclude_none=True) if dump else json.loads(obj.json())
    return data if isinstance(data, dict) else {}
