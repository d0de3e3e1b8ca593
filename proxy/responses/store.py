"""Stored responses: what ``previous_response_id`` continues and ``GET /v1/responses/{id}`` returns.

A record is the Response object, this request's input items, and the conversation before them
(``context``); continuing it means ``context + input + output``. Records expire ``ttl`` seconds
after they were written; an expired record is treated as unknown (and removed).

Every record and every stored output item has an owner (``ids.owner_of_key`` of the client key that
made it, or ``ids.ANONYMOUS_OWNER``); reads and deletes name the owner and find only its records, in
the same query that looks up the id, so another owner's id is exactly an unknown one.

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
from .ids import ANONYMOUS_OWNER
from .record import Item, StoredResponse, json_text

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class ResponseStore(Protocol):
    async def save(self, record: StoredResponse) -> None:
        """The record and its output items, under ``record.owner``."""
        ...

    async def load(self, owner: str, response_id: str) -> StoredResponse | None: ...

    async def delete(self, owner: str, response_id: str) -> bool:
        """The record and its output items; False when ``owner`` has no such record."""
        ...

    async def load_items(self, owner: str, item_ids: list[str]) -> dict[str, Item]:
        """``owner``'s stored output items by id (for ``item_reference`` input items)."""
        ...

    async def close(self) -> None: ...


_OWNER_COLUMN = f"owner TEXT NOT NULL DEFAULT '{ANONYMOUS_OWNER}'"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS responses (id TEXT PRIMARY KEY, expires_at REAL NOT NULL, body TEXT NOT NULL, "
    f"{_OWNER_COLUMN})",
    "CREATE INDEX IF NOT EXISTS responses_expiry ON responses (expires_at)",
    "CREATE TABLE IF NOT EXISTS items (id TEXT PRIMARY KEY, response_id TEXT NOT NULL, "
    f"expires_at REAL NOT NULL, body TEXT NOT NULL, {_OWNER_COLUMN})",
    "CREATE INDEX IF NOT EXISTS items_expiry ON items (expires_at)",
)


def _migrate(conn: sqlite3.Connection) -> None:
    """A file from before owners gets the ``owner`` column; its rows belong to the anonymous owner, so
    they stay readable where no client keys are configured and nobody's where keys are."""
    for table in ("responses", "items"):
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if "owner" not in columns:
            try:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {_OWNER_COLUMN}")
            except sqlite3.OperationalError as exc:  # another worker added it meanwhile
                if "duplicate column" not in str(exc):
                    raise


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
            _migrate(conn)
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
                "INSERT OR REPLACE INTO responses (id, expires_at, body, owner) VALUES (?, ?, ?, ?)",
                (record.id, now + self.ttl, record.dumps(), record.owner),
            )
            conn.executemany(
                "INSERT OR REPLACE INTO items (id, response_id, expires_at, body, owner) VALUES (?, ?, ?, ?, ?)",
                [
                    (item["id"], record.id, now + self.ttl, json_text(item), record.owner)
                    for item in record.output_items()
                ],
            )

    def _load(self, owner: str, response_id: str, now: float) -> StoredResponse | None:
        if not self.path.exists():
            return None
        with _closing(self._connect()) as conn:
            row = conn.execute(
                "SELECT body FROM responses WHERE id = ? AND owner = ? AND expires_at > ?", (response_id, owner, now)
            ).fetchone()
        return StoredResponse.loads(row[0]) if row else None

    def _delete(self, owner: str, response_id: str, now: float) -> bool:
        if not self.path.exists():
            return False
        with _closing(self._connect()) as conn, conn:
            cursor = conn.execute(
                "DELETE FROM responses WHERE id = ? AND owner = ? AND expires_at > ?", (response_id, owner, now)
            )
            conn.execute("DELETE FROM items WHERE response_id = ? AND owner = ?", (response_id, owner))
            return cursor.rowcount > 0

    def _load_items(self, owner: str, item_ids: list[str], now: float) -> dict[str, Item]:
        if not self.path.exists() or not item_ids:
            return {}
        marks = ",".join("?" * len(item_ids))
        with _closing(self._connect()) as conn:
            rows = conn.execute(
                f"SELECT id, body FROM items WHERE id IN ({marks}) AND owner = ? AND expires_at > ?",
                (*item_ids, owner, now),
            ).fetchall()
        return {row[0]: json.loads(row[1]) for row in rows}

    async def load_items(self, owner: str, item_ids: list[str]) -> dict[str, Item]:
        return await self._run(self._load_items, owner, item_ids, time.time())

    async def save(self, record: StoredResponse) -> None:
        async with self._lock:
            await self._run(self._save, record, time.time())

    async def load(self, owner: str, response_id: str) -> StoredResponse | None:
        return await self._run(self._load, owner, response_id, time.time())

    async def delete(self, owner: str, response_id: str) -> bool:
        async with self._lock:
            return await self._run(self._delete, owner, response_id, time.time())

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
