"""Tests for the morph_xml format's own behaviour: the element decoder (what the lenient parsers reuse), schema
guided reading of nested elements, events while streaming, repairs and the prompt. Golden cases, splits and
linear time for every format: test_conformance."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolshim.formats import get_format
from toolshim.formats._morph_block import decode_morph_block
from toolshim.formats.base import (
    Malformed,
    Text,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallRecord,
    ToolCallStart,
    ToolChoice,
    ToolSpec,
)

from tests.formats import harness
from tests.formats.harness import load_golden, only
from tests.formats.tools import TOOLS
from tests.formats.work import assert_linear

FORMAT = get_format("morph_xml")
CASES = load_golden("morph_xml")
parse = partial(harness.parse, FORMAT)

NESTED = ToolSpec(
    "plan_trip",
    "",
    {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "stops": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "nights": {"type": "integer"}},
                },
            },
            "budget": {"type": "object", "properties": {"max": {"type": "number"}, "currency": {"type": "string"}}},
            "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
            "flags": {"type": "array", "items": {"type": "boolean"}},
        },
    },
)


# ---- the element decoder ------------------------------------------------------------------------


def test_decoder_reads_nested_objects_and_arrays_by_schema() -> None:
    text = (
        "<plan_trip>\n<title>Tour &amp; <b>more</b></title>\n"
        "<stops><city>Rome</city><nights>2</nights></stops>\n"
        "<stops><city>Oslo</city><nights>3</nights></stops>\n"
        "<budget><max>1500.5</max><currency>EUR</currency></budget>\n"
        "<matrix><item><item>1</item><item>2</item></item><item>[3, 4]</item></matrix>\n"
        "<flags><item>true</item><item>false</item></flags>\n"
        "</plan_trip>"
    )
    assert decode_morph_block(text, [NESTED]) == [
        (
            "plan_trip",
            {
                "title": "Tour & <b>more</b>",
                "stops": [{"city": "Rome", "nights": "2"}, {"city": "Oslo", "nights": "3"}],
                "budget": {"max": "1500.5", "currency": "EUR"},
                "matrix": [["1", "2"], "[3, 4]"],
                "flags": ["true", "false"],
            },
        )
    ]
    (end,) = only(parse(text, tools=[NESTED]), ToolCallEnd)
    assert json.loads(end.arguments) == {
        "title": "Tour & <b>more</b>",
        "stops": [{"city": "Rome", "nights": 2}, {"city": "Oslo", "nights": 3}],
        "budget": {"max": 1500.5, "currency": "EUR"},
        "matrix": [[1, 2], [3, 4]],
        "flags": [True, False],
    }


def test_single_object_for_an_array_of_objects_is_one_item() -> None:
    text = "<plan_trip><stops><city>Rome</city><nights>2</nights></stops></plan_trip>"
    assert decode_morph_block(text, [NESTED]) == [("plan_trip", {"stops": [{"city": "Rome", "nights": "2"}]})]


def test_decoder_needs_an_offered_tool_name() -> None:
    assert decode_morph_block("<get_stock><a>1</a></get_stock>", TOOLS) is None
    assert decode_morph_block("text <get_weather><city>x</city></get_weather>", TOOLS) is None
    assert decode_morph_block("  <get_weather/>  ", TOOLS) == [("get_weather", {})]
    assert decode_morph_block("<get_weather><city>Lima", TOOLS) == [("get_weather", {"city": "Lima"})]


def test_untyped_values_read_like_json_when_they_look_like_it() -> None:
    free = ToolSpec("free", "", {"type": "object", "properties": {}})
    text = "<free><n>5</n><b>true</b><s>hello</s><o><k>v</k></o><l><item>a</item><item>b</item></l></free>"
    assert decode_morph_block(text, [free]) == [
        ("free", {"n": 5, "b": True, "s": "hello", "o": {"k": "v"}, "l": ["a", "b"]})
    ]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "<get_weather>",
                "</get_weather>",
                "<city>",
                "</city>",
                "<item>",
                "</item>",
                "<x/>",
                "<!--",
                "-->",
                "<![CDATA[",
                "]]>",
                "&lt;",
                "&#0;",
                "&#x110000;",
                "<",
                ">",
                "a",
                "\n",
            ]
        ),
        max_size=30,
    ).map("".join)
)
def test_decoder_is_total(text: str) -> None:
    decoded = decode_morph_block(text, [*TOOLS, NESTED])
    assert decoded is None or all(isinstance(n, str) and isinstance(a, dict) for n, a in decoded)


@pytest.mark.parametrize(
    "unit",
    ["<a>", "<stops>", "<title>x", "<a1></a2>", "<!-- x", "<![CDATA[", "&amp;", "<item>", "</stops>"],
)
def test_decoder_is_linear(unit: str) -> None:
    def make(k: int) -> str:  # distinct names too: each left open
        return "<plan_trip>" + "".join(unit.replace("1", str(i)) for i in range(2000 * k))

    assert_linear(make, lambda text: decode_morph_block(text, [NESTED]))


# ---- streaming ----------------------------------------------------------------------------------


def test_call_starts_at_its_tag_and_ends_once_whole() -> None:
    parser = FORMAT.new_parser(TOOLS, 1)
    assert parser.feed("Sure.\n<get_weather>") == [Text("Sure.\n"), ToolCallStart(0, "get_weather")]
    assert parser.feed("<city>Par") == []
    assert parser.feed("is</city></get_weather>") + parser.close() == [
        ToolCallEnd(0, "get_weather", '{"city":"Paris"}')
    ]


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_never_streams_arguments(name: str) -> None:
    case = CASES[name]
    assert not only(parse(case["output"], case.get("max_calls", 1), case.get("finish_reason", "stop")), ToolCallArgs)


def test_repairs_are_named() -> None:
    (stray,) = only(parse("<get_weather>I think <city>Lima</city></get_weather>"), ToolCallEnd)
    assert stray.repairs == ("stray_text",)
    (unclosed,) = only(parse("<get_weather><city>Lima</city>"), ToolCallEnd)
    assert unclosed.repairs == ("unclosed_tool",)
    (clean,) = only(parse("<search_docs><query>q</query><limit>3</limit></search_docs>"), ToolCallEnd)
    assert clean.repairs == ()  # reading text by the schema is the syntax, not a repair


def test_a_nested_element_of_the_same_name_does_not_end_the_call() -> None:
    same = ToolSpec("note", "", {"type": "object", "properties": {"note": {"type": "object"}}})
    (end,) = only(parse("<note><note><a>1</a></note></note> after", tools=[same]), ToolCallEnd)
    assert json.loads(end.arguments) == {"note": {"a": 1}}


def test_tool_names_that_are_no_tag_names_never_open_a_call() -> None:
    odd = ToolSpec("get weather", "", {"type": "object", "properties": {}})
    assert parse("<get weather></get weather>", tools=[odd]) == [Text("<get weather></get weather>")]


def test_mention_that_never_closes_is_malformed_after_stop() -> None:
    events = parse("Use <get_weather> for that.")
    assert only(events, Malformed)[0].index == 0 and not only(events, ToolCallEnd)


# ---- rendering ----------------------------------------------------------------------------------


def test_prompt_shows_the_syntax_with_a_real_tool() -> None:
    prompt = FORMAT.render_tools(TOOLS, ToolChoice("named", "search_docs"), True)
    assert "<search_docs>\n<query>example</query>\n</search_docs>" in prompt
    assert "<item>" in prompt and "<tool_response>" in prompt and "several tools" in prompt


def test_rendered_calls_round_trip_nested_values() -> None:
    args: dict[str, Any] = {
        "title": "a < b & <c>\nline 2",
        "stops": [{"city": "Rome", "nights": 2}],
        "budget": {"max": 1.5, "currency": "EUR"},
        "matrix": [[1, 2], []],
        "flags": [True],
    }
    text = FORMAT.render_calls([ToolCallRecord("c", "plan_trip", json.dumps(args))])
    assert "<title>\na &lt; b &amp; &lt;c>\nline 2\n</title>" in text
    (end,) = only(parse(text, tools=[NESTED]), ToolCallEnd)
    assert json.loads(end.arguments) == args


def test_stops() -> None:
    assert FORMAT.stop_sequences() == ("\n<tool_response",)
    assert FORMAT.stops_between_calls() == ()
    assert FORMAT.render_result("get_weather", "sunny").startswith(
        "<tool_response>\n<tool_name>get_weather</tool_name>"
    )
