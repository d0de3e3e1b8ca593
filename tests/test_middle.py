"""The middle of the request path as units: ChatTurn, the chunk decoder, the response builder.

The builder is checked with a deterministic id source and with a second renderer (a plain
list of tuples), which is how another front end (the Responses API) reuses it.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolshim.chat.attempt import Attempt
from toolshim.chat.builder import NO_ANSWER, NO_ANSWER_CALL, ResponseBuilder
from toolshim.chat.chunks import ChunkFactory, accumulate
from toolshim.chat.turn import ChatTurn
from toolshim.formats import (
    Malformed,
    Reasoning,
    SecondToolStarted,
    Text,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    ToolChoice,
)
from toolshim.upstream.delta import Delta, decode, parse_payload
from toolshim.wire.errors import InvalidRequest, UpstreamProtocolError

TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}, "strict": True}
MESSAGES = [{"role": "user", "content": "hi"}]


# ---- ChatTurn ------------------------------------------------------------------------------

BODIES: list[dict[str, Any]] = [
    {"model": "m", "messages": MESSAGES},
    {
        "model": "m",
        "messages": MESSAGES,
        "tools": [TOOL],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "temperature": 0.2,
        "stream": True,
        "stream_options": {"include_usage": True},
    },
    {"model": "m", "messages": MESSAGES, "functions": [TOOL["function"]], "function_call": {"name": "get_weather"}},
    {
        "model": "m",
        "messages": MESSAGES,
        "tools": [TOOL],
        "tool_choice": {"type": "allowed_tools", "mode": "auto"},
        "vendor": {"kept": [1]},
    },
]


@pytest.mark.parametrize("body", BODIES)
def test_native_body_is_the_clients_body(body: dict[str, Any]) -> None:
    assert ChatTurn.from_body(body).native_body("m") == body


def test_turn_types_the_tools_and_the_dialect() -> None:
    modern = ChatTurn.from_body(BODIES[1])
    assert [t.name for t in modern.tools] == ["get_weather"] and not modern.legacy_functions
    assert modern.choice == ToolChoice("required") and modern.parallel is False and not modern.parallel_allowed
    assert modern.stream and modern.include_usage and modern.uses_tools and modern.offers_tools
    legacy = ChatTurn.from_body(BODIES[2])
    assert legacy.legacy_functions and legacy.choice == ToolChoice("named", "get_weather")
    assert not legacy.parallel_allowed and legacy.named_tool() == "get_weather"
    unknown_choice = ChatTurn.from_body(BODIES[3])
    assert unknown_choice.choice == ToolChoice("auto") and unknown_choice.options == {"vendor": {"kept": [1]}}
    plain = ChatTurn.from_body(BODIES[0])
    assert not plain.uses_tools and plain.include_usage and not plain.stream


def test_turn_changes_keep_the_dialect() -> None:
    legacy = ChatTurn.from_body(BODIES[2]).with_tool_choice(ToolChoice("none"))
    assert legacy.native_body("x")["function_call"] == "none" and "tool_choice" not in legacy.native_body("x")
    bare = ChatTurn.from_body(BODIES[1]).without_tools().native_body("x")
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(bare) and bare["temperature"] == 0.2


def test_history_with_calls_needs_tools() -> None:
    history = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
    ]
    assert ChatTurn.from_body({"model": "m", "messages": history}).uses_tools


def test_named_choice_must_name_an_offered_tool() -> None:
    turn = ChatTurn.from_body({**BODIES[1], "tool_choice": {"type": "function", "function": {"name": "nope"}}})
    with pytest.raises(InvalidRequest) as info:
        turn.named_tool()
    assert info.value.param == "tool_choice" and "nope" in info.value.message


def test_invalid_body_names_the_field() -> None:
    with pytest.raises(InvalidRequest) as info:
        ChatTurn.from_body({"model": "m", "messages": [{"role": "wizard"}]})
    assert info.value.param == "messages[0].role"


# ---- the decoder -----------------------------------------------------------------------------


def test_decode_reads_text_reasoning_finish_and_usage() -> None:
    chunk = {
        "choices": [{"delta": {"content": "a", "reasoning": "r"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5, "cached": "x"},
    }
    assert decode(chunk) == Delta(
        "a", "r", False, "stop", {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    )
    assert decode({"choices": [{"delta": {"tool_calls": [{"index": 0}]}}]}).has_output
    assert decode({"choices": 5}) == Delta() and decode({"choices": [{"delta": "odd"}]}) == Delta()
    assert decode({"choices": [{"message": {"content": "whole"}, "finish_reason": "length"}]}).content == "whole"


@pytest.mark.parametrize("payload", ["not json", "[1, 2]", '"text"'])
def test_payload_that_is_not_an_object_is_a_protocol_error(payload: str) -> None:
    with pytest.raises(UpstreamProtocolError):
        parse_payload(payload)


@pytest.mark.parametrize("error", [{"message": "overloaded"}, "overloaded"])
def test_error_event_is_a_protocol_error(error: Any) -> None:
    with pytest.raises(UpstreamProtocolError, match="overloaded"):
        decode({"error": error})


def test_dict_payloads_are_not_reparsed() -> None:
    chunk = {"choices": []}
    assert parse_payload(chunk) is chunk


# ---- the builder -----------------------------------------------------------------------------


class ListRenderer:
    """A second front end: items are plain tuples."""

    def role(self) -> tuple[str, ...]:
        return ("role",)

    def content(self, text: str) -> tuple[str, ...]:
        return ("text", text)

    def reasoning(self, text: str) -> tuple[str, ...]:
        return ("think", text)

    def call_header(self, index: int, call_id: str, name: str) -> tuple[str, ...]:
        return ("call", str(index), call_id, name)

    def call_arguments(self, index: int, fragment: str) -> tuple[str, ...]:
        return ("args", str(index), fragment)

    def finish(self, reason: str) -> tuple[str, ...]:
        return ("finish", reason)

    def usage(self, usage: dict[str, int]) -> tuple[str, ...]:
        return ("usage", str(usage["total_tokens"]))


def ids() -> Any:
    counter = itertools.count(1)
    return lambda: f"call_{next(counter)}"


def test_builder_with_a_second_renderer_and_fixed_ids() -> None:
    builder = ResponseBuilder(ListRenderer(), call_ids=ids())
    attempt = Attempt()
    items = builder.start() + builder.feed(
        [
            Text("Let me check."),
            Reasoning("hmm"),
            ToolCallEnd(0, "get_weather", '{"city":"Paris"}', ("json5",)),
            SecondToolStarted(1),
        ],
        attempt,
    )
    builder.add_usage({"prompt_tokens": 4, "completion_tokens": 3})
    items += builder.finish(attempt, include_usage=True)
    assert items == [
        ("role",),
        ("text", "Let me check."),
        ("think", "hmm"),
        ("call", "0", "call_1", "get_weather"),
        ("args", "0", '{"city":"Paris"}'),
        ("finish", "tool_calls"),
        ("usage", "7"),
    ]
    assert attempt.cut and attempt.calls == 1
    assert builder.tally.calls == 1 and builder.tally.parse_outcomes == ["repaired"]
    assert builder.tally.repairs == ["json5"] and builder.produced_output


def test_streamed_arguments_only_append_and_complete_to_the_repaired_text() -> None:
    builder = ResponseBuilder(ListRenderer(), stream_arguments=True, call_ids=ids())
    attempt = Attempt()
    items = builder.feed(
        [
            ToolCallStart(0, "f"),
            ToolCallArgs(0, '{"a": 1'),
            ToolCallEnd(0, "f", '{"a": 1}'),
            ToolCallStart(1, "g"),
            ToolCallArgs(1, "{'b'"),
            Malformed("x", "bad", index=1),
        ],
        attempt,
    )
    assert items == [
        ("call", "0", "call_1", "f"),
        ("args", "0", '{"a": 1'),
        ("args", "0", "}"),
        ("call", "1", "call_2", "g"),
        ("args", "1", "{'b'"),
    ]
    assert attempt.abandoned_call and builder.tally.parse_outcomes == ["clean", "malformed"]


def test_text_is_held_while_a_call_is_demanded() -> None:
    builder = ResponseBuilder(ListRenderer(), wants_call=True, call_ids=ids())
    attempt = Attempt()
    assert builder.feed([Text("I think ")], attempt) == []
    assert not builder.produced_output
    builder.drop_held_text()  # a required re-ask: that text was no answer
    assert builder.feed([Text("Calling."), ToolCallEnd(0, "f", "{}")], attempt)[0] == ("text", "Calling.")


def test_calls_withdrawn_are_counted_not_sent() -> None:
    builder = ResponseBuilder(ListRenderer(), calls_withdrawn=True, call_ids=ids())
    attempt = Attempt()
    assert builder.feed([ToolCallStart(0, "f"), ToolCallEnd(0, "f", '{"x": 1}')], attempt) == []
    assert builder.tally.sanitized == 1
    # nothing else came: never the call's words (a client keeps them for the model to copy), never nothing
    assert builder.finish(attempt, include_usage=True) == [("text", NO_ANSWER_CALL), ("finish", "stop")]


def test_withheld_call_with_tool_results_is_answered_with_the_results() -> None:
    builder = ResponseBuilder(ListRenderer(), calls_withdrawn=True, call_ids=ids(), results=['{"temp": 21}'])
    attempt = Attempt()
    assert builder.feed([ToolCallEnd(0, "f", '{"x": 1}')], attempt) == []
    assert builder.finish(attempt, include_usage=False) == [("text", '{"temp": 21}'), ("finish", "stop")]


@pytest.mark.parametrize(("finish", "reason"), [("length", "length"), ("stop", "stop"), (None, "stop")])
def test_finish_without_calls(finish: str | None, reason: str) -> None:
    """Nothing at all: a note says so, never an empty answer."""
    builder = ResponseBuilder(ListRenderer())
    assert builder.finish(Attempt(finish=finish), include_usage=False) == [("text", NO_ANSWER), ("finish", reason)]
    assert builder.deadline_finish() == ("finish", "length")


@given(st.lists(st.text(max_size=5), max_size=8))
def test_chat_chunks_accumulate_to_the_text(pieces: list[str]) -> None:
    builder = ResponseBuilder(ChunkFactory(model="m"))
    attempt = Attempt()
    chunks = builder.start() + builder.feed([Text(p) for p in pieces], attempt) + builder.finish(attempt, False)
    message = accumulate(chunks)["choices"][0]["message"]
    text = "".join(pieces)
    assert message["content"] == (text if text.strip() else text + NO_ANSWER)
