"""Upstream clients: the only code that talks to model servers, and what comes back from them.

``delta`` decodes every upstream chunk once into a typed ``Delta`` (OpenAI-compatible HTTP and
litellm alike); ``relay`` passes native streams on event by event. May import ``config``, ``wire``
and ``observe``; nothing of the chat path or the server.

``build_upstream(name, config)`` gives an object with ``complete``, ``stream``, ``forward``,
``start`` and ``close`` (see ``base.Upstream``). litellm is imported only when a litellm
upstream is configured.
"""

from __future__ import annotations

from ..config.rules import UpstreamConfig
from .base import Observer, Upstream, UpstreamStream, open_stream


def build_upstream(
    name: str, config: UpstreamConfig, observer: Observer | None = None, max_event_bytes: int | None = None
) -> Upstream:
    """``max_event_bytes``: the largest upstream event or body read (OpenAI-compatible HTTP only)."""
    if config.provider == "litellm":
        from .litellm import LiteLLMUpstream

        return LiteLLMUpstream(name, config, observer)
    from .openai_http import DEFAULT_MAX_EVENT_BYTES, OpenAIUpstream

    return OpenAIUpstream(name, config, observer, max_event_bytes or DEFAULT_MAX_EVENT_BYTES)


__all__ = ["Observer", "Upstream", "UpstreamStream", "build_upstream", "open_stream"]
