"""Per-request facts gathered while serving, read by the access log and the metrics at the end.

``current_request`` holds the request being served (set by the app middleware), so the upstream
clients can count their calls on it (``count_upstream_call``) without being handed it.
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass, field
from typing import Any

OTHER = "other"  # the model label of a request that matched no rule


@dataclass(slots=True)
class RequestInfo:
    """What one request did. Filled by handlers; logged and counted once by the middleware."""

    request_id: str
    started: float = field(default_factory=time.perf_counter)
    # bounded label: chat, responses, passthrough, models, admin, probe (/healthz ...), unknown (no route)
    endpoint: str = "chat"
    model: str = OTHER  # bounded label: the rule's match pattern
    requested_model: str | None = None  # the name the client sent (logged, cut short; never a label)
    tool_mode: str = "-"
    stream: bool = False
    counted: bool = False  # set for requests that go into the request metrics
    in_flight: str | None = None  # the ``stream`` label of the in-flight gauge we raised
    stream_head: dict[str, Any] | None = None  # id, model, created of the first relayed native chunk
    upstream: str | None = None
    first_token: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage_source: str | None = None  # where an emulated answer's usage came from (``usage.UsageSource``)
    grammar: str | None = None  # the decoding constraint sent: "built 12.345 ms" or "cached 0.010 ms"
    tool_calls: int = 0
    parse_outcome: str | None = None
    policies: list[str] = field(default_factory=list)  # conversation policies that acted
    error_code: str | None = None  # the error this request ended with (bounded: our codes)
    upstream_calls: int = 0  # chat calls sent upstream for it: more than one spent toolshim's retry budget

    def mark_first_token(self) -> None:
        if self.first_token is None:
            self.first_token = time.perf_counter()

    def note_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            if isinstance(usage.get("prompt_tokens"), int):
                self.prompt_tokens = usage["prompt_tokens"]
            if isinstance(usage.get("completion_tokens"), int):
                self.completion_tokens = usage["completion_tokens"]

    def summary(self, status: int, duration: float) -> dict[str, Any]:
        out: dict[str, Any] = {
            "endpoint": self.endpoint,
            "model": self.model,
            "tool_mode": self.tool_mode,
            "stream": self.stream,
            "status": status,
            "duration_ms": round(duration * 1000, 2),
        }
        if self.first_token is not None:
            out["ttft_ms"] = round((self.first_token - self.started) * 1000, 2)
        for key in ("requested_model", "upstream", "prompt_tokens", "completion_tokens", "parse_outcome"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.tool_calls:
            out["tool_calls"] = self.tool_calls
        if self.policies:
            out["policies"] = list(self.policies)
        if self.error_code is not None:
            out["error_code"] = self.error_code
        return out


current_request: contextvars.ContextVar[RequestInfo | None] = contextvars.ContextVar("toolshim_request", default=None)


def count_upstream_call() -> None:
    """One more upstream call for the request being served (none outside a request)."""
    info = current_request.get()
    if info is not None:
        info.upstream_calls += 1
