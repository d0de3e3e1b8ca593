"""Churn: does the proxy give everything back when clients hang up and upstreams reset mid-stream?

Three processes, as in ``bench/overhead.py``: the mock upstream (``bench/mock_upstream.py``), the
proxy (``toolshim serve``) and this load generator. ``--requests`` streamed chat requests,
``--clients`` at a time; a seeded share (``--aborts``) of the clients reads the first bytes of its
stream and hangs up, and a share (``--resets``) asks for the ``bench-reset`` model, whose upstream
connection is reset (TCP RST) after a few chunks. Before (after a warm-up) and after the run (once
``--settle`` seconds have passed) it reads, from ``/proc`` and ``/metrics``:

* the proxy's open upstream connections (its sockets connected to the mock's port: ESTABLISHED,
  and CLOSE_WAIT, which is a connection the upstream closed and the proxy never did);
* its open file descriptors and resident memory (the proxy and its worker processes);
* ``toolshim_requests_in_flight``, which must fall back to where it was.

Then requests per second, and how each request ended. Idle keep-alive connections in the
upstream client's pool are normal after a run (at most ``--clients``); they close after its
keep-alive time (30 s, swept up to 60 s later: ``--settle 65`` shows them gone). CLOSE_WAIT
ones, connections or fds that outlive that, and a non-zero in-flight are leaks.

Usage: ``python bench/churn.py [--requests 2000] [--aborts 0.3] [--resets 0.1] [--clients 50]``.
Bounded: every request has a timeout, the whole run ``--max-seconds``; about 20 s for 2,000
requests on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from overhead import MOCK, Variant, free_port, start_proxy, stop, wait_healthy, write_rules
from prometheus_client.parser import text_string_to_metric_families

HEADERS = {"Content-Type": "application/json"}
ESTABLISHED, CLOSE_WAIT = "01", "08"  # /proc/net/tcp states


def body(model: str) -> bytes:
    return json.dumps({"model": model, "messages": [{"role": "user", "content": "Count."}], "stream": True}).encode()


NORMAL, RESET = body("bench-model"), body("bench-reset")


@dataclass
class Snapshot:
    """What the proxy holds at one moment."""

    upstream_established: int
    upstream_close_wait: int
    fds: int
    rss_mib: float
    in_flight: float


def proxy_pids(pid: int) -> list[int]:
    """The proxy and its children (the workers, with ``--workers`` above 1)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    return [pid, *(int(c) for c in children)]


def socket_inodes(pids: list[int]) -> tuple[set[str], int]:
    """The socket inodes these processes hold, and how many fds they have in all."""
    inodes: set[str] = set()
    fds = 0
    for pid in pids:
        folder = Path(f"/proc/{pid}/fd")
        try:
            entries = list(folder.iterdir())
        except OSError:
            continue
        fds += len(entries)
        for entry in entries:
            try:
                target = entry.readlink().name
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes, fds


def upstream_sockets(inodes: set[str], upstream_port: int) -> collections.Counter[str]:
    """States of the held TCP sockets whose remote port is the upstream's."""
    states: collections.Counter[str] = collections.Counter()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == upstream_port and fields[9] in inodes:
                states[fields[3]] += 1
    return states


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


async def in_flight(session: aiohttp.ClientSession, url: str) -> float:
    async with session.get(url + "/metrics") as resp:
        text = await resp.text()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "toolshim_requests_in_flight"
    )


async def snapshot(session: aiohttp.ClientSession, url: str, pid: int, upstream_port: int) -> Snapshot:
    flight = await in_flight(session, url)  # first: its own connection is then in the fd count as well
    pids = proxy_pids(pid)
    inodes, fds = socket_inodes(pids)
    states = upstream_sockets(inodes, upstream_port)
    return Snapshot(states[ESTABLISHED], states[CLOSE_WAIT], fds, rss_mib(pids), flight)


async def one(session: aiohttp.ClientSession, url: str, kind: str) -> str:
    """One streamed request; how it ended, in a few words."""
    try:
        async with session.post(url, data=RESET if kind == "reset" else NORMAL, headers=HEADERS) as resp:
            if resp.status != 200:
                return f"HTTP {resp.status}"
            if kind == "abort":
                await resp.content.readany()
                resp.close()  # hang up mid-stream: the connection is closed, not returned to the pool
                return "client hung up"
            text = await resp.read()
    except (aiohttp.ClientError, TimeoutError) as exc:
        return f"client error ({type(exc).__name__})"
    if text.rstrip().endswith(b"data: [DONE]"):
        return "complete"
    last = text.strip().rsplit(b"\n\n", 1)[-1]
    if b'"error"' in last:
        return "ended with an error event"
    return "cut without an error event"


async def run(args: argparse.Namespace, url: str, pid: int, upstream_port: int) -> None:
    chat = url + "/v1/chat/completions"
    rng = random.Random(args.seed)
    kinds = [
        "abort" if r < args.aborts else "reset" if r < args.aborts + args.resets else "normal"
        for r in (rng.random() for _ in range(args.requests))
    ]
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as probe:
        async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=args.clients)) as s:
            warm = await asyncio.gather(*(one(s, chat, "normal") for _ in range(min(args.clients, 20))))
            if set(warm) != {"complete"}:
                raise SystemExit(f"warm-up failed: {collections.Counter(warm)}")
        await asyncio.sleep(args.settle)
        before = await snapshot(probe, url, pid, upstream_port)
        outcomes: collections.Counter[str] = collections.Counter()
        pending = iter(kinds)

        async def client(session: aiohttp.ClientSession) -> None:
            for kind in pending:
                outcomes[f"{kind}: {await one(session, chat, kind)}"] += 1

        connector = aiohttp.TCPConnector(limit=args.clients)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            started = time.perf_counter()
            await asyncio.wait_for(asyncio.gather(*(client(session) for _ in range(args.clients))), args.max_seconds)
            elapsed = time.perf_counter() - started
        await asyncio.sleep(args.settle)
        after = await snapshot(probe, url, pid, upstream_port)
    report(args, elapsed, outcomes, before, after)


def report(
    args: argparse.Namespace, elapsed: float, outcomes: collections.Counter[str], before: Snapshot, after: Snapshot
) -> None:
    print(
        f"churn: {args.requests} streamed requests, {args.clients} clients, {args.aborts:.0%} hang up mid-stream, "
        f"{args.resets:.0%} upstream resets (seed {args.seed}, {args.workers} worker(s))"
    )
    print(f"  {args.requests / elapsed:.0f} requests/s ({elapsed:.1f} s)")
    for outcome, count in sorted(outcomes.items()):
        print(f"  {count:6d}  {outcome}")
    print(f"  {'':34s}{'before':>10s}{'after':>10s}")
    rows = [
        ("upstream connections (established)", before.upstream_established, after.upstream_established),
        ("upstream connections (close-wait)", before.upstream_close_wait, after.upstream_close_wait),
        ("open file descriptors", before.fds, after.fds),
        ("RSS (MiB)", f"{before.rss_mib:.1f}", f"{after.rss_mib:.1f}"),
        ("requests in flight", f"{before.in_flight:g}", f"{after.in_flight:g}"),
    ]
    for label, first, last in rows:
        print(f"  {label:34s}{first!s:>10s}{last!s:>10s}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--aborts", type=float, default=0.3, help="share of clients that hang up mid-stream")
    parser.add_argument("--resets", type=float, default=0.1, help="share of requests whose upstream resets")
    parser.add_argument("--chunks", type=int, default=20, help="chunks per upstream stream")
    parser.add_argument("--chunk-interval", type=float, default=0.005, help="seconds between upstream chunks")
    parser.add_argument("--workers", type=int, default=1, help="proxy worker processes")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds to wait before each snapshot")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--max-seconds", type=float, default=300.0, help="bound on the whole run")
    args = parser.parse_args()
    if not 0 <= args.aborts + args.resets <= 1:
        raise SystemExit("--aborts plus --resets must be a share between 0 and 1")
    mock_port, proxy_port = free_port(), free_port()
    command = [sys.executable, str(MOCK), "--port", str(mock_port), "--chunks", str(args.chunks)]
    with tempfile.TemporaryDirectory() as tmp:
        mock = subprocess.Popen(
            [*command, "--chunk-interval", str(args.chunk_interval)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        proxy = start_proxy(
            write_rules(f"http://127.0.0.1:{mock_port}", Path(tmp)), proxy_port, args.workers, Variant("default")
        )
        try:
            url = f"http://127.0.0.1:{proxy_port}"
            asyncio.run(wait_healthy(f"http://127.0.0.1:{mock_port}", mock))
            asyncio.run(wait_healthy(url, proxy))
            asyncio.run(run(args, url, proxy.pid, mock_port))
        finally:
            stop(proxy)
            stop(mock)


if __name__ == "__main__":
    main()
