"""What the proxy adds: the same load sent straight to a fast mock upstream and through toolshim.

Three processes, so nobody shares an event loop: the mock upstream (``bench/mock_upstream.py``),
the proxy (``toolshim serve``, one worker by default) and the load generator (this process,
aiohttp clients). Phases, each run direct and then proxied:

* non-streaming, one client in sequence (native rule): the overhead with no queueing at all;
* non-streaming, closed loop: ``--clients`` clients send back to back; gives throughput, and
  latency at saturation (mostly queueing, so compare the ratio rather than the milliseconds);
* non-streaming, paced: the same clients, each sending on a fixed schedule (``--rate`` in total,
  well under capacity); this is the added latency a user sees, checked against the targets;
* streaming, native: the upstream stamps every chunk with its send time (``sent``, a
  CLOCK_MONOTONIC reading shared by all processes); the client subtracts it from the arrival time;
* streaming, emulated (a ``hermes`` rule, ``tools`` in the request), one stream at a time: the
  upstream writes plain-text chunks and then a ``<tool_call>`` block, ``--emu-gap`` s apart, with
  send stamps in the text (the proxy rebuilds every chunk, so the stamps ride in the content and
  the call's argument). Per text chunk: arrival minus stamp; for the call: arrival of the call
  minus the stamp of the upstream chunk that closed it. Then the same with no gap ("burst"):
  the whole stream's added time divided by its chunks (several chunks then share one read and
  one wake-up, so this is the least the proxy adds per chunk; the fixed costs of a request are
  in it too).

Each row also gives the server's CPU time per request (per stream for streams) and the time it
sat runnable waiting for a CPU (``/proc/PID/schedstat``): on a shared machine latencies include
that wait, while CPU time does not, so it is the figure to compare between runs.

``--compare`` instead starts one proxy per variant (event loop and environment; by default
asyncio and uvloop), measures direct and every variant in each of ``--rounds`` rounds (order
rotated) and prints the medians over rounds: variants compared within one run, on one machine.

Usage: ``python bench/overhead.py [--requests 3000] [--clients 50] [--loop uvloop] [--profile out.prof]``
or ``python bench/overhead.py --compare [--rounds 5] [--variant LABEL:LOOP[:NAME=VALUE...]]``.
Bounded: about 30 s (``--compare``: about a minute) on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from loadgen import (
    CALL_PIECES,
    EMU_BURST,
    EMU_PACED,
    EmuResult,
    Result,
    agent_body,
    closed_loop,
    emulated,
    measured,
    paced,
    pct,
    process_tree,
    streams,
)

HERE = Path(__file__).resolve()
MOCK = HERE.with_name("mock_upstream.py")

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


# Starts the proxy with a chosen event loop, optionally under cProfile with a CPU-time clock (on a
# busy machine wall time mostly measures waiting). argv: loop, profile file or "-", toolshim's args.
LAUNCH = """import sys
loop, profile, args = sys.argv[1], sys.argv[2], sys.argv[3:]
if loop == "asyncio":
    sys.modules["uvloop"] = None  # an import of uvloop fails: toolshim falls back to asyncio.run
elif loop == "uvloop":
    import asyncio, uvloop
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())  # uvloop even where toolshim would not pick it
from toolshim.cli import main
if profile == "-":
    sys.exit(main(args))
import cProfile, time
profiler = cProfile.Profile(time.process_time)
try:
    profiler.runcall(main, args)
finally:
    profiler.dump_stats(profile)
"""


@dataclass
class Variant:
    """One proxy configuration: ``loop`` is default (toolshim's choice), asyncio or uvloop."""

    label: str
    loop: str = "default"
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, spec: str) -> Variant:
        """``LABEL:LOOP[:NAME=VALUE...]``, e.g. ``fast-json:asyncio:TOOLSHIM_X=1``."""
        label, _, rest = spec.partition(":")
        loop, *pairs = rest.split(":") if rest else ["default"]
        if loop not in ("default", "asyncio", "uvloop") or not all("=" in p for p in pairs):
            raise argparse.ArgumentTypeError(f"bad variant {spec!r}: want LABEL:default|asyncio|uvloop[:NAME=VALUE...]")
        return cls(label, loop, dict(p.split("=", 1) for p in pairs))


def write_rules(upstream: str, tmp: Path) -> Path:
    rules = tmp / "rules.json5"
    rules.write_text(
        json.dumps(
            {
                "upstreams": {"mock": {"base_url": upstream + "/v1"}},
                "models": [
                    {"match": "emu-*", "upstream": "mock", "tool_mode": "hermes"},
                    {"match": "*", "upstream": "mock", "tool_mode": "native"},
                ],
            }
        )
    )
    return rules


def start_proxy(
    rules: Path, port: int, workers: int, variant: Variant, profile: str | None = None
) -> subprocess.Popen[bytes]:
    args = ["serve", "--rules", str(rules), "--port", str(port), "--workers", str(workers)]
    cmd = [sys.executable, "-c", LAUNCH, variant.loop, profile or "-", *args]
    env = {**os.environ, "TOOLSHIM_READY_DELAY": "0", "TOOLSHIM_DRAIN_SECONDS": "2", **variant.env}
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=HERE.parent.parent)


def start_mock(port: int, args: argparse.Namespace) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            str(MOCK),
            "--port",
            str(port),
            "--chunks",
            str(args.chunks),
            "--chunk-interval",
            str(args.chunk_interval),
            "--emu-text",
            str(args.emu_text),
            "--emu-gap",
            str(args.emu_gap),
        ]
    )


def event_loop_of(pid: int) -> str:
    """Which loop the proxy's workers run, from the extension modules they mapped."""
    loops = set()
    for p in process_tree(pid)[-1:]:  # with several workers, the last one started
        try:
            loops.add("uvloop" if "uvloop/loop." in Path(f"/proc/{p}/maps").read_text() else "asyncio")
        except OSError:
            pass
    return "/".join(sorted(loops)) or "?"


# --- one proxy: every phase with a full table ------------------------------------------------------

QS = (0.5, 0.9, 0.99)


def table(title: str, direct: Result, proxied: Result, unit: str = "req/s", per: str = "req") -> list[float]:
    """Print a phase; return the added p50, p90, p99 in ms."""
    added = [proxied.pct(q) - direct.pct(q) for q in QS]
    print(f"\n{title}")
    print(
        f"  {'':15}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{unit:>11}{'server CPU/' + per:>20}"
        f"{'waited for CPU/' + per:>24}"
    )
    for name, r in (("direct", direct), ("through proxy", proxied)):
        print(
            f"  {name:15}{r.pct(0.5):9.3f}{r.pct(0.9):9.3f}{r.pct(0.99):9.3f}{r.rate:11.0f}{r.cpu_ms:17.3f} ms"
            f"{r.cpu_wait / r.requests * 1000:21.3f} ms"
        )
    print(f"  {'added':15}{added[0]:9.3f}{added[1]:9.3f}{added[2]:9.3f}{proxied.rate / direct.rate:10.2f}x")
    return added


def added_line(label: str, direct: list[float], proxied: list[float]) -> list[float]:
    """One line: the added p50/p90/p99 of two latency lists, and the direct p50 for scale."""
    added = [pct(proxied, q) - pct(direct, q) for q in QS]
    print(
        f"  {label:52} added p50 {added[0]:7.3f}  p90 {added[1]:7.3f}  p99 {added[2]:7.3f} ms"
        f"  (direct p50 {pct(direct, 0.5):.3f})"
    )
    return added


async def measure(args: argparse.Namespace, direct_url: str, proxy_url: str, pids: tuple[int, int]) -> None:
    chat = "/v1/chat/completions"
    direct, proxied = direct_url + chat, proxy_url + chat
    await warm_up(args, direct, proxied)

    async def both(phase: Callable[[str], Awaitable[Result]]) -> tuple[Result, Result]:
        return await measured(lambda: phase(direct), pids[0]), await measured(lambda: phase(proxied), pids[1])

    n1, big = args.requests // 6, agent_body(args.big_kb)
    d, p = await both(lambda url: closed_loop(url, n1, 1))
    one = table(f"non-streaming native, one client, {n1} requests in sequence: no queueing at all", d, p)
    d, p = await both(lambda url: closed_loop(url, n1 // 3, 1, big))
    table(
        f"non-streaming native, one client, {n1 // 3} agent requests of {len(big) / 1000:.0f} kB (tools, history)", d, p
    )
    d, p = await both(lambda url: closed_loop(url, args.requests, args.clients))
    table(f"non-streaming native, closed loop: {args.clients} clients back to back, {args.requests} requests", d, p)
    d, p = await both(lambda url: paced(url, args.requests, args.clients, args.rate))
    paced_added = table(f"non-streaming native, paced: {args.clients} clients, {args.rate:.0f} req/s in total", d, p)
    d, p = await both(lambda url: streams(url, args.streams, args.stream_clients))
    chunk = table(
        f"streaming native: {args.streams} streams x {args.chunks} chunks, {args.stream_clients} at a "
        "time; latency = per-chunk delay",
        d,
        p,
        unit="streams/s",
        per="stream",
    )
    n, chunks = args.emu_streams, args.emu_text + CALL_PIECES
    d, p = await both(lambda url: emulated(url, n, EMU_PACED, args.emu_text))
    emu = table(
        f"streaming emulated (hermes, tools in the request): {n} streams one at a time, each {args.emu_text} "
        f"text chunks + a {CALL_PIECES}-chunk <tool_call> block, {args.emu_gap * 1000:g} ms apart; latency = "
        "per text chunk",
        d,
        p,
        unit="streams/s",
        per="stream",
    )
    assert isinstance(d, EmuResult) and isinstance(p, EmuResult)
    added_line("tool call (from the chunk closing the call object)", d.call, p.call)
    added_line("whole stream (request to [DONE])", d.whole, p.whole)
    cpu_chunk = p.cpu_ms / chunks
    d, p = await both(lambda url: emulated(url, n, EMU_BURST, args.emu_text))
    assert isinstance(d, EmuResult) and isinstance(p, EmuResult)
    print(f"\nstreaming emulated, burst: the same {n} streams with no gap between chunks")
    whole = added_line("whole stream (request to [DONE])", d.whole, p.whole)
    print(f"\nsummary (added = through proxy minus direct; {os.cpu_count()} CPUs shared with the mock and the client)")
    print(f"  non-streaming native, 1 client   added p50 {one[0]:6.3f} ms  p90 {one[1]:6.3f} ms  p99 {one[2]:6.3f} ms")
    print(
        f"  emulated stream, per text chunk  added p50 {emu[0]:6.3f} ms  p90 {emu[1]:6.3f} ms  p99 {emu[2]:6.3f} ms"
        f"  (proxy CPU {cpu_chunk:.3f} ms per chunk, fixed costs of the request included)"
    )
    print(
        f"  emulated stream, burst           added whole-stream p50 / {chunks} chunks = {whole[0] / chunks:.3f} ms "
        "per chunk (fixed costs of the request included)"
    )
    print("\ntargets (issue 2):")
    for label, value, limit in (
        ("added p50, non-streaming (paced)", paced_added[0], 1.0),
        ("added p99, non-streaming (paced)", paced_added[2], 5.0),
        ("added per-chunk delay p50, native stream", chunk[0], 1.0),
        ("added per-chunk delay p50, emulated stream", emu[0], 1.0),
    ):
        print(f"  {label:44}{value:8.3f} ms  < {limit} ms  {'PASS' if value < limit else 'MISS'}")


async def warm_up(args: argparse.Namespace, *urls: str) -> None:
    """Connections, caches and the proxy's pool; checks that the emulated rule really emulates."""
    for i, url in enumerate(urls):
        await closed_loop(url, 300, args.clients)
        await closed_loop(url, 10, 1, agent_body(args.big_kb))
        await streams(url, 10, 5)
        await emulated(url, 5, EMU_BURST, args.emu_text, check=i > 0)


# --- several proxies: the variants compared round by round ---------------------------------------

# (key, column, is a latency: shown as proxy minus direct of the same round)
COLUMNS = (
    ("p50", "p50", True),
    ("p90", "p90", True),
    ("p99", "p99", True),
    ("cpu_req", "CPU", False),
    ("big", "p50", True),
    ("cpu_big", "CPU", False),
    ("emu50", "p50", True),
    ("emu90", "p90", True),
    ("emu99", "p99", True),
    ("burst", "burst", True),
    ("cpu_chunk", "CPU", False),
)
GROUPS = ((4, "non-streaming native, 1 client"), (2, "{big} kB agent req."), (5, "emulated stream, per chunk"))


async def figures(args: argparse.Namespace, url: str, pid: int) -> dict[str, float]:
    """One round's figures for one server (latencies not yet minus direct)."""
    chunks, streams_n = args.emu_text + CALL_PIECES, max(2, args.emu_streams // 4)
    one = await measured(lambda: closed_loop(url, args.requests // 6, 1), pid)
    big = await measured(lambda: closed_loop(url, args.requests // 30, 1, agent_body(args.big_kb)), pid)
    emu = await measured(lambda: emulated(url, streams_n, EMU_PACED, args.emu_text), pid)
    burst = await emulated(url, streams_n, EMU_BURST, args.emu_text)
    assert isinstance(emu, EmuResult)
    return {
        "p50": one.pct(0.5),
        "p90": one.pct(0.9),
        "p99": one.pct(0.99),
        "cpu_req": one.cpu_ms,
        "big": big.pct(0.5),
        "cpu_big": big.cpu_ms,
        "emu50": emu.pct(0.5),
        "emu90": emu.pct(0.9),
        "emu99": emu.pct(0.99),
        "burst": pct(burst.whole, 0.5) / chunks,
        "cpu_chunk": emu.cpu_ms / chunks,
    }


async def compare(
    args: argparse.Namespace, direct_url: str, mock_pid: int, proxies: dict[str, tuple[str, int]]
) -> None:
    chat = "/v1/chat/completions"
    await warm_up(args, direct_url + chat, *(url + chat for url, _ in proxies.values()))
    labels = list(proxies)
    runs: dict[str, list[dict[str, float]]] = {label: [] for label in labels}
    for r in range(args.rounds):
        base = await figures(args, direct_url + chat, mock_pid)
        for label in labels[r % len(labels) :] + labels[: r % len(labels)]:
            url, pid = proxies[label]
            got = await figures(args, url + chat, pid)
            runs[label].append({key: got[key] - base[key] if latency else got[key] for key, _, latency in COLUMNS})
        print(f"  round {r + 1}/{args.rounds} done", file=sys.stderr)
    median = {
        label: {key: statistics.median(run[key] for run in runs[label]) for key, _, _ in COLUMNS} for label in labels
    }
    big_kb = len(agent_body(args.big_kb)) / 1000
    print(
        f"\nvariants: {args.rounds} rounds of direct then every proxy (order rotated); each figure is the median "
        "over rounds.\nLatencies: added ms (proxy minus direct in the same round). CPU: the proxy's CPU time, ms per "
        f"request or per chunk.\n'burst': a whole emulated stream with no gaps, added ms per chunk "
        f"({args.emu_text + CALL_PIECES} chunks a stream)."
    )
    print(f"  {'':16}" + "|".join(f"{title.format(big=f'{big_kb:.0f}'):^{9 * n}}" for n, title in GROUPS))
    cells, start = [], 0
    for n, _ in GROUPS:
        cells.append("".join(f"{name:>9}" for _, name, _ in COLUMNS[start : start + n]))
        start += n
    print(f"  {'variant':16}" + "|".join(cells))
    for label in labels:
        cells, start = [], 0
        for n, _ in GROUPS:
            cells.append("".join(f"{median[label][key]:9.3f}" for key, _, _ in COLUMNS[start : start + n]))
            start += n
        print(f"  {label:16}" + "|".join(cells))
    first = labels[0]
    print(f"  CPU relative to {first}: median (min-max) of ratios over rounds (the robust figure on a busy machine):")
    for label in labels[1:]:
        parts = []
        for key, name in (
            ("cpu_req", "per request"),
            ("cpu_big", f"per {big_kb:.0f} kB request"),
            ("cpu_chunk", "per emulated chunk"),
        ):
            ratios = [a[key] / b[key] for a, b in zip(runs[label], runs[first], strict=True)]
            parts.append(f"{name} x{statistics.median(ratios):.3f} ({min(ratios):.2f}-{max(ratios):.2f})")
        print(f"    {label:16}" + "   ".join(parts))


# --- entry point ---------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--rate", type=float, default=500.0, help="total req/s of the paced phase")
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--stream-clients", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--chunk-interval", type=float, default=0.005, help="seconds between upstream chunks")
    parser.add_argument("--big-kb", type=int, default=64, help="size of the agent-sized requests")
    parser.add_argument("--emu-streams", type=int, default=40, help="emulated streams per phase")
    parser.add_argument("--emu-text", type=int, default=30, help="plain-text chunks before the tool call")
    parser.add_argument("--emu-gap", type=float, default=0.002, help="seconds between emulated chunks (paced)")
    parser.add_argument("--workers", type=int, default=1, help="proxy worker processes")
    parser.add_argument(
        "--loop",
        choices=("default", "asyncio", "uvloop"),
        default="default",
        help="the proxy's event loop (default: toolshim's own choice); with --workers 1 only",
    )
    parser.add_argument("--profile", help="run the proxy under cProfile and write the stats here")
    parser.add_argument("--compare", action="store_true", help="compare proxy variants instead (see --variant)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of --compare")
    parser.add_argument(
        "--variant",
        type=Variant.parse,
        action="append",
        default=[],
        help="LABEL:LOOP[:NAME=VALUE...] (repeatable): a proxy for --compare besides asyncio and "
        "uvloop (if installed); NAME=VALUE go into its environment",
    )
    args = parser.parse_args()
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    mock_port = free_port()
    direct = f"http://127.0.0.1:{mock_port}"
    if "uvloop" in (args.loop, *(v.loop for v in args.variant)) and importlib.util.find_spec("uvloop") is None:
        raise SystemExit("uvloop is not installed: pip install uvloop")
    variants = [Variant(args.loop, args.loop)]
    if args.compare:
        loops = ["asyncio", "uvloop"] if importlib.util.find_spec("uvloop") else ["asyncio"]
        variants = [*(Variant(loop, loop) for loop in loops), *args.variant]
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        mock = start_mock(mock_port, args)
        stack.callback(stop, mock)
        rules = write_rules(direct, Path(tmp))
        proxies: dict[str, tuple[str, subprocess.Popen[bytes]]] = {}
        for variant in variants:
            port = free_port()
            proc = start_proxy(rules, port, args.workers, variant, None if args.compare else args.profile)
            stack.callback(stop, proc)
            proxies[variant.label] = (f"http://127.0.0.1:{port}", proc)
        asyncio.run(_healthy_then_measure(args, direct, mock, proxies))
        running = ", ".join(f"{label}: {event_loop_of(proc.pid)}" for label, (_, proc) in proxies.items())
        print(
            f"\n({time.perf_counter() - started:.1f} s; proxy: toolshim serve --workers {args.workers}, "
            f"event loop {running}; {os.cpu_count()} CPUs)"
        )
        _warn_if_busy(load_before)
    if args.profile and not args.compare:
        import pstats

        pstats.Stats(args.profile).sort_stats("tottime").print_stats(25)


def _warn_if_busy(load_before: float) -> None:
    """Latency under load means little when other work competes for the CPUs: say so."""
    load = max(load_before, os.getloadavg()[0])
    cpus = os.cpu_count() or 1
    if load > cpus:
        print(
            f"WARNING: load average {load:.1f} on {cpus} CPUs: other processes competed for the CPUs, so the "
            "latencies under load include waiting for a CPU ('waited for CPU/req'). 'server CPU/req' is the robust "
            "figure: the proxy's added latency on an idle core is about its CPU per request plus one loopback hop."
        )


async def _healthy_then_measure(
    args: argparse.Namespace,
    direct: str,
    mock: subprocess.Popen[bytes],
    proxies: dict[str, tuple[str, subprocess.Popen[bytes]]],
) -> None:
    await wait_healthy(direct, mock)
    for url, proc in proxies.values():
        await wait_healthy(url, proc)
    if args.compare:
        await compare(args, direct, mock.pid, {label: (url, proc.pid) for label, (url, proc) in proxies.items()})
    else:
        ((url, proc),) = proxies.values()
        await measure(args, direct, url, (mock.pid, proc.pid))


if __name__ == "__main__":
    main()
