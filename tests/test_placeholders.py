"""A call that copies the worked example's placeholder (``country: "example"``) is asked for again, once.

Every format's instructions end with an example call of a real tool whose string values are toolshim's filler
(``formats.PLACEHOLDERS``). A small model asked to ship a parcel to Canada wrote
``get_parcel_fee(weight_kg=3, country="example")``; the tool failed on it and the loop ended on that error. The
filler is toolshim's own text: the call is kept back and the same question asked again, in every format with an
example, streamed or not, with instructions that leave the example out (shown it again, the model copied it again
11 times in 12); written again, it is taken.
"""

from __future__ import annotations

import json

import pytest
from toolshim.chat.example import WorkedExample, without_example
from toolshim.chat.grounding import Grounds
from toolshim.formats import PLACEHOLDERS, ToolCallRecord, ToolChoice, ToolSpec, get_format

from tests.fakes import Reply, text_stream
from tests.test_emulation import ask, call_text, emulated, pieces

PARCEL = {
    "type": "function",
    "function": {
        "name": "get_parcel_fee",
        "description": "The postage for a parcel to a country, in euros.",
        "parameters": {
            "type": "object",
            "properties": {"weight_kg": {"type": "number"}, "country": {"type": "string"}},
            "required": ["weight_kg", "country"],
        },
    },
}
ASKED = [{"role": "user", "content": "How much does it cost to ship a 3 kg parcel to Canada?"}]
# the formats whose worked example calls a real tool (pythonic's and xml's do not), and the filler each writes
FILLERS = {"hermes": "example", "caret": "example", "qwen3_xml": "example", "morph_xml": "example", "react": "..."}
WITH_EXAMPLE = tuple(FILLERS)
FILLER = FILLERS["hermes"]


def reply(fmt: str, country: str) -> Reply:
    return Reply(pieces=text_stream(pieces(call_text(fmt, "get_parcel_fee", {"weight_kg": 3, "country": country}))))


@pytest.mark.parametrize("fmt", WITH_EXAMPLE)
def test_the_worked_example_shows_the_filler(fmt: str) -> None:
    spec = ToolSpec(PARCEL["function"]["name"], "", PARCEL["function"]["parameters"])  # type: ignore[index]
    assert FILLERS[fmt] in PLACEHOLDERS
    assert FILLERS[fmt] in get_format(fmt).render_tools([spec], ToolChoice("auto"), False)


@pytest.mark.parametrize("fmt", WITH_EXAMPLE)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_with_the_filler_is_asked_again(start_proxy, fake_upstream, fmt: str, stream: bool) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    fake_upstream.script(reply(fmt, FILLERS[fmt]), reply(fmt, "Canada"))
    result = await ask(proxy, stream, messages=ASKED, tools=[PARCEL])
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert json.loads(made["function"]["arguments"]) == {"weight_kg": 3, "country": "Canada"}
    first, second = fake_upstream.requests
    assert_same_question_without_the_example(first, second, FILLERS[fmt])


def system_text(request: dict[str, object]) -> str:
    messages = request["messages"]
    assert isinstance(messages, list) and messages[0]["role"] == "system"
    return str(messages[0]["content"])


def assert_same_question_without_the_example(first: dict[str, object], second: dict[str, object], filler: str) -> None:
    """The second request asks the same question (told about the filler, the model copies it), and its instructions
    are the first's with the paragraph of the worked example left out."""
    assert second["messages"][1:] == first["messages"][1:]  # type: ignore[index]
    before, after = system_text(first), system_text(second)
    assert "get_parcel_fee" in after and len(after) < len(before)
    gone = [paragraph for paragraph in before.split("\n\n") if paragraph not in after]
    assert len(gone) == 1 and filler in gone[0]  # the example's paragraph gone, every other one as it was


WEEKDAY = {
    "type": "function",
    "function": {
        "name": "get_weekday",
        "description": "The day of the week of a date.",
        "parameters": {"type": "object", "properties": {"date": {"type": "string"}}, "required": ["date"]},
    },
}


@pytest.mark.parametrize("stream", [False, True])
async def test_with_grounding_a_call_of_nothing_but_fillers_is_judged_as_made_up(
    start_proxy, fake_upstream, stream: bool
) -> None:
    """The spider's legs: ``get_weekday(date="...")`` holds no value of the conversation at all. Grounding asks for
    a plain answer (the question shares no word with the tool); written again there, the call does not stand (it
    would for a made-up value), and the model is asked for its plain answer once more."""
    proxy = await start_proxy(models=emulated("hermes", ground_arguments=True))
    copied = Reply(pieces=text_stream(pieces(call_text("hermes", "get_weekday", {"date": FILLER}))))
    fake_upstream.script(copied, copied, Reply(pieces=text_stream(pieces("A spider has eight legs."))))
    asked = [{"role": "user", "content": "How many legs does a spider have?"}]
    result = await ask(proxy, stream, messages=asked, tools=[WEEKDAY])
    assert result["choices"][0]["message"]["content"] == "A spider has eight legs."
    assert not result["choices"][0]["message"]["tool_calls"]


@pytest.mark.parametrize("stream", [False, True])
async def test_with_grounding_a_grounded_call_with_a_filler_is_asked_again(
    start_proxy, fake_upstream, stream: bool
) -> None:
    proxy = await start_proxy(models=emulated("hermes", ground_arguments=True))
    fake_upstream.script(reply("hermes", FILLER), reply("hermes", "Canada"))
    result = await ask(proxy, stream, messages=ASKED, tools=[PARCEL])
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert json.loads(made["function"]["arguments"]) == {"weight_kg": 3, "country": "Canada"}
    first, second = fake_upstream.requests
    assert_same_question_without_the_example(first, second, FILLER)


@pytest.mark.parametrize("stream", [False, True])
async def test_the_filler_written_again_is_taken(start_proxy, fake_upstream, stream: bool) -> None:
    proxy = await start_proxy(models=emulated("hermes"))
    fake_upstream.script(reply("hermes", FILLER), reply("hermes", FILLER))
    result = await ask(proxy, stream, messages=ASKED, tools=[PARCEL])
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert json.loads(made["function"]["arguments"])["country"] == FILLER
    assert len(fake_upstream.requests) == 2


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_parcel_fee"}}])
async def test_a_demanded_call_is_taken_at_once(start_proxy, fake_upstream, choice: object) -> None:
    proxy = await start_proxy(models=emulated("hermes"))
    fake_upstream.script(reply("hermes", FILLER))
    result = await ask(proxy, False, messages=ASKED, tools=[PARCEL], tool_choice=choice)
    assert result["choices"][0]["message"]["tool_calls"] and len(fake_upstream.requests) == 1


async def test_without_repairs_the_call_is_taken_at_once(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("hermes", max_repair_retries=0))
    fake_upstream.script(reply("hermes", FILLER))
    result = await ask(proxy, False, messages=ASKED, tools=[PARCEL])
    assert result["choices"][0]["message"]["tool_calls"] and len(fake_upstream.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_the_filler_is_taken_when_the_user_gave_it(start_proxy, fake_upstream, stream: bool) -> None:
    proxy = await start_proxy(models=emulated("hermes"))
    fake_upstream.script(reply("hermes", FILLER))
    asked = [{"role": "user", "content": f"Postage for 3 kg to the country I'll call '{FILLER}'?"}]
    result = await ask(proxy, stream, messages=asked, tools=[PARCEL])
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert json.loads(made["function"]["arguments"])["country"] == FILLER
    assert len(fake_upstream.requests) == 1


TOOL = ToolSpec("lookup", "Look up a code, e.g. ZX-9.", {"properties": {"code": {"type": "string"}}})


def example(said: str = "") -> WorkedExample:
    return WorkedExample(get_format("hermes"), "", tuple, lambda: Grounds([said]))


def test_only_toolshim_s_filler_is_a_placeholder() -> None:
    shown = example()
    assert shown.placeholders(TOOL, json.dumps({"code": f" {FILLER} ", "n": 1})) == [f'code=" {FILLER} "']
    assert shown.placeholders(TOOL, '{"code": "ZX-10"}') == []
    assert shown.placeholders(TOOL, json.dumps({"code": FILLER + "x"})) == []
    assert shown.placeholders(TOOL, '{"n": 1}') == []  # numbers are never fillers
    assert shown.placeholders(TOOL, "not json") == [] and shown.placeholders(None, "[1]") == []


def test_a_filler_the_definition_or_the_user_gave_is_a_value() -> None:
    value = json.dumps({"code": FILLER})
    assert example(said=f"the code is {FILLER}").placeholders(TOOL, value) == []
    defined = ToolSpec("lookup", "Look up a code.", {"properties": {"code": {"type": "string", "default": FILLER}}})
    assert example().placeholders(defined, value) == []


def test_the_conversation_is_read_only_for_a_filler_and_the_check_ends_once_asked() -> None:
    read: list[int] = []

    def conversation() -> Grounds:
        read.append(1)
        return Grounds(())

    shown = WorkedExample(get_format("hermes"), "", tuple, conversation)
    assert shown.placeholders(TOOL, '{"code": "Oslo"}') == [] and read == []
    assert shown.placeholders(TOOL, json.dumps({"code": FILLER})) == [f'code="{FILLER}"'] and read == [1]
    shown.trust_placeholders()
    assert shown.placeholders(TOOL, json.dumps({"code": FILLER})) == []


def test_instructions_without_their_example_stay_whole_where_it_is_not_a_paragraph_of_its_own() -> None:
    fmt = get_format("hermes")
    calls = [("get_parcel_fee", {"weight_kg": 1.5, "country": FILLER})]
    shown = fmt.render_calls([ToolCallRecord("", "get_parcel_fee", json.dumps(calls[0][1]))])
    assert without_example("Intro.\n\nFor example:\n" + shown + "\n\nLast.", fmt, calls) == "Intro.\n\nLast."
    assert without_example("Intro.\n\nFor example:\n" + shown, fmt, calls) == "Intro."
    long = "Intro.\n\n" + "a line\n" * 5 + shown + "\n\nLast."  # more than the lines that lead to an example
    assert without_example(long, fmt, calls) == long
    assert without_example("No example here.", fmt, calls) == "No example here."
    assert without_example("Intro.", fmt, []) == "Intro."
