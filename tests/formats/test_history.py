"""Tests for proxy.formats.history: tool calls/results as text, and the system prompt merge."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from toolshim.formats import FORMATS, ToolCallRecord, ToolChoice, ToolFormat, get_format
from toolshim.formats.history import content_text, merge_system_prompt, render_history

from tests.formats.harness import feed_chunks, summarize
from tests.formats.tools import TOOLS

HERMES = get_format("hermes")
ALL_FORMATS = sorted(FORMATS)


def call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris and Rome? Also find docs on tools."},
    {
        "role": "assistant",
        "content": "Checking both.",
        "tool_calls": [
            call("c1", "get_weather", {"city": "Paris"}),
            call("c2", "get_weather", {"city": "Rome", "unit": "celsius"}),
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "18 C, sunny"},
    {
        "role": "tool",
        "tool_call_id": "c2",
        "content": [{"type": "text", "text": "22 C"}, {"type": "text", "text": "dry"}],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("c3", "search_docs", {"query": "tools", "tags": ["a"]})],
    },
    {"role": "tool", "tool_call_id": "c3", "content": "3 hits"},
    {"role": "user", "content": [{"type": "text", "text": "thanks"}, {"type": "image_url", "image_url": {"url": "x"}}]},
]


def assert_plain(messages: list[dict[str, Any]]) -> None:
    """What every rendered history must be: no tool role/keys, string assistant content."""
    for message in messages:
        assert message["role"] not in ("tool", "function")
        assert "tool_calls" not in message and "function_call" not in message
        if message["role"] == "assistant":
            assert isinstance(message["content"], str)


def test_hermes_conversation_exact() -> None:
    out = render_history(HERMES, CONVERSATION)
    first_calls = HERMES.render_calls(
        [
            ToolCallRecord("c1", "get_weather", '{"city": "Paris"}'),
            ToolCallRecord("c2", "get_weather", '{"city": "Rome", "unit": "celsius"}'),
        ]
    )
    second_calls = HERMES.render_calls([ToolCallRecord("c3", "search_docs", '{"query": "tools", "tags": ["a"]}')])
    assert out == [
        {"role": "system", "content": "Be brief."},
        CONVERSATION[1],
        {"role": "assistant", "content": "Checking both.\n" + first_calls},
        {
            "role": "user",
            "content": HERMES.render_result("get_weather", "18 C, sunny")
            + "\n"
            + HERMES.render_result("get_weather", "22 C\ndry"),
        },
        {"role": "assistant", "content": second_calls},
        {"role": "user", "content": HERMES.render_result("search_docs", "3 hits")},
        CONVERSATION[-1],
    ]


@pytest.mark.parametrize("name", ALL_FORMATS)
def test_any_format_gives_plain_messages_and_keeps_input(name: str) -> None:
    before = copy.deepcopy(CONVERSATION)
    out = render_history(get_format(name), CONVERSATION)
    assert CONVERSATION == before
    assert_plain(out)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "assistant", "user", "user"]
    assert all(o is not i for o in out for i in CONVERSATION)
    out[0]["content"] = "changed"
    assert CONVERSATION == before


@pytest.mark.parametrize("name", ALL_FORMATS)
def test_rendered_assistant_calls_parse_back(name: str) -> None:
    """The history shows the model its own calls in the syntax its parser reads."""
    fmt = get_format(name)
    out = render_history(fmt, CONVERSATION)
    for rendered, original in ((out[2], CONVERSATION[2]), (out[4], CONVERSATION[5])):
        calls = original["tool_calls"]
        parser = fmt.new_parser(TOOLS, max_calls=len(calls))
        summary = summarize(feed_chunks(lambda p=parser: p, [rendered["content"]]))
        expected = [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])} for c in calls]
        assert summary["calls"] == expected
        assert summary["malformed"] == 0


@pytest.mark.parametrize("name", ALL_FORMATS)
def test_results_keep_their_pairing_by_id(name: str) -> None:
    fmt = get_format(name)
    messages = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call("a", "get_weather", {"city": "X"}), call("b", "search_docs", {"query": "q"})],
        },
        {"role": "tool", "tool_call_id": "b", "content": "docs"},
        {"role": "tool", "tool_call_id": "a", "content": "weather"},
    ]
    out = render_history(fmt, messages)
    assert out[1] == {
        "role": "user",
        "content": fmt.render_result("search_docs", "docs") + "\n" + fmt.render_result("get_weather", "weather"),
    }


def test_unpaired_result_uses_its_name_then_the_last_call() -> None:
    messages = [
        {"role": "assistant", "tool_calls": [call("a", "get_weather", {"city": "X"})]},
        {"role": "tool", "tool_call_id": "zzz", "name": "search_docs", "content": "named"},
        {"role": "tool", "tool_call_id": "zzz", "content": "unnamed"},
    ]
    out = render_history(HERMES, messages)
    assert out[1]["content"] == (
        HERMES.render_result("search_docs", "named") + "\n" + HERMES.render_result("get_weather", "unnamed")
    )


def test_result_without_any_call_gets_a_generic_name() -> None:
    out = render_history(HERMES, [{"role": "tool", "tool_call_id": "x", "content": "orphan"}])
    assert out == [{"role": "user", "content": HERMES.render_result("tool", "orphan")}]


def test_legacy_function_call_and_function_role() -> None:
    messages = [
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
        },
        {"role": "function", "name": "get_weather", "content": "cold"},
        {"role": "user", "content": "ok"},
    ]
    out = render_history(HERMES, messages)
    assert out == [
        {"role": "assistant", "content": HERMES.render_calls([ToolCallRecord("", "get_weather", '{"city": "Oslo"}')])},
        {"role": "user", "content": HERMES.render_result("get_weather", "cold")},
        {"role": "user", "content": "ok"},
    ]


def test_arguments_given_as_object_are_serialized() -> None:
    message = {
        "role": "assistant",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Lima"}}}
        ],
    }
    out = render_history(HERMES, [message])
    assert out[0]["content"] == HERMES.render_calls([ToolCallRecord("a", "get_weather", '{"city": "Lima"}')])


@pytest.mark.parametrize(
    ("content", "expected_prefix"),
    [
        ("Let me check.", "Let me check.\n"),
        ("Line\n", "Line\n"),
        ("", ""),
        (None, ""),
        ([{"type": "text", "text": "Part A"}, {"type": "text", "text": "Part B"}], "Part A\nPart B\n"),
    ],
)
def test_assistant_text_then_calls(content: Any, expected_prefix: str) -> None:
    message = {"role": "assistant", "content": content, "tool_calls": [call("a", "get_weather", {"city": "X"})]}
    rendered = HERMES.render_calls([ToolCallRecord("a", "get_weather", '{"city": "X"}')])
    assert render_history(HERMES, [message]) == [{"role": "assistant", "content": expected_prefix + rendered}]


def test_empty_or_null_tool_calls_are_dropped() -> None:
    messages = [
        {"role": "assistant", "content": "hi", "tool_calls": []},
        {"role": "assistant", "content": None, "tool_calls": None, "name": "bot"},
        {"role": "assistant", "content": None},
    ]
    assert render_history(HERMES, messages) == [
        {"role": "assistant", "content": "hi"},
        {"role": "assistant", "content": "", "name": "bot"},
        {"role": "assistant", "content": ""},
    ]


def test_other_messages_pass_through_untouched() -> None:
    messages = [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}], "name": "bob"},
        {"role": "developer", "content": "dev"},
        {"role": "assistant", "content": "plain"},
    ]
    assert render_history(HERMES, messages) == messages


def test_content_text_flattens_parts() -> None:
    assert content_text(None) == ""
    assert content_text("x") == "x"
    parts = [
        {"type": "text", "text": "a"},
        {"type": "refusal", "refusal": "no"},
        {"type": "image_url", "image_url": {}},
        {"type": "input_text", "text": "b"},
        "c",
    ]
    assert content_text(parts) == "a\nno\n[image_url]\nb\nc"


# ---- merge_system_prompt ---------------------------------------------------------------------------


PROMPT = "You can call tools."


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [{"role": "user", "content": "hi"}],
            [{"role": "system", "content": PROMPT}, {"role": "user", "content": "hi"}],
        ),
        (
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
            [{"role": "system", "content": "Be brief.\n\n" + PROMPT}, {"role": "user", "content": "hi"}],
        ),
        ([{"role": "system", "content": "Be brief.\n\n"}], [{"role": "system", "content": "Be brief.\n\n" + PROMPT}]),
        ([{"role": "developer", "content": "Dev."}], [{"role": "developer", "content": "Dev.\n\n" + PROMPT}]),
        ([{"role": "system", "content": None}], [{"role": "system", "content": PROMPT}]),
        ([{"role": "system", "content": "  "}], [{"role": "system", "content": PROMPT}]),
        (
            [{"role": "system", "content": [{"type": "text", "text": "A"}]}],
            [{"role": "system", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "\n\n" + PROMPT}]}],
        ),
        ([{"role": "system", "content": []}], [{"role": "system", "content": [{"type": "text", "text": PROMPT}]}]),
        (
            [
                {"role": "user", "content": "u"},
                {"role": "system", "content": "late"},
                {"role": "system", "content": "2nd"},
            ],
            [
                {"role": "user", "content": "u"},
                {"role": "system", "content": "late\n\n" + PROMPT},
                {"role": "system", "content": "2nd"},
            ],
        ),
        ([], [{"role": "system", "content": PROMPT}]),
    ],
)
def test_merge_system_prompt(messages: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    before = copy.deepcopy(messages)
    assert merge_system_prompt(messages, PROMPT) == expected
    assert messages == before


def test_merge_empty_prompt_is_a_copy() -> None:
    messages = [{"role": "system", "content": "s"}]
    out = merge_system_prompt(messages, "")
    assert out == messages and out[0] is not messages[0]


@pytest.mark.parametrize("name", ALL_FORMATS)
def test_history_then_prompt_pipeline(name: str) -> None:
    fmt: ToolFormat = get_format(name)
    prompt = fmt.render_tools(TOOLS, ToolChoice(), False)
    out = merge_system_prompt(render_history(fmt, CONVERSATION), prompt)
    assert_plain(out)
    assert out[0]["content"].startswith("Be brief.\n\n") and out[0]["content"].endswith(prompt)
