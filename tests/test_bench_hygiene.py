"""bench/hygiene.py: what the benchmarks count as markup, echoed instructions, empty, missing usage."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from toolshim.formats import FORMATS, ToolChoice, ToolSpec, get_format

from bench.hygiene import echoes, has_markup, has_usage, instruction_windows, invalid_args, is_empty

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city, in the unit the user asked for.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("<get_weather><city>Paris</city></get_weather>", True),
        ("<get_weather/>", True),
        ("<tool_response>{}</tool_response>", True),
        ("It is sunny in Paris; get_weather says so.", False),
        ("Use <b>bold</b> here.", False),
    ],
)
def test_markup_includes_tags_named_after_offered_tools(content: str, expected: bool) -> None:
    assert has_markup(content, ["get_weather"]) is expected


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (' "asparagus", "portion_amount": 4.0, "meal_name": "breakfast"}, "response": "x", "n": 4, "m": "b"}', True),
        ('{\\"name\\": \\"log_food\\"', True),  # an escaped call object
        ('Sizes: "S": 1, "M": 2.', False),  # two members are a sentence's quote, three in a row are JSON
        ("It is 18 degrees in Paris.", False),
    ],
)
def test_the_remains_of_a_json_call_object_are_markup(content: str, expected: bool) -> None:
    assert has_markup(content) is expected
    assert has_markup('[f(params={"a": 1, "b": 2, "c": 3})]', lists=False) is False  # the prompt mode's call


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_sentence_of_the_rendered_instructions_is_an_echo(fmt: str) -> None:
    rendered = get_format(fmt).render_tools([ToolSpec.from_openai(t) for t in TOOLS], ToolChoice("auto"), False)
    windows = instruction_windows(fmt, TOOLS, parallel=False)
    longest = max((line for line in rendered.splitlines() if "get_weather" not in line), key=len)
    assert echoes(f"Sure. {longest}", windows)
    assert not echoes("The weather in Paris is sunny and 21 degrees today, as far as I know.", windows)


def test_code_in_a_language_fence_is_no_markup() -> None:
    code = 'Like this:\n```python\nresult = {"name": "get_weather", "arguments": {}}\n```\nDone.'
    assert not has_markup(code, ["get_weather"])
    assert has_markup(code.replace("python", "json"), ["get_weather"]) and has_markup(code.replace("python", ""))


def test_a_tag_name_in_inline_code_is_a_mention_but_a_call_in_inline_code_is_markup() -> None:
    assert not has_markup("Finally, the results are printed inside the `<tool_response>` tags.")
    assert not has_markup("Close it with `</get_weather>`.", ["get_weather"])
    assert has_markup('Run `<tool_call>{"name": "get_weather"}</tool_call>` now.', ["get_weather"])
    assert has_markup("Then <tool_response> follows.")


def test_a_call_written_as_words_is_not_an_echo() -> None:
    windows = instruction_windows("hermes", TOOLS, parallel=False)
    assert not echoes("get_weather, arguments: city: Paris", windows)


def test_quoting_a_tools_own_description_is_not_an_echo() -> None:
    windows = instruction_windows("hermes", TOOLS, parallel=False)
    assert not echoes("I can get the current weather in a city, in the unit the user asked for.", windows)


def test_empty_and_usage() -> None:
    assert is_empty(SimpleNamespace(tool_calls=None, content="  \n"))
    assert not is_empty(SimpleNamespace(tool_calls=[object()], content=None))
    assert not is_empty(SimpleNamespace(tool_calls=None, content="Hi"))
    assert has_usage(SimpleNamespace(usage=SimpleNamespace(prompt_tokens=3, completion_tokens=1)))
    assert not has_usage(SimpleNamespace(usage=None))


def test_invalid_args() -> None:
    assert not invalid_args([("get_weather", '{"city": "Paris"}')], TOOLS)
    assert not invalid_args([], TOOLS)
    assert invalid_args([("get_weather", "{}")], TOOLS)  # required city
    assert invalid_args([("get_weather", '{"city": 3}')], TOOLS)
    assert invalid_args([("get_weather", "not json")], TOOLS)
    assert invalid_args([("launch", "{}")], TOOLS)  # not offered
