"""A client that stops reading a streamed answer: dropped after ``TOOLSHIM_SEND_TIMEOUT``.

The client is a real socket with a small receive buffer that sends its request and then reads
nothing; the fake upstream streams far more than the socket buffers hold. Within the send
timeout (plus the time to fill the buffers) the proxy closes the client connection, the upstream
connection is closed (the fake upstream sees the disconnect before it has sent all it had),
the request leaves the in-flight gauge, and ``toolshim_connection_drops{reason="send_timeout"}``
counts it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import pytest

from tests.conftest import Proxy
from tests.fakes import FakeUpstream, Reply, chunk, sse

PIECE = "x" * 16_384
PIECES = 2_000  # 32 MiB of content: more than every socket buffer between the fake and the client
SEND_TIMEOUT = 1.0


def silent_client(proxy: Proxy, path: str, body: dict[str, Any]) -> socket.socket:
    """Send one request on a socket with a small receive buffer, then never read."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window stays small
    host, port = proxy.url.removeprefix("http://").split(":")
    sock.connect((host, int(port)))
    raw = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    sock.sendall(f"{head}Content-Length: {len(raw)}\r\n\r\n".encode() + raw)
    return sock


def drops(proxy: Proxy) -> float:
    value = proxy.metrics.registry.get_sample_value("toolshim_connection_drops_total", {"reason": "send_timeout"})
    return value or 0.0


def in_flight(proxy: Proxy) -> float:
    return proxy.metrics.registry.get_sample_value("toolshim_requests_in_flight", {"stream": "true"}) or 0.0


async def wait_for(condition: Any, seconds: float) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < seconds, "timed out"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


@pytest.mark.parametrize(
    ("path", "models"),
    [
        ("/v1/chat/completions", [{"match": "*", "upstream": "up", "tool_mode": "native"}]),
        ("/v1/chat/completions", [{"match": "*", "upstream": "up", "tool_mode": "hermes"}]),
        ("/v1/completions", [{"match": "*", "upstream": "up", "tool_mode": "native"}]),
    ],
    ids=["native", "emulated", "passthrough"],
)
async def test_a_client_that_stops_reading_is_dropped_and_the_upstream_closed(
    start_proxy: Any, fake_upstream: FakeUpstream, path: str, models: list[dict[str, Any]]
) -> None:
    events = [sse(chunk({"role": "assistant", "content": ""}))] + [sse(chunk({"content": PIECE}))] * PIECES
    fake_upstream.script(Reply(pieces=[*events, sse(chunk({}, "stop")), sse("[DONE]")]))
    proxy = await start_proxy(models=models, send_timeout=SEND_TIMEOUT)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "prompt": "hi", "stream": True}
    sock = await asyncio.to_thread(silent_client, proxy, path, body)
    try:
        await wait_for(lambda: bool(fake_upstream.disconnected) and fake_upstream.disconnected[0], 20.0)
        assert fake_upstream.pieces_sent[0] < PIECES  # closed while it still had most of the answer to send
        await wait_for(lambda: drops(proxy) == 1 and in_flight(proxy) == 0, 5.0)
    finally:
        sock.close()


async def test_a_client_that_reads_slowly_but_steadily_is_not_dropped(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    """The bound is on one write waiting, not on the answer: pauses shorter than it are fine."""
    fake_upstream.script(Reply(pieces=[sse(chunk({"content": "a" * 1000}))] * 50 + [sse(chunk({}, "stop"))]))
    proxy = await start_proxy(send_timeout=SEND_TIMEOUT)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    sock = await asyncio.to_thread(silent_client, proxy, "/v1/chat/completions", body)
    received = b""
    try:
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        while b"[DONE]" not in received:
            piece = await asyncio.wait_for(loop.sock_recv(sock, 4096), 5.0)
            if not piece:
                break
            received += piece
            await asyncio.sleep(0.01)
    finally:
        sock.close()
    assert b"[DONE]" in received and drops(proxy) == 0


@pytest.mark.parametrize("tool_mode", ["native", "hermes"])
async def test_a_client_that_does_not_read_a_whole_answer_is_dropped(
    start_proxy: Any, fake_upstream: FakeUpstream, tool_mode: str
) -> None:
    """A non-streamed answer larger than the socket buffers: the write is bounded as a stream's is,
    so the handler task and the body are released instead of waiting for the client for ever."""
    content = "y" * 24_000_000
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
    fake_upstream.script(Reply(body={"id": "c", "object": "chat.completion", "model": "m", **answer}))
    models = [{"match": "*", "upstream": "up", "tool_mode": tool_mode}]
    proxy = await start_proxy(models=models, send_timeout=SEND_TIMEOUT)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    sock = await asyncio.to_thread(silent_client, proxy, "/v1/chat/completions", body)
    try:
        await wait_for(lambda: drops(proxy) == 1, 20.0)
    finally:
        sock.close()
