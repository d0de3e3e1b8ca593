"""Stored responses in Redis (or Valkey, or any server speaking its protocol), for several replicas.

One key per response, ``toolshim:response:<id>``, and one per output item, ``toolshim:item:<id>``
(for ``item_reference``), written with ``SET … EX ttl`` in one MULTI/EXEC (never half-written);
the server expires them. The ``redis`` client is imported only when this
store is configured (``TOOLSHIM_RESPONSES_STORE=redis``, ``TOOLSHIM_REDIS_URL``).
"""

from __future__ import annotations

import json
import math

import redis.asyncio as aioredis

from .record import Item, StoredResponse, json_text

_PREFIX = "toolshim:response:"
_ITEM_PREFIX = "toolshim:item:"


class RedisStore:
    def __init__(self, url: str, ttl: float) -> None:
        self._client = aioredis.Redis.from_url(url)
        self.ttl = max(1, math.ceil(ttl))

    async def save(self, record: StoredResponse) -> None:
        async with self._client.pipeline(transaction=True) as pipe:  # MULTI/EXEC: all keys or none
            pipe.set(_PREFIX + record.id, record.dumps(), ex=self.ttl)
            for item in record.output_items():
                pipe.set(_ITEM_PREFIX + item["id"], json_text(item), ex=self.ttl)
            await pipe.execute()

    async def load_items(self, item_ids: list[str]) -> dict[str, Item]:
        if not item_ids:
            return {}
        values = await self._client.mget([_ITEM_PREFIX + item_id for item_id in item_ids])
        return {item_id: json.loads(raw) for item_id, raw in zip(item_ids, values, strict=True) if raw is not None}

    async def load(self, response_id: str) -> StoredResponse | None:
        raw = await self._client.get(_PREFIX + response_id)
        return StoredResponse.loads(raw) if raw is not None else None

    async def delete(self, response_id: str) -> bool:
        return bool(await self._client.delete(_PREFIX + response_id))

    async def close(self) -> None:
        await self._client.aclose()
