"""How often one request moves between toolshim's modules: the length of its path through the code.

The proxy runs in this process (``create_app`` on a real port, as ``tests/conftest.py`` does) before
an in-process mock upstream; every frame whose module is inside the ``toolshim`` package is traced
(``sys.setprofile``, and ``threading.setprofile`` for the Responses store's worker threads) during
one request of each kind, after a warm-up request of the same kind (of ``TRACED`` traced requests, the
one with the fewest calls: a timer firing or two chunks read at once must not move the figures):

* native non-streaming chat, native streaming chat (``CHUNKS`` content chunks);
* emulated streaming chat (a ``hermes`` rule, ``tools`` sent): ``TEXT_CHUNKS`` text chunks, then a
  ``<tool_call>`` block in ``len(CALL_PIECES)`` chunks;
* a streamed ``/v1/responses`` request on the same emulated rule and upstream answer.

Counted per request:

* calls: Python calls (and coroutine/generator resumptions) of toolshim functions;
* transitions: a call or a return that moves from one toolshim module to another;
* re-entries: a call into a module from outside it (another module, or the event loop resuming a
  coroutine) when the request has already entered that module before;
* calls per chunk: calls divided by the SSE events the client received (streams only).

``--tree DIR`` (repeatable) measures the checkout at DIR instead of the importable toolshim: DIR/.shim
goes first on ``sys.path``, with DIR/.shim/toolshim a symlink to DIR/proxy. Several trees are each
measured in their own process and printed side by side, with ratios to the first, in one run.

Usage: ``python bench/crossings.py [--tree DIR ...] [--json]``. A few seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

PACKAGE = "toolshim"
CHUNKS = 8  # native stream: content chunks, then a finish chunk
TEXT_CHUNKS = 6  # emulated stream: text chunks before the <tool_call> block
PIECE_GAP = 0.002  # seconds between upstream chunks, so the proxy reads each one on its own
TRACED = 3  # requests traced per kind; the one with the fewest calls is shown (timers, coalesced reads)
KINDS = ("native", "native stream", "emulated stream", "responses stream")


# --- the tracer ----------------------------------------------------------------------------------


def module_of(frame: FrameType | None) -> str | None:
    """The toolshim module a frame runs in, or None outside the package."""
    if frame is None:
        return None
    name = frame.f_globals.get("__name__", "")
    return name if name == PACKAGE or name.startswith(PACKAGE + ".") else None


@dataclass
class Counts:
    """What one request did inside the package."""

    calls: int = 0
    transitions: int = 0
    reentries: int = 0
    chunks: int = 0
    modules: set[str] = field(default_factory=set)
    pairs: Counter[tuple[str, str]] = field(default_factory=Counter)  # (from, to) of every transition
    reentered: Counter[str] = field(default_factory=Counter)  # re-entries per module

    def on_event(self, frame: FrameType, event: str) -> None:
        if event == "call":
            self._on_call(frame)
        elif event == "return":
            self._on_return(frame)

    def _on_call(self, frame: FrameType) -> None:
        module = module_of(frame)
        if module is None:
            return
        self.calls += 1
        caller = module_of(frame.f_back)
        if caller == module:
            return
        if caller is not None:
            self._transition(caller, module)
        if module in self.modules:
            self.reentries += 1
            self.reentered[module] += 1
        self.modules.add(module)

    def _on_return(self, frame: FrameType) -> None:
        module = module_of(frame)
        if module is None:
            return
        back = module_of(frame.f_back)
        if back is not None and back != module:
            self._transition(module, back)

    def _transition(self, source: str, target: str) -> None:
        self.transitions += 1
        self.pairs[source, target] += 1

    def row(self) -> dict[str, Any]:
        short = len(PACKAGE) + 1
        pairs = [f"{a[short:]} -> {b[short:]}: {n}" for (a, b), n in self.pairs.most_common()]
        reentered = [f"{module[short:]}: {n}" for module, n in self.reentered.most_common()]
        return {**asdict(self), "modules": len(self.modules), "pairs": pairs, "reentered": reentered}


class Tracing:
    """One profile function for every thread, counting into ``counts`` while a request is traced."""

    def __init__(self) -> None:
        self.counts: Counts | None = None
        self.lock = threading.Lock()
        threading.setprofile(self._profile)  # threads started from now on (the store's workers)

    def _profile(self, frame: FrameType, event: str, arg: object) -> None:
        counts = self.counts
        if counts is not None and event in ("call", "return"):
            with self.lock:
                counts.on_event(frame, event)

    def start(self) -> Counts:
        self.counts = Counts()
        sys.setprofile(self._profile)
        return self.counts

    def stop(self) -> None:
        sys.setprofile(None)
        self.counts = None


# --- the upstream and the requests ---------------------------------------------------------------


def upstream_pieces(body: dict[str, Any]) -> list[bytes]:
    """What the mock model streams: native content chunks, or hermes text and one call."""
    from mock_upstream import CALL_PIECES, chunk

    if str(body.get("model", "")).startswith("emu"):
        texts = [*(f"word{i} " for i in range(TEXT_CHUNKS)), *(p.replace("{stamp}", "1") for p in CALL_PIECES)]
        usage = {"prompt_tokens": 50, "completion_tokens": len(texts), "total_tokens": 50 + len(texts)}
        last = chunk({}, "stop", usage=usage)
    else:
        texts, last = [f"tok{i} " for i in range(CHUNKS)], chunk({}, "stop")
    return [chunk({"content": t}) for t in texts] + [last, b"data: [DONE]\n\n"]


async def start_upstream() -> tuple[str, Callable[[], Any]]:
    from aiohttp import web
    from mock_upstream import COMPLETION

    async def chat(request: web.Request) -> web.StreamResponse:
        body = json.loads(await request.read())
        if not body.get("stream"):
            return web.Response(body=COMPLETION, content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for piece in upstream_pieces(body):
            await resp.write(piece)
            await asyncio.sleep(PIECE_GAP)
        with contextlib.suppress(ConnectionError):  # the proxy may hang up once it has read [DONE]
            await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return f"http://127.0.0.1:{port}/v1", runner.cleanup


WEATHER = {
    "name": "get_weather",
    "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
MESSAGES = [{"role": "user", "content": "Weather in Paris?"}]


def request_of(kind: str) -> tuple[str, dict[str, Any]]:
    """The path and body of one request of ``kind``."""
    if kind == "native":
        return "/v1/chat/completions", {"model": "bench-model", "messages": MESSAGES, "max_tokens": 16}
    if kind == "native stream":
        return "/v1/chat/completions", {"model": "bench-model", "messages": MESSAGES, "stream": True}
    if kind == "emulated stream":
        tools = [{"type": "function", "function": WEATHER}]
        return "/v1/chat/completions", {"model": "emu", "messages": MESSAGES, "tools": tools, "stream": True}
    return "/v1/responses", {
        "model": "emu",
        "input": "Weather in Paris?",
        "tools": [{"type": "function", **WEATHER}],
        "stream": True,
    }


def sse_events(raw: bytes) -> int:
    return sum(1 for line in raw.split(b"\n") if line.startswith(b"data:"))


async def send(session: Any, url: str, kind: str) -> int:
    """Send one request of ``kind``; the SSE events it got (0 for a whole answer)."""
    path, body = request_of(kind)
    async with session.post(url + path, json=body) as resp:
        raw = await resp.read()
        if resp.status != 200:
            raise SystemExit(f"{kind}: HTTP {resp.status}: {raw[:300]!r}")
    if kind == "emulated stream" and b"get_weather" not in raw:
        raise SystemExit(f"{kind}: no tool call in the answer: {raw[:300]!r}")
    return sse_events(raw) if body.get("stream") else 0


async def traced_request(tracing: Tracing, session: Any, url: str, kind: str) -> dict[str, Any]:
    counts = tracing.start()
    try:
        counts.chunks = await send(session, url, kind)
    finally:
        tracing.stop()
    return counts.row()


# --- one tree, in this process -------------------------------------------------------------------


def write_rules(tmp: Path, upstream: str) -> Path:
    rules = tmp / "rules.json5"
    models = [
        {"match": "emu*", "upstream": "mock", "tool_mode": "hermes"},
        {"match": "*", "upstream": "mock", "tool_mode": "native"},
    ]
    rules.write_text(json.dumps({"upstreams": {"mock": {"base_url": upstream}}, "models": models}))
    return rules


async def measure_here() -> dict[str, dict[str, Any]]:
    """Every request kind against the toolshim this process imports."""
    import aiohttp

    try:
        from toolshim.config.loading import load_rules
    except ImportError:  # a tree from before rules files were read in config.loading
        from toolshim.config.rules import load_rules  # type: ignore[attr-defined,no-redef]
    from toolshim.config.settings import Settings
    from toolshim.server.app import create_app, start_site

    tracing = Tracing()
    upstream, stop_upstream = await start_upstream()
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        rules = write_rules(Path(tmp), upstream)
        settings = Settings(rules_path=rules, data_dir=Path(tmp) / "data")
        app = create_app(settings, load_rules(rules))
        runner = await start_site(app, "127.0.0.1", 0)
        port = runner.addresses[0][1]
        url = f"http://127.0.0.1:{port}"
        try:
            async with aiohttp.ClientSession() as session:
                for kind in KINDS:
                    await send(session, url, kind)  # warm-up: caches, the upstream connection
                    traced = [await traced_request(tracing, session, url, kind) for _ in range(TRACED)]
                    rows[kind] = min(traced, key=lambda row: row["calls"])
        finally:
            await runner.cleanup()
            await stop_upstream()
    return rows


# --- several trees, one process each -------------------------------------------------------------


def measure_tree(tree: Path) -> dict[str, dict[str, Any]]:
    """Run this script in a child process with ``tree``'s toolshim first on the path."""
    shim = tree / ".shim"
    if not (shim / PACKAGE).is_dir():
        raise SystemExit(f"{shim / PACKAGE} is missing: mkdir -p {shim} && ln -s ../proxy {shim / PACKAGE}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, __file__, "--json", "--here"], env=env, check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


COLUMNS = (("calls", "calls"), ("transitions", "transitions"), ("reentries", "re-entries"), ("modules", "modules"))


def per_chunk(row: dict[str, Any]) -> float | None:
    return row["calls"] / row["chunks"] if row["chunks"] else None


def print_table(results: dict[str, dict[str, dict[str, Any]]]) -> None:
    labels = list(results)
    first = labels[0]
    print(f"toolshim module crossings, one request each (chunks = SSE events the client got; {TEXT_CHUNKS} text chunks")
    from mock_upstream import CALL_PIECES

    print(f"and a {len(CALL_PIECES)}-chunk call upstream for the emulated kinds; {CHUNKS} chunks + finish natively)")
    header = f"  {'request':18}{'tree':14}" + "".join(f"{name:>12}" for _, name in COLUMNS)
    print(header + f"{'chunks':>8}{'calls/chunk':>13}")
    for kind in KINDS:
        for label in labels:
            row = results[label][kind]
            chunk = per_chunk(row)
            cells = "".join(f"{row[key]:12d}" for key, _ in COLUMNS)
            print(f"  {kind:18}{label:14}{cells}{row['chunks']:8d}{f'{chunk:.1f}' if chunk else '-':>13}")
        for label in labels[1:]:
            row, base = results[label][kind], results[first][kind]
            ratios = "".join(f"{f'x{row[key] / base[key]:.2f}' if base[key] else '-':>12}" for key, _ in COLUMNS)
            chunk, base_chunk = per_chunk(row), per_chunk(base)
            ratio = f"x{chunk / base_chunk:.2f}" if chunk and base_chunk else "-"
            print(f"  {'':18}{label + '/' + first:14}{ratios}{'':8}{ratio:>13}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", type=Path, action="append", default=[], help="a checkout with DIR/.shim/toolshim")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--pairs",
        type=int,
        default=0,
        help="also list each kind's N most frequent transitions and most re-entered modules",
    )
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # mock_upstream
    if args.here or not args.tree:
        results = {"here": asyncio.run(measure_here())}
    else:
        results = {tree.resolve().name: measure_tree(tree.resolve()) for tree in args.tree}
    if args.json:
        print(json.dumps(results["here"] if args.here else results))
    else:
        print_table(results)
        print_pairs(results, args.pairs)


def print_pairs(results: dict[str, dict[str, dict[str, Any]]], top: int) -> None:
    """Where the transitions are: the most frequent (from, to) module pairs of every kind, and the modules
    re-entered most."""
    for label, rows in results.items() if top else ():
        for kind in KINDS:
            print(f"\n{kind} ({label}): the {top} most frequent transitions")
            for pair in rows[kind]["pairs"][:top]:
                print(f"  {pair}")
            print(f"{kind} ({label}): the {top} modules re-entered most")
            for module in rows[kind]["reentered"][:top]:
                print(f"  {module}")


if __name__ == "__main__":
    main()
