"""The fast mock upstream of ``bench/overhead.py``: an OpenAI-compatible server on loopback.

Run in its own process (``python bench/mock_upstream.py --port P``) so it never shares an event
loop with the proxy or the load generator. What it answers depends on the request:

* not streaming: one fixed completion;
* streaming, native models: ``--chunks`` chunks ``--chunk-interval`` s apart, each stamped with
  its send time in a ``sent`` field (a CLOCK_MONOTONIC reading, the same clock in every process);
* streaming, model ``emu-paced`` or ``emu-burst`` (the bench's emulated rules): what a model asked
  for the ``hermes`` format writes: ``--emu-text`` plain-text chunks, then a ``<tool_call>`` block
  in ``len(CALL_PIECES)`` chunks, then a finish chunk with usage; ``--emu-gap`` s apart for
  ``emu-paced``, back to back for ``emu-burst``. The stamps are in the text itself, because the
  proxy rebuilds every chunk: ``@t<time>`` in each text chunk, and ``@c<time>`` in the argument
  of the call, sent in the chunk that closes the call object;
* streaming, model ``bench-reset`` (``bench/churn.py``): ``RESET_AFTER`` chunks, then the
  connection is reset (TCP RST), as an upstream that crashes mid-answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import struct
import time

from aiohttp import web

COMPLETION = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1,
        "model": "bench-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello! How can I help you today?"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 9, "total_tokens": 18},
    }
).encode()

# The <tool_call> block as a model streams it; "{stamp}" is the send time of the chunk closing the object.
CALL_PIECES = (
    "<tool_call>\n",
    '{"name": "get_weather", ',
    '"arguments": {"city": ',
    '"Paris@c{stamp}"}}',
    "\n</tool_call>",
)


RESET_AFTER = 3  # chunks the ``bench-reset`` model sends before resetting the connection


def chunk(delta: dict[str, object], finish: str | None = None, **extra: object) -> bytes:
    payload = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "bench-model",
        **extra,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def emulated_pieces(text_chunks: int) -> list[str]:
    return [*(f"@t{{stamp}} w{i} " for i in range(text_chunks)), *CALL_PIECES]


def run_mock(port: int, chunks: int, interval: float, emu_text: int, emu_gap: float) -> None:

    async def native_stream(resp: web.StreamResponse) -> None:
        for i in range(chunks):
            last = i == chunks - 1
            await resp.write(
                chunk({} if last else {"content": f"tok{i} "}, "stop" if last else None, sent=time.monotonic())
            )
            await asyncio.sleep(interval)

    async def emulated_stream(resp: web.StreamResponse, gap: float) -> None:
        for piece in emulated_pieces(emu_text):
            await resp.write(chunk({"content": piece.replace("{stamp}", f"{time.monotonic():.6f}")}))
            if gap:
                await asyncio.sleep(gap)
        usage = {
            "prompt_tokens": 50,
            "completion_tokens": emu_text + len(CALL_PIECES),
            "total_tokens": 50 + emu_text + len(CALL_PIECES),
        }
        await resp.write(chunk({}, "stop", usage=usage))

    async def reset_midway(request: web.Request, resp: web.StreamResponse) -> None:
        for i in range(RESET_AFTER):
            await resp.write(chunk({"content": f"tok{i} "}, sent=time.monotonic()))
            await asyncio.sleep(interval)
        transport = request.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is not None:  # linger 0: close() sends RST instead of FIN
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        if transport is not None:
            transport.abort()

    async def chat(request: web.Request) -> web.StreamResponse:
        body = json.loads(await request.read())
        if not body.get("stream"):
            return web.Response(body=COMPLETION, content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        model = body.get("model")
        if model == "bench-reset":
            await reset_midway(request, resp)
            return resp
        if model in ("emu-paced", "emu-burst"):
            await emulated_stream(resp, emu_gap if model == "emu-paced" else 0.0)
        else:
            await native_stream(resp)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application(client_max_size=8 * 2**20)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/healthz", healthz)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None, backlog=1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--chunk-interval", type=float, default=0.005)
    parser.add_argument("--emu-text", type=int, default=30)
    parser.add_argument("--emu-gap", type=float, default=0.002)
    args = parser.parse_args()
    run_mock(args.port, args.chunks, args.chunk_interval, args.emu_text, args.emu_gap)


if __name__ == "__main__":
    main()
