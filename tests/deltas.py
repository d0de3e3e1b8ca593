"""A checker for what we send clients: OpenAI's rules for chat.completion.chunk deltas and completions."""

from __future__ import annotations

import json
from typing import Any


def parse_sse(body: str) -> tuple[list[dict[str, Any]], bool]:
    """Chunks from a raw SSE body, and whether it ended with ``data: [DONE]``."""
    chunks: list[dict[str, Any]] = []
    done = False
    for block in body.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(
            line[6:] if line.startswith("data: ") else line[5:]
            for line in block.split("\n")
            if line.startswith("data:")
        )
        if not data:
            continue
        assert not done, "an event after [DONE]"
        if data == "[DONE]":
            done = True
            continue
        chunks.append(json.loads(data))  # every data line but [DONE] is JSON
    return chunks, done


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise AssertionError(f"{what} arguments are not JSON: {text!r}") from exc
    assert isinstance(value, dict), f"{what} arguments are not a JSON object: {text!r}"
    return value


def check_deltas(chunks: list[dict[str, Any]]) -> None:
    """OpenAI's streaming rules, for one choice (n=1):

    - every chunk a ``chat.completion.chunk`` with the same id and model; the role in the first delta only;
    - per tool call index: id/type/name on the first fragment only, contiguous indexes, distinct ids,
      arguments that concatenate to a JSON object;
    - legacy ``functions`` answers as ``delta.function_call`` ({name, arguments}): the name on the first
      fragment only, arguments that concatenate to a JSON object, never mixed with ``tool_calls``;
    - ``finish_reason`` on the last choice chunk only: ``tool_calls`` / ``function_call`` exactly when a
      call was streamed, or ``length`` (a cut answer, whose last call's arguments may be cut too, as OpenAI
      does at ``max_tokens``); after it at most one choice-less chunk, the usage chunk.
    """
    assert chunks, "no chunks"
    first_delta = chunks[0]["choices"][0]["delta"]
    assert first_delta.get("role") == "assistant", "the first delta must carry the role"
    ids = {c["id"] for c in chunks}
    assert len(ids) == 1, f"chunk ids differ: {ids}"
    models = {c.get("model") for c in chunks}
    assert len(models) == 1, f"chunk models differ: {models}"
    assert all(c.get("object") == "chat.completion.chunk" for c in chunks), "a chunk that is not a completion chunk"
    seen: dict[int, dict[str, str]] = {}
    legacy: dict[str, str] | None = None
    finish: str | None = None
    usage_chunks = 0
    for position, chunk in enumerate(chunks):
        if not chunk["choices"]:
            assert finish and isinstance(chunk.get("usage"), dict), "a choice-less chunk must be the final usage chunk"
            usage_chunks += 1
            assert usage_chunks == 1, "more than one usage chunk"
            assert all(
                isinstance(chunk["usage"].get(k), int) for k in ("prompt_tokens", "completion_tokens", "total_tokens")
            ), chunk["usage"]
            continue
        assert not finish, "a chunk after the finish_reason chunk"
        assert len(chunk["choices"]) == 1 and chunk["choices"][0]["index"] == 0, "one choice, index 0"
        choice = chunk["choices"][0]
        delta = choice["delta"]
        assert position == 0 or "role" not in delta or delta["role"] is None, "the role again after the first delta"
        assert delta.get("content") is None or isinstance(delta["content"], str)
        for call in delta.get("tool_calls") or ():
            assert legacy is None, "tool_calls mixed with a legacy function_call"
            index = call["index"]
            if index not in seen:
                assert index == len(seen), f"tool call indexes must be contiguous, got {index}"
                assert call.get("id", "").startswith("call_") and call.get("type") == "function"
                assert call["id"] not in {s["id"] for s in seen.values()}, f"tool call id reused: {call['id']}"
                assert call["function"].get("name"), "the first fragment must name the function"
                seen[index] = {"id": call["id"], "args": call["function"].get("arguments") or ""}
            else:
                assert not call.get("id") and not call.get("type") and not call["function"].get("name")
                seen[index]["args"] += call["function"].get("arguments") or ""
        if delta.get("function_call"):
            assert not seen, "a legacy function_call mixed with tool_calls"
            fragment = delta["function_call"]
            if legacy is None:
                assert fragment.get("name"), "the first function_call fragment must name the function"
                legacy = {"args": fragment.get("arguments") or ""}
            else:
                assert not fragment.get("name"), "the function name again after the first fragment"
                legacy["args"] += fragment.get("arguments") or ""
        if choice.get("finish_reason"):
            finish = choice["finish_reason"]
    assert finish, "no finish_reason"
    if seen:
        assert finish in ("tool_calls", "length"), f"tool calls streamed but finish_reason {finish!r}"
    elif legacy is not None:
        assert finish in ("function_call", "length"), f"a function_call streamed but finish_reason {finish!r}"
    else:
        assert finish not in ("tool_calls", "function_call"), f"finish_reason {finish!r} without a call"
    complete = [*seen.values()] if finish != "length" else [*seen.values()][:-1]
    for index, state in enumerate(complete):
        _json_object(state["args"], f"call {index}")
    if legacy is not None and finish != "length":
        _json_object(legacy["args"], "function_call")


def check_completion(body: dict[str, Any]) -> None:
    """The non-streaming counterpart: one assistant message whose calls are well formed, and a
    ``finish_reason`` that says whether it holds calls."""
    assert body.get("object") == "chat.completion", body.get("object")
    [choice] = body["choices"]
    message = choice["message"]
    assert message["role"] == "assistant"
    assert message.get("content") is None or isinstance(message["content"], str)
    calls = message.get("tool_calls") or []
    for call in calls:
        assert call["id"].startswith("call_") and call["type"] == "function" and call["function"]["name"]
        _json_object(call["function"]["arguments"], f"call {call['id']}")
    assert len({c["id"] for c in calls}) == len(calls), "tool call ids are not distinct"
    legacy = message.get("function_call")
    assert not (calls and legacy), "tool_calls and a legacy function_call in one message"
    if calls:
        assert choice["finish_reason"] == "tool_calls", choice["finish_reason"]
    elif legacy:
        assert legacy["name"] and choice["finish_reason"] == "function_call", choice["finish_reason"]
        _json_object(legacy["arguments"], "function_call")
    else:
        assert choice["finish_reason"] not in ("tool_calls", "function_call"), choice["finish_reason"]


def streamed_calls(chunks: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The tool calls of a checked stream, merged: ``[{"id", "name", "arguments"}]`` in index order."""
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            for call in choice["delta"].get("tool_calls") or ():
                slot = calls.setdefault(call["index"], {"id": call.get("id") or "", "name": "", "arguments": ""})
                slot["name"] += call["function"].get("name") or ""
                slot["arguments"] += call["function"].get("arguments") or ""
    return [calls[i] for i in sorted(calls)]
