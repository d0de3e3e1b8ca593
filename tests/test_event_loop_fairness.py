"""One request's parsing cannot stall the event loop: /healthz answers while worst-case output streams.

The upstream here runs in its own thread and writes the whole answer at once, so the proxy always
has more to read than it can parse (a fake upstream on the proxy's own loop would only write when the
proxy waits, and so hand it pauses a real fast upstream does not). The answer is text that keeps the
parser busy and undecided: never-closed ``<tool_call>`` openers and objects, partial markers. While it
is parsed, /healthz is asked again and again on the proxy's loop; each answer must come within half a
second on a quiet machine, and within a fifth of the stream's own time on a loaded one (the proxy yields
every few milliseconds of work; a stalled loop makes /healthz wait for nearly the whole stream).
The test session's own heap is not the proxy's: ``tests/conftest.py`` freezes earlier modules' objects, so a
garbage collection here pauses for the proxy's objects, as in a serving process.

The parser's own cost is checked to be linear without a clock in ``tests/formats`` (``assert_linear``
over ``ADVERSARIAL_OUTPUTS``); ``bench/parser_worst.py`` prints the absolute figures.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from collections.abc import Iterator

import aiohttp
import pytest

from tests.conftest import ProxyFactory
from tests.fakes import FakeUpstream, chunk, sse

# Worst-case text for hermes with lenient recognition, in 16-character content deltas.
# No valid call (a call would end the stream at the cut); the rule does not re-ask, so all of it is read.
_UNITS = ('<tool_call>{"name": ', '<tool_call>{"name": "nope", "arguments": {"a": ', "<tool_cal</tool_c<", "[{" * 8)
_SIZE = 80_000


def _worst_body(piece: int) -> bytes:
    """An HTTP response streaming worst-case text as SSE content deltas of ``piece`` characters."""
    text = "".join(_UNITS) * (_SIZE // len("".join(_UNITS)))
    events = [sse(chunk({"role": "assistant", "content": ""}))]
    events += [sse(chunk({"content": text[i : i + piece]})) for i in range(0, len(text), piece)]
    events += [sse(chunk({}, "stop")), sse("[DONE]")]
    head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    return (head + "".join(events)).encode()


def _read_request(conn: socket.socket) -> None:
    """Read one HTTP request (head and ``Content-Length`` body) off ``conn``."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536) or b"\r\n\r\n"
    head, _, rest = data.partition(b"\r\n\r\n")
    found = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    length = int(found.group(1)) if found else 0
    while len(rest) < length:
        rest += conn.recv(65536) or b"x" * length


@pytest.fixture(params=[16, _SIZE], ids=["small-deltas", "one-delta"])
def fast_upstream(request: pytest.FixtureRequest) -> Iterator[str]:
    """A base URL whose every request gets the worst-case stream, written by another thread at once:
    in 16-character deltas (a fast token stream), or all of it in one delta (one huge event)."""
    body = _worst_body(request.param)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(30)
                try:
                    _read_request(conn)
                    conn.sendall(body)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    stop.set()
    thread.join(5)
    listener.close()


async def _healthz_seconds(session: aiohttp.ClientSession, url: str) -> float:
    started = time.perf_counter()
    async with session.get(url + "/healthz") as resp:
        assert resp.status == 200
        await resp.read()
    return time.perf_counter() - started


async def test_healthz_answers_while_worst_output_is_parsed(
    start_proxy: ProxyFactory, fake_upstream: FakeUpstream, fast_upstream: str
) -> None:
    fake_upstream.url = fast_upstream  # the rules name the fast upstream instead of the scripted one
    proxy = await start_proxy(models=[{"match": "*", "upstream": "up", "tool_mode": "hermes", "max_repair_retries": 0}])
    tools = [{"type": "function", "function": {"name": "search_docs", "parameters": {"type": "object"}}}]
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}], "tools": tools}
    async with aiohttp.ClientSession() as session:
        await _healthz_seconds(session, proxy.url)  # warm: the probe's own connection is set up

        async def answer() -> tuple[float, int]:
            started = time.perf_counter()
            async with session.post(proxy.base_url + "/chat/completions", json=body) as resp:
                size = len(await resp.read())
            return time.perf_counter() - started, size

        streaming = asyncio.ensure_future(answer())
        latencies: list[float] = []
        while not streaming.done():
            latencies.append(await _healthz_seconds(session, proxy.url))
            await asyncio.sleep(0.02)
        seconds, size = await streaming
    assert size > 0
    # half a second on a quiet machine; on a loaded one the whole run slows down, so the bound is also a
    # share of the stream's own time (a stalled loop makes /healthz wait for nearly all of it)
    bound = max(0.5, seconds / 5)
    assert max(latencies) < bound, f"/healthz took up to {max(latencies):.2f} s during a {seconds:.2f} s stream"
    assert len(latencies) >= 3, f"the stream took only {seconds:.2f} s: too short to show anything"


class _Pieces:
    """A stream's reader of its own pieces (bytes as payloads): never over, nothing held at the end."""

    over = False

    def feed(self, piece: bytes) -> list[str]:
        return [piece.decode()]

    def end(self) -> list[str]:
        return []

    def failure(self) -> None:
        return None


async def _read_all(pieces: object, monkeypatch: pytest.MonkeyPatch) -> tuple[list[object], int]:
    """The payloads of a stream over ``pieces``, and how many times pacing yielded to the loop."""
    from toolshim.upstream import base

    yields = 0
    real_sleep = asyncio.sleep

    async def counted_sleep(delay: float) -> None:
        nonlocal yields
        yields += delay == 0
        await real_sleep(delay)

    monkeypatch.setattr(base.asyncio, "sleep", counted_sleep)
    stream = base.UpstreamStream("up", base.Body(pieces, _Pieces(), lambda: None), None, time.perf_counter())  # type: ignore[arg-type]
    payloads = [payload async for payload in stream]
    return payloads, yields


async def test_a_stream_whose_reads_wait_is_not_paced_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tokens that come slower than the pace (a model generating) each let the loop run while awaited:
    pacing adds no yield of its own, which would wake the whole request once more per token."""
    from toolshim.upstream.base import PACE_SECONDS

    async def slow() -> object:
        for i in range(5):
            await asyncio.sleep(PACE_SECONDS * 2)
            yield f"t{i}".encode()

    payloads, yields = await _read_all(slow(), monkeypatch)
    assert payloads == ["t0", "t1", "t2", "t3", "t4"] and yields == 0


async def test_a_stream_read_without_waiting_still_yields(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces already buffered (a fast upstream) never let the loop run by themselves: past the pace's
    time of work the stream yields."""
    from toolshim.upstream.base import PACE_SECONDS

    async def buffered() -> object:
        for i in range(4):
            time.sleep(PACE_SECONDS * 1.5)  # the work of parsing a big piece, with no wait between pieces
            yield f"t{i}".encode()

    payloads, yields = await _read_all(buffered(), monkeypatch)
    assert len(payloads) == 4 and yields >= 3
