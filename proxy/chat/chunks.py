"""Chat-completions wire shapes: ``chat.completion.chunk`` dicts, and chunks → a full completion.

``ChunkFactory`` is the chat front end's ``builder.Renderer``. The emulated path always produces
streaming chunks; a non-streaming client gets ``accumulate(chunks)``, so the streamed and
non-streamed answers cannot disagree. No I/O here.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


def new_completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex


@dataclass(slots=True)
class ChunkFactory:
    """Builds ``chat.completion.chunk`` dicts that share one id, model and timestamp."""

    model: str
    legacy_functions: bool = False
    id: str = field(default_factory=new_completion_id)
    created: int = field(default_factory=lambda: int(time.time()))
    system_fingerprint: str | None = None

    @classmethod
    def continuing(cls, head: dict[str, Any], model: str) -> ChunkFactory:
        """A factory whose chunks belong to a stream already sent (same id, model, created)."""
        factory = cls(model=str(head.get("model") or model))
        if isinstance(head.get("id"), str):
            factory.id = head["id"]
        if isinstance(head.get("created"), int):
            factory.created = head["created"]
        return factory

    def _head(self) -> dict[str, Any]:
        """What every chunk of this stream shares."""
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": self.system_fingerprint,
        }

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**self._head(), "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    def role(self) -> dict[str, Any]:
        return self._chunk({"role": "assistant", "content": ""})

    def content(self, text: str) -> dict[str, Any]:
        return self._chunk({"content": text})

    def reasoning(self, text: str) -> dict[str, Any]:
        return self._chunk({"reasoning_content": text})

    def call_header(self, index: int, call_id: str, name: str) -> dict[str, Any]:
        if self.legacy_functions:
            return self._chunk({"function_call": {"name": name, "arguments": ""}})
        return self._chunk(
            {
                "tool_calls": [
                    {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
                ]
            }
        )

    def call_arguments(self, index: int, fragment: str) -> dict[str, Any]:
        if self.legacy_functions:
            return self._chunk({"function_call": {"arguments": fragment}})
        return self._chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})

    def finish(self, reason: str) -> dict[str, Any]:
        if reason == "tool_calls" and self.legacy_functions:
            reason = "function_call"
        return self._chunk({}, reason)

    def usage(self, usage: dict[str, int]) -> dict[str, Any]:
        return {**self._head(), "choices": [], "usage": usage}


def accumulate(chunks: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Merge chunks into a ``chat.completion``, the way the OpenAI SDKs accumulate a stream."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    function_call: dict[str, str] | None = None
    finish: str | None = None
    usage: dict[str, Any] | None = None
    head: dict[str, Any] = {}
    for chunk in chunks:
        head = head or chunk
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            finish = choice.get("finish_reason") or finish
            if delta.get("content"):
                content.append(delta["content"])
            if delta.get("reasoning_content"):
                reasoning.append(delta["reasoning_content"])
            for call in delta.get("tool_calls") or ():
                slot = calls.setdefault(
                    call["index"], {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                slot["id"] = call.get("id") or slot["id"]
                fn = call.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
            if delta.get("function_call"):
                function_call = function_call or {"name": "", "arguments": ""}
                function_call["name"] += delta["function_call"].get("name") or ""
                function_call["arguments"] += delta["function_call"].get("arguments") or ""
    text = "".join(content)
    message: dict[str, Any] = {"role": "assistant", "content": text or (None if calls or function_call else "")}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    if function_call:
        message["function_call"] = function_call
    message.setdefault("refusal", None)
    return {
        "id": head.get("id", new_completion_id()),
        "object": "chat.completion",
        "created": head.get("created", int(time.time())),
        "model": head.get("model", ""),
        "system_fingerprint": head.get("system_fingerprint"),
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish or "stop"}],
        "usage": usage,
    }


def split_completion(completion: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A whole ``chat.completion`` (native, not streamed) as the chunks that would have streamed it."""
    chunks: list[dict[str, Any]] = []
    choices = completion.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], Mapping) else {}
    message = choice.get("message") or {}
    delta: dict[str, Any] = {}
    for key in ("reasoning_content", "content"):
        if isinstance(message.get(key), str) and message[key]:
            delta[key] = message[key]
    calls = [
        {"index": i, "id": call.get("id"), "type": "function", "function": call.get("function") or {}}
        for i, call in enumerate(message.get("tool_calls") or ())
        if isinstance(call, Mapping)
    ]
    if calls:
        delta["tool_calls"] = calls
    chunks.append({"choices": [{"index": 0, "delta": delta, "finish_reason": choice.get("finish_reason") or "stop"}]})
    if isinstance(completion.get("usage"), Mapping):
        chunks.append({"choices": [], "usage": completion["usage"]})
    return chunks
