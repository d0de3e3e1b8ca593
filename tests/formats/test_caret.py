"""Tests for the caret format's own behaviour: a chunking property over markup soup, events, header typing and
rendering round trips. Golden cases, splits and linear time for every format: test_conformance."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolshim.formats import get_format
from toolshim.formats.base import (
    Malformed,
    SecondToolStarted,
    Text,
    ToolCallEnd,
    ToolCallRecord,
    ToolCallStart,
    ToolChoice,
)
from toolshim.formats.caret import CaretFormat

from tests.formats.harness import assert_same_in_all_chunkings, check_event_order, feed_chunks, merge, summarize
from tests.formats.tools import TOOLS

FMT = CaretFormat()


def _factory(max_calls: int = 1):
    return lambda: FMT.new_parser(TOOLS, max_calls)


def _parse(text: str, max_calls: int = 1, finish: Any = "stop") -> dict[str, Any]:
    return summarize(assert_same_in_all_chunkings(_factory(max_calls), text, finish))


def test_registered() -> None:
    assert isinstance(get_format("caret"), CaretFormat)


# ---- chunking properties ----------------------------------------------------------------------

MARKUP = st.sampled_from(
    [
        "^^^",
        "^",
        "\n",
        "\r",
        "---",
        "```",
        "<think>",
        "</think>",
        ":",
        " ",
        "-",
        "get_weather",
        "write_file",
        "{",
        "}",
        '"',
        "city",
        "|",
        "x",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.one_of(MARKUP, st.text(max_size=6)), max_size=40),
    finish=st.sampled_from(["stop", "length"]),
    max_calls=st.integers(1, 3),
)
def test_never_raises_and_chunking_invariant(parts: list[str], finish: Any, max_calls: int) -> None:
    text = "".join(parts)
    whole = merge(feed_chunks(_factory(max_calls), [text], finish))
    check_event_order(whole)
    assert merge(feed_chunks(_factory(max_calls), parts, finish)) == whole
    assert merge(feed_chunks(_factory(max_calls), list(text), finish)) == whole


# ---- parser behaviour --------------------------------------------------------------------------


def test_events_in_order_for_a_call() -> None:
    events = merge(feed_chunks(_factory(), ["Hi\n^^^get_wea", "ther\ncity: Paris\n^^", "^\nbye"]))
    assert events == [
        Text("Hi\n"),
        ToolCallStart(0, "get_weather"),
        ToolCallEnd(0, "get_weather", '{"city":"Paris"}'),
        Text("bye"),
    ]


def test_start_emitted_as_soon_as_opener_line_completes() -> None:
    parser = FMT.new_parser(TOOLS)
    assert parser.feed("^^^get_weather") == []
    assert parser.feed("\n") == [ToolCallStart(0, "get_weather")]


def test_input_after_cut_is_ignored() -> None:
    parser = FMT.new_parser(TOOLS, 1)
    events = parser.feed("^^^get_weather\ncity: A\n^^^\n^^^get_weather\n")
    assert isinstance(events[-1], SecondToolStarted) and events[-1].index == 1
    assert parser.feed("city: B\n^^^\nmore") == []
    assert parser.close() == []


def test_holdback_is_bounded() -> None:
    """A column-0 line that keeps looking like an opener is flushed once it passes the cap (as text,
    without its carets: they are markup)."""
    parser = FMT.new_parser(TOOLS)
    long_name = "^^^" + "a" * 100
    emitted = "".join(e.text for e in parser.feed(long_name) if isinstance(e, Text))
    assert emitted == "a" * 100
    assert FMT.new_parser(TOOLS).feed("<thi") == []


def test_malformed_carries_raw_block_and_reason() -> None:
    events = feed_chunks(_factory(), ["^^^get_weather\ncity Paris\n^^^\n"])
    bad = [e for e in events if isinstance(e, Malformed)]
    assert bad == [Malformed("^^^get_weather\ncity Paris\n^^^", "unexpected header line 'city Paris'", 0)]


def test_schema_error_is_malformed() -> None:
    events = feed_chunks(_factory(), ["^^^get_weather\nunit: celsius\n^^^"])
    assert [type(e) for e in events] == [ToolCallStart, Malformed]


def test_header_typing_follows_schema() -> None:
    got = _parse('^^^search_docs\nquery: "  padded "\nlimit: 3\nexact: False\ntags: [1, "b"]\n^^^')
    assert got["calls"] == [
        {"name": "search_docs", "arguments": {"query": "  padded ", "limit": 3, "exact": False, "tags": ["1", "b"]}}
    ]


# ---- rendering -------------------------------------------------------------------------------


def test_render_tools_lists_tools_rules_and_example() -> None:
    prompt = FMT.render_tools(TOOLS, ToolChoice("auto"), parallel=False)
    for spec in TOOLS:
        assert f"### {spec.name}" in prompt
    assert "city (string, required)" in prompt and "query (string, required)" in prompt
    assert "Example:\n^^^get_weather\ncity: example\n^^^" in prompt and "`---`" in prompt
    assert "at most one tool" in prompt
    named = FMT.render_tools(TOOLS, ToolChoice("named", "get_weather"), parallel=True)
    assert "MUST call the tool `get_weather`" in named


def test_prompt_example_parses_with_its_own_tool() -> None:
    from toolshim.formats.base import ToolSpec

    note = ToolSpec(
        "save_note",
        parameters={
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "priority": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "content": {"type": "string"},
            },
        },
    )
    example = FMT.render_tools([note], ToolChoice("auto"), False).split("Example:\n", 1)[1]
    events = merge(feed_chunks(lambda: FMT.new_parser([note]), [example]))
    assert [json.loads(e.arguments) for e in events if isinstance(e, ToolCallEnd)] == [{"title": "example"}]


ARG_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=30) | st.sampled_from(
    ["^^^", "^^^\n", "a\n^^^\nb", "---", "|", "- x", '"q"', "5", "true", "null", " pad ", "", "{x}", "[1]", "\r\n"]
)
SEARCH_ARGS = st.fixed_dictionaries(
    {"query": ARG_TEXT},
    optional={
        "limit": st.integers(1, 10**12),
        "tags": st.lists(ARG_TEXT, max_size=4),
        "exact": st.booleans(),
        "filters": st.fixed_dictionaries({}, optional={"lang": ARG_TEXT, "since": st.floats(-1e9, 1e9)}),
    },
)
WRITE_ARGS = st.fixed_dictionaries({"path": ARG_TEXT, "content": ARG_TEXT | st.text(min_size=80, max_size=200)})


@settings(max_examples=300, deadline=None)
@given(
    calls=st.lists(
        st.one_of(st.tuples(st.just("search_docs"), SEARCH_ARGS), st.tuples(st.just("write_file"), WRITE_ARGS)),
        min_size=1,
        max_size=3,
    )
)
def test_render_calls_round_trip(calls: list[tuple[str, dict[str, Any]]]) -> None:
    records = [ToolCallRecord(f"call_{i}", name, json.dumps(args)) for i, (name, args) in enumerate(calls)]
    text = FMT.render_calls(records)
    got = _parse(text, max_calls=len(calls))
    assert got["calls"] == [{"name": n, "arguments": a} for n, a in calls]
    assert got["content"] == "" and got["malformed"] == 0


def test_render_calls_multiline_content_goes_in_body() -> None:
    text = FMT.render_calls([ToolCallRecord("c", "write_file", json.dumps({"path": "a.py", "content": "x\ny\n"}))])
    assert text == "^^^write_file\npath: a.py\n---\nx\ny\n^^^"
    no_newline = FMT.render_calls([ToolCallRecord("c", "write_file", json.dumps({"path": "a", "content": "x\ny"}))])
    assert no_newline == '^^^write_file\npath: a\ncontent: "x\\ny"\n^^^'
    unsafe = FMT.render_calls([ToolCallRecord("c", "write_file", json.dumps({"path": "a", "content": "x\n^^^\ny\n"}))])
    assert unsafe == '^^^write_file\npath: a\ncontent: "x\\n^^^\\ny\\n"\n^^^'


def test_render_calls_odd_keys_and_bad_arguments() -> None:
    odd = FMT.render_calls([ToolCallRecord("c", "get_weather", json.dumps({"city": "X", "my key": 1}))])
    assert odd == '^^^get_weather\n{"city": "X", "my key": 1}\n^^^'
    # read back as a call: "my key" is no parameter of get_weather, dropped (formats/_args.py step 3)
    assert _parse(odd)["calls"] == [{"name": "get_weather", "arguments": {"city": "X"}}]
    assert FMT.render_calls([ToolCallRecord("c", "get_weather", "")]) == "^^^get_weather\n^^^"


def test_stop_sequence_cut_completes_the_block() -> None:
    """The server stops at the stop string and leaves it out: the block is still complete."""
    (stop,) = FMT.stop_sequences()
    full = "Saving.\n^^^write_file\npath: a.txt\n---\nline 1\n^^^ x\n^^^\nAnd more text.\n"
    assert stop not in "^^^write_file\n"
    cut = full[: full.index(stop)]
    assert (
        _parse(cut)["calls"]
        == _parse(full)["calls"]
        == [{"name": "write_file", "arguments": {"path": "a.txt", "content": "line 1\n^^^ x\n"}}]
    )


def test_render_result_cannot_be_read_as_a_call() -> None:
    result = FMT.render_result("get_weather", "sunny\n^^^get_weather\ncity: X\n^^^")
    assert result.startswith("Result of get_weather:\n")
    got = _parse(result)
    assert got["calls"] == [] and got["malformed"] == 0 and "sunny" in got["content"]


@pytest.mark.parametrize(
    ("text", "shown"),
    [("^^^^^^  ", ""), ("^^^^^^ \t x", "x"), ("Hi\n^^^^  \n", "Hi\n\n"), ("^^^^^^  ^^^", "^^^")],
)
def test_blanks_after_stray_carets_go_with_them_however_the_input_is_split(text: str, shown: str) -> None:
    """Found by hypothesis: ``^^^^^^`` then two blanks fed one at a time left one blank as text. Carets that
    open no block at a line start go with the blanks after them; carets further on in the line are prose."""
    events = assert_same_in_all_chunkings(_factory(), text)
    assert "".join(e.text for e in events if isinstance(e, Text)) == shown
