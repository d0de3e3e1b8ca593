"""Agent loops end in an answer (issue 31): repeated calls answered from their result, cycles of calls
stopped by the loop guard, calls written as plain lines kept out when no call may be made.

The sans-IO pieces (``repeats``, ``plaincalls``) in any split of the text, then end to end: the real
``openai`` SDK → proxy → a scripted upstream, streamed and not, in every format.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolshim.chat.plaincalls import PlainCalls
from toolshim.chat.repeats import call_key, repeat_keys, trailing_repeats
from toolshim.formats import ToolSpec

from tests.fakes import Reply, text_stream
from tests.formats.tools import OPENAI_TOOLS
from tests.test_emulation import FORMAT_NAMES, ask, call_text, emulated, pieces

QUESTION = "What is the weather in Madrid?"
RESULT = '{"temperature": 21, "sky": "sunny"}'

# ---- repeats ------------------------------------------------------------------------------------------


def keys(calls: str) -> list[str]:
    """``"ABA"`` as call keys (each letter a call; the same letter, the same call)."""
    return [call_key(letter, "{}") for letter in calls]


@pytest.mark.parametrize(
    ("calls", "repeating", "trailing"),
    [
        ("", "", 0),
        ("A", "A", 0),  # A again now would repeat it
        ("AA", "A", 1),
        ("AB", "B", 0),  # A again: B came after it, new
        ("ABA", "AB", 0),  # B again: only A came after it, made before
        ("ABAB", "AB", 1),
        ("ABABA", "AB", 2),
        ("REW", "W", 0),  # read, edit, write: each new
        ("RER", "ER", 0),  # read, edit, read: the read again follows the new edit, no repeat
        ("ABCABC", "ABC", 1),
    ],
)
def test_repeats(calls: str, repeating: str, trailing: int) -> None:
    assert repeat_keys(keys(calls)) == frozenset(keys(repeating))
    assert trailing_repeats(keys(calls)) == trailing


def lookups(calls: str) -> list[str]:
    """``"D Z D"`` as calls of one tool with the letters as arguments; ``"E"`` alone is another tool."""
    return [call_key("edit" if arg == "E" else "get_air", {"city": arg}) for arg in calls.split()]


@pytest.mark.parametrize(
    ("calls", "repeating", "trailing"),
    [
        ("D Z D", "D Z", 1),  # the same tool for another city changed nothing: Delhi again repeats
        ("D Z", "D Z", 0),  # either city again would repeat: the other was only a lookup
        ("D Z Z D", "D Z", 2),
        ("D E D", "E D", 0),  # another tool between: the read again follows something new
        ("D Z E", "E", 0),
        ("D Z W", "D Z W", 0),  # three lookups of one tool, each new: none repeats yet
    ],
)
def test_a_lookup_of_the_same_tool_between_is_nothing_new(calls: str, repeating: str, trailing: int) -> None:
    assert repeat_keys(lookups(calls)) == frozenset(lookups(repeating))
    assert trailing_repeats(lookups(calls)) == trailing


@given(st.lists(st.sampled_from(["A1", "A2", "A3", "B1", "B2", "C1"]), max_size=12))
def test_repeat_keys_agree_with_the_call_by_call_walk(calls: list[str]) -> None:
    """The linear ``repeat_keys`` gives what asking ``trailing_repeats`` of each possible next call gives."""
    keys = [call_key(c[0], c[1]) for c in calls]
    expected = {k for k in set(keys) if trailing_repeats([*keys, k]) >= 1}
    assert repeat_keys(keys) == frozenset(expected)


def test_call_keys_ignore_spacing_and_key_order() -> None:
    assert call_key("f", '{"a": 1, "b": 2}') == call_key("f", '{ "b":2,"a":1 }') == call_key("f", {"b": 2, "a": 1})
    assert call_key("f", '{"a": 1}') != call_key("g", '{"a": 1}') != call_key("f", '{"a": 2}')
    assert call_key("f", "not json") == "f\0not json"


# ---- plain calls --------------------------------------------------------------------------------------

TOOLS = [
    ToolSpec("get_weather", "", {"type": "object", "properties": {"city": {}, "unit": {}}}),
    ToolSpec("add_event", "", {"type": "object", "properties": {"date": {}, "time": {}, "title": {}}}),
]
PLAIN = [
    ("get_weather\ncity: Madrid", ""),
    ("add_event\ndate: 2025-03-14\ntime: 15:00\ntitle: Dentist", ""),
    ("get_weather\ncity: Madrid\n\nIt is sunny.", "It is sunny."),
    ('get_weather(city="Madrid")\nDone.', "Done."),
    ('get_weather:\n{"city": "Madrid"}\nok', "ok"),
    ("**get_weather**\n- city: Madrid\n", ""),
    ("### Get-Weather\n", ""),
    ("get_weather\nThe weather is fine.", "The weather is fine."),
    # another format's syntax (lenient recognition reads only foreign, not toolshim's, syntaxes)
    ("^^^get_weather\ncity: Madrid\n^^^\nIt is sunny.", "It is sunny."),
    ('Action: get_weather\nAction Input: {"city": "Madrid"}', ""),
    ("<tool:get_weather>\n<param:city>Madrid</param:city>\n</tool:get_weather>", ""),
    ("<get_weather>\n<city>Madrid</city>\n</get_weather>\nDone.", "Done."),
    ('[get_weather(city="Madrid")]', ""),
    # the model's own words stay
    ("Action: I answer without tools.", "Action: I answer without tools."),
    ("<b>Sunny</b> today", "<b>Sunny</b> today"),
    ("It is sunny in Madrid.", "It is sunny in Madrid."),
    ("get_weather: Paris is sunny.", "get_weather: Paris is sunny."),
    ("get_weatherly things", "get_weatherly things"),
    ("Weather\nget", "Weather\nget"),
    ("city: Madrid\nis sunny", "city: Madrid\nis sunny"),  # an argument line without a call before it
]


def plain(text: str, cuts: list[int] | None = None) -> str:
    filt = PlainCalls(TOOLS)
    out, start = [], 0
    for cut in [*sorted(cuts or []), len(text)]:
        out.append(filt.feed(text[start:cut]))
        start = max(start, cut)
    return "".join(out) + filt.flush()


@pytest.mark.parametrize(("text", "expected"), PLAIN)
def test_a_call_written_as_plain_lines_is_dropped_in_any_split(text: str, expected: str) -> None:
    assert plain(text) == expected
    assert plain(text, list(range(len(text)))) == expected
    for seed in range(20):
        rng = random.Random(seed)
        assert plain(text, [rng.randrange(len(text) + 1) for _ in range(rng.randrange(6))]) == expected


@given(st.lists(st.sampled_from([t for t, _ in PLAIN] + ["\n", " ", "city", "get_"]), max_size=5), st.data())
def test_plain_calls_any_split_gives_the_same_text(parts: list[str], data: st.DataObject) -> None:
    text = "".join(parts)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=6))
    assert plain(text, cuts) == plain(text)


# ---- a repeated call is answered from its result --------------------------------------------------------


def looped(calls: int, args: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    for n in range(calls):
        fn = {"name": "get_weather", "arguments": json.dumps(args or {"city": "Madrid"})}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{n}", "type": "function", "function": fn}]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": RESULT},
        ]
    return messages


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_whose_result_is_in_the_history_is_answered_from_it(
    start_proxy, fake_upstream, fmt: str, stream: bool
) -> None:
    """The 0.5B model called get_weather(Madrid) again with the result in front of it. The call is not
    returned; the model is asked again with the tools withdrawn and the result pointed at."""
    proxy = await start_proxy(models=emulated(fmt))
    again = call_text(fmt, args={"city": "Madrid"})
    fake_upstream.script(Reply(pieces=text_stream(pieces(again))), Reply(pieces=text_stream(["It is 21 C, sunny."])))
    result = await ask(proxy, stream, messages=looped(1))
    choice = result["choices"][0]
    assert choice["finish_reason"] == "stop" and not choice["message"].get("tool_calls")
    assert choice["message"]["content"] == "It is 21 C, sunny."
    first, second = fake_upstream.requests
    assert "stop" not in second and "### get_weather" in first["messages"][0]["content"]
    assert second["messages"][0]["role"] == "user"  # no tool instructions, so no system message
    assert second["messages"][:-2] == first["messages"][1:]
    assert second["messages"][-2]["role"] == "assistant" and "Madrid" in second["messages"][-2]["content"]
    assert second["messages"][-1]["content"].startswith("You already called `get_weather` with these same arguments")
    assert proxy.metrics.reasks.labels("*", "repeat")._value.get() == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_a_repeat_that_comes_back_again_is_answered_with_the_result(
    start_proxy, fake_upstream, stream: bool
) -> None:
    proxy = await start_proxy(models=emulated("pythonic"))
    fake_upstream.script(Reply(pieces=text_stream(pieces(call_text("pythonic", args={"city": "Madrid"})))))
    result = await ask(proxy, stream, messages=looped(1))
    assert result["choices"][0]["message"]["content"] == RESULT  # never the call, never toolshim's words
    assert len(fake_upstream.requests) == 2  # the same call again: no third try


@pytest.mark.parametrize(
    ("history", "args", "option"),
    [
        pytest.param(looped(1), {"city": "Paris"}, {}, id="other-arguments"),
        pytest.param(looped(1), {"city": "Madrid"}, {"answer_repeated_calls": False}, id="off"),
        pytest.param([{"role": "user", "content": QUESTION}], {"city": "Madrid"}, {}, id="first-call"),
        pytest.param([*looped(1), {"role": "user", "content": "Again, please."}], {"city": "Madrid"}, {}, id="asked"),
    ],
)
async def test_other_calls_are_returned(start_proxy, fake_upstream, history, args, option) -> None:
    proxy = await start_proxy(models=emulated("hermes", **option))
    fake_upstream.script(Reply(pieces=text_stream(pieces(call_text("hermes", args=args)))))
    result = await ask(proxy, False, messages=history)
    [call] = result["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == args and len(fake_upstream.requests) == 1


async def test_a_new_call_beside_a_repeat_is_returned_alone(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("pythonic"))
    output = '[get_weather(city="Madrid"), get_weather(city="Paris")]'
    fake_upstream.script(Reply(pieces=text_stream(pieces(output))))
    result = await ask(proxy, False, messages=looped(1), parallel_tool_calls=True)
    calls = result["choices"][0]["message"]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"city": "Paris"}]


# ---- no call may be made: plain lines too -------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
async def test_the_loop_guards_answer_is_never_the_calls_words(
    start_proxy, fake_upstream, fmt: str, stream: bool
) -> None:
    """Seen: after the loop guard withdrew the tools the model wrote the call once more, in its format or as
    the plain lines it found in its history; the client got ``get_weather`` / ``city: Madrid``."""
    proxy = await start_proxy(models=emulated(fmt))
    for output in (call_text(fmt, args={"city": "Madrid"}), "get_weather\ncity: Madrid"):
        fake_upstream.script(Reply(pieces=text_stream(pieces(output))))
        fake_upstream.requests.clear()
        result = await ask(proxy, stream, messages=looped(3))
        message = result["choices"][0]["message"]
        assert not message.get("tool_calls") and message["content"] == RESULT
        assert "same arguments 3 times" in fake_upstream.requests[0]["messages"][0]["content"]
        forced = fake_upstream.requests[1]["messages"][-1]["content"]
        assert forced == (
            "No tool can be called in this reply: answer the user now in plain text, using the tool results above."
        )


@pytest.mark.parametrize("stream", [False, True])
async def test_a_cycle_of_calls_ends_in_an_answer(start_proxy, fake_upstream, stream: bool) -> None:
    """A, B, A, B, A: the loop guard withdraws the tools and names both."""
    proxy = await start_proxy(models=emulated("hermes", answer_repeated_calls=False))
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    for n, city in enumerate(["Madrid", "Paris", "Madrid", "Paris", "Madrid"]):
        fn = {"name": "get_weather", "arguments": json.dumps({"city": city})}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{n}", "type": "function", "function": fn}]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": f"{city}: sunny"},
        ]
    fake_upstream.script(Reply(pieces=text_stream(["Both are sunny."])))
    result = await ask(proxy, stream, messages=messages, tools=[OPENAI_TOOLS["get_weather"]])
    assert result["choices"][0]["message"]["content"] == "Both are sunny."
    system = fake_upstream.requests[0]["messages"][0]["content"]
    assert "You keep calling `get_weather` in turn with the same arguments" in system
    assert proxy.metrics.policy_actions.labels("*", "max_repeated_calls")._value.get() == 1


WRITTEN = {
    **{f"as-{fmt}": call_text(fmt, args={"city": "Madrid"}) for fmt in FORMAT_NAMES},
    "plain-lines": "get_weather\ncity: Madrid",
    "plain-json": 'get_weather\n{"city": "Madrid"}',
    "bare-python": 'get_weather(city="Madrid")',
    "bare-json": '{"name": "get_weather", "arguments": {"city": "Madrid"}}',
}


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("written", sorted(WRITTEN))
async def test_no_form_of_a_withheld_call_reaches_the_client(
    start_proxy, fake_upstream, fmt: str, written: str
) -> None:
    """Under tool_choice "none" a call in any syntax (the format's, another's, the plain lines of a call's
    words) is withheld; with nothing else written, the answer is the latest tool result."""
    proxy = await start_proxy(models=emulated(fmt, max_repair_retries=0))
    fake_upstream.script(Reply(pieces=text_stream(pieces(WRITTEN[written]))))
    result = await ask(proxy, False, messages=looped(1), tool_choice="none")
    message = result["choices"][0]["message"]
    assert not message.get("tool_calls") and message["content"] == RESULT
