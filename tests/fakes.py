"""A scriptable OpenAI-compatible upstream: a real aiohttp server for end-to-end tests.

Each incoming chat request takes the next scripted ``Reply`` (the last one repeats). Streams
are written in the exact pieces given, with optional delays, so chunk boundaries are under
the test's control; the server notes whether the client disconnected before the end.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # JSON body (non-stream) or None
    pieces: Sequence[str | bytes] = ()  # raw SSE bytes to write (stream)
    delay: float = 0.0  # seconds between pieces
    hang: float = 0.0  # sleep before answering
    stall: tuple[int, float] = (0, 0.0)  # (pieces, seconds): sleep that long after writing that many pieces
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers (Retry-After, ...)
    # the answer's text made from the request body (an "echo model" repeating what it was told):
    # streamed in 5-character pieces when the request streams, else one completion
    respond: Callable[[dict[str, Any]], str] | None = None


@dataclass
class FakeUpstream:
    replies: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    disconnected: list[bool] = field(default_factory=list)  # per streamed request
    pieces_sent: list[int] = field(default_factory=list)
    url: str = ""
    # the tokenizer endpoint this server has ("llama.cpp": /tokenize, "llama-cpp-python": /extras/tokenize);
    # it counts one token per whitespace-separated word. Calls to either path are noted, not in ``requests``.
    tokenizer: str | None = None
    tokenize_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def script(self, *replies: Reply) -> None:
        self.replies = list(replies)

    def _next(self) -> Reply:
        if not self.replies:
            return Reply(body=completion("ok"))
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            self.requests.append(json.loads(raw) if raw else {})
        except ValueError:
            self.requests.append({"_raw": raw.decode("utf-8", "replace")})
        self.paths.append(request.path)
        self.headers.append(dict(request.headers))
        reply = self._next()
        if reply.respond is not None:
            reply = _responding(reply, self.requests[-1])
        if reply.hang:
            await asyncio.sleep(reply.hang)
        if not reply.pieces:
            headers = {**reply.headers, **({"Content-Type": reply.content_type} if reply.content_type else {})}
            if isinstance(reply.body, str | bytes):
                return web.Response(status=reply.status, body=reply.body, headers=headers)
            return web.json_response(reply.body, status=reply.status, headers=headers)
        return await self._stream(request, reply)

    async def tokenize(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read() or b"{}")
        self.tokenize_calls.append((request.path, body))
        kinds = {"/tokenize": ("llama.cpp", "content"), "/extras/tokenize": ("llama-cpp-python", "input")}
        kind, field_name = kinds[request.path]
        if kind != self.tokenizer:
            return web.json_response({"detail": "Not Found"}, status=404)
        return web.json_response({"tokens": list(range(len(str(body.get(field_name, "")).split())))})

    async def _stream(self, request: web.Request, reply: Reply) -> web.StreamResponse:
        index = len(self.disconnected)
        self.disconnected.append(False)
        self.pieces_sent.append(0)
        resp = web.StreamResponse(
            status=reply.status, headers={**reply.headers, "Content-Type": reply.content_type or "text/event-stream"}
        )
        await resp.prepare(request)
        try:
            for n, piece in enumerate(reply.pieces):
                if reply.delay:
                    await asyncio.sleep(reply.delay)
                if reply.stall[1] and n == reply.stall[0]:
                    await asyncio.sleep(reply.stall[1])
                await resp.write(piece.encode() if isinstance(piece, str) else piece)
                self.pieces_sent[index] += 1
            await resp.write_eof()
        except (asyncio.CancelledError, ConnectionResetError):
            self.disconnected[index] = True
            raise
        return resp


def _responding(reply: Reply, body: dict[str, Any]) -> Reply:
    """``reply`` with its text made from the request ``body``."""
    assert reply.respond is not None
    text = reply.respond(body)
    if body.get("stream"):
        return Reply(pieces=text_stream([text[i : i + 5] for i in range(0, len(text), 5)]))
    return Reply(body=completion(text))


def last_message(body: dict[str, Any]) -> str:
    """An echo model's answer: the text of the last message it was sent."""
    content = body["messages"][-1].get("content")
    return content if isinstance(content, str) else ""


def system_prompt(body: dict[str, Any]) -> str:
    """An echo model's answer: the system message it was sent (empty when there is none)."""
    first = body["messages"][0]
    return str(first.get("content") or "") if first.get("role") == "system" else ""


def completion(
    content: str | None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish: str = "stop",
    model: str = "up-model",
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-up",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage or {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def chunk(
    delta: dict[str, Any], finish: str | None = None, *, usage: dict[str, int] | None = None, model: str = "up-model"
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": "chatcmpl-up",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        out["usage"] = usage
    return out


def sse(payload: Any) -> str:
    return "data: " + (payload if isinstance(payload, str) else json.dumps(payload)) + "\n\n"


def text_stream(
    pieces: Sequence[str], *, finish: str = "stop", usage: dict[str, int] | None = None, done: bool = True
) -> list[str]:
    """SSE events streaming ``pieces`` as content deltas, like an OpenAI-compatible server."""
    events = [sse(chunk({"role": "assistant", "content": ""}))]
    events += [sse(chunk({"content": p})) for p in pieces]
    events.append(sse(chunk({}, finish)))
    if usage is not None:
        events.append(sse({**chunk({}), "choices": [], "usage": usage}))
    if done:
        events.append(sse("[DONE]"))
    return events
