"""The load generator of ``bench/overhead.py``: request bodies, clients, and what they measure.

Every client here is an aiohttp client in the bench's own process; a result holds latencies in
seconds and, filled in by ``measured``, the CPU time the server under test spent meanwhile.
Stream latencies come from send stamps the mock upstream (``mock_upstream.py``) writes into its
chunks, read on the same CLOCK_MONOTONIC clock here.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import string
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import mock_upstream

HEADERS = {"Content-Type": "application/json"}
BODY = json.dumps(
    {"model": "bench-model", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16}
).encode()
STREAM_BODY = json.dumps(
    {"model": "bench-model", "messages": [{"role": "user", "content": "Count."}], "stream": True}
).encode()
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def emulated_body(model: str) -> bytes:
    """A streamed request with ``tools``; ``emu-*`` models match the bench's hermes rule."""
    return json.dumps(
        {
            "model": model,
            "stream": True,
            "tools": [WEATHER],
            "messages": [{"role": "user", "content": "Weather in Paris?"}],
        }
    ).encode()


EMU_PACED, EMU_BURST = emulated_body("emu-paced"), emulated_body("emu-burst")
CALL_PIECES = len(mock_upstream.CALL_PIECES)  # upstream chunks of the <tool_call> block
STAMP = re.compile(rb"@([tc])(\d+\.\d+)")


_ID_LETTERS = string.ascii_letters + string.digits


def agent_body(kb: int) -> bytes:
    """A native request of about ``kb`` kB, as an agent sends: tools, and a history of calls and results."""
    messages: list[dict[str, object]] = [{"role": "system", "content": "You are a coding agent. " * 20}]
    while len(json.dumps(messages)) < kb * 1000:
        i = len(messages)
        call = {
            "id": "call_" + "".join(random.Random(i).choices(_ID_LETTERS, k=24)),  # as OpenAI's look
            "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": f"Paris {i}"})},
        }
        messages += [
            {"role": "user", "content": f"Step {i}: and the weather in the next city? ü" * 4},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "Sunny, 21 °C, light wind.\n" * 20},
        ]
    return json.dumps({"model": "bench-model", "tools": [WEATHER] * 8, "messages": messages, "max_tokens": 16}).encode()


# --- clients -------------------------------------------------------------------------------------


def pct(data: list[float], q: float) -> float:
    """The ``q`` quantile of seconds, in milliseconds."""
    data = sorted(data)
    return data[min(len(data) - 1, int(q * len(data)))] * 1000 if data else float("nan")


@dataclass
class Result:
    latencies: list[float]  # seconds (per request, or per chunk for streams)
    elapsed: float
    requests: int
    cpu: float = 0.0  # CPU seconds the measured server (upstream or proxy) spent on the phase
    cpu_wait: float = 0.0  # seconds that server was runnable but waited for a CPU

    def pct(self, q: float) -> float:
        return pct(self.latencies, q)

    @property
    def rate(self) -> float:
        return self.requests / self.elapsed

    @property
    def cpu_ms(self) -> float:
        return self.cpu / self.requests * 1000


@dataclass
class EmuResult(Result):
    """Emulated streams: ``latencies`` per text chunk, ``call`` per tool call, ``whole`` per stream."""

    call: list[float] = field(default_factory=list)
    whole: list[float] = field(default_factory=list)
    chunks: int = 1  # upstream chunks per stream (text and the call block)


async def _post(session: aiohttp.ClientSession, url: str, body: bytes = BODY) -> float:
    started = time.perf_counter()
    async with session.post(url, data=body, headers=HEADERS) as resp:
        await resp.read()
        if resp.status != 200:
            raise SystemExit(f"{url}: HTTP {resp.status}")
    return time.perf_counter() - started


async def closed_loop(url: str, requests: int, clients: int, body: bytes = BODY) -> Result:
    """``clients`` clients, each sending its next request as soon as the last one is answered."""
    latencies: list[float] = []
    remaining = requests

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            latencies.append(await _post(session, url, body))

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients)) as session:
        started = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(clients)))
        return Result(latencies, time.perf_counter() - started, requests)


async def paced(url: str, requests: int, clients: int, rate: float) -> Result:
    """``clients`` clients sharing ``rate`` requests/s on fixed, staggered schedules."""
    latencies: list[float] = []
    period = clients / rate
    per_client = requests // clients

    async def client(session: aiohttp.ClientSession, offset: float, t0: float) -> None:
        for k in range(per_client):
            await asyncio.sleep(max(0.0, t0 + offset + k * period - time.perf_counter()))
            latencies.append(await _post(session, url))

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients)) as session:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(session, i * period / clients, t0) for i in range(clients)))
        return Result(latencies, time.perf_counter() - t0, per_client * clients)


async def streams(url: str, count: int, concurrency: int) -> Result:
    """Per-chunk delay of native streams: arrival time minus the upstream's ``sent`` stamp."""
    delays: list[float] = []
    queue = list(range(count))

    async def one(session: aiohttp.ClientSession) -> None:
        async with session.post(url, data=STREAM_BODY, headers=HEADERS) as resp:
            buffer = b""
            async for piece in resp.content.iter_any():
                arrived = time.monotonic()
                buffer += piece
                *events, buffer = buffer.split(b"\n\n")
                for event in events:
                    if event.startswith(b"data: {"):
                        delays.append(arrived - json.loads(event[6:])["sent"])

    async def worker(session: aiohttp.ClientSession) -> None:
        while queue:
            queue.pop()
            await one(session)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        started = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        return Result(delays, time.perf_counter() - started, count)


async def emulated(url: str, count: int, body: bytes, text_chunks: int, check: bool = False) -> EmuResult:
    """``count`` emulated streams one after another; ``check``: fail unless a tool call came back."""
    result = EmuResult([], 0.0, count, chunks=text_chunks + CALL_PIECES)
    async with aiohttp.ClientSession() as session:
        started = time.perf_counter()
        for _ in range(count):
            t0 = time.perf_counter()
            seen = b""
            async with session.post(url, data=body, headers=HEADERS) as resp:
                if resp.status != 200:
                    raise SystemExit(f"{url}: HTTP {resp.status}: {(await resp.read())[:300]!r}")
                buffer = b""
                async for piece in resp.content.iter_any():
                    arrived = time.monotonic()
                    buffer += piece
                    *events, buffer = buffer.split(b"\n\n")
                    for event in events:
                        for kind, stamp in STAMP.findall(event):
                            (result.latencies if kind == b"t" else result.call).append(arrived - float(stamp))
                    seen += piece if check else b""
            result.whole.append(time.perf_counter() - t0)
            if check and not (b'"name":"get_weather"' in seen and b'"finish_reason":"tool_calls"' in seen):
                raise SystemExit(f"{url}: the emulated stream did not end in a get_weather call: {seen[-600:]!r}")
        result.elapsed = time.perf_counter() - started
    if len(result.latencies) != count * text_chunks or len(result.call) != count:
        raise SystemExit(f"{url}: stamps lost: {len(result.latencies)} text, {len(result.call)} call")
    return result


async def measured(phase: Callable[[], Awaitable[Result]], pid: int) -> Result:
    """Run ``phase``, noting the CPU time of the server ``pid`` (upstream or proxy) meanwhile."""
    cpu, wait = cpu_seconds(pid)
    result = await phase()
    cpu_after, wait_after = cpu_seconds(pid)
    result.cpu, result.cpu_wait = cpu_after - cpu, wait_after - wait
    return result


def cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU time a process (and its workers) used, and time spent runnable but waiting for a CPU.

    Both are robust to other load on the machine; the second shows how much of a latency is
    queueing for a CPU that other processes hold.
    """
    run = wait = 0
    for p in process_tree(pid):
        try:
            run_ns, wait_ns, _ = Path(f"/proc/{p}/schedstat").read_text().split()
        except OSError:
            continue
        run, wait = run + int(run_ns), wait + int(wait_ns)
    return run / 1e9, wait / 1e9


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the workers of ``--workers N``)."""
    pids, i = [pid], 0
    while i < len(pids):
        for children in Path(f"/proc/{pids[i]}/task").glob("*/children"):
            try:
                pids += [int(c) for c in children.read_text().split()]
            except OSError:
                pass
        i += 1
    return pids
