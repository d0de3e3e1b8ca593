"""Native mode: the request goes upstream as it is (model renamed if the rule says so).

Streams are relayed event by event as they arrive, never buffered whole; the bytes of each
event's payload are not touched.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from .context import RequestInfo
from .sse import DONE_BYTES, encode
from .upstream import Upstream


async def complete(upstream: Upstream, body: dict[str, Any], info: RequestInfo) -> dict[str, Any]:
    result = await upstream.complete(body)
    info.note_usage(result.get("usage"))
    info.tool_calls = _count_calls(result)
    return result


async def stream(upstream: Upstream, body: dict[str, Any], info: RequestInfo) -> AsyncIterator[bytes]:
    """SSE bytes for the client; closes the upstream when the consumer stops early."""
    upstream_stream = await upstream.stream(body)
    try:
        async for data in upstream_stream:
            info.note_native_chunk(data)
            yield encode(data)
        yield DONE_BYTES
    finally:
        await upstream_stream.aclose()


def _count_calls(result: dict[str, Any]) -> int:
    total = 0
    for choice in result.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict) and isinstance(message.get("tool_calls"), list):
            total += len(message["tool_calls"])
    return total
