"""A model that copies the prompt's worked example, call and all, makes no call.

Every format but pythonic and xml ends its instructions with an example call of a real tool (the named one,
else the first listed). A small model that repeats the instructions often repeats that example with them: the
echo is dropped (echo.py), and so is the example call it carries, in every format: with a tool whose values
all come from its schema (an ``enum``) nothing else would tell it from a call the user asked for, and the
thermostat would be switched by toolshim's own text. The same call written without an echo is the model's.
The examples are the format's own (``ToolFormat.worked_example``), not read back from the prompt: hermes' syntax
skeleton before its example kept the parser from finding it there.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from toolshim.chat.example import opening_at_end
from toolshim.formats import FORMATS, ToolChoice, ToolSpec, get_format

from tests.fakes import Reply, text_stream
from tests.formats.tools import OPENAI_TOOLS
from tests.test_emulation import ask, call_text, emulated, pieces

THERMOSTAT: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "set_thermostat",
        "description": "Set the thermostat's mode.",
        "parameters": {
            "type": "object",
            "properties": {"mode": {"type": "string", "enum": ["eco", "comfort", "off"]}},
            "required": ["mode"],
        },
    },
}
WEATHER = OPENAI_TOOLS["get_weather"]
ASKED = [{"role": "user", "content": "Is it warm enough at home?"}]
SPECS = [ToolSpec.from_openai(THERMOSTAT), ToolSpec.from_openai(WEATHER)]
WITH_EXAMPLE = ("caret", "hermes", "morph_xml", "qwen3_xml", "react")


def instructions_tail(fmt: str, choice: ToolChoice) -> str:
    """The instructions from their worked example on, as a model that repeats them writes them."""
    text = get_format(fmt).render_tools(SPECS, choice, False)
    start = max(text.rfind("xample"), 0)
    return text[text.rfind("\n", 0, start) + 1 :]


def test_every_format_with_an_example_names_it() -> None:
    for name in FORMATS:
        calls = get_format(name).worked_example(SPECS, ToolChoice("auto"))
        assert calls == ([("set_thermostat", {"mode": "eco"})] if name in WITH_EXAMPLE else [])
        named = get_format(name).worked_example(SPECS, ToolChoice("named", "get_weather"))
        assert [call_name for call_name, _ in named] == ([] if name == "xml" else ["get_weather"])


@pytest.mark.parametrize("fmt", WITH_EXAMPLE)
def test_the_example_shown_is_the_example_named(fmt: str) -> None:
    [(name, arguments)] = get_format(fmt).worked_example(SPECS, ToolChoice("auto"))
    shown = instructions_tail(fmt, ToolChoice("auto"))
    assert name in shown
    assert arguments["mode"] in shown


@pytest.mark.parametrize("fmt", WITH_EXAMPLE)
@pytest.mark.parametrize("stream", [False, True])
async def test_an_echoed_example_call_is_no_call(start_proxy, fake_upstream, fmt: str, stream: bool) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    echoed = instructions_tail(fmt, ToolChoice("auto"))
    fake_upstream.script(Reply(pieces=text_stream(pieces(echoed))))
    result = await ask(proxy, stream, messages=ASKED, tools=[THERMOSTAT, WEATHER])
    message = result["choices"][0]["message"]
    assert not message.get("tool_calls"), message["tool_calls"]
    shown = message["content"] or ""
    assert "set_thermostat" not in shown
    assert "xample" not in shown, shown  # the lines that led to the example go with it


@pytest.mark.parametrize("fmt", WITH_EXAMPLE)
@pytest.mark.parametrize("stream", [False, True])
async def test_the_same_call_without_an_echo_is_the_models(start_proxy, fake_upstream, fmt: str, stream: bool) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    fake_upstream.script(Reply(pieces=text_stream(pieces(call_text(fmt, "set_thermostat", {"mode": "eco"})))))
    result = await ask(proxy, stream, messages=ASKED, tools=[THERMOSTAT, WEATHER])
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert made["function"]["name"] == "set_thermostat"
    assert json.loads(made["function"]["arguments"]) == {"mode": "eco"}


@pytest.mark.parametrize("stream", [False, True])
async def test_text_that_only_starts_like_the_leading_line_is_the_answer(
    start_proxy, fake_upstream, stream: bool
) -> None:
    """Held while it may be the line that leads to the example, a streamed answer goes on whole."""
    proxy = await start_proxy(models=emulated("hermes"))
    answer = "For example, the living room is at 21 degrees."
    fake_upstream.script(Reply(pieces=text_stream(pieces(answer, size=3))))
    result = await ask(proxy, stream, messages=ASKED, tools=[THERMOSTAT, WEATHER])
    assert result["choices"][0]["message"]["content"] == answer


@pytest.mark.parametrize("stream", [False, True])
async def test_the_leading_line_before_another_call_is_the_model_s_text(
    start_proxy, fake_upstream, stream: bool
) -> None:
    proxy = await start_proxy(models=emulated("hermes"))
    text = "For example:\n" + call_text("hermes", "get_weather", {"city": "Oslo"})
    fake_upstream.script(Reply(pieces=text_stream(pieces(text))))
    asked = [{"role": "user", "content": "Is it warm in Oslo?"}]
    result = await ask(proxy, stream, messages=asked, tools=[THERMOSTAT, WEATHER])
    message = result["choices"][0]["message"]
    assert [call["function"]["name"] for call in message["tool_calls"]] == ["get_weather"]
    assert (message["content"] or "").strip() == "For example:"


REACT_LEAD_IN = "Example (placeholder values):\nThought: I need to use a tool."


@pytest.mark.parametrize(
    ("text", "lead_in", "kept"),
    [
        ("Sure.\nFor example:", "For example:", "Sure.\n"),
        ("For example:\n", "For example:", ""),
        ("Example (placeholder values):", REACT_LEAD_IN, ""),  # its Thought went to reasoning
        ("Example (placeholder values):\n  Thought: I need to use a tool.\n", REACT_LEAD_IN, ""),
        ("For the weather, see below.", "For example:", "For the weather, see below."),
        ("Let me say For", "For example:", "Let me say For"),  # only whole lines
        ("anything", "", "anything"),
    ],
)
def test_the_lines_leading_to_the_example_are_cut_from_the_end_of_a_text(text: str, lead_in: str, kept: str) -> None:
    assert text[: opening_at_end(text, lead_in)] == kept
