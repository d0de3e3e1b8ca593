"""A checker for what we stream to clients: OpenAI's rules for chat.completion.chunk deltas."""

from __future__ import annotations

import json
from typing import Any


def parse_sse(body: str) -> tuple[list[dict[str, Any]], bool]:
    """Chunks from a raw SSE body, and whether it ended with ``data: [DONE]``."""
    chunks: list[dict[str, Any]] = []
    done = False
    for block in body.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[6:] if line.startswith("data: ") else line[5:]
                         for line in block.split("\n") if line.startswith("data:"))
        if not data:
            continue
        assert not done, "an event after [DONE]"
        if data == "[DONE]":
            done = True
            continue
        chunks.append(json.loads(data))  # every data line but [DONE] is JSON
    return chunks, done


def check_deltas(chunks: list[dict[str, Any]]) -> None:
    """Role first; per tool index: id/type/name on the first fragment only, contiguous indexes,
    arguments that concatenate to a JSON object; finish_reason last (then only a usage chunk)."""
    assert chunks, "no chunks"
    first_delta = chunks[0]["choices"][0]["delta"]
    assert first_delta.get("role") == "assistant", "the first delta must carry the role"
    ids = {c["id"] for c in chunks}
    assert len(ids) == 1, f"chunk ids differ: {ids}"
    seen: dict[int, dict[str, str]] = {}
    finished = False
    for chunk in chunks:
        if not chunk["choices"]:
            assert finished and chunk.get("usage"), "a choice-less chunk must be the final usage chunk"
            continue
        assert not finished, "a chunk after the finish_reason chunk"
        choice = chunk["choices"][0]
        delta = choice["delta"]
        for call in delta.get("tool_calls") or ():
            index = call["index"]
            if index not in seen:
                assert index == len(seen), f"tool call indexes must be contiguous, got {index}"
                assert call.get("id", "").startswith("call_") and call.get("type") == "function"
                assert call["function"].get("name"), "the first fragment must name the function"
                seen[index] = {"args": call["function"].get("arguments") or ""}
            else:
                assert not call.get("id") and not call.get("type") and not call["function"].get("name")
                seen[index]["args"] += call["function"].get("arguments") or ""
        if choice.get("finish_reason"):
            finished = True
            if seen:
                assert choice["finish_reason"] == "tool_calls"
    assert finished, "no finish_reason"
    for index, state in seen.items():
        assert isinstance(json.loads(state["args"]), dict), f"call {index} arguments are not a JSON object"
