"""Tests for the react format's own behaviour: marker soup, argument streaming, the cut, edge cases, the answer
fallback and rendering round trips. Golden cases, splits and linear time for every format: test_conformance."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolshim.formats.base import (
    Malformed,
    Reasoning,
    SecondToolStarted,
    Text,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallRecord,
    ToolCallStart,
    ToolChoice,
    ToolSpec,
)
from toolshim.formats.react import ReactFormat

from tests.formats import harness
from tests.formats.harness import assert_same_in_all_chunkings, summarize
from tests.formats.tools import TOOLS

FORMAT = ReactFormat()
parse = partial(harness.parse, FORMAT)


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("Action Input:Thought{}\"'\\\n`*<think>/ Fa")), max_size=120),
    st.sampled_from(["stop", "length"]),
)
def test_marker_soup_is_deterministic_and_keeps_the_contract(text: str, finish: str) -> None:
    events = assert_same_in_all_chunkings(lambda: FORMAT.new_parser(TOOLS, 2), text, finish)  # type: ignore[arg-type]
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert len(starts) <= 2 and all(e.name in {t.name for t in TOOLS} for e in starts)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_never_raises_on_arbitrary_text(text: str) -> None:
    assert_same_in_all_chunkings(lambda: FORMAT.new_parser(TOOLS, 1), text)


def test_args_fragments_are_the_raw_object_even_with_markers_inside_strings() -> None:
    raw = '{"path": "notes.md", "content": "line one\nAction: get_weather\nObservation: }\n"}'
    events = parse(f"Action: write_file\nAction Input: {raw}\nI am done.")
    fragments = "".join(e.fragment for e in events if isinstance(e, ToolCallArgs))
    assert fragments == raw
    assert [type(e) for e in events][:2] == [ToolCallStart, ToolCallArgs]
    arguments = json.dumps(
        {"path": "notes.md", "content": "line one\nAction: get_weather\nObservation: }\n"}, separators=(",", ":")
    )
    assert events[2] == ToolCallEnd(0, "write_file", arguments, ("control_chars",))  # raw newlines: repaired
    assert events[-1] == Text("I am done.")


def test_marker_line_ends_an_unbalanced_object() -> None:
    events = parse('Action: get_weather\nAction Input: {"city": "Paris"\nThought: oops\nFinal Answer: ok')
    assert [e for e in events if isinstance(e, ToolCallArgs)] == [ToolCallArgs(0, '{"city": "Paris"\n')]
    assert events[-2:] == [Reasoning("oops"), Text("ok")]


def test_cut_is_reported_at_the_marker_and_nothing_follows() -> None:
    parser = FORMAT.new_parser(TOOLS, 1)
    first = parser.feed('Action: get_weather\nAction Input: {"city": "Paris"}\nAction:')
    assert isinstance(first[-1], SecondToolStarted) and first[-1].index == 1
    assert any(isinstance(e, ToolCallEnd) for e in first)
    assert parser.feed(' get_weather\nAction Input: {"city": "Rome"}') == []
    assert parser.close() == []


def test_action_without_input_uses_empty_arguments_when_allowed() -> None:
    tools = [*TOOLS, ToolSpec("list_files", "List files.", {"type": "object", "properties": {}})]
    events = parse("Thought: look\nAction: list_files\n", tools=tools)
    assert events[-2:] == [ToolCallStart(0, "list_files"), ToolCallEnd(0, "list_files", "{}")]
    events = parse("Action: list_files\nFinal Answer: listed", tools=tools)
    assert events == [ToolCallStart(0, "list_files"), ToolCallEnd(0, "list_files", "{}"), Text("listed")]


def test_action_without_input_is_malformed_when_parameters_are_required() -> None:
    events = parse("Action: get_weather")
    assert isinstance(events[-1], Malformed) and events[-1].index == 0
    assert parse("Action: get_weather", finish="length") == [
        Malformed("Action: get_weather", "tool block truncated (finish_reason=length)")
    ]


def test_streaming_is_incremental() -> None:
    parser = FORMAT.new_parser(TOOLS, 1)
    assert parser.feed("Hello there, ") == [Text("Hello there,")]
    assert parser.feed("friend.\nAct") == [Text(" friend.")]
    assert parser.feed("ion: get_weather\n") == [ToolCallStart(0, "get_weather")]
    assert parser.feed('Action Input: {"ci') == [ToolCallArgs(0, '{"ci')]
    assert parser.feed('ty": "Paris"}') == [
        ToolCallArgs(0, 'ty": "Paris"}'),
        ToolCallEnd(0, "get_weather", '{"city":"Paris"}'),
    ]
    assert parser.close() == []


def test_holdback_is_bounded() -> None:
    parser = FORMAT.new_parser(TOOLS, 1)
    # Trailing whitespace is held back (a marker line may follow), but at most MAX_HOLDBACK of it.
    assert parser.feed("Hi\n" + " " * 200) == [Text("Hi\n" + " " * 136)]
    assert parser.feed("x" + "\n" * 500) == [Text(" " * 64 + "x" + "\n" * (500 - 64))]
    assert parser.feed("y") == [Text("\n" * 64 + "y")]
    assert parser.feed("\n" + "Action Input" * 10) == [Text("\n" + "Action Input" * 10)]


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("<think>never closed", [Reasoning("never closed")]),
        (
            "Action: get_weather\nAction Input: ```json\n```\nok",
            [ToolCallStart(0, "get_weather"), Malformed, Text("ok")],
        ),
        (
            "Action: get_weather\nAction Input:\nFinal Answer: no",
            [ToolCallStart(0, "get_weather"), Malformed, Text("no")],
        ),
        (
            'Action: get_weather\nAction Input: ```json\n{"city": "Paris"\n```\nok',
            [ToolCallStart(0, "get_weather"), ToolCallArgs(0, '{"city": "Paris"\n'), ToolCallEnd, Text("ok")],
        ),
        (
            'Action: get_weather\nAction Input: {"city": "Paris"}\nObservation',
            # a stop sequence cut short ("\nObservation" without its colon) is dropped, not shown
            [ToolCallStart(0, "get_weather"), ToolCallArgs(0, '{"city": "Paris"}'), ToolCallEnd],
        ),
        (
            'Action:   "get_weather()"  \nAction Input: {"city": "Rome"}',
            [ToolCallStart(0, "get_weather"), ToolCallArgs(0, '{"city": "Rome"}'), ToolCallEnd],
        ),
        ("Thought: a\n\n  Thought: b\nanswer:", [Reasoning("a\nb\nanswer:"), Text("b\nanswer:")]),  # answer fallback
        (
            "<think>x</think>Action: get_weather\nAction Input: Oslo",
            [Reasoning("x"), ToolCallStart(0, "get_weather"), ToolCallEnd],
        ),
    ],
)
def test_edge_cases(output: str, expected: list[Any]) -> None:
    events = assert_same_in_all_chunkings(lambda: FORMAT.new_parser(TOOLS, 1), output)
    assert len(events) == len(expected), events
    for got, want in zip(events, expected, strict=True):
        assert got == want if not isinstance(want, type) else isinstance(got, want), (got, want)


def test_observation_before_any_call_is_reasoning() -> None:
    assert parse("Observation: the user is polite.\nFinal Answer: Hi!") == [
        Reasoning("the user is polite."),
        Text("Hi!"),
    ]


@pytest.mark.parametrize(
    ("output", "content"),
    [
        ("Observation: It is 13 degrees.", ["It is 13 degrees."]),
        ("Thought: I now know.\nObservation: It is 13 degrees.\n", ["It is 13 degrees."]),
        ("Observation: It is 13 degrees.\nThought: I answered.", ["It is 13 degrees."]),
        ("Observation: first\nObservation: second", ["second"]),
        ("Thought: one\nThought: It is 13 degrees.", ["It is 13 degrees."]),
        ("Thought: so <think>hidden</think> it is 13.", ["so  it is 13."]),
        ("Thought: x\nFinal Answer:", []),
        ("Thought: x\nFinal Answer: 13", ["13"]),
        ("<think>It is 13 degrees.</think>", []),
        ("Thought: I will look.\nAction: get_weather", []),
        ("Thought: looking\nAction: get_time\nAction Input: {}", []),
        ('Thought: a\nAction: get_weather\nAction Input: {"city": "Paris"}\nObservation: 13', []),
        ("Thought: a\n\nstill a\nThought: b", ["b"]),
        ("Thought: a\nFinal Answer: x\nThought: b", ["x"]),
        ("plain\nThought: b", ["plain"]),
        ('Thought:Action Input: {"city": "Oslo"}', []),
        ("Observation: ```\nAction: get_weather\n```", []),
        ("Thought: use **Action:** lines", ["use **Action:** lines"]),
    ],
)
@pytest.mark.parametrize("finish", ["stop", "length"])
def test_answer_fallback_needs_no_answer_no_call_and_no_text(output: str, content: list[str], finish: str) -> None:
    events = assert_same_in_all_chunkings(lambda: FORMAT.new_parser(TOOLS, 1), output, finish)  # type: ignore[arg-type]
    texts = [e.text for e in events if isinstance(e, Text)]
    if finish == "stop":
        assert texts == content
    elif "Final Answer:" in output or output.startswith("plain"):
        assert texts == content  # real content, not the fallback
    else:
        assert texts == []  # a length cut never falls back: a cut-off thought may be a call's preamble


def test_answer_fallback_keeps_a_bounded_prefix() -> None:
    body = "word " * 20_000 + "end"
    events = parse("Observation: " + body)
    assert events[0] == Reasoning(body)
    assert events[1] == Text(body[: 64 * 1024].strip())


# ---- rendering -------------------------------------------------------------------------


def test_render_tools_lists_every_tool_the_rules_and_an_example() -> None:
    prompt = FORMAT.render_tools(TOOLS, ToolChoice("auto"), parallel=False)
    for tool in TOOLS:
        assert tool.name in prompt
    assert "city (string, required)" in prompt and "query (string, required)" in prompt
    assert "Action Input:" in prompt and "Final Answer:" in prompt and "Observation" in prompt
    assert 'Action: get_weather\nAction Input: {"city":"..."}' in prompt
    named = FORMAT.render_tools(TOOLS, ToolChoice("named", "search_docs"), parallel=True)
    assert "`search_docs`" in named and "one Action / Action Input pair after another" in named


def test_render_tools_example_is_parsed_as_a_call() -> None:
    prompt = FORMAT.render_tools(TOOLS, ToolChoice("auto"), parallel=False)
    example = prompt[prompt.index("Example") :].split("\n", 1)[1]
    summary = summarize(parse(example))
    assert summary["calls"] == [{"name": "get_weather", "arguments": {"city": "..."}}]


@pytest.mark.parametrize(
    "arguments",
    [
        [{"city": "Paris"}],
        [{"city": "Zürich\nAction: x", "unit": "celsius"}, {"query": 'a "b" \\ c', "tags": ["x"], "limit": 2}],
        [{"path": "p", "content": "```\n}\n{"}, {"city": "Rome"}, {"query": "q", "filters": {"lang": "en"}}],
    ],
)
def test_render_calls_round_trip(arguments: list[dict[str, Any]]) -> None:
    names = {"city": "get_weather", "path": "write_file", "query": "search_docs"}
    records = [
        ToolCallRecord(f"call_{i}", names[next(iter(a))], json.dumps(a, indent=2)) for i, a in enumerate(arguments)
    ]
    rendered = FORMAT.render_calls(records)
    events = assert_same_in_all_chunkings(lambda: FORMAT.new_parser(TOOLS, len(records)), rendered)
    assert summarize(events)["calls"] == [{"name": r.name, "arguments": json.loads(r.arguments)} for r in records]
    turn = "Thought: I will look it up.\n" + rendered  # a history turn: content as a Thought, then the calls
    summary = summarize(assert_same_in_all_chunkings(lambda: FORMAT.new_parser(TOOLS, len(records)), turn))
    assert summary["reasoning"] == "I will look it up." and len(summary["calls"]) == len(records)


def test_render_result_and_stop_sequences() -> None:
    assert FORMAT.render_result("get_weather", "18 °C") == "Observation: 18 °C"
    assert FORMAT.stop_sequences() == ("\nObservation:",)
    assert FORMAT.name == "react"


def test_second_action_glued_to_the_first_input_is_the_cut_not_text() -> None:
    """A model that writes the next ``Action:`` right after the closing brace, without a line break."""
    text = 'Action: get_weather\nAction Input: {"city": "Paris"}Action: get_weather\nAction Input: {"city": "Oslo"}'
    parser = ReactFormat().new_parser(TOOLS, 1)
    events = parser.feed(text) + parser.close("stop")
    assert not [e for e in events if isinstance(e, Text)]
    assert isinstance(events[-1], SecondToolStarted) and isinstance(events[-2], ToolCallEnd)


@pytest.mark.parametrize(
    ("output", "repairs"),
    [
        ('Action:\nget_weather\nAction Input: {"city": "Paris"}', ("name_next_line",)),
        ("Action: get_weather\nAction Input: Paris\nObs", ("partial_stop", "plain_input")),
        ('Action: get_weather\nAction Input: {"city": "Paris"}\nObservation', ()),  # after the block: no call repair
    ],
)
def test_line_syntax_repairs_are_named(output: str, repairs: tuple[str, ...]) -> None:
    """The ReAct repairs ride on the call's ``ToolCallEnd.repairs`` (counted in toolshim_tool_repairs)."""
    events = assert_same_in_all_chunkings(lambda: FORMAT.new_parser(TOOLS, 1), output)
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert len(ends) == 1 and ends[0].repairs == repairs


def test_final_answer_then_action_is_no_call_in_any_split() -> None:
    """LangChain: a Final Answer before a parsable Action wins; nothing of the Action shows."""
    output = 'Final Answer: 42\nAction: get_weather\nAction Input: {"city": "Paris"}\n'
    events = assert_same_in_all_chunkings(lambda: FORMAT.new_parser(TOOLS, 1), output)
    assert events == [Text("42")]
