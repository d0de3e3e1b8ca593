"""An output that starts inside a thought (``formats/_thought.py``), for every registered format.

The chat template wrote ``<think>``; the model writes its thought, ``</think>``, then the answer or a
call in the format's syntax. Every case runs whole, one character at a time and in seeded random
splits (``assert_same_in_all_chunkings``), plus a hypothesis property over arbitrary splits.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolshim.formats import FORMATS, Reasoning, Text, ToolCallRecord, get_format
from toolshim.formats._thought import THOUGHT_HOLD, ThoughtStart, set_thinking
from toolshim.formats.base import StreamParser

from tests.formats.harness import assert_same_in_all_chunkings, feed_chunks, merge, summarize
from tests.formats.tools import TOOLS

FORMAT_NAMES = sorted(FORMATS)
THOUGHT = 'The user wants the weather in Paris.\nI should call the tool, with "city" set.'


def call(fmt: str) -> str:
    return get_format(fmt).render_calls([ToolCallRecord("c1", "get_weather", json.dumps({"city": "Paris"}))])


def parser(fmt: str, mode: str = "auto") -> StreamParser:
    return set_thinking(get_format(fmt).new_parser(TOOLS, 1), mode)  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("mode", ["auto", "template"])
def test_thought_then_call(fmt: str, mode: str) -> None:
    output = THOUGHT + "\n</think>\n\n" + call(fmt)
    summary = summarize(assert_same_in_all_chunkings(lambda: parser(fmt, mode), output))
    assert summary["reasoning"].strip() == THOUGHT
    assert summary["calls"] == [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    assert summary["content"] == "" and summary["malformed"] == 0


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_thought_then_answer(fmt: str) -> None:
    answer = "Final Answer: It is sunny." if fmt == "react" else "It is sunny."
    events = assert_same_in_all_chunkings(lambda: parser(fmt), "Easy one.</think>\n" + answer)
    assert summarize(events)["reasoning"] == "Easy one." and summarize(events)["content"] == "It is sunny."


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_opening_tag_first_is_the_formats_business(fmt: str) -> None:
    """``<think>`` before any ``</think>``: the format's own think handling, unchanged."""
    output = "<think>a</think>b"
    assert merge(feed_chunks(lambda: parser(fmt), [output])) == merge(
        feed_chunks(lambda: get_format(fmt).new_parser(TOOLS, 1), [output])
    )


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_auto_hold_is_bounded(fmt: str) -> None:
    """A plain answer is held at most THOUGHT_HOLD characters; a ``</think>`` later is not a leading thought."""
    p = parser(fmt)
    assert p.feed("x" * (THOUGHT_HOLD - 1)) == []
    assert p.feed("xx")  # decided: released to the format's parser
    events = merge([*p.feed("</think>y"), *p.close()])
    assert not any(isinstance(e, Reasoning) for e in events)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_off_and_plain_text_unchanged(fmt: str) -> None:
    assert not isinstance(parser(fmt, "off"), ThoughtStart)
    assert not isinstance(get_format(fmt).new_parser(TOOLS, 1), ThoughtStart)  # the formats never hold a thought
    events = assert_same_in_all_chunkings(lambda: parser(fmt), "Just an answer, no thought.")
    assert events == [Text("Just an answer, no thought.")]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_template_mode_streams_reasoning_at_once(fmt: str) -> None:
    p = parser(fmt, "template")
    assert p.feed("<think>\nstep one, ") == [Reasoning("step one, ")]
    assert p.feed("step two</th") == [Reasoning("step two")]  # only the partial tag waits
    assert summarize([*p.feed("ink>\n\n" + call(fmt)), *p.close()])["calls"]
    unclosed = summarize(assert_same_in_all_chunkings(lambda: parser(fmt, "template"), "still thinking"))
    assert unclosed["reasoning"] == "still thinking" and unclosed["content"] == ""


@settings(max_examples=60, deadline=None)
@given(
    fmt=st.sampled_from(FORMAT_NAMES),
    thought=st.text("ab <>/think\n", max_size=40),
    rest=st.text("ab <>/think\n", max_size=40),
    cuts=st.lists(st.integers(0, 90), max_size=6),
)
def test_property_any_split_same_events(fmt: str, thought: str, rest: str, cuts: list[int]) -> None:
    text = thought + "</think>" + rest
    points = sorted({min(c, len(text)) for c in cuts})
    parts = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    for mode in ("auto", "template"):
        assert merge(feed_chunks(lambda m=mode: parser(fmt, m), parts)) == merge(
            feed_chunks(lambda m=mode: parser(fmt, m), [text])
        )
