"""The delta checker itself: it accepts OpenAI-shaped streams and rejects each kind of broken one."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.deltas import check_completion, check_deltas, parse_sse, streamed_calls

USAGE = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def head(index: int, call_id: str, name: str = "get_weather", args: str = "") -> dict[str, Any]:
    return {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def frag(index: int, args: str) -> dict[str, Any]:
    return {"index": index, "function": {"arguments": args}}


def two_calls() -> list[dict[str, Any]]:
    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Checking."}),
        chunk({"tool_calls": [head(0, "call_a")]}),
        chunk({"tool_calls": [frag(0, '{"city":')]}),
        chunk({"tool_calls": [frag(0, '"Paris"}')]}),
        chunk({"tool_calls": [head(1, "call_b", args="{}")]}),
        chunk({}, "tool_calls"),
        {**chunk({}), "choices": [], "usage": USAGE},
    ]


def legacy_call() -> list[dict[str, Any]]:
    return [
        chunk({"role": "assistant", "content": None}),
        chunk({"function_call": {"name": "get_weather", "arguments": ""}}),
        chunk({"function_call": {"arguments": '{"city":"Paris"}'}}),
        chunk({}, "function_call"),
    ]


def test_good_streams_pass() -> None:
    check_deltas(two_calls())
    check_deltas(legacy_call())
    check_deltas([chunk({"role": "assistant", "content": "Hi"}), chunk({}, "stop")])
    cut = [*two_calls()[:4], chunk({}, "length")]  # a call cut at max_tokens: OpenAI ends with "length"
    check_deltas(cut)
    assert streamed_calls(two_calls()) == [
        {"id": "call_a", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"id": "call_b", "name": "get_weather", "arguments": "{}"},
    ]


def _set(path: tuple[Any, ...], value: Any) -> Callable[[list[dict[str, Any]]], None]:
    def change(chunks: list[dict[str, Any]]) -> None:
        target: Any = chunks
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


BROKEN: dict[str, tuple[Callable[[], list[dict[str, Any]]], Callable[[list[dict[str, Any]]], None]]] = {
    "no-role-first": (two_calls, lambda c: c[0]["choices"][0]["delta"].pop("role")),
    "role-again": (two_calls, _set((1, "choices", 0, "delta", "role"), "assistant")),
    "ids-differ": (two_calls, _set((3, "id"), "chatcmpl-2")),
    "models-differ": (two_calls, _set((3, "model"), "other")),
    "index-skips": (two_calls, _set((5, "choices", 0, "delta", "tool_calls", 0, "index"), 2)),
    "no-id-on-first": (two_calls, lambda c: c[2]["choices"][0]["delta"]["tool_calls"][0].pop("id")),
    "id-reused": (two_calls, _set((5, "choices", 0, "delta", "tool_calls", 0, "id"), "call_a")),
    "name-repeated": (two_calls, _set((3, "choices", 0, "delta", "tool_calls", 0, "function", "name"), "x")),
    "args-not-json": (two_calls, _set((4, "choices", 0, "delta", "tool_calls", 0, "function", "arguments"), '"P')),
    "args-not-object": (two_calls, _set((5, "choices", 0, "delta", "tool_calls", 0, "function", "arguments"), "[]")),
    "finish-stop-with-calls": (two_calls, _set((6, "choices", 0, "finish_reason"), "stop")),
    "finish-not-last": (two_calls, lambda c: c.insert(6, chunk({}, "tool_calls"))),
    "no-finish": (two_calls, _set((6, "choices", 0, "finish_reason"), None)),
    "usage-twice": (two_calls, lambda c: c.append(copy.deepcopy(c[-1]))),
    "usage-before-finish": (two_calls, lambda c: c.insert(3, copy.deepcopy(c[-1]))),
    "legacy-name-repeated": (legacy_call, _set((2, "choices", 0, "delta", "function_call", "name"), "x")),
    "legacy-finish-tool-calls": (legacy_call, _set((3, "choices", 0, "finish_reason"), "tool_calls")),
    "legacy-mixed": (legacy_call, lambda c: c.insert(3, chunk({"tool_calls": [head(0, "call_a", args="{}")]}))),
    "legacy-args-not-json": (legacy_call, _set((2, "choices", 0, "delta", "function_call", "arguments"), "{")),
    "finish-tool-calls-without-call": (lambda: [chunk({"role": "assistant"}), chunk({}, "tool_calls")], lambda c: None),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_streams_fail(name: str) -> None:
    build, change = BROKEN[name]
    chunks = build()
    change(chunks)
    with pytest.raises(AssertionError):
        check_deltas(chunks)


def test_parse_sse() -> None:
    body = "data: " + json.dumps(chunk({"role": "assistant"})) + "\r\n\r\n: keep-alive\n\ndata: [DONE]\n\n"
    chunks, done = parse_sse(body)
    assert done and [c["choices"][0]["delta"] for c in chunks] == [{"role": "assistant"}]
    assert parse_sse("data: {}\n\n") == ([{}], False)
    with pytest.raises(ValueError):
        parse_sse("data: {not json\n\n")
    with pytest.raises(AssertionError):
        parse_sse("data: [DONE]\n\ndata: {}\n\n")


def completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
    }


def test_check_completion() -> None:
    call = head(0, "call_a", args='{"city":"Paris"}')
    call.pop("index")
    check_completion(completion({"content": None, "tool_calls": [call]}, "tool_calls"))
    check_completion(completion({"content": None, "function_call": {"name": "f", "arguments": "{}"}}, "function_call"))
    check_completion(completion({"content": "hi"}, "stop"))
    for bad in (
        completion({"content": None, "tool_calls": [call]}, "stop"),
        completion({"content": None, "tool_calls": [call, call]}, "tool_calls"),
        completion(
            {"content": None, "tool_calls": [{**call, "function": {"name": "f", "arguments": "{"}}]}, "tool_calls"
        ),
        completion({"content": None, "function_call": {"name": "f", "arguments": "{}"}}, "tool_calls"),
        completion({"content": "hi"}, "tool_calls"),
    ):
        with pytest.raises(AssertionError):
            check_completion(bad)
