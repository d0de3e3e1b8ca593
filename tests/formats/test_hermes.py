"""Tests for the hermes format's own behaviour: argument fragments, marker soup, streaming events,
bare-object detection and its limits, and rendering round trips. Golden cases, splits and linear time
for every format: test_conformance."""

from __future__ import annotations

import json
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolshim.formats import get_format
from toolshim.formats.base import (
    Event,
    Malformed,
    Reasoning,
    SecondToolStarted,
    Text,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallRecord,
    ToolCallStart,
    ToolChoice,
)
from toolshim.formats.hermes import HermesFormat

from tests.formats import harness
from tests.formats.harness import (
    assert_same_in_all_chunkings,
    feed_chunks,
    load_golden,
    merge,
    only,
    summarize,
)
from tests.formats.tools import TOOLS
from tests.formats.work import assert_linear, code_content

FORMAT = HermesFormat()
CASES = load_golden("hermes")
MARKERS = ("<tool_call>", "</tool_call>", "<think>", "</think>", "<tool_response>")
PARIS = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


parse = partial(harness.parse, FORMAT)


# ---- golden cases: hermes quirks (every format: test_conformance) ------------------------


@pytest.mark.parametrize("name", sorted(CASES))
def test_argument_fragments_are_the_raw_arguments(name: str) -> None:
    case = CASES[name]
    chunks = [case["output"][i : i + 3] for i in range(0, len(case["output"]), 3)]
    events = feed_chunks(
        lambda: FORMAT.new_parser(TOOLS, case.get("max_calls", 1)), chunks, case.get("finish_reason", "stop")
    )
    for end in only(events, ToolCallEnd):
        raw = "".join(e.fragment for e in events if isinstance(e, ToolCallArgs) and e.index == end.index)
        if raw:  # the fragments are the model's text; parsed they give the call's arguments
            assert raw in case["output"]
            assert end.repairs or json.loads(end.arguments) == json.loads(raw)


_SOUP = [
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "<tool_response>",
    '{"name": ',
    '"get_weather"',
    '"arguments": ',
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    "\\",
    ",",
    ":",
    "`",
    "```",
    "```json\n",
    "\n",
    " ",
    "<",
    "Paris",
    "True",
    "<tool_",
    "</tool",
]


_PLAIN_SOUP = [t for t in _SOUP if not any(q in t for q in "`\"'")]


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(st.lists(st.sampled_from(_SOUP), max_size=60), st.lists(st.sampled_from(_PLAIN_SOUP), max_size=60)).map(
        "".join
    ),
    st.sampled_from(["stop", "length"]),
)
def test_marker_soup_never_raises_and_never_leaks(text: str, finish: str) -> None:
    assert_same_in_all_chunkings(lambda: FORMAT.new_parser(TOOLS, 2), text, finish)  # type: ignore[arg-type]
    if not any(q in text for q in "`\"'"):  # only code spans and strings of prose JSON keep markers as text
        for ev in feed_chunks(lambda: FORMAT.new_parser(TOOLS, 2), [text], finish):  # type: ignore[arg-type]
            if isinstance(ev, Text):
                assert not any(marker in ev.text for marker in MARKERS), ev


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_never_raises_on_arbitrary_text(text: str) -> None:
    assert_same_in_all_chunkings(lambda: FORMAT.new_parser(TOOLS, 1), text)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200).filter(lambda t: "{" not in t and "<t" not in t and "</t" not in t and "`" not in t))
def test_text_without_marker_characters_is_passed_through(text: str) -> None:
    assert summarize(parse(text))["content"] == text


# ---- streaming events ----------------------------------------------------------------------


def test_streaming_is_incremental() -> None:
    parser = FORMAT.new_parser(TOOLS, 1)
    assert parser.feed("Let me look. <b>x</b> <tool_c") == [Text("Let me look. <b>x</b> ")]
    assert parser.feed('all>\n{"name": "get_wea') == []
    assert parser.feed('ther", "arguments": {"ci') == [ToolCallStart(0, "get_weather"), ToolCallArgs(0, '{"ci')]
    assert parser.feed('ty": "Par') == [ToolCallArgs(0, 'ty": "Par')]
    assert parser.feed('is"}}\n</tool_call>\nBye') == [
        ToolCallArgs(0, 'is"}'),
        ToolCallEnd(0, "get_weather", '{"city":"Paris"}'),
        Text("\nBye"),
    ]
    assert parser.close() == []


def test_cut_is_reported_at_the_opening_tag_and_nothing_follows() -> None:
    parser = FORMAT.new_parser(TOOLS, 1)
    first = parser.feed(f"<tool_call>{PARIS}</tool_call>\n<tool_ca")
    assert first[0] == ToolCallStart(0, "get_weather") and first[-1] == ToolCallEnd(
        0, "get_weather", '{"city":"Paris"}'
    )
    assert parser.feed("ll>") == [SecondToolStarted(1)]
    assert parser.feed(f"{PARIS}</tool_call>") == []
    assert parser.close() == []


def test_arguments_before_name_and_string_arguments_emit_no_fragments() -> None:
    for obj in (
        '{"arguments": {"city": "Oslo"}, "name": "get_weather"}',
        '{"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}',
    ):
        events = parse(f"<tool_call>{obj}</tool_call>")
        assert events == [ToolCallStart(0, "get_weather"), ToolCallEnd(0, "get_weather", '{"city":"Oslo"}')]


def test_bare_call_is_decided_when_balanced() -> None:
    parser = FORMAT.new_parser(TOOLS, 1)
    assert parser.feed('Sure.\n{"name": "get_weather", "arguments": {"city": "Rome"}') == [Text("Sure.\n")]
    assert parser.feed("}") == [
        ToolCallStart(0, "get_weather"),
        ToolCallArgs(0, '{"city": "Rome"}'),
        ToolCallEnd(0, "get_weather", '{"city":"Rome"}'),
    ]
    assert parser.close() == []


def test_bare_prefix_is_decided_within_a_bounded_prefix() -> None:
    parser = FORMAT.new_parser(TOOLS, 1)
    assert parser.feed('{"nam') == []
    assert merge(parser.feed('ing": 1')) == [Text('{"naming": 1')]
    parser = FORMAT.new_parser(TOOLS, 1)
    assert merge(parser.feed("{" + " " * 70)) == [Text("{" + " " * 70)]  # too much whitespace for a call prefix


def test_bare_candidate_is_capped_then_flushed_as_text() -> None:
    body = '{"name": "get_weather", "arguments": {"city": "' + "x" * (1 << 20)
    parser = FORMAT.new_parser(TOOLS, 1)
    held = [ev for i in range(0, (1 << 20) - 1, 65536) for ev in parser.feed(body[i : min(i + 65536, (1 << 20) - 1)])]
    assert held == []  # undecided up to the cap
    assert merge(parser.feed(body[(1 << 20) - 1 :])) == [Text(body)]  # at the cap: text, and so is the rest
    assert parser.feed("}}") == [Text("}}")] and parser.close() == []


def test_second_bare_call_is_the_cut_point() -> None:
    events = parse(f"{PARIS}\n{PARIS}\nmore")
    assert [type(e) for e in events] == [ToolCallStart, ToolCallArgs, ToolCallEnd, SecondToolStarted]


def test_commas_between_bare_calls_are_markup_held_until_decided() -> None:
    parser = FORMAT.new_parser(TOOLS, 2)
    assert [type(e) for e in parser.feed(PARIS + ",\n")] == [ToolCallStart, ToolCallArgs, ToolCallEnd]
    assert parser.feed('{"name": "Oslo"') == []  # the comma waits for the object it precedes
    assert merge(parser.feed("} ok") + parser.close()) == [Text(',\n{"name": "Oslo"} ok')]
    assert summarize(parse(PARIS + ", and more"))["content"] == ", and more"  # no object follows: prose
    assert summarize(parse("<think>x</think>, {}"))["content"] == ", {}"


def test_plain_string_arguments_fill_the_single_string_parameter() -> None:
    events = parse('{"name": "get_weather", "arguments": "Rome"}')
    assert only(events, ToolCallEnd) == [ToolCallEnd(0, "get_weather", '{"city":"Rome"}', ("plain_input",))]
    block = parse('<tool_call>{"name": "search_docs", "arguments": "17 * 23 + 4"}</tool_call>')
    assert only(block, ToolCallEnd)[0].repairs == ("plain_input",)
    bad = only(parse(CASES["bare_plain_string_unusable"]["output"], 2), Malformed)[0]
    assert bad.raw == ', {"name": "write_file", "arguments": "17 * 23 + 4"}'  # its separator is markup too
    assert bad.reason == "arguments must be a JSON object, got the string '17 * 23 + 4'"
    number = only(parse('<tool_call>{"name": "get_weather", "arguments": 42}</tool_call>'), Malformed)[0]
    assert number.index == 0 and "got number" in number.reason  # raw JSON that is no string is not plain input


def test_repairs_are_reported() -> None:
    end = only(parse(CASES["repairable_json"]["output"]), ToolCallEnd)[0]
    assert {"single_quotes", "python_literals", "trailing_commas"} <= set(end.repairs)
    assert only(parse(CASES["missing_brace"]["output"]), ToolCallEnd)[0].repairs == ("unclosed_brackets",)
    assert only(parse(CASES["stop_cut_unclosed"]["output"]), ToolCallEnd)[0].repairs == ("unclosed_brackets",)
    assert "name_case" in only(parse(CASES["near_miss_name"]["output"]), ToolCallEnd)[0].repairs
    assert only(parse(CASES["nested_object"]["output"]), ToolCallEnd)[0].repairs == ()


def test_malformed_blocks_carry_the_raw_block_and_index() -> None:
    output = CASES["length_mid_block"]["output"]
    events = parse(output, finish="length")
    assert events[1] == ToolCallStart(0, "get_weather")
    bad = only(events, Malformed)[0]
    assert bad.index == 0 and bad.raw == output[output.index("<tool_call>") :].replace("\n", "", 1)
    assert "truncated" in bad.reason
    events = parse(CASES["unknown_tool"]["output"])
    unknown = only(events, Malformed)[0]
    assert unknown.index is None and "get_stock" in unknown.reason
    assert unknown.raw == '<tool_call>{"name": "get_stock", "arguments": {"symbol": "ACME"}}'
    assert not only(events, ToolCallStart)


def test_a_block_of_several_values_that_are_no_call_is_malformed_once() -> None:
    # lenient recognition reads a Malformed block again (a GLM block here): twice would make its call twice
    output = '<tool_call>get_weather\n<arg_value>[1, 2]</arg_value>\n<arg_value>{"k": 1}</arg_value>\n</tool_call>'
    assert len(only(parse(output), Malformed)) == 1


def test_unknown_tool_does_not_use_up_a_call() -> None:
    events = parse(
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    )
    assert only(events, ToolCallEnd) == [ToolCallEnd(0, "get_weather", '{"city":"Oslo"}')]
    assert not only(events, SecondToolStarted)


def test_stop_in_string_is_malformed_not_guessed() -> None:
    events = parse('<tool_call>{"name": "get_weather", "arguments": {"city": "Par')
    assert [type(e) for e in events] == [ToolCallStart, ToolCallArgs, Malformed]
    assert "inside a JSON string" in events[-1].reason  # type: ignore[union-attr]


def test_whitespace_after_a_block_is_dropped_unless_prose_follows() -> None:
    assert summarize(parse(f"<tool_call>{PARIS}</tool_call>\n\n"))["content"] == ""
    assert summarize(parse(f"<tool_call>{PARIS}</tool_call>\n\nDone."))["content"] == "\n\nDone."
    assert summarize(parse("<think>x</think>\n\nHello"))["content"] == "\n\nHello"


def test_holdback_is_bounded() -> None:
    parser = FORMAT.new_parser(TOOLS, 1)
    assert parser.feed("x <tool_res") == [Text("x ")]
    assert parser.feed("ume is fine") == [Text("<tool_resume is fine")]
    assert parser.feed("<" * 100) == [Text("<" * 99)]
    assert parser.feed("``") == [Text("<")]
    assert parser.close() == [Text("``")]


def test_deeply_nested_input_does_not_raise() -> None:
    for text in (
        "<tool_call>" + "[" * 50_000,
        "<tool_call>{" + '"a":[' * 20_000 + "]" * 20_000 + "}</tool_call>",
        '{"name": "get_weather", "arguments": ' + "[" * 20_000 + "]" * 20_000 + "}",
    ):
        events = parse(text)
        assert not only(events, ToolCallEnd)


# ---- linear time (the format-independent checks are in test_conformance) ---------------------


def test_long_bare_call_is_decided_in_linear_time() -> None:
    def bare(scale: int) -> str:
        return json.dumps({"name": "write_file", "arguments": {"path": "x", "content": code_content(200 * scale)}})

    def chunked(text: str, size: int) -> list[Event]:
        return feed_chunks(lambda: FORMAT.new_parser(TOOLS, 1), [text[i : i + size] for i in range(0, len(text), size)])

    for size, scale in ((7, 4), (4096, 48)):  # ~70 KB in tiny chunks; ~860 KB, near the bare-object cap
        ends = only(chunked(bare(scale), size), ToolCallEnd)
        assert len(ends) == 1 and json.loads(ends[0].arguments)["content"] == code_content(200 * scale)
    assert_linear(bare, lambda text: chunked(text, 7))


# ---- rendering -------------------------------------------------------------------------


def test_registry_and_stop_sequences() -> None:
    assert isinstance(get_format("hermes"), HermesFormat) and FORMAT.name == "hermes"
    assert FORMAT.stop_sequences() == ("</tool_call>", "\n<tool_response>")


def test_render_tools_lists_every_tool_and_an_example() -> None:
    prompt = FORMAT.render_tools(TOOLS, ToolChoice("auto"), parallel=False)
    for spec in TOOLS:
        assert f"### {spec.name}" in prompt
    assert "city (string, required)" in prompt and "query (string, required)" in prompt
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "example"}}\n</tool_call>' in prompt
    assert "its own <tool_call></tool_call> tags" in prompt and "at most one tool" in prompt
    example = prompt[prompt.index("For example:") :]
    assert only(parse(example), ToolCallEnd) == [ToolCallEnd(0, "get_weather", '{"city":"example"}')]


def test_render_tools_example_uses_the_named_tool() -> None:
    prompt = FORMAT.render_tools(TOOLS, ToolChoice("named", "search_docs"), parallel=True)
    assert prompt.endswith(
        "You MUST call the tool `search_docs` now; do not answer directly. "
        "You may call several tools in one turn, one block after another."
    )
    assert '<tool_call>\n{"name": "search_docs", "arguments": {"query": "example"}}\n</tool_call>' in prompt


def test_render_calls_round_trip() -> None:
    calls = [
        ToolCallRecord("call_1", "get_weather", '{"city": "Zürich", "unit": "celsius"}'),
        ToolCallRecord("call_2", "write_file", json.dumps({"path": "a.py", "content": CODE_WITH_MARKERS})),
        ToolCallRecord("call_3", "search_docs", '{"query": "q", "tags": ["a"], "filters": {"since": 1.5}}'),
    ]
    rendered = FORMAT.render_calls(calls)
    assert rendered.startswith('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"')
    events = assert_same_in_all_chunkings(lambda: FORMAT.new_parser(TOOLS, len(calls)), rendered)
    assert [(e.name, json.loads(e.arguments)) for e in only(events, ToolCallEnd)] == [
        (c.name, json.loads(c.arguments)) for c in calls
    ]
    assert summarize(events)["content"] == "" and not only(events, Malformed)


CODE_WITH_MARKERS = 'print("</tool_call>")\n# <tool_call> {"name": "x"}\npath = "C:\\\\tmp"\n'


def test_render_calls_keeps_non_json_arguments_as_a_string() -> None:
    rendered = FORMAT.render_calls([ToolCallRecord("c", "get_weather", "city=Paris")])
    assert rendered == '<tool_call>\n{"name": "get_weather", "arguments": "city=Paris"}\n</tool_call>'


def test_render_result() -> None:
    assert FORMAT.render_result("get_weather", '{"temp": 21}') == '<tool_response>\n{"temp": 21}\n</tool_response>'


def test_reasoning_and_text_events_are_separate() -> None:
    events = parse("<think>plan</think>Answer")
    assert events == [Reasoning("plan"), Text("Answer")]


def test_tags_inside_prose_json_are_removed_and_reported() -> None:
    events = parse('{"name": "Bob", "note": "<tool_<tool_call>call> and </think>"}\nok')
    assert summarize(events)["content"] == '{"name": "Bob", "note": "<tool_ and "}\nok'
    assert only(events, Malformed)[0].raw.startswith('{"name": "Bob"')
    fenced = '```json\n{"name": "Bob", "note": "<tool_call>"}\n```'
    assert summarize(parse(fenced))["content"] == fenced  # inside a code fence it is a mention


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "stop-string-eaten"])
def test_a_windows_path_at_a_values_end_is_read_in_a_block(closed: bool) -> None:
    """``"C:\\"`` escapes its own closing quote: the block ends inside a string, and is read again with the
    backslash kept as one (``trailing_backslash``), in every chunking."""
    text = '<tool_call>\n{"name": "write_file", "arguments": {"path": "C:\\", "content": "x"}}\n'
    text += "</tool_call>" if closed else ""
    events = assert_same_in_all_chunkings(lambda: FORMAT.new_parser(TOOLS, 1), text)
    [end] = only(events, ToolCallEnd)
    assert json.loads(end.arguments) == {"path": "C:\\", "content": "x"}
    assert "trailing_backslash" in end.repairs
    assert not only(events, Malformed)
