"""Overload: the per-worker in-flight limit (proxy/overload.py) and a full upstream pool.

Both answer 503 with ``Retry-After`` in OpenAI's shape: the limit at once, the pool after the
connect timeout spent waiting for a free connection; never a 504 "timed out".
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import openai

from tests.conftest import Proxy
from tests.fakes import FakeUpstream, Reply, completion
from tests.test_core_errors import assert_error

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


async def post(session: aiohttp.ClientSession, proxy: Proxy) -> tuple[int, dict[str, str], object, float]:
    started = time.monotonic()
    async with session.post(proxy.base_url + "/chat/completions", json=BODY) as resp:
        return resp.status, dict(resp.headers), await resp.json(), time.monotonic() - started


def shed(proxy: Proxy, reason: str) -> float:
    value = proxy.metrics.registry.get_sample_value("toolshim_requests_shed_total", {"reason": reason})
    return value or 0.0


async def test_past_the_in_flight_limit_requests_get_503_with_retry_after_at_once(
    start_proxy, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(Reply(body=completion("slow"), hang=1.5), Reply(body=completion("slow"), hang=1.5))
    proxy = await start_proxy(max_in_flight=2)
    async with aiohttp.ClientSession() as session:
        held = [asyncio.create_task(post(session, proxy)) for _ in range(2)]
        for _ in range(100):  # both are with the upstream
            if len(fake_upstream.requests) == 2:
                break
            await asyncio.sleep(0.02)
        fake_upstream.script(Reply(body=completion("ok")))

        status, headers, body, took = await post(session, proxy)
        assert status == 503 and headers["Retry-After"] == "1" and took < 0.5
        assert_error(body, code="overloaded", type_="server_error")
        assert "limit of 2 requests" in body["error"]["message"]  # type: ignore[index]
        async with session.get(proxy.url + "/healthz") as resp:  # not limited
            assert resp.status == 200
        assert shed(proxy, "in_flight_limit") == 1
        assert len(fake_upstream.requests) == 2  # the shed request never reached the upstream

        assert [r[0] for r in await asyncio.gather(*held)] == [200, 200]
        status, _, _, _ = await post(session, proxy)  # room again
        assert status == 200
    assert shed(proxy, "in_flight_limit") == 1


async def test_the_sdk_backs_off_on_the_503_and_gets_through(start_proxy, fake_upstream: FakeUpstream) -> None:
    """The OpenAI SDK retries a 503 after ``Retry-After``; by then the held request is done."""
    ok = Reply(body=completion("ok"))
    fake_upstream.script(ok, Reply(body=completion("slow"), hang=0.8), ok)
    proxy = await start_proxy(max_in_flight=1)
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="k", max_retries=2, timeout=10)
    await client.chat.completions.create(**BODY)  # type: ignore[call-overload]  # warm: imports, connection
    async with aiohttp.ClientSession() as session:
        first = asyncio.create_task(post(session, proxy))
        for _ in range(100):
            if len(fake_upstream.requests) == 2:
                break
            await asyncio.sleep(0.02)
        reply = await client.chat.completions.create(**BODY)  # type: ignore[call-overload]
        await client.close()
        assert reply.choices[0].message.content == "ok"
        assert (await first)[0] == 200
    assert shed(proxy, "in_flight_limit") >= 1


async def test_a_full_upstream_pool_is_a_clear_503_not_a_timeout(start_proxy, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(Reply(body=completion("slow"), hang=2.0), Reply(body=completion("ok")))
    proxy = await start_proxy(upstream_extra={"max_connections": 1, "connect_timeout": 0.5})
    async with aiohttp.ClientSession() as session:
        held = asyncio.create_task(post(session, proxy))
        for _ in range(100):
            if fake_upstream.requests:
                break
            await asyncio.sleep(0.02)
        status, headers, body, took = await post(session, proxy)
        assert status == 503 and headers["Retry-After"] == "1", body
        error = assert_error(body, code="upstream_pool_full", type_="upstream_error")
        assert "all 1 connections" in error["message"] and "'up'" in error["message"]
        assert 0.4 < took < 1.5
        outcome = {"upstream": "up", "outcome": "pool_full"}
        assert proxy.metrics.registry.get_sample_value("toolshim_upstream_requests_total", outcome) == 1
        assert (await held)[0] == 200
        status, _, _, _ = await post(session, proxy)  # the connection is free again
        assert status == 200


async def test_an_upstream_timeout_with_room_in_the_pool_is_still_a_504(
    start_proxy, fake_upstream: FakeUpstream
) -> None:
    """Only a wait for the pool is "busy": an upstream that is slow to answer stays a timeout."""
    fake_upstream.script(Reply(body=completion("late"), hang=1.0))
    proxy = await start_proxy(upstream_extra={"max_connections": 1, "read_timeout": 0.3})
    async with aiohttp.ClientSession() as session:
        status, headers, body, _ = await post(session, proxy)
    assert status == 504 and "Retry-After" not in headers
    assert_error(body, code="upstream_timeout", type_="upstream_error")
