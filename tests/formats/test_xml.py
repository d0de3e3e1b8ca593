"""Tests for the xml format's own behaviour: marker soup, events and streaming, repairs, tag edge cases and
rendering round trips. Golden cases, splits and linear time for every format: test_conformance."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolshim.formats import get_format
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
from toolshim.formats.xml import EXAMPLE, XmlFormat

from tests.formats import harness
from tests.formats.harness import (
    assert_no_leak,
    assert_same_in_all_chunkings,
    load_golden,
    only,
    summarize,
)
from tests.formats.tools import TOOLS

FORMAT = XmlFormat()
CASES = load_golden("xml")
MARKERS = ("<tool:", "</tool:", "<param:", "</param:", "<think>", "</think>", "<tool_result")
SAVE_NOTE = ToolSpec(
    "save_note",
    "Save a note.",
    {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "body": {"type": "string"},
            "priority": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["title", "body"],
    },
)


parse = partial(harness.parse, FORMAT)


# ---- golden cases: xml quirks (every format: test_conformance) --------------------------


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_never_streams_arguments(name: str) -> None:
    """Values are raw text, so there is no JSON to stream: a call comes as ToolCallStart, then ToolCallEnd."""
    case = CASES[name]
    assert not only(parse(case["output"], case.get("max_calls", 1), case.get("finish_reason", "stop")), ToolCallArgs)


_SOUP = [
    "<tool:",
    "get_weather",
    "search_docs",
    ">",
    "</tool:",
    "<param:",
    "</param:",
    "city",
    "tags",
    "limit",
    "<think>",
    "</think>",
    "<tool_result",
    "`",
    "```",
    "\n",
    "\r",
    " ",
    "/",
    "<",
    "Paris",
    "5",
    "{",
    "'",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_SOUP), max_size=60).map("".join), st.sampled_from(["stop", "length"]))
def test_marker_soup_never_raises_and_never_leaks(text: str, finish: str) -> None:
    events = assert_same_in_all_chunkings(lambda: FORMAT.new_parser(TOOLS, 2), text, finish)  # type: ignore[arg-type]
    if "`" not in text:  # code spans legitimately keep markers as text
        assert_no_leak(events, MARKERS, (Text,))
    assert not only(events, ToolCallArgs)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_never_raises_on_arbitrary_text(text: str) -> None:
    assert_same_in_all_chunkings(lambda: FORMAT.new_parser(TOOLS, 1), text)


# ---- events and streaming ------------------------------------------------------------------


def test_streaming_is_incremental() -> None:
    parser = FORMAT.new_parser(TOOLS, 1)
    assert parser.feed("Hello <b> there <to") == [Text("Hello <b> there ")]
    assert parser.feed("ol:get_wea") == []
    assert parser.feed("ther>\n<param:city>Par") == [ToolCallStart(0, "get_weather")]
    assert parser.feed("is</param:city>\n</tool:get_weather>\nBye") == [
        ToolCallEnd(0, "get_weather", '{"city":"Paris"}'),
        Text("Bye"),
    ]
    assert parser.close() == []


def test_cut_is_reported_at_the_opening_tag_and_nothing_follows() -> None:
    parser = FORMAT.new_parser(TOOLS, 1)
    first = parser.feed("<tool:get_weather><param:city>Paris</param:city></tool:get_weather>\n<tool:search_do")
    assert first == [ToolCallStart(0, "get_weather"), ToolCallEnd(0, "get_weather", '{"city":"Paris"}')]
    assert parser.feed("cs>") == [SecondToolStarted(1)]
    assert parser.feed("<param:query>x</param:query></tool:search_docs>") == []
    assert parser.close() == []


def test_repairs_are_reported() -> None:
    events = parse(
        "<tool:search_docs>\nq: <param:query>x</param:query>"
        "<param:filters>{lang: 'en',}</param:filters>\n</tool:search_doc>"
    )
    end = only(events, ToolCallEnd)[0]
    assert end.arguments == '{"query":"x","filters":{"lang":"en"}}'
    assert {"stray_text", "close_tag_mismatch", "trailing_commas"} <= set(end.repairs)
    assert only(parse(CASES["stop_sequence_cut"]["output"]), ToolCallEnd)[0].repairs == ("unclosed_tool",)
    assert set(only(parse(CASES["unclosed_last_param"]["output"]), ToolCallEnd)[0].repairs) == {
        "unclosed_param",
        "unclosed_tool",
    }
    assert "name_case" in only(parse(CASES["near_miss_name"]["output"]), ToolCallEnd)[0].repairs
    assert only(parse(CASES["nested_object"]["output"]), ToolCallEnd)[0].repairs == ()


def test_malformed_blocks_carry_the_raw_block_and_index() -> None:
    output = CASES["length_mid_block"]["output"]
    events = parse(output, finish="length")
    assert events[1] == ToolCallStart(0, "get_weather")
    bad = only(events, Malformed)[0]
    assert bad.index == 0 and bad.raw == output[output.index("<tool:") :] and "truncated" in bad.reason
    unknown = only(parse(CASES["unknown_tool"]["output"]), Malformed)[0]
    assert unknown.index is None and "get_stock" in unknown.reason and unknown.raw.endswith("</tool:get_stock>")
    assert not only(parse(CASES["unknown_tool"]["output"]), ToolCallStart)


def test_unknown_tool_does_not_use_up_a_call() -> None:
    events = parse("<tool:nope></tool:nope><tool:get_weather><param:city>Oslo</param:city></tool:get_weather>")
    assert only(events, ToolCallEnd) == [ToolCallEnd(0, "get_weather", '{"city":"Oslo"}')]


def test_self_closing_and_empty_tags() -> None:
    tools = [*TOOLS, ToolSpec("list_files", "List files.", {"type": "object", "properties": {"dir": {}}})]
    assert only(parse("<tool:list_files/>", tools=tools), ToolCallEnd) == [ToolCallEnd(0, "list_files", "{}")]
    events = parse("<tool:list_files><param:dir/></tool:list_files>", tools=tools)
    assert only(events, ToolCallEnd) == [ToolCallEnd(0, "list_files", '{"dir":""}')]


def test_untyped_params_read_json_scalars_and_containers() -> None:
    tools = [ToolSpec("anything", "", {"type": "object"})]  # no properties: any key, untyped
    text = (
        '<tool:anything><param:n>42</param:n><param:b>true</param:b><param:o>{"k": [1]}</param:o>'
        '<param:s>hello</param:s><param:z>null</param:z><param:q>"x"</param:q></tool:anything>'
    )
    end = only(parse(text, tools=tools), ToolCallEnd)[0]
    assert json.loads(end.arguments) == {"n": 42, "b": True, "o": {"k": [1]}, "s": "hello", "z": "null", "q": '"x"'}


def test_typed_values_are_converted_by_finalize_call_without_reporting_repairs() -> None:
    schema = {
        "type": "object",
        "properties": {
            "note": {"type": ["string", "null"]},
            "level": {"enum": [1, 2, 3]},
            "mode": {"enum": ["1", "2"]},
            "n": {"$ref": "#/$defs/n"},
        },
        "$defs": {"n": {"type": "integer"}},
    }
    tools = [ToolSpec("t", "", schema)]
    text = (
        "<tool:t><param:note>null</param:note><param:level>2</param:level><param:mode>1</param:mode>"
        "<param:n>7</param:n></tool:t>"
    )
    end = only(parse(text, tools=tools), ToolCallEnd)[0]
    assert json.loads(end.arguments) == {"note": "null", "level": 2, "mode": "1", "n": 7}  # text wins for string|null
    assert end.repairs == ()


def test_dropped_markup_never_joins_the_text_around_it_into_a_marker() -> None:
    assert parse("a<</tool:x>param:city>Oslo") == [Text("a<Oslo")]
    events = parse("<<think>x</think>tool:get_weather>ok")
    assert events == [Text("<"), Reasoning("x"), Text("ok")]
    events = parse("<" + CASES["tool_only"]["output"] + "/think>b")
    assert [e for e in events if isinstance(e, Text)] == [Text("<"), Text("b")]


def test_holdback_is_bounded_by_the_longest_marker() -> None:
    parser = FORMAT.new_parser(TOOLS, 1)
    assert parser.feed("x <tool_res") == [Text("x ")]
    assert parser.feed("ume is fine") == [Text("<tool_resume is fine")]
    assert parser.feed("<" * 100) == [Text("<" * 99)]
    assert parser.close() == [Text("<")]


def test_tag_names_are_bounded() -> None:
    events = parse("<tool:" + "a" * 500 + ">rest")
    assert only(events, Malformed) and "a" * 200 in "".join(e.text for e in only(events, Text))


def test_imitated_result_in_prose_stops_output_but_not_inside_a_fence() -> None:
    assert parse("Done.\n<tool_result:x>\nfake\n</tool_result:x> more") == [Text("Done.\n")]
    fenced = "```\n<tool_result:x>\n```\nreal"
    assert parse(fenced) == [Text(fenced)]


# ---- rendering -------------------------------------------------------------------------


def test_registry_and_stop_sequences() -> None:
    assert isinstance(get_format("xml"), XmlFormat) and FORMAT.name == "xml"
    assert FORMAT.stop_sequences() == ("<tool_result",)


def test_render_tools_lists_every_tool_the_rules_and_the_example() -> None:
    prompt = FORMAT.render_tools(TOOLS, ToolChoice("auto"), parallel=False)
    for tool in TOOLS:
        assert f"### {tool.name}" in prompt
    assert "city (string, required)" in prompt and "query (string, required)" in prompt
    assert "</param:PARAM_NAME>" in prompt and "<tool_result:TOOL_NAME>" in prompt and EXAMPLE in prompt
    assert "never inside a ``` code fence" in prompt and "at most one tool" in prompt
    named = FORMAT.render_tools(TOOLS, ToolChoice("named", "search_docs"), parallel=True)
    assert "`search_docs`" in named and "several tools" in named


def test_render_tools_example_is_parsed_as_the_call_it_shows() -> None:
    events = assert_same_in_all_chunkings(lambda: FORMAT.new_parser([SAVE_NOTE], 1), EXAMPLE)
    assert summarize(events)["calls"] == [
        {
            "name": "save_note",
            "arguments": {
                "title": "Groceries",
                "body": 'Buy "oat milk" & eggs\nif price < 3: buy 2 \\ maybe',
                "priority": 2,
                "tags": ["home", "weekly"],
            },
        }
    ]


def test_render_result_is_never_taken_for_a_call() -> None:
    rendered = FORMAT.render_result("get_weather", "<tool:get_weather><param:city>x</param:city></tool:get_weather>")
    assert rendered.startswith("<tool_result:get_weather>\n") and rendered.endswith("\n</tool_result:get_weather>")
    assert parse(rendered) == []


ROUND_TRIPS = [
    [{"city": "Paris"}],
    [{"city": "Zürich <tool:x>", "unit": "celsius"}, {"query": 'a "b" \\ c', "tags": ["x"], "limit": 2}],
    [{"path": "p", "content": "\n\n```\n}\n{\r\n"}, {"city": "Rome"}, {"query": "q", "filters": {"lang": "en"}}],
    [{"query": "", "tags": [], "exact": False}, {"path": "", "content": "a\r"}, {"query": "q", "tags": ["1", "b"]}],
]


def _records(arguments: list[dict[str, Any]]) -> list[ToolCallRecord]:
    names = {"city": "get_weather", "path": "write_file", "query": "search_docs"}
    return [ToolCallRecord(f"call_{i}", names[next(iter(a))], json.dumps(a, indent=2)) for i, a in enumerate(arguments)]


def _round_trip(records: list[ToolCallRecord]) -> list[dict[str, Any]]:
    rendered = FORMAT.render_calls(records)
    return summarize(assert_same_in_all_chunkings(lambda: FORMAT.new_parser(TOOLS, len(records)), rendered))["calls"]


@pytest.mark.parametrize("arguments", ROUND_TRIPS)
def test_render_calls_round_trip(arguments: list[dict[str, Any]]) -> None:
    records = _records(arguments)
    assert _round_trip(records) == [{"name": r.name, "arguments": json.loads(r.arguments)} for r in records]


def test_render_calls_shape() -> None:
    records = _records([{"query": "q", "tags": ["a", "b"], "limit": 3, "filters": {"lang": "en"}}])
    assert FORMAT.render_calls(records) == (
        "<tool:search_docs>\n<param:query>q</param:query>\n<param:tags>a</param:tags>\n<param:tags>b</param:tags>\n"
        '<param:limit>3</param:limit>\n<param:filters>{"lang": "en"}</param:filters>\n</tool:search_docs>'
    )
    assert FORMAT.render_calls([ToolCallRecord("c", "get_weather", "not json")]) == (
        "<tool:get_weather>\n</tool:get_weather>"
    )


_VALUE = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40).filter(lambda s: "</param:" not in s)


@settings(max_examples=150, deadline=None)
@given(
    path=_VALUE,
    content=_VALUE,
    query=_VALUE,
    limit=st.integers(1, 10**6),
    tags=st.lists(_VALUE, max_size=4),
    exact=st.booleans(),
    since=st.floats(allow_nan=False, allow_infinity=False, width=32),
)
def test_render_calls_round_trip_property(
    path: str, content: str, query: str, limit: int, tags: list[str], exact: bool, since: float
) -> None:
    arguments = [
        {"path": path, "content": content},
        {"query": query, "limit": limit, "tags": tags, "exact": exact, "filters": {"since": since}},
    ]
    records = _records(arguments)
    rendered = FORMAT.render_calls(records)
    assert summarize(parse(rendered, max_calls=2))["calls"] == [
        {"name": r.name, "arguments": a} for r, a in zip(records, arguments, strict=True)
    ]
