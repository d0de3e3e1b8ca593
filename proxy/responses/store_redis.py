"""Stored responses in Redis (or Valkey, or any server speaking its protocol), for several replicas.

One key per response, ``toolshim:response:<id>``, written with ``SET … EX ttl`` in one command
(never half-written); the server expires it. The ``redis`` client is imported only when this
store is configured (``TOOLSHIM_RESPONSES_STORE=redis``, ``TOOLSHIM_REDIS_URL``).
"""

from __future__ import annotations

import math

import redis.asyncio as aioredis

from .record import StoredResponse

_PREFIX = "toolshim:response:"


class RedisStore:
    def __init__(self, url: str, ttl: float) -> None:
        self._client = aioredis.Redis.from_url(url)
        self.ttl = max(1, math.ceil(ttl))

    async def save(self, record: StoredResponse) -> None:
        await self._client.set(_PREFIX + record.id, record.dumps(), ex=self.ttl)

    async def load(self, response_id: str) -> StoredResponse | None:
        raw = await self._client.get(_PREFIX + response_id)
        return StoredResponse.loads(raw) if raw is not None else None

    async def delete(self, response_id: str) -> bool:
        return bool(await self._client.delete(_PREFIX + response_id))

    async def close(self) -> None:
        await self._client.aclose()
