"""``ProseParser``: the output of an emulated turn without tools, as text plus ``<think>`` reasoning.

Every case runs whole, one character at a time and in seeded random splits
(``assert_same_in_all_chunkings``); call markup of any format stays text, never a call.
"""

from __future__ import annotations

import pytest
from toolshim.formats._thought import set_thinking
from toolshim.formats.prose import ProseParser

from tests.formats.harness import assert_same_in_all_chunkings, summarize

CASES = [
    ("Plain answer.", "Plain answer.", ""),
    ("<think>Why not.</think>\nAnswer.", "Answer.", "Why not."),
    ("Before <think>mid</think> after", "Before  after", "mid"),
    ("Stray </think>close", "Stray close", ""),
    ("`<think>` is a tag", "`<think>` is a tag", ""),
    ("```\n<think>x</think>\n```", "```\n<think>x</think>\n```", ""),
    (
        '<tool_call>{"name": "f", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "f", "arguments": {}}</tool_call>',
        "",
    ),
    ("[f(a=1)]", "[f(a=1)]", ""),
    ("<think>cut short", "", "cut short"),
    ("ends with <thi", "ends with <thi", ""),
]


@pytest.mark.parametrize(("output", "content", "reasoning"), CASES)
def test_text_and_thinking(output: str, content: str, reasoning: str) -> None:
    summary = summarize(assert_same_in_all_chunkings(ProseParser, output))
    assert (summary["content"], summary["reasoning"]) == (content, reasoning)
    assert summary["calls"] == [] and summary["malformed"] == 0


def test_an_output_starting_inside_a_thought_with_the_rule_s_thinking() -> None:
    summary = summarize(
        assert_same_in_all_chunkings(lambda: set_thinking(ProseParser(), "template"), "Hm.</think>\nHi")
    )
    assert (summary["content"], summary["reasoning"]) == ("Hi", "Hm.")
