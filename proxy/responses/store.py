"""Stored responses: what ``previous_response_id`` continues and ``GET /v1/responses/{id}`` returns.

A record is the Response object, this request's input items, and the conversation before them
(``context``); continuing it means ``context + input + output``. Records expire ``ttl`` seconds
after they were written; an expired record is treated as unknown (and removed).

``SQLiteStore`` is the default: one file under the data directory, no server; stdlib ``sqlite3``
runs in a worker thread (``asyncio.to_thread``), never on the event loop. ``RedisStore``
(``store_redis``) serves several replicas. Both write a record in one statement, so nothing is
ever half-written.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ..wire.errors import StoreUnavailable
from .record import Item, StoredResponse, json_text

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class ResponseStore(Protocol):
    async def save(self, record: StoredResponse) -> None: ...

    async def load(self, response_id: str) -> StoredResponse | None: ...

    async def delete(self, response_id: str) -> bool: ...

    async def load_items(self, item_ids: list[str]) -> dict[str, Item]:
        """Output items of stored responses by id (for ``item_reference`` input items)."""
        ...

    async def close(self) -> None: ...


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS responses (id TEXT PRIMARY KEY, expires_at REAL NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS responses_expiry ON responses (expires_at)",
    "CREATE TABLE IF NOT EXISTS items (id TEXT PRIMARY KEY, response_id TEXT NOT NULL, "
    "expires_at REAL NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS items_expiry ON items (expires_at)",
)


class SQLiteStore:
    """Responses in ``<data_dir>/responses.sqlite3``; the file is created on the first write."""

    def __init__(self, data_dir: Path, ttl: float) -> None:
        self.path = data_dir / "responses.sqlite3"
        self.ttl = ttl
        self._lock = asyncio.Lock()  # one writer at a time in this process; SQLite locks across processes
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        """A connection; the first one creates the directory, the file and the tables."""
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=10)
        if not self._ready:
            conn.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.commit()
            self._ready = True
        return conn

    async def _run(self, work: Callable[..., _T], *args: Any) -> _T:
        """``work`` in a worker thread; an OS or SQLite failure becomes ``StoreUnavailable``.

        The operator's log names the path and the settings that move it; the client's message
        names neither."""
        try:
            return await asyncio.to_thread(work, *args)
        except (OSError, sqlite3.Error) as exc:
            log.error(
                "response store unavailable at %s (%s); set TOOLSHIM_DATA_DIR to a writable directory, "
                "or TOOLSHIM_RESPONSES_STORE=redis",
                self.path,
                exc,
            )
            raise StoreUnavailable() from exc

    def _save(self, record: StoredResponse, now: float) -> None:
        with _closing(self._connect()) as conn, conn:
            conn.execute("DELETE FROM responses WHERE expires_at <= ?", (now,))
            conn.execute("DELETE FROM items WHERE expires_at <= ?", (now,))
            conn.execute(
                "INSERT OR REPLACE INTO responses (id, expires_at, body) VALUES (?, ?, ?)",
                (record.id, now + self.ttl, record.dumps()),
            )
            conn.executemany(
                "INSERT OR REPLACE INTO items (id, response_id, expires_at, body) VALUES (?, ?, ?, ?)",
                [(item["id"], record.id, now + self.ttl, json_text(item)) for item in record.output_items()],
            )

    def _load(self, response_id: str, now: float) -> StoredResponse | None:
        if not self.path.exists():
            return None
        with _closing(self._connect()) as conn:
            row = conn.execute(
                "SELECT body FROM responses WHERE id = ? AND expires_at > ?", (response_id, now)
            ).fetchone()
        return StoredResponse.loads(row[0]) if row else None

    def _delete(self, response_id: str, now: float) -> bool:
        if not self.path.exists():
            return False
        with _closing(self._connect()) as conn, conn:
            cursor = conn.execute("DELETE FROM responses WHERE id = ? AND expires_at > ?", (response_id, now))
            conn.execute("DELETE FROM items WHERE response_id = ?", (response_id,))
            return cursor.rowcount > 0

    def _load_items(self, item_ids: list[str], now: float) -> dict[str, Item]:
        if not self.path.exists() or not item_ids:
            return {}
        marks = ",".join("?" * len(item_ids))
        with _closing(self._connect()) as conn:
            rows = conn.execute(
                f"SELECT id, body FROM items WHERE id IN ({marks}) AND expires_at > ?", (*item_ids, now)
            ).fetchall()
        return {row[0]: json.loads(row[1]) for row in rows}

    async def load_items(self, item_ids: list[str]) -> dict[str, Item]:
        return await self._run(self._load_items, item_ids, time.time())

    async def save(self, record: StoredResponse) -> None:
        async with self._lock:
            await self._run(self._save, record, time.time())

    async def load(self, response_id: str) -> StoredResponse | None:
        return await self._run(self._load, response_id, time.time())

    async def delete(self, response_id: str) -> bool:
        async with self._lock:
            return await self._run(self._delete, response_id, time.time())

    async def close(self) -> None:
        return None


class _closing:
    """``sqlite3.Connection``'s own context manager commits but does not close."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


def open_store(kind: str, data_dir: Path, ttl: float, redis_url: str | None) -> ResponseStore:
    """The configured store; the Redis client is imported only when it is configured."""
    if kind == "redis":
        from .store_redis import RedisStore

        if not redis_url:
            raise ValueError("responses_store 'redis' needs TOOLSHIM_REDIS_URL")
        return RedisStore(redis_url, ttl)
    return SQLiteStore(data_dir, ttl)
