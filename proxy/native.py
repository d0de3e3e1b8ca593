"""Native mode: the request goes upstream as the client sent it (model renamed if the rule says so).

Streams are relayed event by event as they arrive, never buffered whole; the bytes of each
event's payload are not touched. Payloads are decoded only to find the first token and the
usage; an odd one is relayed all the same (native mode does not judge the upstream).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from .context import RequestInfo
from .delta import Payload, decode, parse_payload
from .errors import UpstreamProtocolError
from .jsoncodec import dumps
from .redact import REDACTOR
from .sse import DONE_BYTES, encode
from .upstream import Upstream


async def complete(upstream: Upstream, body: dict[str, Any], info: RequestInfo) -> dict[str, Any]:
    result = await upstream.complete(body)
    info.note_usage(result.get("usage"))
    info.tool_calls = _count_calls(result)
    return result


async def stream(upstream: Upstream, body: dict[str, Any], info: RequestInfo) -> AsyncGenerator[bytes, None]:
    """SSE bytes for the client; closes the upstream when the consumer stops early."""
    upstream_stream = await upstream.stream(body)
    try:
        async for payload in upstream_stream:
            _note(payload, info)
            yield encode(REDACTOR.redact(payload if isinstance(payload, str) else dumps(payload).decode()))
        yield DONE_BYTES
    finally:
        await upstream_stream.aclose()


async def chunks(
    upstream: Upstream,
    body: dict[str, Any],
    info: RequestInfo,
) -> AsyncGenerator[dict[str, Any], None]:
    """The stream decoded into chunk dicts (for a front end that re-shapes them); closes the upstream."""
    upstream_stream = await upstream.stream(body)
    try:
        async for payload in upstream_stream:
            chunk = parse_payload(payload)
            delta = decode(chunk)
            info.note_usage(delta.usage)
            if delta.has_output:
                info.mark_first_token()
            if delta.has_tool_calls:
                info.tool_calls += _new_calls(chunk)
            yield chunk
    finally:
        await upstream_stream.aclose()


def _note(payload: Payload, info: RequestInfo) -> None:
    """The stream's head, its first token and its usage, without changing what is relayed."""
    if info.first_token is not None and isinstance(payload, str) and '"usage"' not in payload:
        return  # the common case, decided without parsing
    try:
        chunk = parse_payload(payload)
        delta = decode(chunk)
    except UpstreamProtocolError:
        return
    if info.stream_head is None:
        info.stream_head = {k: chunk.get(k) for k in ("id", "model", "created")}
    info.note_usage(delta.usage)
    if delta.has_output:
        info.mark_first_token()


def _new_calls(chunk: dict[str, Any]) -> int:
    """Calls that start in this chunk (their first fragment carries the id)."""
    choice = (chunk.get("choices") or [{}])[0]
    delta = choice.get("delta") if isinstance(choice, dict) else None
    calls = delta.get("tool_calls") if isinstance(delta, dict) else None
    return sum(1 for call in calls or () if isinstance(call, dict) and call.get("id"))


def _count_calls(result: dict[str, Any]) -> int:
    total = 0
    for choice in result.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict) and isinstance(message.get("tool_calls"), list):
            total += len(message["tool_calls"])
    return total
