"""Upstream chat chunks decoded once into a small typed ``Delta``, for every mode and upstream kind.

An upstream stream yields payloads: the ``data`` text of an SSE event (OpenAI-compatible
servers) or an already-built dict (litellm, which is never serialised just to be parsed again).
``parse_payload`` turns either into a chunk dict; ``decode`` reads what the proxy acts on.
An error event mid-stream or a payload that is not a JSON object is an ``UpstreamProtocolError``.
No I/O here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..wire.errors import UpstreamProtocolError, stream_error

Payload = str | dict[str, Any]
_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


@dataclass(frozen=True, slots=True)
class Delta:
    """What one upstream chunk says: text, thinking, whether a call is streaming, the finish, usage."""

    content: str = ""
    reasoning: str = ""
    has_tool_calls: bool = False
    finish_reason: str | None = None
    usage: Mapping[str, int] | None = None

    @property
    def has_output(self) -> bool:
        return bool(self.content or self.reasoning or self.has_tool_calls)


def parse_payload(payload: Payload) -> dict[str, Any]:
    """The chunk object of one payload; raises ``UpstreamProtocolError`` when it is none."""
    if isinstance(payload, dict):
        return payload
    try:
        chunk = json.loads(payload)
    except ValueError:
        raise UpstreamProtocolError(f"upstream sent an event that is not JSON: {payload[:80]!r}") from None
    if not isinstance(chunk, dict):
        raise UpstreamProtocolError("upstream sent an event that is not a JSON object")
    return chunk


def decode_payload(payload: Payload) -> Delta:
    """The ``Delta`` of one payload (``parse_payload`` then ``decode``): one call per streamed event."""
    return decode(parse_payload(payload))


def well_formed(chunk: dict[str, Any]) -> dict[str, Any]:
    """``chunk`` with a ``choices`` that is a list of objects: another value (``"choices": 5``) or
    item is left out, so a front end that iterates the choices cannot fail on it."""
    choices = chunk.get("choices")
    if choices is None or (isinstance(choices, list) and all(isinstance(c, dict) for c in choices)):
        return chunk
    kept = [c for c in choices if isinstance(c, dict)] if isinstance(choices, list) else []
    return {**chunk, "choices": kept}


def decode(chunk: Mapping[str, Any]) -> Delta:
    """The ``Delta`` of a chunk (or of a whole non-streamed completion); error events raise."""
    error = chunk.get("error")
    if isinstance(error, dict | str):
        raise stream_error(chunk)
    usage = _usage(chunk.get("usage"))
    choices = chunk.get("choices")
    # the first object among the choices: an odd item (``7``) is skipped, as ``well_formed`` leaves it out
    first = next((c for c in choices if isinstance(c, dict)), None) if isinstance(choices, list) else None
    if first is None:
        return Delta(usage=usage)
    delta = first.get("delta") or first.get("message") or {}
    if not isinstance(delta, dict):
        delta = {}
    content = delta.get("content")
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    finish = first.get("finish_reason")
    return Delta(
        content=content if isinstance(content, str) else "",
        reasoning=reasoning if isinstance(reasoning, str) else "",
        has_tool_calls=bool(delta.get("tool_calls") or delta.get("function_call")),
        finish_reason=finish if isinstance(finish, str) else None,
        usage=usage,
    )


def _usage(value: Any) -> dict[str, int] | None:
    if not isinstance(value, dict):
        return None
    return {key: value[key] for key in _USAGE_KEYS if isinstance(value.get(key), int)}
