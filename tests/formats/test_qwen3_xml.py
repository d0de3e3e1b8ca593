"""Tests for the qwen3_xml format's own behaviour: the block decoder (what the lenient parsers reuse), schema
typing of raw values, events while streaming, repairs and the prompt. Golden cases, splits and linear time for
every format: test_conformance."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolshim.formats import get_format
from toolshim.formats._qwen3_block import decode_qwen3_block
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
from tests.formats.harness import feed_chunks, load_golden, only
from tests.formats.tools import TOOLS
from tests.formats.work import assert_linear

FORMAT = get_format("qwen3_xml")
CASES = load_golden("qwen3_xml")
parse = partial(harness.parse, FORMAT)

# vLLM's qwen3coder tests type values by schema type names outside JSON Schema too ("float").
TYPED = ToolSpec(
    "test_types",
    "",
    {
        "type": "object",
        "properties": {
            "int_param": {"type": "integer"},
            "float_param": {"type": "float"},
            "whole_float": {"type": "float"},
            "bool_param": {"type": "boolean"},
            "str_param": {"type": "string"},
            "obj_param": {"type": "object"},
            "null_param": {"type": ["integer", "null"]},
            "null_text": {"type": "string"},
            "null_required": {"type": "integer"},
            "null_optional": {"type": "integer"},
            "untyped": {},
        },
        "required": ["null_required"],
    },
)


def block(name: str, **params: str) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


# ---- the block decoder --------------------------------------------------------------------------


def test_decoder_types_values_by_schema() -> None:
    text = block(
        "test_types",
        int_param="42",
        float_param="3.14",
        whole_float="2.0",
        bool_param="true",
        str_param="hello world",
        obj_param='{"key": "value"}',
        null_param="null",
        null_text="null",
        null_required="null",
        null_optional="NULL",
        untyped="[1, 2]",
    )
    assert decode_qwen3_block(text, [TYPED]) == [
        (
            "test_types",
            {
                "int_param": "42",  # JSON Schema types stay text: finalize_call converts them (and reports it)
                "float_param": 3.14,  # an alias type finalize_call cannot know is converted here
                "whole_float": 2,
                "bool_param": "true",
                "str_param": "hello world",
                "obj_param": '{"key": "value"}',
                "null_param": None,
                "null_text": "null",  # a string parameter keeps the word
                "null_required": None,  # finalize_call's validation then names the problem
                "untyped": [1, 2],  # null_optional: left out, the model means "not given"
            },
        )
    ]


def test_decoder_through_the_parser_gives_typed_json() -> None:
    text = block(
        "test_types",
        int_param="42",
        float_param="3.14",
        bool_param="True",
        obj_param="{'key': None}",
        null_required="7",
    )
    (end,) = only(parse(text, tools=[TYPED]), ToolCallEnd)
    assert end.arguments == (
        '{"int_param":42,"float_param":3.14,"bool_param":true,"obj_param":{"key":null},"null_required":7}'
    )
    assert end.repairs == ("single_quotes", "python_literals")  # reading text by the schema is no repair


def test_decoder_reads_several_functions_and_keeps_unknown_names() -> None:
    text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</function>\n<function=nope>\n</function>"
    assert decode_qwen3_block(text, TOOLS) == [("get_weather", {"city": "A"}), ("nope", {})]


@pytest.mark.parametrize("text", ["", "plain text", "<tool_call>\n</tool_call>", "<function=", "<function=a\nb>"])
def test_decoder_returns_none_without_a_function(text: str) -> None:
    assert decode_qwen3_block(text, TOOLS) is None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "<tool_call>",
                "</tool_call>",
                "<function=get_weather>",
                "</function>",
                "<parameter=city>",
                "</parameter>",
                "<parameter=",
                "<function=",
                "\n",
                "x",
                ">",
                "<",
                "null",
                "{'a': 1}",
            ]
        ),
        max_size=30,
    ).map("".join)
)
def test_decoder_is_total(text: str) -> None:
    """Any text: a list of (str, dict) or None, never an exception."""
    decoded = decode_qwen3_block(text, TOOLS)
    assert decoded is None or all(isinstance(n, str) and isinstance(a, dict) for n, a in decoded)


@pytest.mark.parametrize(
    "unit",
    [
        "<parameter=a>\n",
        "<function=x>\n",
        "<parameter=a>\nv\n</function>\n",
        "</parameter>",
        "<parameter=a>x <parameter=b",
    ],
)
def test_decoder_is_linear(unit: str) -> None:
    assert_linear(lambda k: "<function=get_weather>\n" + unit * 2000 * k, lambda text: decode_qwen3_block(text, TOOLS))


# ---- streaming ----------------------------------------------------------------------------------


def test_call_starts_at_its_function_tag_and_ends_once_whole() -> None:
    parser = FORMAT.new_parser(TOOLS, 1)
    assert parser.feed("Sure.\n<tool_call>\n<function=get_weather>") == [
        Text("Sure.\n"),
        ToolCallStart(0, "get_weather"),
    ]
    assert parser.feed("\n<parameter=city>\nParis") == []
    rest = parser.feed("\n</parameter>\n</function>\n</tool_call>") + parser.close()
    assert rest == [ToolCallEnd(0, "get_weather", '{"city":"Paris"}')]


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_never_streams_arguments(name: str) -> None:
    case = CASES[name]
    assert not only(parse(case["output"], case.get("max_calls", 1), case.get("finish_reason", "stop")), ToolCallArgs)


def test_unclosed_function_is_reported_as_a_repair() -> None:
    text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</tool_call>"
    (end,) = only(parse(text), ToolCallEnd)
    assert end.repairs == ("unclosed_function",)
    (stopped,) = only(parse(text[: text.index("</tool_call>")]), ToolCallEnd)
    assert stopped.repairs == ("unclosed_function",)


def test_function_without_wrapper_then_new_function_closes_the_first() -> None:
    text = "<function=get_weather>\n<parameter=city>\nA\n</parameter>\n<function=get_weather>\n<parameter=city>\nB\n"
    events = parse(text, max_calls=2)
    assert [e.arguments for e in only(events, ToolCallEnd)] == ['{"city":"A"}', '{"city":"B"}']
    assert only(events, ToolCallEnd)[0].repairs == ("unclosed_function",)


def test_markup_inside_a_value_stays_value_unless_it_starts_a_line() -> None:
    code = "x = '<function=f>' + '</function>' + '<tool_call>' + '</tool_call>'"
    text = block("write_file", path="a.py", content=code)
    (end,) = only(parse(text), ToolCallEnd)
    assert end.arguments.endswith(f'"content":{json.dumps(code)}}}')


def test_unknown_function_is_malformed_without_an_index() -> None:
    events = parse(block("get_stock_price", symbol="X"))
    (bad,) = only(events, Malformed)
    assert bad.index is None and not only(events, ToolCallStart)


def test_same_events_for_a_long_split_output() -> None:
    text = "Let me.\n" + block("search_docs", query="q", limit="3", tags='["a"]') + "\nDone."
    whole = feed_chunks(lambda: FORMAT.new_parser(TOOLS, 1), [text])
    for size in (1, 2, 3, 5, 8, 13):
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        assert harness.merge(feed_chunks(lambda: FORMAT.new_parser(TOOLS, 1), pieces)) == harness.merge(whole)


# ---- rendering ----------------------------------------------------------------------------------


def test_prompt_shows_the_syntax_with_a_real_tool() -> None:
    prompt = FORMAT.render_tools(TOOLS, ToolChoice("named", "search_docs"), False)
    assert "<tool_call>\n<function=search_docs>\n<parameter=query>\nexample\n</parameter>" in prompt
    assert "<tool_response>" in prompt and "at most one tool" in prompt


def test_rendered_calls_use_raw_strings_and_json_for_the_rest() -> None:
    args: dict[str, Any] = {"query": 'say "hi"\nbye', "limit": 5, "tags": ["a"], "filters": {"lang": "py"}}
    text = FORMAT.render_calls([ToolCallRecord("c", "search_docs", json.dumps(args))])
    assert text == (
        '<tool_call>\n<function=search_docs>\n<parameter=query>\nsay "hi"\nbye\n</parameter>\n'
        '<parameter=limit>\n5\n</parameter>\n<parameter=tags>\n["a"]\n</parameter>\n'
        '<parameter=filters>\n{"lang": "py"}\n</parameter>\n</function>\n</tool_call>'
    )


def test_stops() -> None:
    assert FORMAT.stop_sequences() == ("</tool_call>", "\n<tool_response>")
    assert FORMAT.stops_between_calls() == ("</tool_call>",)
    assert FORMAT.render_result("get_weather", "sunny") == "<tool_response>\nsunny\n</tool_response>"
