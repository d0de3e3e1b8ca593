"""Conversation policies end to end: the OpenAI SDK → proxy → a scripted upstream, and the pure helpers.

Each policy gets a realistic agent history (a coding agent chasing a failing test: user, assistant
``tool_calls``, ``tool`` results, ...) and two sets of asserts: what the upstream received (tools
withdrawn, the instruction in the system message, the tools trimmed, results shortened) and what the
client got back (a text answer, a structured call, a 504, a clean finish), plus the metric sample
``toolshim_policy_actions_total{model=<rule match>, policy}``. Negative cases check the thresholds,
the resets and the documented defaults.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st
from openai.lib.streaming.chat import ChatCompletionStreamState
from toolshim.chat.policies import (
    CUT_MARKER,
    _fair_shares,
    apply_policies,
    limit_tool_outputs,
    repeated_call,
    shorten,
    trailing_tool_errors,
    trailing_tool_turns,
)
from toolshim.chat.turn import TOOL_FIELDS, ChatTurn
from toolshim.config.rules import ModelRule
from toolshim.formats import ToolCallRecord, get_format

from tests.checked import checked_openai
from tests.deltas import check_deltas, parse_sse, streamed_calls
from tests.fakes import FakeUpstream, Reply, completion, text_stream

MODEL, MATCH = "agent-small", "agent-*"  # the metric label is the rule's match, never the model name
SYSTEM = "You are a coding agent working in the repository at /repo."
TASK = "The test suite fails on test_parse_dates. Find out why and fix it."
ANSWER = "test_parse_dates fails because parse_dates() splits on '/', but the fixture uses ISO dates."
MARKER_RE = re.compile(r"\n\[\.\.\. toolshim removed (\d+) characters of this tool output \.\.\.\]\n")
ERROR_PATTERN = ModelRule(match="x", upstream="u").tool_error_pattern


def _tool(name: str, description: str, **params: str) -> dict[str, Any]:
    properties = {key: {"type": "string", "description": desc} for key, desc in params.items()}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(params)},
        },
    }


TOOLS = [
    _tool("read_file", "Read a UTF-8 file of the repository.", path="path relative to the repository"),
    _tool("search_code", "Search the code with a regular expression.", query="the regular expression"),
    _tool("run_tests", "Run pytest on a file or folder.", target="test file or folder"),
    _tool("write_file", "Replace the whole content of a file.", path="the file", content="the new text"),
    _tool("list_dir", "List the entries of a folder.", path="the folder"),
    _tool("git_diff", "Show the uncommitted changes."),
]
DESCRIPTIONS = [t["function"]["description"] for t in TOOLS]  # appear only in tool instructions
DATES_PY = "\n".join(
    [
        "from datetime import date",
        "",
        "def parse_dates(text: str) -> list[date]:",
        "    day, month, year = text.split('/')",
        "    return [date(int(year), int(month), int(day))]",
    ]
)
PYTEST_FAIL = (
    "F............\nFAILED tests/test_dates.py::test_parse_dates - ValueError: not enough values to "
    "unpack\n1 failed, 12 passed in 0.21s"
)


class History:
    """An OpenAI-format agent conversation, built turn by turn."""

    def __init__(self, task: str = TASK) -> None:
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
        self._ids = 0

    def call(self, name: str, args: dict[str, Any] | str, result: str, text: str | None = None) -> History:
        """One assistant turn with one call, then its result."""
        return self.parallel((name, args, result), text=text)

    def parallel(self, *calls: tuple[str, dict[str, Any] | str, str], text: str | None = None) -> History:
        """One assistant turn with several calls, then their results in order."""
        records, results = [], []
        for name, args, result in calls:
            self._ids += 1
            call_id = f"call_{self._ids:03d}"
            arguments = args if isinstance(args, str) else json.dumps(args)
            records.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
            results.append({"role": "tool", "tool_call_id": call_id, "content": result})
        self.messages += [{"role": "assistant", "content": text, "tool_calls": records}, *results]
        return self

    def say(self, role: str, text: str) -> History:
        self.messages.append({"role": role, "content": text})
        return self


def exploring(turns: int = 4) -> History:
    """Up to four different tool-only turns, as an agent explores before answering."""
    steps = [
        ("list_dir", {"path": "src"}, "__init__.py\ndates.py\nparser.py"),
        ("search_code", {"query": "def parse_dates"}, "src/dates.py:3: def parse_dates(text: str)"),
        ("read_file", {"path": "src/dates.py"}, DATES_PY),
        ("run_tests", {"target": "tests/test_dates.py"}, PYTEST_FAIL),
    ]
    history = History()
    for step in steps[:turns]:
        history.call(*step)
    return history


def rules(mode: str = "native", **options: Any) -> list[dict[str, Any]]:
    return [{"match": MATCH, "upstream": "up", "tool_mode": mode, **options}]


async def ask(proxy: Any, messages: list[dict[str, Any]], stream: bool = False, **kwargs: Any) -> dict[str, Any]:
    """One request through the SDK; streamed answers are merged by the SDK's own accumulator. The raw
    answer the SDK read is checked too (``check_deltas`` / ``check_completion``)."""
    params: dict[str, Any] = {"model": MODEL, "messages": messages, "tools": TOOLS, **kwargs}
    async with checked_openai(proxy.base_url) as client:
        if not stream:
            result = (await client.chat.completions.create(**params)).model_dump()
        else:
            state = ChatCompletionStreamState()
            async for chunk in await client.chat.completions.create(**params, stream=True):
                state.handle_chunk(chunk)
            result = state.get_final_completion().model_dump()
    assert client.transport.check() == 1
    return result


def pieces(text: str, size: int = 9) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def text_reply(mode: str, stream: bool, text: str = ANSWER) -> Reply:
    """The upstream answering with text: JSON for native non-stream, SSE otherwise (emulation streams)."""
    if mode == "native" and not stream:
        return Reply(body=completion(text))
    return Reply(pieces=text_stream(pieces(text)))


def call_reply(mode: str, name: str, args: dict[str, Any]) -> Reply:
    """The upstream answering with one tool call, natively or in the emulated format's syntax."""
    if mode == "native":
        call = {"id": "call_up1", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        return Reply(body=completion(None, tool_calls=[call], finish="tool_calls"))
    text = get_format(mode).render_calls([ToolCallRecord("call_1", name, json.dumps(args))])
    return Reply(pieces=text_stream(pieces(text)))


def actions(proxy: Any) -> dict[str, float]:
    """Every ``toolshim_policy_actions_total`` sample of the rule, by policy."""
    samples = proxy.metrics.policy_actions.collect()[0].samples
    return {
        s.labels["policy"]: s.value
        for s in samples
        if s.name == "toolshim_policy_actions_total" and s.labels["model"] == MATCH
    }


def assert_answer(result: dict[str, Any], text: str = ANSWER) -> None:
    choice = result["choices"][0]
    assert choice["message"]["content"] == text
    assert not choice["message"].get("tool_calls")
    assert choice["finish_reason"] == "stop"


def assert_call(result: dict[str, Any], name: str, args: dict[str, Any]) -> None:
    choice = result["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    [call] = choice["message"]["tool_calls"]
    assert call["function"]["name"] == name and json.loads(call["function"]["arguments"]) == args


def assert_withdrawn(body: dict[str, Any], mode: str, *instruction: str) -> None:
    """Tools withdrawn for this turn, the instruction after the client's own system text."""
    system = body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith(SYSTEM)
    for words in instruction:
        assert words in system["content"]
    assert "Do not call" in system["content"] or "Stop calling tools" in system["content"]
    if mode == "native":
        assert body["tool_choice"] == "none" and body["tools"] == TOOLS
        assert "parallel_tool_calls" not in body
        return
    assert not set(TOOL_FIELDS) & set(body) and "stop" not in body
    assert not any(d in json.dumps(body["messages"]) for d in DESCRIPTIONS), "tool instructions were sent"


def assert_offered(body: dict[str, Any], mode: str) -> None:
    """Nothing acted: the tools reach the model as usual, the system text is the client's."""
    if mode == "native":
        assert body["tools"] == TOOLS and "tool_choice" not in body
        assert body["messages"][0] == {"role": "system", "content": SYSTEM}
        return
    system = body["messages"][0]["content"]
    assert all(d in system for d in DESCRIPTIONS) and body["stop"]
    assert "Do not call" not in system and "Stop calling tools" not in system


# ---- consecutive tool turns ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["native", "hermes", "react"])
@pytest.mark.parametrize("stream", [False, True])
async def test_tool_turn_limit_asks_for_an_answer(start_proxy, fake_upstream, mode: str, stream: bool) -> None:
    proxy = await start_proxy(models=rules(mode, max_consecutive_tool_turns=4))
    fake_upstream.script(text_reply(mode, stream))
    result = await ask(proxy, exploring(4).messages, stream, parallel_tool_calls=True)
    assert_withdrawn(fake_upstream.requests[-1], mode, "called tools 4 times in a row", "answer the user")
    assert_answer(result)
    assert actions(proxy) == {"max_consecutive_tool_turns": 1}


@pytest.mark.parametrize("mode", ["native", "hermes"])
async def test_tool_turns_below_the_limit_keep_the_tools(start_proxy, fake_upstream, mode: str) -> None:
    proxy = await start_proxy(models=rules(mode, max_consecutive_tool_turns=4))
    fake_upstream.script(call_reply(mode, "run_tests", {"target": "tests/test_dates.py"}))
    result = await ask(proxy, exploring(3).messages)
    assert_offered(fake_upstream.requests[-1], mode)
    assert_call(result, "run_tests", {"target": "tests/test_dates.py"})
    assert actions(proxy) == {}


@pytest.mark.parametrize(
    "history",
    [
        pytest.param(
            exploring(4)
            .say("assistant", ANSWER)
            .say("user", "Now fix it.")
            .call("write_file", {"path": "src/dates.py", "content": "..."}, "ok"),
            id="new-user-message",
        ),
        # As the issue words it: only turns that were *only* tool calls count, so a narrated turn ends the streak.
        pytest.param(
            exploring(2)
            .call("read_file", {"path": "src/dates.py"}, DATES_PY, text="Let me read the code.")
            .call("run_tests", {"target": "tests"}, PYTEST_FAIL),
            id="turn-with-text",
        ),
    ],
)
async def test_tool_turn_streak_restarts(start_proxy, fake_upstream, history: History) -> None:
    proxy = await start_proxy(models=rules(max_consecutive_tool_turns=3))
    fake_upstream.script(text_reply("native", False))
    await ask(proxy, history.messages)
    assert_offered(fake_upstream.requests[-1], "native")
    assert actions(proxy) == {}


async def test_tool_turn_limit_is_off_by_default(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=rules())
    history = History()
    for i in range(15):  # 15 different, successful calls: no other guard applies either
        history.call("read_file", {"path": f"src/module_{i}.py"}, f"# module {i}\nVALUE = {i}\n")
    fake_upstream.script(text_reply("native", False))
    await ask(proxy, history.messages)
    assert_offered(fake_upstream.requests[-1], "native")
    assert actions(proxy) == {}


async def test_tool_choice_none_from_the_client_is_left_alone(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=rules(max_consecutive_tool_turns=2))
    fake_upstream.script(text_reply("native", False))
    await ask(proxy, exploring(4).messages, tool_choice="none")
    body = fake_upstream.requests[-1]
    assert body["tool_choice"] == "none" and body["messages"][0] == {"role": "system", "content": SYSTEM}
    assert actions(proxy) == {}


# ---- repeated calls -------------------------------------------------------------------------------


def rereading(times: int = 3) -> History:
    """The agent reads the same file again and again (the arguments spelled differently each time)."""
    history = History().call("search_code", {"query": "parse_dates"}, "src/dates.py:3")
    for args in ['{"path": "src/dates.py"}', '{ "path":"src/dates.py" }', {"path": "src/dates.py"}][:times]:
        history.call("read_file", args, DATES_PY)
    return history


@pytest.mark.parametrize("mode", ["native", "hermes"])
@pytest.mark.parametrize("stream", [False, True])
async def test_repeated_call_asks_for_an_answer(start_proxy, fake_upstream, mode: str, stream: bool) -> None:
    proxy = await start_proxy(models=rules(mode))  # on by default, at 3
    fake_upstream.script(text_reply(mode, stream))
    result = await ask(proxy, rereading(3).messages, stream)
    assert_withdrawn(fake_upstream.requests[-1], mode, "`read_file`", "same arguments 3 times", "explain")
    assert_answer(result)
    assert actions(proxy) == {"max_repeated_calls": 1}


@pytest.mark.parametrize(
    "history",
    [
        pytest.param(rereading(2), id="twice"),
        pytest.param(
            History()
            .call("read_file", {"path": "a.py"}, "a")
            .call("read_file", {"path": "b.py"}, "b")
            .call("read_file", {"path": "c.py"}, "c"),
            id="other-arguments",
        ),
        pytest.param(
            rereading(2)
            .say("assistant", "The file has not changed.")
            .say("user", "Read it once more.")
            .call("read_file", {"path": "src/dates.py"}, DATES_PY),
            id="user-asked-again",
        ),
    ],
)
async def test_calls_that_are_not_a_loop_keep_the_tools(start_proxy, fake_upstream, history: History) -> None:
    proxy = await start_proxy(models=rules())
    fake_upstream.script(call_reply("native", "run_tests", {"target": "tests"}))
    result = await ask(proxy, history.messages)
    assert_offered(fake_upstream.requests[-1], "native")
    assert_call(result, "run_tests", {"target": "tests"})
    assert actions(proxy) == {}


async def test_repeated_call_limit_is_configurable(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(
        models=[*rules(max_repeated_calls=None), {**rules(max_repeated_calls=2)[0], "match": "strict-*"}]
    )
    fake_upstream.script(text_reply("native", False))
    await ask(proxy, rereading(3).messages)
    assert_offered(fake_upstream.requests[-1], "native")
    await ask(proxy, rereading(2).messages, model="strict-model")
    assert_withdrawn(fake_upstream.requests[-1], "native", "same arguments 2 times")
    assert actions(proxy) == {}
    assert proxy.metrics.policy_actions.labels("strict-*", "max_repeated_calls")._value.get() == 1


# ---- consecutive tool errors ----------------------------------------------------------------------


def failing(errors: int = 3) -> History:
    """The test runner is missing and a config file too: each call errors."""
    history = exploring(2)
    steps = [
        ("run_tests", {"target": "tests"}, "Error: pytest: command not found"),
        (
            "read_file",
            {"path": "setup.cfg"},
            'Traceback (most recent call last):\n  File "tools.py", line 8, in read_file\nFileNotFoundError: setup.cfg',
        ),
        ("run_tests", {"target": "tests/test_dates.py"}, "error: exit status 127"),
    ]
    for step in steps[:errors]:
        history.call(*step)
    return history


@pytest.mark.parametrize("mode", ["native", "react"])
@pytest.mark.parametrize("stream", [False, True])
async def test_tool_errors_ask_to_report_the_problem(start_proxy, fake_upstream, mode: str, stream: bool) -> None:
    proxy = await start_proxy(models=rules(mode))  # on by default, at 3
    report = "I cannot run the tests: pytest is not installed (exit status 127)."
    fake_upstream.script(text_reply(mode, stream, report))
    result = await ask(proxy, failing(3).messages, stream)
    assert_withdrawn(fake_upstream.requests[-1], mode, "The last 3 tool calls failed", "what went wrong")
    assert_answer(result, report)
    assert actions(proxy) == {"max_consecutive_tool_errors": 1}


@pytest.mark.parametrize(
    "history",
    [
        pytest.param(failing(2), id="two-errors"),
        pytest.param(failing(3).call("list_dir", {"path": "."}, "setup.py\nsrc\ntests"), id="then-a-success"),
        pytest.param(
            failing(3)
            .say("assistant", "pytest is missing.")
            .say("user", "I installed it, go on.")
            .call("run_tests", {"target": "tests"}, "Error: tests/conftest.py: syntax error"),
            id="user-reset",
        ),
    ],
)
async def test_errors_below_the_limit_keep_the_tools(start_proxy, fake_upstream, history: History) -> None:
    proxy = await start_proxy(models=rules())
    fake_upstream.script(call_reply("native", "list_dir", {"path": "tests"}))
    result = await ask(proxy, history.messages)
    assert_offered(fake_upstream.requests[-1], "native")
    assert_call(result, "list_dir", {"path": "tests"})
    assert actions(proxy) == {}


async def test_error_pattern_and_limit_are_configurable(start_proxy, fake_upstream) -> None:
    custom = {**rules(max_consecutive_tool_errors=2, tool_error_pattern=r'"status":\s*"failed"')[0], "match": "json-*"}
    proxy = await start_proxy(models=[*rules(max_consecutive_tool_errors=None), custom])
    fake_upstream.script(text_reply("native", False))
    await ask(proxy, failing(3).messages)  # the guard is off for this rule
    assert_offered(fake_upstream.requests[-1], "native")
    history = exploring(2).call("run_tests", {"target": "tests"}, '{"status": "failed", "exit": 127}')
    history.call("run_tests", {"target": "tests/test_dates.py"}, '{"status": "failed", "exit": 127}')
    await ask(proxy, history.messages, model="json-model")
    assert_withdrawn(fake_upstream.requests[-1], "native", "The last 2 tool calls failed")
    assert proxy.metrics.policy_actions.labels("json-*", "max_consecutive_tool_errors")._value.get() == 1
    assert actions(proxy) == {}


# ---- tool budget ----------------------------------------------------------------------------------


def names(tools: Sequence[dict[str, Any]]) -> list[str]:
    return [t["function"]["name"] for t in tools]


async def test_budget_keeps_priority_then_recent_then_request_order(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=rules(max_tools=5, tool_priority=["run_tests", "deploy"]))
    history = History().call("git_diff", {}, "").call("list_dir", {"path": "src"}, "dates.py")
    history.call("read_file", {"path": "src/dates.py"}, DATES_PY)  # most recent first: read_file, list_dir, git_diff
    fake_upstream.script(call_reply("native", "run_tests", {"target": "tests"}))
    result = await ask(proxy, history.messages)
    # run_tests (priority), read_file, list_dir, git_diff (recent use), search_code (request order); sent in
    # the client's order. write_file, unused and last in the request, is the one left out.
    assert names(fake_upstream.requests[-1]["tools"]) == [
        "read_file",
        "search_code",
        "run_tests",
        "list_dir",
        "git_diff",
    ]
    assert_call(result, "run_tests", {"target": "tests"})
    assert actions(proxy) == {"max_tools": 1}


async def test_relevance_order_lists_and_keeps_first_the_tools_the_task_points_at(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=rules("hermes", max_tools=2, tool_order="relevance"))
    fake_upstream.script(call_reply("hermes", "run_tests", {"target": "tests"}))
    result = await ask(proxy, History().messages)
    system = fake_upstream.requests[-1]["messages"][0]["content"]
    # "The test suite fails ..." points at run_tests; the budget's second place goes by request order.
    assert system.index("Run pytest on a file or folder.") < system.index("Read a UTF-8 file of the repository.")
    assert "Search the code" not in system
    assert_call(result, "run_tests", {"target": "tests"})
    assert actions(proxy) == {"max_tools": 1}


TWO_TASKS = [{"role": "user", "content": "Show the uncommitted changes in git, then run the tests."}]


@pytest.mark.parametrize(
    ("parallel", "first"),
    [(True, "Show the uncommitted changes."), (None, "Run pytest on a file or folder.")],
    ids=["parallel-asked-order", "one-call-best-match"],
)
async def test_several_tasks_are_listed_in_the_order_asked_when_several_calls_may_come(
    start_proxy, fake_upstream, parallel: bool | None, first: str
) -> None:
    """git_diff is asked for first; run_tests shares more of the request's words, so ranks first."""
    proxy = await start_proxy(models=rules("pythonic", tool_order="relevance"))
    fake_upstream.script(call_reply("pythonic", "git_diff", {}))
    extra = {} if parallel is None else {"parallel_tool_calls": parallel}
    result = await ask(proxy, TWO_TASKS, **extra)
    system = fake_upstream.requests[-1]["messages"][0]["content"]
    assert min(DESCRIPTIONS, key=system.index) == first and all(d in system for d in DESCRIPTIONS)
    assert_call(result, "git_diff", {})


UNRELATED = "Who wrote the novel Pride and Prejudice?"  # no word of any tool's name, description or parameters


@pytest.mark.parametrize("mode", ["native", "hermes", "pythonic"])
@pytest.mark.parametrize("stream", [False, True])
async def test_an_unrelated_first_request_is_answered_without_tools(
    start_proxy, fake_upstream, mode: str, stream: bool
) -> None:
    proxy = await start_proxy(models=rules(mode, offer_tools="when_related"))
    fake_upstream.script(text_reply(mode, stream, "Jane Austen."))
    result = await ask(proxy, [{"role": "user", "content": UNRELATED}], stream, parallel_tool_calls=True)
    body = fake_upstream.requests[-1]
    if mode == "native":
        assert body["tool_choice"] == "none" and body["tools"] == TOOLS and "parallel_tool_calls" not in body
    else:
        assert not set(TOOL_FIELDS) & set(body) and "stop" not in body and "grammar" not in body
        assert not any(d in json.dumps(body["messages"]) for d in DESCRIPTIONS), "tool instructions were sent"
    assert_answer(result, "Jane Austen.")
    assert actions(proxy) == {"offer_tools": 1}


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": "Show me the code of parse_dates."}],  # "code": search_code's description
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": UNRELATED}],  # "repository": read_file
        [
            {"role": "user", "content": UNRELATED},
            {"role": "assistant", "content": "Jane Austen."},
            {"role": "user", "content": "Fine, go on."},
        ],  # the conversation has begun
    ],
    ids=["related", "system-prompt-related", "later-turn"],
)
async def test_a_related_or_later_request_keeps_the_tools(start_proxy, fake_upstream, messages) -> None:
    proxy = await start_proxy(models=rules("hermes", offer_tools="when_related"))
    fake_upstream.script(call_reply("hermes", "search_code", {"query": "parse_dates"}))
    result = await ask(proxy, messages)
    assert all(d in fake_upstream.requests[-1]["messages"][0]["content"] for d in DESCRIPTIONS)
    assert_call(result, "search_code", {"query": "parse_dates"})
    assert actions(proxy) == {}


@pytest.mark.parametrize(
    ("mode", "stream"), [("native", False), ("hermes", False), ("hermes", True), ("pythonic", True)]
)
async def test_an_opening_request_is_offered_only_the_tools_it_is_related_to(
    start_proxy, fake_upstream, mode: str, stream: bool
) -> None:
    proxy = await start_proxy(models=rules(mode, offer_tools="related"))
    fake_upstream.script(call_reply(mode, "run_tests", {"target": "tests"}))
    result = await ask(proxy, RUN_THE_TESTS, stream, parallel_tool_calls=True)
    body = fake_upstream.requests[-1]
    if mode == "native":
        assert names(body["tools"]) == ["run_tests"] and body["parallel_tool_calls"] is True
    else:
        sent = json.dumps(body["messages"])
        assert [d for d in DESCRIPTIONS if d in sent] == ["Run pytest on a file or folder."]
    assert_call(result, "run_tests", {"target": "tests"})
    assert actions(proxy) == {"offer_tools": 1}


async def test_tools_are_offered_to_any_request_by_default(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=rules("hermes"))
    fake_upstream.script(call_reply("hermes", "search_code", {"query": "Pride and Prejudice"}))
    result = await ask(proxy, [{"role": "user", "content": UNRELATED}])
    assert all(d in fake_upstream.requests[-1]["messages"][0]["content"] for d in DESCRIPTIONS)
    assert_call(result, "search_code", {"query": "Pride and Prejudice"})
    assert actions(proxy) == {}


async def test_budget_fills_up_in_request_order(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=rules(max_tools=2))
    fake_upstream.script(call_reply("native", "search_code", {"query": "parse_dates"}))
    result = await ask(proxy, History().messages)
    assert fake_upstream.requests[-1]["tools"] == TOOLS[:2]
    assert_call(result, "search_code", {"query": "parse_dates"})
    assert actions(proxy) == {"max_tools": 1}


@pytest.mark.parametrize("mode", ["native", "hermes"])
async def test_budget_always_keeps_a_forced_tool(start_proxy, fake_upstream, mode: str) -> None:
    proxy = await start_proxy(models=rules(mode, max_tools=2, tool_priority=["read_file", "search_code"]))
    forced = {"type": "function", "function": {"name": "git_diff"}}
    fake_upstream.script(call_reply(mode, "git_diff", {}))
    result = await ask(proxy, History().messages, tool_choice=forced)
    body = fake_upstream.requests[-1]
    if mode == "native":
        assert names(body["tools"]) == ["read_file", "git_diff"] and body["tool_choice"] == forced
    else:
        assert "Show the uncommitted changes." in body["messages"][0]["content"]
    assert_call(result, "git_diff", {})
    assert actions(proxy) == {"max_tools": 1}


async def test_budget_not_reached_leaves_the_tools(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=rules(max_tools=6, tool_priority=["git_diff"]))
    fake_upstream.script(text_reply("native", False))
    await ask(proxy, exploring(2).messages)
    assert_offered(fake_upstream.requests[-1], "native")
    assert actions(proxy) == {}


async def test_emulated_call_to_a_withdrawn_tool_is_an_unknown_tool(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=rules("hermes", max_tools=2, tool_priority=["read_file", "run_tests"]))
    fake_upstream.script(
        call_reply("hermes", "write_file", {"path": "src/dates.py", "content": "x"}),
        call_reply("hermes", "run_tests", {"target": "tests"}),
    )
    result = await ask(proxy, exploring(2).messages, stream=True)
    first, reask = fake_upstream.requests
    system = first["messages"][0]["content"]
    assert "### read_file" in system and "### run_tests" in system
    assert "### write_file" not in system and "### list_dir" not in system
    assert "is not a tool" in reask["messages"][-1]["content"] and "write_file" in reask["messages"][-1]["content"]
    assert_call(result, "run_tests", {"target": "tests"})
    assert "<tool_call" not in (result["choices"][0]["message"]["content"] or "")
    assert actions(proxy) == {"max_tools": 1}
    assert proxy.metrics.reasks.labels(MATCH, "repair")._value.get() == 1


async def test_withdrawn_tool_never_reaches_the_client(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=rules("hermes", max_tools=1, max_repair_retries=0))
    fake_upstream.script(
        Reply(
            pieces=text_stream(
                pieces(
                    'I will write it.\n<tool_call>{"name": "write_file", "arguments": {"path": "a", "content": "b"}}'
                    "</tool_call>"
                )
            )
        )
    )
    result = await ask(proxy, History().messages)
    message = result["choices"][0]["message"]
    assert not message.get("tool_calls") and result["choices"][0]["finish_reason"] == "stop"
    assert message["content"].strip() == "I will write it."
    assert len(fake_upstream.requests) == 1


# ---- tool output limits ---------------------------------------------------------------------------


def listing(name: str, lines: int) -> str:
    """A long tool output whose every line is distinct, so head and tail are recognisable."""
    return "\n".join(f"{name} line {i:05d}: " + "abcdefghij" * 4 for i in range(1, lines + 1))


def check_shortened(new: str, original: str, limit: int) -> None:
    """Head and tail of the original around one marker that counts exactly what was removed."""
    assert len(new) <= limit
    [marker] = list(MARKER_RE.finditer(new))
    head, tail = new[: marker.start()], new[marker.end() :]
    assert head and tail and original.startswith(head) and original.endswith(tail)
    assert len(head) > len(tail), "the head (the start of the output) gets the larger part"
    assert int(marker.group(1)) == len(original) - len(head) - len(tail)


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


async def test_each_result_is_shortened_to_the_limit(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=rules(max_tool_output_chars=1000))
    big_file, big_log = listing("src/dates.py", 120), listing("pytest", 200)
    history = History().call("read_file", {"path": "src/dates.py"}, big_file)
    history.parallel(("list_dir", {"path": "src"}, "dates.py"), ("run_tests", {"target": "tests"}, big_log))
    fake_upstream.script(text_reply("native", True))
    result = await ask(proxy, history.messages, stream=True)
    sent = tool_results(fake_upstream.requests[-1])
    check_shortened(sent["call_001"], big_file, 1000)  # older turns too: the limit is per result
    check_shortened(sent["call_003"], big_log, 1000)
    assert sent["call_002"] == "dates.py"
    assert_answer(result)
    assert actions(proxy) == {"tool_output_limit": 1}


async def test_emulated_history_carries_the_shortened_result(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=rules("hermes", max_tool_output_chars=800))
    big_file = listing("src/dates.py", 100)
    fake_upstream.script(text_reply("hermes", False))
    await ask(proxy, History().call("read_file", {"path": "src/dates.py"}, big_file).messages)
    rendered = fake_upstream.requests[-1]["messages"][-1]
    assert rendered["role"] == "user"
    [result] = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", rendered["content"], re.S)
    check_shortened(result, big_file, 800)
    assert big_file[2000:2100] not in rendered["content"]
    assert actions(proxy) == {"tool_output_limit": 1}


async def test_total_limit_shares_the_latest_turn_fairly(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=rules(max_total_tool_output_chars=4000))
    old, big_file, big_log = listing("old.py", 200), listing("src/parser.py", 150), listing("pytest", 200)
    history = History().call("read_file", {"path": "old.py"}, old)
    history.parallel(
        ("list_dir", {"path": "src"}, "x" * 150),
        ("search_code", {"query": "date"}, "y" * 400),
        ("read_file", {"path": "src/parser.py"}, big_file),
        ("run_tests", {"target": "tests"}, big_log),
    )
    fake_upstream.script(text_reply("native", False))
    result = await ask(proxy, history.messages)
    sent = tool_results(fake_upstream.requests[-1])
    assert sent["call_001"] == old, "older turns are not part of the total"
    assert sent["call_002"] == "x" * 150 and sent["call_003"] == "y" * 400, "small results stay whole"
    share = (4000 - 150 - 400) // 2
    for call_id, original in (("call_004", big_file), ("call_005", big_log)):
        check_shortened(sent[call_id], original, share)
        assert len(sent[call_id]) > share - 10, "a large result gets its whole fair share"
    assert sum(len(sent[f"call_00{i}"]) for i in range(2, 6)) <= 4000
    assert sent["call_005"].endswith(big_log[-60:]), "the last result still fits, with its tail"
    assert_answer(result)
    assert actions(proxy) == {"tool_output_limit": 1}


async def test_per_tool_limits_by_name(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(
        models=rules(max_tool_output_chars=1000, tool_output_limits={"run_tests": 3000, "read_file": 400})
    )
    log, source, hits = listing("pytest", 100), listing("src/dates.py", 40), listing("grep", 30)
    history = History().parallel(
        ("run_tests", {"target": "tests"}, log),
        ("read_file", {"path": "a"}, source),
        ("search_code", {"query": "date"}, hits),
        ("list_dir", {"path": "."}, "a\nb"),
    )
    fake_upstream.script(text_reply("native", False))
    await ask(proxy, history.messages)
    sent = tool_results(fake_upstream.requests[-1])
    check_shortened(sent["call_001"], log, 3000)
    assert len(sent["call_001"]) > 1000, "a per-tool limit overrides the general one, also upwards"
    check_shortened(sent["call_002"], source, 400)
    check_shortened(sent["call_003"], hits, 1000)
    assert sent["call_004"] == "a\nb"


@pytest.mark.parametrize(
    "options",
    [{}, {"max_tool_output_chars": 5000, "max_total_tool_output_chars": 9000}],
    ids=["off-by-default", "under-the-limits"],
)
async def test_outputs_within_limits_are_untouched(start_proxy, fake_upstream, options: dict[str, Any]) -> None:
    proxy = await start_proxy(models=rules(**options))
    history = History().parallel(
        ("read_file", {"path": "a"}, listing("a", 50 if options else 2000)),
        ("read_file", {"path": "b"}, listing("b", 50 if options else 2000)),
    )
    fake_upstream.script(text_reply("native", False))
    await ask(proxy, history.messages)
    assert fake_upstream.requests[-1]["messages"] == history.messages
    assert actions(proxy) == {}


# ---- retry without tools --------------------------------------------------------------------------

NO_TOOLS = Reply(
    status=400,
    body={"error": {"message": "registry.ollama.ai/library/gemma3:4b does not support tools", "type": "api_error"}},
)


@pytest.mark.parametrize("stream", [False, True])
async def test_retry_without_tools_gets_an_answer(start_proxy, fake_upstream, stream: bool) -> None:
    proxy = await start_proxy(models=rules(retry_without_tools=True))
    fake_upstream.script(NO_TOOLS, text_reply("native", stream))
    history = exploring(2)
    result = await ask(proxy, history.messages, stream, tool_choice="auto", parallel_tool_calls=False)
    first, retry = fake_upstream.requests
    assert first["tools"] == TOOLS
    assert not set(TOOL_FIELDS) & set(retry)
    assert retry == {k: v for k, v in first.items() if k not in TOOL_FIELDS}
    assert_answer(result)
    assert actions(proxy) == {"retry_without_tools": 1}


@pytest.mark.parametrize(
    "options, error",
    [
        ({}, NO_TOOLS),
        (
            {"retry_without_tools": True},
            Reply(
                status=400,
                body={"error": {"message": "max_tokens must be at most 4096", "type": "invalid_request_error"}},
            ),
        ),
    ],
    ids=["option-off", "not-about-tools"],
)
async def test_other_failures_pass_through(start_proxy, fake_upstream, options: dict[str, Any], error: Reply) -> None:
    proxy = await start_proxy(models=rules(**options))
    fake_upstream.script(error, text_reply("native", False))
    with pytest.raises(openai.BadRequestError) as caught:
        await ask(proxy, History().messages)
    assert caught.value.body["message"] == error.body["error"]["message"]
    assert len(fake_upstream.requests) == 1
    assert actions(proxy) == {}


# ---- deadline -------------------------------------------------------------------------------------


def stall_after(fake: FakeUpstream, sent: int, seconds: float) -> None:
    """Make the fake write the first ``sent`` pieces of a stream at once, then stall for ``seconds``."""

    async def stream(request: web.Request, reply: Reply) -> web.StreamResponse:
        index = len(fake.disconnected)
        fake.disconnected.append(False)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for piece in reply.pieces[:sent]:
                await response.write(piece.encode() if isinstance(piece, str) else piece)
            await asyncio.sleep(seconds)
            await response.write_eof()
        except (asyncio.CancelledError, ConnectionResetError):
            fake.disconnected[index] = True
            raise
        return response

    fake._stream = stream  # type: ignore[method-assign]  # an instance attribute: handle() looks it up


@pytest.mark.parametrize("mode, stream", [("native", False), ("native", True), ("hermes", False), ("hermes", True)])
async def test_deadline_before_the_first_byte_is_a_504(start_proxy, fake_upstream, mode: str, stream: bool) -> None:
    proxy = await start_proxy(models=rules(mode, max_request_seconds=0.3))
    fake_upstream.script(Reply(hang=5, body=completion(ANSWER)))
    started = time.monotonic()
    with pytest.raises(openai.InternalServerError) as caught:
        await ask(proxy, exploring(2).messages, stream)
    assert time.monotonic() - started < 2
    assert caught.value.status_code == 504
    assert caught.value.body["code"] == "deadline_exceeded" and caught.value.body["type"] == "timeout_error"
    assert "0.3 seconds" in caught.value.body["message"]
    assert actions(proxy) == {"max_request_seconds": 1}


async def test_deadline_covers_the_reasks(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=rules("hermes", max_request_seconds=0.5))
    malformed = '<tool_call>{"name": "read_file", "arguments": {"file": 3}}</tool_call>'
    fake_upstream.script(Reply(pieces=text_stream([malformed])), Reply(hang=5, pieces=text_stream(["late"])))
    with pytest.raises(openai.InternalServerError) as caught:
        await ask(proxy, History().messages)
    assert caught.value.body["code"] == "deadline_exceeded"
    assert len(fake_upstream.requests) == 2, "the re-ask was sent and counted against the deadline"


async def stalled_stream(
    proxy: Any, fake: FakeUpstream, pieces: list[str] | None = None, sent: int = 3
) -> tuple[list[dict[str, Any]], bool, float]:
    """A stream whose upstream sends the role chunk and ``sent - 1`` content pieces, then goes silent;
    read raw and put through ``check_deltas``."""
    stall_after(fake, sent, 10)
    fake.script(Reply(pieces=text_stream(pieces or ["The failing test ", "is test_parse_dates", " because"])))
    payload = {"model": MODEL, "messages": exploring(2).messages, "tools": TOOLS, "stream": True}
    started = time.monotonic()
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.base_url + "/chat/completions", json=payload) as resp,
    ):
        assert resp.status == 200
        chunks, done = parse_sse(await resp.text())
    check_deltas(chunks)
    return chunks, done, time.monotonic() - started


@pytest.mark.parametrize("mode", ["native", "hermes"])
async def test_a_stalled_stream_finishes_cleanly(start_proxy, fake_upstream, mode: str) -> None:
    proxy = await start_proxy(models=rules(mode, max_request_seconds=0.6))
    chunks, done, elapsed = await stalled_stream(proxy, fake_upstream)
    assert done and 0.5 < elapsed < 2
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert content == "The failing test is test_parse_dates"
    finishes = [c["choices"][0].get("finish_reason") for c in chunks if c["choices"]]
    assert finishes[-1] == "length" and not any(finishes[:-1])
    for _ in range(50):
        if fake_upstream.disconnected[-1]:
            break
        await asyncio.sleep(0.02)
    assert fake_upstream.disconnected[-1], "the stalled upstream was not closed"
    assert actions(proxy) == {"max_request_seconds": 1}


@pytest.mark.parametrize("mode", ["native", "hermes"])
async def test_the_deadline_finish_belongs_to_the_same_stream(start_proxy, fake_upstream, mode: str) -> None:
    proxy = await start_proxy(models=rules(mode, max_request_seconds=0.4))
    chunks, done, _ = await stalled_stream(proxy, fake_upstream)
    assert done and chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert len({c["id"] for c in chunks}) == 1 and len({c["model"] for c in chunks}) == 1


@pytest.mark.parametrize("mode", ["hermes", "react", "xml", "caret", "qwen3_xml", "morph_xml", "pythonic"])
async def test_the_deadline_in_the_middle_of_a_streamed_call(start_proxy, fake_upstream, mode: str) -> None:
    """With ``stream_arguments`` a call already begun is cut like OpenAI cuts at ``max_tokens``: the same
    call index, no new one, and ``finish_reason`` ``length``."""
    proxy = await start_proxy(models=rules(mode, stream_arguments=True, max_request_seconds=0.4))
    args = {"path": "src/dates.py", "content": DATES_PY}
    text = "I will fix it.\n" + get_format(mode).render_calls(
        [ToolCallRecord("call_1", "write_file", json.dumps(args))]
    )
    chunks, done, _ = await stalled_stream(proxy, fake_upstream, pieces(text, 5), sent=len(text) // 10)
    assert done and chunks[-1]["choices"][0]["finish_reason"] == "length"
    [call] = streamed_calls(chunks)
    assert call["name"] == "write_file"
    assert any(json.dumps(args, separators=sep).startswith(call["arguments"]) for sep in ((",", ":"), (", ", ": ")))
    with pytest.raises(ValueError):
        json.loads(call["arguments"])  # cut: never passed off as a whole call
    assert actions(proxy) == {"max_request_seconds": 1}


async def test_a_stream_within_the_deadline_is_untouched(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=rules(max_request_seconds=5))
    fake_upstream.script(Reply(pieces=text_stream(pieces(ANSWER)), delay=0.01))
    result = await ask(proxy, History().messages, stream=True)
    assert_answer(result)
    assert len(fake_upstream.requests) == 1


# ---- pure helpers ---------------------------------------------------------------------------------


def rule(**options: Any) -> ModelRule:
    return ModelRule(match=MATCH, upstream="up", **options)


def test_shorten_examples() -> None:
    text = listing("x", 100)
    assert shorten(text, len(text)) == text
    check_shortened(shorten(text, 500), text, 500)
    assert shorten(text, 20) == text[:2] + f"[...{len(text) - 4} cut...]" + text[-2:]  # the short marker
    assert shorten(text, 5) == text[:5]


@given(st.text(min_size=0, max_size=3000), st.integers(min_value=0, max_value=3500))
def test_shorten_never_exceeds_the_limit(text: str, limit: int) -> None:
    out = shorten(text, limit)
    if len(text) <= limit:
        assert out == text
        return
    assert len(out) <= limit
    if limit >= 2 * len(CUT_MARKER.format(n=len(text))):
        assert MARKER_RE.search(out), "room for the clear marker: it is used"


def test_fair_shares_examples() -> None:
    assert _fair_shares([150, 400, 7000, 9000], 4000) == [150, 400, 1725, 1725]
    assert _fair_shares([100, 200], 1000) == [100, 200]
    assert _fair_shares([5000] * 4, 1000) == [250] * 4
    assert _fair_shares([], 1000) == []


@given(st.lists(st.integers(min_value=0, max_value=20_000), max_size=12), st.integers(min_value=0, max_value=50_000))
def test_fair_shares_are_max_min_fair(lengths: list[int], budget: int) -> None:
    shares = _fair_shares(lengths, budget)
    assert all(0 <= s <= n for s, n in zip(shares, lengths, strict=True)) and sum(shares) <= budget
    if sum(lengths) <= budget:
        assert shares == lengths
        return
    cut = [s for s, n in zip(shares, lengths, strict=True) if s < n]
    assert cut and max(cut) - min(cut) <= 1, "the results that are cut share alike"
    assert all(n <= max(cut) + 1 for s, n in zip(shares, lengths, strict=True) if s == n), "only small ones whole"
    assert sum(shares) > budget - len(lengths), "the budget is used up"


def test_limit_tool_outputs_uses_legacy_names_and_content_parts() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "function_call": {"name": "run_tests", "arguments": "{}"}},
        {"role": "function", "name": "run_tests", "content": [{"type": "text", "text": listing("t", 40)}]},
    ]
    out = limit_tool_outputs(messages, rule(tool_output_limits={"run_tests": 300}))
    assert out is not None and messages[2]["content"][0]["type"] == "text", "the input is not mutated"
    check_shortened(out[2]["content"], listing("t", 40), 300)
    assert limit_tool_outputs(messages, rule()) is None
    assert limit_tool_outputs(messages, rule(max_tool_output_chars=10_000)) is None


def test_total_limit_ignores_older_turns_and_user_text() -> None:
    history = History().call("read_file", {"path": "a"}, listing("a", 100))
    history.parallel(("read_file", {"path": "b"}, listing("b", 100)), ("read_file", {"path": "c"}, listing("c", 100)))
    history.say("user", "Summarise these files. " * 100)
    out = limit_tool_outputs(history.messages, rule(max_total_tool_output_chars=2000))
    assert out is not None
    assert out[3]["content"] == listing("a", 100) and out[-1] == history.messages[-1]
    assert len(out[5]["content"]) + len(out[6]["content"]) <= 2000


def test_trailing_tool_turns() -> None:
    assert trailing_tool_turns(exploring(4).messages) == 4
    assert trailing_tool_turns(exploring(2).call("git_diff", {}, "", text="Checking the diff.").messages) == 0
    assert trailing_tool_turns(exploring(4).say("user", "go on").messages) == 0
    assert trailing_tool_turns(History().parallel(("a", {}, "1"), ("b", {}, "2")).messages) == 1
    legacy = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "function_call": {"name": "a", "arguments": "{}"}},
        {"role": "function", "name": "a", "content": "1"},
    ]
    assert trailing_tool_turns(legacy) == 1


def looping(history: History, limit: int) -> list[str] | None:
    """The names of the calls ``repeated_call`` finds the agent looping on."""
    keys = repeated_call(history.messages, limit)
    return None if keys is None else [key.split("\0")[0] for key in keys]


def test_repeated_call() -> None:
    assert looping(rereading(3), 3) == ["read_file"]
    assert looping(rereading(2), 3) is None
    assert looping(rereading(2), 2) == ["read_file"]
    same_turn = History().parallel(*[("read_file", {"path": "a"}, "a")] * 3)
    assert looping(same_turn, 3) == ["read_file"]
    resumed = rereading(2).say("user", "again").call("read_file", {"path": "src/dates.py"}, DATES_PY)
    assert looping(resumed, 2) is None


def test_a_cycle_of_calls_is_a_loop_too() -> None:
    """A, B, A, B, A: the last two calls each repeat one made before, with nothing new in between."""
    history = History()
    for _ in range(2):
        history.call("read_file", {"path": "a.py"}, "a").call("run_tests", {"target": "a"}, "1 failed")
    assert looping(history, 3) is None  # A, B, A, B: one repeat (the second B)
    assert looping(history, 2) == ["read_file", "run_tests"]
    assert looping(history.call("read_file", {"path": "a.py"}, "a"), 3) == ["read_file", "run_tests"]
    # read, edit, read: the edit was new, the file may have changed
    edited = (
        History()
        .call("read_file", {"path": "a.py"}, "a")
        .call("edit_file", {"path": "a.py", "text": "b"}, "ok")
        .call("read_file", {"path": "a.py"}, "b")
    )
    assert looping(edited, 2) is None


def test_trailing_tool_errors() -> None:
    assert trailing_tool_errors(failing(3).messages, ERROR_PATTERN) == 3
    assert trailing_tool_errors(failing(3).call("git_diff", {}, "").messages, ERROR_PATTERN) == 0
    assert trailing_tool_errors(failing(1).say("user", "retry").messages, ERROR_PATTERN) == 0
    parallel = History().parallel(("a", {}, "ok"), ("b", {}, "Error: b"), ("c", {}, "ERROR c"))
    assert trailing_tool_errors(parallel.messages, ERROR_PATTERN) == 2
    parts = History().call("a", {}, "Exception: boom").messages
    parts[-1]["content"] = [{"type": "text", "text": "Exception: boom"}]
    assert trailing_tool_errors(parts, ERROR_PATTERN) == 1
    json_errors = History().call("a", {}, '{"error": "no such file"}').messages
    assert trailing_tool_errors(json_errors, ERROR_PATTERN) == 0
    assert trailing_tool_errors(json_errors, r'"error"\s*:') == 1


def run_policies(body: dict[str, Any], model_rule: ModelRule) -> tuple[list[str], dict[str, Any]]:
    """The policies' actions and the body the turn they return would send upstream natively."""
    result = apply_policies(ChatTurn.from_body({"model": MODEL, **body}), model_rule)
    return result.actions, result.turn.native_body(MODEL)


def test_apply_policies_order_and_purity() -> None:
    history = exploring(2)
    for _ in range(3):
        history.call("read_file", {"path": "src/dates.py"}, DATES_PY)
    raw = {"model": MODEL, "messages": history.messages, "tools": TOOLS, "parallel_tool_calls": True}
    snapshot = json.dumps(raw)
    actions, body = run_policies(raw, rule(max_consecutive_tool_turns=5, max_tools=2))
    assert actions == ["max_consecutive_tool_turns", "max_tools"], "one loop guard acts, the first"
    assert json.dumps(raw) == snapshot, "the client's body is not mutated"
    assert body["tool_choice"] == "none" and names(body["tools"]) == ["read_file", "search_code"]
    assert "parallel_tool_calls" not in body


def test_legacy_functions_are_withdrawn_and_budgeted() -> None:
    functions = [t["function"] for t in TOOLS]
    messages = [{"role": "user", "content": "go"}]
    for _ in range(3):
        messages += [
            {"role": "assistant", "content": None, "function_call": {"name": "git_diff", "arguments": "{}"}},
            {"role": "function", "name": "git_diff", "content": "Error: not a git repository"},
        ]
    actions, body = run_policies({"messages": messages, "functions": functions}, rule(max_tools=2))
    assert actions == ["max_repeated_calls", "max_tools"]
    assert body["function_call"] == "none" and "tool_choice" not in body and "tools" not in body
    assert [f["name"] for f in body["functions"]] == ["read_file", "git_diff"]
    _, forced = run_policies(
        {"messages": messages[:1], "functions": functions, "function_call": {"name": "list_dir"}}, rule(max_tools=1)
    )
    assert [f["name"] for f in forced["functions"]] == ["list_dir"]


def test_guards_need_tools_and_a_tool_result_last() -> None:
    history = failing(3)
    assert run_policies({"messages": history.messages}, rule())[0] == []
    assert run_policies({"messages": history.messages, "tools": TOOLS, "tool_choice": "none"}, rule())[0] == []
    answered = failing(3).say("assistant", "pytest is missing.").messages
    assert run_policies({"messages": answered, "tools": TOOLS}, rule())[0] == []
    assert run_policies({"messages": history.messages, "tools": TOOLS}, rule())[0] == ["max_consecutive_tool_errors"]


@pytest.mark.parametrize("choice", [{"type": "function", "function": "git_diff"}, {"type": "function"}, "required"])
def test_budget_survives_any_tool_choice(choice: Any) -> None:
    """A malformed named choice is the mode's to report (400), not a crash (500) in the budget."""
    actions, body = run_policies(
        {"messages": [{"role": "user", "content": "go"}], "tools": TOOLS, "tool_choice": choice}, rule(max_tools=2)
    )
    assert actions == ["max_tools"] and body["tools"] == TOOLS[:2]
    assert body["tool_choice"] == choice


@pytest.mark.parametrize(
    ("body", "gated"),
    [
        ({"messages": [{"role": "user", "content": UNRELATED}]}, True),
        ({"messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": UNRELATED}]}, True),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": UNRELATED}]}]}, True),
        ({"messages": [{"role": "user", "content": UNRELATED}], "tool_choice": "auto"}, True),
        ({"messages": [{"role": "user", "content": UNRELATED}], "tool_choice": "required"}, False),
        ({"messages": [{"role": "user", "content": UNRELATED}], "tool_choice": "none"}, False),
        (
            {
                "messages": [{"role": "user", "content": UNRELATED}],
                "tool_choice": {"type": "function", "function": {"name": "git_diff"}},
            },
            False,
        ),
        ({"messages": [{"role": "user", "content": "谁写了《傲慢与偏见》"}]}, False),  # no word to judge by
        (
            {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 17 * 23?"}]},
            False,
        ),
        ({"messages": [{"role": "user", "content": "Run the tests."}]}, False),
        ({"messages": [{"role": "user", "content": UNRELATED}, {"role": "user", "content": "Thanks."}]}, False),
        ({"messages": History(UNRELATED).call("git_diff", {}, "").messages[1:]}, False),  # no system prompt
    ],
)
@pytest.mark.parametrize("offer", ["when_related", "related"])
def test_offer_tools_gates_only_an_unrelated_first_request(body: dict[str, Any], gated: bool, offer: str) -> None:
    actions, sent = run_policies({**body, "tools": TOOLS, "parallel_tool_calls": True}, rule(offer_tools=offer))
    if gated:
        assert actions == ["offer_tools"] and sent["tool_choice"] == "none" and sent["tools"] == TOOLS
        assert "parallel_tool_calls" not in sent
    else:
        assert sent.get("tool_choice") == body.get("tool_choice")
        assert offer == "related" or (actions == [] and sent["tools"] == TOOLS)
    assert run_policies({**body, "tools": TOOLS}, rule())[0] == [], "off by default"


RUN_THE_TESTS = [{"role": "user", "content": "Run the tests."}]  # only run_tests shares a word ("run", "test")


def test_offer_tools_related_offers_an_opening_request_only_the_tools_it_shares_words_with() -> None:
    body = {"messages": RUN_THE_TESTS, "tools": TOOLS, "parallel_tool_calls": True}
    actions, sent = run_policies(body, rule(offer_tools="related"))
    assert actions == ["offer_tools"] and names(sent["tools"]) == ["run_tests"]
    assert "tool_choice" not in sent and sent["parallel_tool_calls"] is True
    assert run_policies(body, rule(offer_tools="when_related")) == ([], run_policies(body, rule())[1])
    # several related tools keep the client's order; a request related to every tool keeps them all
    actions, sent = run_policies(
        {**body, "messages": [{"role": "user", "content": "Read the file."}]}, rule(offer_tools="related")
    )
    assert names(sent["tools"]) == ["read_file", "run_tests", "write_file"]  # "Run pytest on a file..."
    every = " ".join(DESCRIPTIONS)
    assert (
        run_policies({**body, "messages": [{"role": "user", "content": every}]}, rule(offer_tools="related"))[0] == []
    )


@pytest.mark.parametrize(
    "body",
    [
        {"messages": RUN_THE_TESTS, "tool_choice": "required"},
        {"messages": RUN_THE_TESTS, "tool_choice": {"type": "function", "function": {"name": "git_diff"}}},
        {"messages": [*RUN_THE_TESTS, {"role": "assistant", "content": "Which ones?"}, *RUN_THE_TESTS]},
        {"messages": History("Run the tests.").call("git_diff", {}, "").messages},
    ],
    ids=["required", "named", "later-turn", "tool-history"],
)
def test_offer_tools_related_keeps_every_tool_past_the_opening_auto_request(body: dict[str, Any]) -> None:
    actions, sent = run_policies({**body, "tools": TOOLS}, rule(offer_tools="related"))
    assert actions == [] and sent["tools"] == TOOLS


def test_offer_tools_related_reads_the_users_words_and_keeps_what_the_system_prompt_points_at() -> None:
    # "repository" (the system prompt) relates read_file: kept with run_tests, which the user's words point at
    system = [{"role": "system", "content": SYSTEM}]
    actions, sent = run_policies({"messages": system + RUN_THE_TESTS, "tools": TOOLS}, rule(offer_tools="related"))
    assert actions == ["offer_tools"] and names(sent["tools"]) == ["read_file", "run_tests"]
    # a user message with no word to judge by is not judged, whatever the system prompt's words relate to
    # ("one": "Show the uncommitted changes in one file." would otherwise keep git_diff alone)
    casual = [{"role": "system", "content": "Answer in one short sentence."}, {"role": "user", "content": "17 * 23?"}]
    tools = [*TOOLS[:5], _tool("git_diff", "Show the uncommitted changes in one file.")]
    assert run_policies({"messages": casual, "tools": tools}, rule(offer_tools="related")) == (
        [],
        run_policies({"messages": casual, "tools": tools}, rule())[1],
    )


def test_offer_tools_related_trims_legacy_functions() -> None:
    functions = [t["function"] for t in TOOLS]
    actions, body = run_policies({"messages": RUN_THE_TESTS, "functions": functions}, rule(offer_tools="related"))
    assert actions == ["offer_tools"] and [f["name"] for f in body["functions"]] == ["run_tests"]


def test_an_unrelated_request_without_tools_or_legacy_functions() -> None:
    messages = [{"role": "user", "content": UNRELATED}]
    assert run_policies({"messages": messages}, rule(offer_tools="when_related"))[0] == []
    functions = [t["function"] for t in TOOLS]
    actions, body = run_policies({"messages": messages, "functions": functions}, rule(offer_tools="when_related"))
    assert actions == ["offer_tools"] and body["function_call"] == "none" and "tool_choice" not in body
