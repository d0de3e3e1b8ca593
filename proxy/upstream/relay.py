"""Native mode: the request goes upstream as the client sent it (model renamed if the rule says so).

Streams are relayed event by event as they arrive, never buffered whole; the bytes of each
event's payload are not touched. Each payload must be a JSON object (the SDKs parse every
event): one that is not, or an error event, ends the stream with an OpenAI error event carrying
the upstream's message (scrubbed), never relayed as it is. An odd-shaped object is relayed all
the same (native mode does not judge the answer). With a ``first_token_timeout``, events before
the first token (the role chunk) are held, so a timeout before it is a clean 504.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from ..observe.context import RequestInfo
from ..observe.redact import REDACTOR
from ..wire.jsoncodec import dumps
from ..wire.sse import DONE_BYTES, encode
from . import Upstream, open_stream
from .delta import Delta, decode, parse_payload, well_formed


async def complete(upstream: Upstream, body: dict[str, Any], info: RequestInfo) -> dict[str, Any]:
    result = await upstream.complete(body)
    info.note_usage(result.get("usage"))
    info.tool_calls = _count_calls(result)
    return result


async def stream(
    upstream: Upstream, body: dict[str, Any], info: RequestInfo, first_token_timeout: float | None = None
) -> AsyncGenerator[bytes, None]:
    """SSE bytes for the client; closes the upstream when the consumer stops early."""
    upstream_stream = await open_stream(upstream, body, first_token_timeout)
    held: list[bytes] = []  # events before the first token, while a first-token limit runs
    try:
        async for payload in upstream_stream:
            delta = _note(parse_payload(payload), info)
            event = encode(REDACTOR.redact(payload if isinstance(payload, str) else dumps(payload).decode()))
            if first_token_timeout is not None and info.first_token is None and delta.finish_reason is None:
                held.append(event)
                continue
            if held:
                event, held = b"".join([*held, event]), []
            yield event
        if held:
            yield b"".join(held)
        yield DONE_BYTES
    finally:
        await upstream_stream.aclose()


async def chunks(
    upstream: Upstream,
    body: dict[str, Any],
    info: RequestInfo,
    first_token_timeout: float | None = None,
) -> AsyncGenerator[dict[str, Any], None]:
    """The stream decoded into chunk dicts (for a front end that re-shapes them); closes the upstream.

    A chunk's ``choices`` that is not a list of objects is read as empty (a front end iterates it)."""
    upstream_stream = await open_stream(upstream, body, first_token_timeout)
    try:
        async for payload in upstream_stream:
            chunk = well_formed(parse_payload(payload))
            delta = decode(chunk)
            if delta.usage:
                info.note_usage(delta.usage)
            if info.first_token is None and delta.has_output:
                info.mark_first_token()
            if delta.has_tool_calls:
                info.tool_calls += _new_calls(chunk)
            yield chunk
    finally:
        await upstream_stream.aclose()


def _note(chunk: dict[str, Any], info: RequestInfo) -> Delta:
    """The stream's head, its first token and its usage; an error event raises (``decode``)."""
    delta = decode(chunk)
    if info.stream_head is None:
        info.stream_head = {k: chunk.get(k) for k in ("id", "model", "created")}
    if delta.usage:
        info.note_usage(delta.usage)
    if info.first_token is None and delta.has_output:
        info.mark_first_token()
    return delta


def _new_calls(chunk: dict[str, Any]) -> int:
    """Calls that start in this chunk (their first fragment carries the id)."""
    choice = (chunk.get("choices") or [{}])[0]
    delta = choice.get("delta") if isinstance(choice, dict) else None
    calls = delta.get("tool_calls") if isinstance(delta, dict) else None
    return sum(1 for call in calls or () if isinstance(call, dict) and call.get("id"))


def _count_calls(result: dict[str, Any]) -> int:
    total = 0
    choices = result.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict) and isinstance(message.get("tool_calls"), list):
            total += len(message["tool_calls"])
    return total
