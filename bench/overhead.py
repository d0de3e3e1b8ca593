"""What the proxy adds: the same load sent straight to a fast mock upstream and through toolshim.

Three processes, so nobody shares an event loop: the mock upstream (this file with
``--mock-upstream``), the proxy (``toolshim serve``, native mode, one worker by default) and the
load generator (this process, aiohttp clients). Phases, each run direct and then proxied:

* one client in sequence: the overhead with no queueing at all;
* non-streaming, closed loop: ``--clients`` clients send back to back; gives throughput, and
  latency at saturation (mostly queueing, so compare the ratio rather than the milliseconds);
* non-streaming, paced: the same clients, each sending on a fixed schedule (``--rate`` in total,
  well under capacity); this is the added latency a user sees, checked against the targets;
* streaming: the upstream stamps every chunk with its send time (``sent``, a CLOCK_MONOTONIC
  reading shared by all processes); the client subtracts it from the arrival time.

Each row also gives the server's CPU time per request and the time it sat runnable waiting
for a CPU (``/proc/PID/schedstat``): on a shared machine latencies include that wait, while
CPU per request does not, so it is the figure to compare between runs.

Usage: ``python bench/overhead.py [--requests 3000] [--clients 50] [--profile out.prof]``.
Bounded: about 30-50 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web

HERE = Path(__file__).resolve()
TOOLSHIM = Path(sys.executable).with_name("toolshim")
BODY = json.dumps({"model": "bench-model", "messages": [{"role": "user", "content": "Say hello."}],
                   "max_tokens": 16}).encode()
STREAM_BODY = json.dumps({"model": "bench-model", "messages": [{"role": "user", "content": "Count."}],
                          "stream": True}).encode()
HEADERS = {"Content-Type": "application/json"}


# --- the mock upstream (its own process) -------------------------------------------------------

COMPLETION = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "bench-model",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello! How can I help you today?"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 9, "total_tokens": 18}}).encode()


def _chunk(i: int, last: bool) -> bytes:
    delta = {} if last else {"content": f"tok{i} "}
    payload = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "bench-model",
               "sent": time.monotonic(), "choices": [{"index": 0, "delta": delta,
                                                      "finish_reason": "stop" if last else None}]}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def run_mock(port: int, chunks: int, interval: float) -> None:
    """A fast OpenAI-compatible server: a fixed completion, or ``chunks`` chunks ``interval`` s apart."""

    async def chat(request: web.Request) -> web.StreamResponse:
        body = json.loads(await request.read())
        if not body.get("stream"):
            return web.Response(body=COMPLETION, content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(chunks):
            await resp.write(_chunk(i, i == chunks - 1))
            await asyncio.sleep(interval)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/healthz", healthz)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None, backlog=1024)


# --- processes -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"{proc.args!r} exited with {proc.returncode}")
            try:
                async with session.get(url + "/healthz") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit(f"{url} did not become healthy in {timeout} s")


def stop(proc: subprocess.Popen[bytes], timeout: float = 15) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# The proxy under cProfile with a CPU-time clock: on a busy machine wall time mostly measures waiting.
PROFILED = """import cProfile, sys, time
from toolshim.cli import main
profiler = cProfile.Profile(time.process_time)
try:
    profiler.runcall(main, sys.argv[2:])
finally:
    profiler.dump_stats(sys.argv[1])
"""


def start_proxy(upstream: str, port: int, workers: int, profile: str | None, tmp: Path) -> subprocess.Popen[bytes]:
    rules = tmp / "rules.json5"
    rules.write_text(json.dumps({"upstreams": {"mock": {"base_url": upstream + "/v1"}},
                                 "models": [{"match": "*", "upstream": "mock", "tool_mode": "native"}]}))
    args = ["serve", "--rules", str(rules), "--port", str(port), "--workers", str(workers)]
    cmd = [sys.executable, "-c", PROFILED, profile, *args] if profile else [str(TOOLSHIM), *args]
    env = {**os.environ, "TOOLSHIM_READY_DELAY": "0", "TOOLSHIM_DRAIN_SECONDS": "2"}
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=HERE.parent.parent)


def cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU time a process used, and time it spent runnable but waiting for a CPU (Linux schedstat).

    Both are robust to other load on the machine; the second shows how much of a latency is
    queueing for a CPU that other processes hold.
    """
    run_ns, wait_ns, _ = Path(f"/proc/{pid}/schedstat").read_text().split()
    return int(run_ns) / 1e9, int(wait_ns) / 1e9


# --- load --------------------------------------------------------------------------------------


@dataclass
class Result:
    latencies: list[float]  # seconds (per request, or per chunk for streams)
    elapsed: float
    requests: int
    cpu: float = 0.0  # CPU seconds the measured server (upstream or proxy) spent on the phase
    cpu_wait: float = 0.0  # seconds that server was runnable but waited for a CPU

    def pct(self, q: float) -> float:
        data = sorted(self.latencies)
        return data[min(len(data) - 1, int(q * len(data)))] * 1000

    @property
    def rate(self) -> float:
        return self.requests / self.elapsed


async def _post(session: aiohttp.ClientSession, url: str) -> float:
    started = time.perf_counter()
    async with session.post(url, data=BODY, headers=HEADERS) as resp:
        await resp.read()
        if resp.status != 200:
            raise SystemExit(f"{url}: HTTP {resp.status}")
    return time.perf_counter() - started


async def closed_loop(url: str, requests: int, clients: int) -> Result:
    """``clients`` clients, each sending its next request as soon as the last one is answered."""
    latencies: list[float] = []
    remaining = requests

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            latencies.append(await _post(session, url))

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
    """Per-chunk delay: arrival time minus the upstream's ``sent`` stamp."""
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


# --- report ------------------------------------------------------------------------------------


def table(title: str, direct: Result, proxied: Result, unit: str = "req/s") -> tuple[float, float]:
    added50, added99 = proxied.pct(0.5) - direct.pct(0.5), proxied.pct(0.99) - direct.pct(0.99)
    print(f"\n{title}")
    print(f"  {'':15}{'p50 ms':>10}{'p99 ms':>10}{unit:>12}{'server CPU/req':>16}{'waited for CPU/req':>20}")
    for name, r in (("direct", direct), ("through proxy", proxied)):
        print(f"  {name:15}{r.pct(0.5):10.3f}{r.pct(0.99):10.3f}{r.rate:12.0f}{r.cpu / r.requests * 1000:13.3f} ms"
              f"{r.cpu_wait / r.requests * 1000:17.3f} ms")
    print(f"  {'added':15}{added50:10.3f}{added99:10.3f}{proxied.rate / direct.rate:11.2f}x")
    return added50, added99


async def both(phase: Callable[[str], Awaitable[Result]], direct_url: str, proxy_url: str,
               pids: tuple[int, int]) -> tuple[Result, Result]:
    """Run ``phase`` direct and then through the proxy, noting each server's CPU time."""
    results = []
    for url, pid in zip((direct_url, proxy_url), pids, strict=True):
        cpu, wait = cpu_seconds(pid)
        result = await phase(url + "/v1/chat/completions")
        cpu_after, wait_after = cpu_seconds(pid)
        result.cpu, result.cpu_wait = cpu_after - cpu, wait_after - wait
        results.append(result)
    return results[0], results[1]


async def measure(args: argparse.Namespace, direct_url: str, proxy_url: str, pids: tuple[int, int]) -> None:
    chat = "/v1/chat/completions"
    for url in (direct_url, proxy_url):  # warm up connections, caches and the proxy's pool
        await closed_loop(url + chat, 300, args.clients)
        await streams(url + chat, 10, 5)
    d, p = await both(lambda url: closed_loop(url, args.requests // 6, 1), direct_url, proxy_url, pids)
    table(f"non-streaming, one client, {args.requests // 6} requests in sequence: no queueing at all", d, p)
    d, p = await both(lambda url: closed_loop(url, args.requests, args.clients), direct_url, proxy_url, pids)
    table(f"non-streaming, closed loop: {args.clients} clients back to back, {args.requests} requests", d, p)
    d, p = await both(lambda url: paced(url, args.requests, args.clients, args.rate), direct_url, proxy_url, pids)
    added50, added99 = table(f"non-streaming, paced: {args.clients} clients, {args.rate:.0f} req/s in total", d, p)
    d, p = await both(lambda url: streams(url, args.streams, args.stream_clients), direct_url, proxy_url, pids)
    chunk50, _ = table(f"streaming: {args.streams} streams x {args.chunks} chunks, {args.stream_clients} at a time;"
                       " latency = per-chunk delay", d, p, unit="streams/s")
    print("\ntargets (issue 2):")
    for label, value, limit in (("added p50, non-streaming", added50, 1.0),
                                ("added p99, non-streaming", added99, 5.0),
                                ("added per-chunk delay p50, streaming", chunk50, 1.0)):
        print(f"  {label:40}{value:8.3f} ms  < {limit} ms  {'PASS' if value < limit else 'MISS'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--rate", type=float, default=500.0, help="total req/s of the paced phase")
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--stream-clients", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--chunk-interval", type=float, default=0.005, help="seconds between upstream chunks")
    parser.add_argument("--workers", type=int, default=1, help="proxy worker processes")
    parser.add_argument("--profile", help="run the proxy under cProfile and write the stats here")
    parser.add_argument("--mock-upstream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mock_upstream:
        run_mock(args.port, args.chunks, args.chunk_interval)
        return
    run(args)


def run(args: argparse.Namespace) -> None:
    load_before = os.getloadavg()[0]
    mock_port, proxy_port = free_port(), free_port()
    direct, proxied = f"http://127.0.0.1:{mock_port}", f"http://127.0.0.1:{proxy_port}"
    mock = subprocess.Popen([sys.executable, str(HERE), "--mock-upstream", "--port", str(mock_port),
                             "--chunks", str(args.chunks), "--chunk-interval", str(args.chunk_interval)])
    with tempfile.TemporaryDirectory() as tmp:
        proxy = start_proxy(direct, proxy_port, args.workers, args.profile, Path(tmp))
        try:
            started = time.perf_counter()
            asyncio.run(_healthy_then_measure(args, direct, proxied, mock, proxy))
            print(f"\n({time.perf_counter() - started:.1f} s; proxy: toolshim serve --workers {args.workers}, "
                  f"{os.cpu_count()} CPUs)")
            _warn_if_busy(load_before)
        finally:
            stop(proxy)
            stop(mock)
    if args.profile:
        import pstats

        pstats.Stats(args.profile).sort_stats("tottime").print_stats(25)


def _warn_if_busy(load_before: float) -> None:
    """Latency under load means little when other work competes for the CPUs: say so."""
    load = max(load_before, os.getloadavg()[0])
    cpus = os.cpu_count() or 1
    if load > cpus:
        print(f"WARNING: load average {load:.1f} on {cpus} CPUs: other processes competed for the CPUs, so the "
              "latencies under load include waiting for a CPU ('waited for CPU/req'). 'server CPU/req' is the robust "
              "figure: the proxy's added latency on an idle core is about its CPU per request plus one loopback hop.")


async def _healthy_then_measure(args: argparse.Namespace, direct: str, proxied: str,
                                mock: subprocess.Popen[bytes], proxy: subprocess.Popen[bytes]) -> None:
    await wait_healthy(direct, mock)
    await wait_healthy(proxied, proxy)
    await measure(args, direct, proxied, (mock.pid, proxy.pid))


if __name__ == "__main__":
    main()
