"""What ``GET /v1/models`` lists: every concrete rule name, and for glob rules the upstreams' own models.

For each upstream that a glob rule sends to, its ``/v1/models`` is fetched (OpenAI-compatible
upstreams only), cached for ``ttl`` seconds, and the names a request would resolve to that very
rule are listed with ``owned_by`` naming the upstream. An upstream that fails or answers
something else is logged (warning, with the cause) and skipped: the list is never an error.
The catalog lives in the swappable ``Runtime``, so a rules reload starts it afresh.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from ..config.rules import RuleSet, is_glob
from ..upstream import Upstream
from ..wire.errors import ProxyError

log = logging.getLogger(__name__)

FETCH_TIMEOUT = 5.0


def model_card(name: str, owner: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": owner}


class ModelCatalog:
    """Upstream model lists, cached per upstream; no state beyond the cache."""

    def __init__(self, ttl: float = 60.0) -> None:
        self.ttl = ttl
        self._cache: dict[str, tuple[float, list[str]]] = {}

    async def cards(self, rules: RuleSet, upstreams: Mapping[str, Upstream]) -> list[dict[str, Any]]:
        cards: dict[str, dict[str, Any]] = {}
        for name in rules.exposed_models():
            resolved = rules.resolve(name)
            cards[name] = model_card(name, resolved.upstream_name if resolved else "toolshim")
        asked = sorted({rule.upstream for rule in rules.models if is_glob(rule.match) and not rule.upstream_model})
        found = await asyncio.gather(*(self._models_of(n, upstreams[n]) for n in asked if n in upstreams))
        for upstream_name, names in zip(asked, found, strict=True):
            for name in names:
                resolved = rules.resolve(name)
                if (
                    name not in cards
                    and resolved is not None
                    and resolved.upstream_name == upstream_name
                    and is_glob(resolved.rule.match)
                    and not resolved.rule.upstream_model
                ):
                    cards[name] = model_card(name, upstream_name)
        return list(cards.values())

    async def _models_of(self, name: str, upstream: Upstream) -> list[str]:
        cached = self._cache.get(name)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        names = await _fetch(name, upstream)
        self._cache[name] = (time.monotonic() + self.ttl, names)
        return names


async def _fetch(name: str, upstream: Upstream) -> list[str]:
    """The model ids an upstream lists; ``[]`` (logged) when it cannot say."""
    if getattr(getattr(upstream, "config", None), "provider", "openai") != "openai":
        return []
    try:
        async with asyncio.timeout(FETCH_TIMEOUT):
            resp = await upstream.forward("GET", "/models", b"", None)
            try:
                raw = await resp.read()
            finally:
                resp.release()
        data = json.loads(raw)
    except ProxyError as exc:
        log.warning("cannot list the models of upstream %r: %s", name, exc.message)
        return []
    except TimeoutError:
        log.warning("cannot list the models of upstream %r: no answer within %.0f s", name, FETCH_TIMEOUT)
        return []
    except (OSError, ValueError) as exc:
        log.warning("cannot list the models of upstream %r: %s", name, type(exc).__name__)
        return []
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        log.warning("cannot list the models of upstream %r: its /models answer has no 'data' list", name)
        return []
    return [item["id"] for item in items if isinstance(item, dict) and isinstance(item.get("id"), str)]
