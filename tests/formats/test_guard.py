"""``_guard`` (issue 18): fenced call blocks, invented tool results, and what stays as it was."""

from __future__ import annotations

import json

import pytest
from toolshim.formats import FORMATS, get_format
from toolshim.formats.base import Text, ToolCallEnd, ToolCallRecord
from toolshim.formats.plain import plain_text

from tests.formats.harness import assert_same_in_all_chunkings, only, parse, summarize
from tests.formats.tools import TOOLS

FORMAT_NAMES = sorted(FORMATS)


def rendered(fmt: str, name: str, args: dict[str, object]) -> str:
    return get_format(fmt).render_calls([ToolCallRecord("c1", name, json.dumps(args))])


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_a_fence_inside_a_fenced_call_stays_in_its_argument(fmt: str) -> None:
    """Only the closing fence of the dropped one goes: a ```python fence inside an argument is kept."""
    body = "```python\nprint(1)\n```\n"
    text = "Saving.\n```\n" + rendered(fmt, "write_file", {"path": "a.md", "content": body}) + "\n```\nSaved."
    summary = summarize(assert_same_in_all_chunkings(lambda: get_format(fmt).new_parser(TOOLS, 1), text))
    assert summary["calls"] == [{"name": "write_file", "arguments": {"path": "a.md", "content": body}}]
    assert summary["content"].split() == ["Saving.", "Saved."]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_prose_after_a_call_is_not_held_when_it_opens_no_result(fmt: str) -> None:
    parser = get_format(fmt).new_parser(TOOLS, 1)
    events = parser.feed(rendered(fmt, "get_weather", {"city": "Paris"}) + "\nBye")
    assert only(events, ToolCallEnd) and "Bye" in "".join(e.text for e in only(events, Text))


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_a_line_that_only_mentions_a_result_is_text(fmt: str) -> None:
    events = parse(get_format(fmt), rendered(fmt, "get_weather", {"city": "Paris"}) + "\nThe result: sunny.")
    assert "The result: sunny." in "".join(e.text for e in only(events, Text))


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_plain_text_keeps_the_words_of_a_broken_block(fmt: str) -> None:
    words = plain_text(rendered(fmt, "get_weather", {"town": "Paris"}))
    assert "town" in words and "Paris" in words
    assert not any(mark in words for mark in ("<", ">", "```", "^^^", "{", '"', "Action"))


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        # what the local model wrote on BFCL, as the client gets it when no call could be made of it
        (
            "<function=get_traffic_info>\n<parameter=start_location=Boston>\n",
            "get_traffic_info\nstart_location: Boston",
        ),
        ('[get_weather(city="Paris", unit=celsius)]', "get_weather\ncity: Paris\nunit: celsius"),
        ('calculator\n{"expression":"17 * 23","result":391}', "calculator\nexpression: 17 * 23\nresult: 391"),
        ("<tool_call>\n<function=get_weather>\n<parameter=ci", "get_weather"),  # a tag cut off at the end
        ("see http://example.com/a", "see http://example.com/a"),
    ],
)
def test_plain_text_of_what_models_wrote(raw: str, words: str) -> None:
    assert plain_text(raw) == words
