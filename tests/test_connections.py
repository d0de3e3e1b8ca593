"""Connection bounds (proxy/connections.py) against the real server on loopback, with raw sockets.

Hundreds of idle, slow-header and slow-body connections are dropped within their bounds while
normal chat requests keep succeeding; at the connection cap idle connections give way, then
/v1 is shed with 503 while /healthz answers, then connections are refused with a JSON 503; the
HTTP parser's own 400s are JSON in OpenAI's shape. Every loop here is bounded in count and time.
"""

from __future__ import annotations

import asyncio
import json
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from toolshim.config.loading import load_rules
from toolshim.config.settings import Settings
from toolshim.observe.metrics import Metrics
from toolshim.server.app import create_app
from toolshim.server.connections import (
    FD_RESERVE,
    ConnectionLimits,
    GuardedAppRunner,
    GuardedServer,
    connection_cap,
    raw_error,
)
from toolshim.wire.errors import Overloaded

from tests.conftest import Proxy, free_port, write_rules
from tests.fakes import FakeUpstream, Reply, completion, text_stream
from tests.test_core_errors import assert_error

HOST = b"Host: 127.0.0.1\r\n"
CHAT_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\n" + HOST


@dataclass
class Answer:
    """What a raw client got before the server closed the connection."""

    status: int | None
    headers: dict[str, str]
    body: bytes
    closed_after: float  # seconds from connecting until the server closed


def parse(raw: bytes) -> tuple[int | None, dict[str, str], bytes]:
    if not raw:
        return None, {}, b""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


def error_of(answer: Answer) -> dict[str, Any]:
    assert answer.headers.get("content-type", "").startswith("application/json"), answer
    return json.loads(answer.body)  # type: ignore[no-any-return]


async def read_to_close(reader: asyncio.StreamReader, started: float, limit: float) -> Answer:
    """Everything the server sends until it closes (at most ``limit`` seconds)."""
    data = b""
    async with asyncio.timeout(limit):
        while chunk := await reader.read(65536):
            data += chunk
    return Answer(*parse(data), time.monotonic() - started)


async def trickle(port: int, first: bytes, piece: bytes, every: float, limit: float) -> Answer:
    """Send ``first``, then ``piece`` every ``every`` seconds, until the server closes."""
    started = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)

    async def feed() -> None:
        writer.write(first)
        while True:
            await asyncio.sleep(every)
            writer.write(piece)
            await writer.drain()

    feeder = asyncio.create_task(feed())
    try:
        return await read_to_close(reader, started, limit)
    finally:
        feeder.cancel()
        await asyncio.gather(feeder, return_exceptions=True)
        writer.close()


async def exchange(port: int, data: bytes, limit: float = 5.0) -> Answer:
    """Send ``data`` whole and read the answer until the server closes."""
    return await trickle(port, data, b"", 3600, limit)


def drops(proxy: Proxy, reason: str) -> float:
    value = proxy.metrics.registry.get_sample_value("toolshim_connection_drops_total", {"reason": reason})
    return value or 0.0


async def chat_ok(proxy: Proxy, client: openai.AsyncOpenAI | None = None) -> None:
    own = client or openai.AsyncOpenAI(base_url=proxy.base_url, api_key="k", max_retries=0, timeout=10)
    try:
        reply = await own.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "ok"
    finally:
        if client is None:
            await own.close()


async def test_hundreds_of_idle_slow_header_and_slow_body_connections_are_dropped_within_bounds(start_proxy) -> None:
    proxy = await start_proxy(head_timeout=1.0, body_timeout=1.0, keepalive_timeout=1.5)
    port = int(proxy.url.rsplit(":", 1)[1])
    n = 100
    body_head = CHAT_HEAD + b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="k", max_retries=0, timeout=10)
    await chat_ok(proxy, client)  # warm: the SDK's imports and its connection
    idle = [trickle(port, b"", b"", 3600, 6.0) for _ in range(n)]
    slow_head = [trickle(port, CHAT_HEAD, b"X-A: b\r\n", 0.2, 6.0) for _ in range(n)]
    slow_body = [trickle(port, body_head, b" ", 0.2, 6.0) for _ in range(n)]
    flood = asyncio.gather(*idle, *slow_head, *slow_body)

    served = 0
    while not flood.done() and served < 30:  # normal requests keep succeeding during the flood
        await chat_ok(proxy, client)
        served += 1
    answers = await flood
    await client.close()
    assert served >= 2

    for answer in answers[:n]:  # idle: closed by the keep-alive bound, nothing said
        assert answer.status is None and 1.3 < answer.closed_after < 4.0, answer
    for answer in answers[n : 2 * n]:  # a head still arriving after 1 s: 408 in OpenAI's shape, closed
        assert answer.status == 408 and 0.8 < answer.closed_after < 4.0, answer
        assert_error(error_of(answer), code="request_timeout", type_="invalid_request_error")
    for answer in answers[2 * n :]:  # a body still arriving after 1 s: 408 from the handler's read, closed
        assert answer.status == 408 and 0.8 < answer.closed_after < 4.0, answer
        assert_error(error_of(answer), code="request_timeout", type_="invalid_request_error")
    assert drops(proxy, "head_timeout") == n
    assert drops(proxy, "body_timeout") == n
    await chat_ok(proxy)
    for _ in range(100):  # the lingering ones close as their clients leave
        if proxy.metrics.registry.get_sample_value("toolshim_connections_open") == 0:
            break
        await asyncio.sleep(0.05)
    assert proxy.metrics.registry.get_sample_value("toolshim_connections_open") == 0


async def test_a_slow_head_that_completes_in_time_is_served(start_proxy) -> None:
    proxy = await start_proxy(head_timeout=2.0)
    port = int(proxy.url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.monotonic()
    for line in (b"GET /healthz HTTP/1.1\r\n", HOST, b"X-A: b\r\n", b"Connection: close\r\n\r\n"):
        writer.write(line)
        await asyncio.sleep(0.2)
    answer = await read_to_close(reader, started, 5.0)
    writer.close()
    assert answer.status == 200
    assert drops(proxy, "head_timeout") == 0


async def test_no_bound_cuts_a_long_answer_or_a_kept_alive_connection(start_proxy, fake_upstream: FakeUpstream) -> None:
    """The bounds are on what the client sends: a stream that runs three times longer than every
    bound completes, and the same keep-alive connection then serves the next request."""
    fake_upstream.script(Reply(pieces=text_stream(["x"] * 15), delay=0.1), Reply(body=completion("ok")))
    proxy = await start_proxy(head_timeout=0.5, body_timeout=0.5, keepalive_timeout=0.5)
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="k", max_retries=0, timeout=10)
    messages: Any = [{"role": "user", "content": "hi"}]
    stream = await client.chat.completions.create(model="m", messages=messages, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "x" * 15
    await chat_ok(proxy, client)  # at once: the connection the stream used is still open
    await client.close()
    assert drops(proxy, "head_timeout") == drops(proxy, "body_timeout") == 0


async def test_at_the_cap_idle_connections_give_way_to_new_ones(start_proxy) -> None:
    proxy = await start_proxy(max_connections=50)
    port = int(proxy.url.rsplit(":", 1)[1])
    conns = []
    for _ in range(200):  # four times the cap, none sending anything
        conns.append(await asyncio.open_connection("127.0.0.1", port))
    async with asyncio.timeout(5):
        evicted = await asyncio.gather(*(reader.read() for reader, _ in conns[:150]))
    assert evicted == [b""] * 150  # the longest-waiting ones were closed
    assert drops(proxy, "idle_evicted") >= 150
    await chat_ok(proxy)  # a new client still gets in, and is served
    answer = await exchange(port, b"GET /healthz HTTP/1.1\r\n" + HOST + b"Connection: close\r\n\r\n")
    assert answer.status == 200
    for _, writer in conns:
        writer.close()


async def test_at_the_cap_with_every_connection_busy_v1_is_shed_healthz_answers_then_refused(
    tmp_path: Path, fake_upstream: FakeUpstream
) -> None:
    """Busy connections (bodies still arriving) fill the cap; the overflow band answers /healthz and
    sheds /v1 with 503 + Retry-After; past the band a connection gets a JSON 503 and is closed."""
    rules = write_rules(tmp_path, fake_upstream.url, [{"match": "*", "upstream": "up", "tool_mode": "native"}])
    metrics = Metrics()
    app = create_app(Settings(rules_path=rules), load_rules(rules), metrics)
    proxy = Proxy("", app, metrics)
    limits = ConnectionLimits(head_timeout=10, body_timeout=10, keepalive_timeout=10, max_connections=2, overflow=1)
    runner = GuardedAppRunner(app, limits=limits, metrics=metrics, shutdown_timeout=1)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        busy = []
        for _ in range(2):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(CHAT_HEAD + b"Content-Length: 100\r\n\r\n{")
            busy.append((reader, writer))
        await asyncio.sleep(0.2)

        shed = await exchange(port, CHAT_HEAD + b"Content-Length: 2\r\n\r\n{}")
        assert shed.status == 503 and shed.headers["retry-after"] == "1"
        assert_error(error_of(shed), code="too_many_connections", type_="server_error")
        health = await exchange(port, b"GET /healthz HTTP/1.1\r\n" + HOST + b"\r\n")
        assert health.status == 200  # answered, then closed: the band is for a moment's use

        reader, writer = await asyncio.open_connection("127.0.0.1", port)  # in the band, busy
        writer.write(b"GET /healthz HTTP/1.1\r\n" + HOST + b"Content-Length: 50\r\n\r\n")
        busy.append((reader, writer))
        await asyncio.sleep(0.2)
        refused = await exchange(port, b"")
        assert refused.status == 503 and refused.headers["retry-after"] == "1"
        assert_error(error_of(refused), code="too_many_connections", type_="server_error")
        assert drops(proxy, "refused") == 1
        shed_total = proxy.metrics.registry.get_sample_value(
            "toolshim_requests_shed_total", {"reason": "connection_limit"}
        )
        assert shed_total == 2
        for _, writer in busy:
            writer.close()
    finally:
        await runner.cleanup()


MALFORMED = {
    "garbage request line": b"GARBAGE\r\n\r\n",
    "bad method": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
    "header too long": b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Long: " + b"a" * 9000 + b"\r\n\r\n",
    "request line too long": b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n" + HOST + b"\r\n",
    "invalid header": b"GET /healthz HTTP/1.1\r\n" + HOST + b"Bad Header : x\r\n\r\n",
    "bad chunked encoding": CHAT_HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    "bad content length": CHAT_HEAD + b"Content-Length: -5\r\n\r\n",
}


@pytest.mark.parametrize("raw", MALFORMED.values(), ids=MALFORMED.keys())
async def test_malformed_http_gets_a_json_400(start_proxy, raw: bytes) -> None:
    proxy = await start_proxy()
    port = int(proxy.url.rsplit(":", 1)[1])
    answer = await exchange(port, raw)
    assert answer.status == 400, answer
    error = assert_error(error_of(answer), code="bad_http_request", type_="invalid_request_error")
    assert error["message"].startswith("Malformed HTTP request: ")


def test_the_cap_fits_the_open_files_limit() -> None:
    assert connection_cap(4096, 1 << 20) == 4096
    assert connection_cap(4096, 1024) == 1024 - FD_RESERVE - ConnectionLimits(1, 1, 1, 1).overflow
    assert connection_cap(4096, 100) == 16
    assert connection_cap(4096, resource.RLIM_INFINITY) == 4096


def test_raw_error_is_a_whole_http_answer() -> None:
    raw = raw_error(Overloaded("busy"))
    status, headers, body = parse(raw)
    assert status == 503 and headers["retry-after"] == "1" and headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body)
    assert json.loads(body) == {
        "error": {"message": "busy", "type": "server_error", "param": None, "code": "overloaded"}
    }


def test_the_aiohttp_internals_the_guard_relies_on_are_there() -> None:
    """``GuardedRequestHandler`` reads three of ``RequestHandler``'s attributes; an aiohttp that renames
    them must fail here, not silently stop bounding connections."""
    for name in ("_messages", "_request_in_progress", "_close", "_force_close"):
        assert name in RequestHandler.__slots__, name
    assert issubclass(GuardedServer, web.Server)
