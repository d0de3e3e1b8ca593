"""Stored responses in Redis (or Valkey, or any server speaking its protocol), for several replicas.

One key per response, ``toolshim:response:<owner>:<id>``, and one per output item,
``toolshim:item:<owner>:<id>`` (for ``item_reference``), written with ``SET … EX ttl`` in one
MULTI/EXEC (never half-written); the server expires them. The owner is part of the key, so a lookup
by another owner misses exactly as an unknown id does. The anonymous owner's keys have no owner part
(``toolshim:response:<id>``, the layout from before owners): records written then stay readable where
no client keys are configured. Ids are checked (``ids.is_id``) before they get here: no ``:`` in them.
DELETE removes the response and its output items in one MULTI/EXEC. The ``redis`` client is imported
only when this store is configured (``TOOLSHIM_RESPONSES_STORE=redis``, ``TOOLSHIM_REDIS_URL``).
"""

from __future__ import annotations

import json
import math

import redis.asyncio as aioredis

from .ids import ANONYMOUS_OWNER
from .record import Item, StoredResponse, json_text

_PREFIX = "toolshim:response:"
_ITEM_PREFIX = "toolshim:item:"


def response_key(owner: str, response_id: str) -> str:
    return _PREFIX + _scope(owner) + response_id


def item_key(owner: str, item_id: str) -> str:
    return _ITEM_PREFIX + _scope(owner) + item_id


def _scope(owner: str) -> str:
    return "" if owner == ANONYMOUS_OWNER else owner + ":"


class RedisStore:
    def __init__(self, url: str, ttl: float) -> None:
        self._client = aioredis.Redis.from_url(url)
        self.ttl = max(1, math.ceil(ttl))

    async def save(self, record: StoredResponse) -> None:
        async with self._client.pipeline(transaction=True) as pipe:  # MULTI/EXEC: all keys or none
            pipe.set(response_key(record.owner, record.id), record.dumps(), ex=self.ttl)
            for item in record.output_items():
                pipe.set(item_key(record.owner, item["id"]), json_text(item), ex=self.ttl)
            await pipe.execute()

    async def load_items(self, owner: str, item_ids: list[str]) -> dict[str, Item]:
        if not item_ids:
            return {}
        values = await self._client.mget([item_key(owner, item_id) for item_id in item_ids])
        return {item_id: json.loads(raw) for item_id, raw in zip(item_ids, values, strict=True) if raw is not None}

    async def load(self, owner: str, response_id: str) -> StoredResponse | None:
        raw = await self._client.get(response_key(owner, response_id))
        return StoredResponse.loads(raw) if raw is not None else None

    async def delete(self, owner: str, response_id: str) -> bool:
        """The response and its output items (read first: the record names them), as the SQLite store does."""
        record = await self.load(owner, response_id)
        if record is None:
            return False
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.delete(response_key(owner, response_id))
            for item in record.output_items():
                pipe.delete(item_key(owner, item["id"]))
            removed = await pipe.execute()
        return bool(removed and removed[0])

    async def close(self) -> None:
        await self._client.aclose()
