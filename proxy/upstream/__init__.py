"""Upstream clients: the only code that talks to model servers.

``build_upstream(name, config)`` gives an object with ``complete``, ``stream``, ``forward``,
``start`` and ``close`` (see ``base.Upstream``). litellm is imported only when a litellm
upstream is configured.
"""

from __future__ import annotations

from ..rules import UpstreamConfig
from .base import Observer, Upstream, UpstreamStream, open_stream


def build_upstream(name: str, config: UpstreamConfig, observer: Observer | None = None) -> Upstream:
    if config.provider == "litellm":
        from .litellm import LiteLLMUpstream

        return LiteLLMUpstream(name, config, observer)
    from .openai_http import OpenAIUpstream

    return OpenAIUpstream(name, config, observer)


__all__ = ["Observer", "Upstream", "UpstreamStream", "build_upstream", "open_stream"]
