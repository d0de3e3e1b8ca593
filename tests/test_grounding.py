"""``ground_arguments``: a call whose values the conversation does not hold is not taken at once.

A small model converts a temperature it invented instead of asking the weather tool, fetches the weather in a
city it guessed, or calls a weather tool for "What is the capital of France?". The unit tests pin what counts
as grounded; the proxy tests what the model is asked next and what the client gets, in every format.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from toolshim.chat.builder import NO_ANSWER_CALL
from toolshim.chat.coverage import NOTHING_UNCOVERED, Uncovered, answered_as_asked, asked_apart, uncovered_in
from toolshim.chat.grounding import Grounds
from toolshim.formats import ToolSpec

from tests.fakes import Reply, last_message, text_stream
from tests.formats.tools import OPENAI_TOOLS
from tests.test_emulation import FORMAT_NAMES, ask, call_text, emulated, pieces
from tests.test_observability import scrape, value

WEATHER = {"type": "string", "description": "City name, e.g. Paris"}
GET_WEATHER = ToolSpec(
    "get_weather", "Current weather in a city.", {"properties": {"city": WEATHER}, "required": ["city"]}
)
CONVERT = ToolSpec(
    "convert_temperature",
    "Convert a temperature between Celsius and Fahrenheit.",
    {
        "properties": {"value": {"type": "number"}, "to_unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["value", "to_unit"],
    },
)
CURRENCY = ToolSpec(
    "convert_currency",
    "Convert money.",
    {
        "properties": {"amount": {"type": "number"}, "from_currency": {"type": "string"}, "to": {"type": "string"}},
        "required": ["amount", "from_currency", "to"],
    },
)


CALCULATOR = ToolSpec(
    "calculator",
    "Evaluate an arithmetic expression, e.g. 2 * (3 + 4).",
    {"properties": {"expression": {"type": "string"}}, "required": ["expression"]},
)


# BFCL live's Travel_1_FindAttractions: the form's example is a place
ATTRACTIONS = ToolSpec(
    "find_attractions",
    "Browse attractions in a city.",
    {
        "properties": {
            "location": {"type": "string", "description": "City, in the form 'City, Country', e.g. 'Paris, FR'"}
        },
        "required": ["location"],
    },
)

ATTRACTIONS_CA = ToolSpec(
    "find_attractions",
    "Browse attractions in a city.",
    {
        "properties": {"location": {"type": "string", "description": "e.g. 'San Francisco, CA'"}},
        "required": ["location"],
    },
)


LOOKUP = ToolSpec(
    "lookup_contact",
    "Look up a person in the address book by name.",
    {"properties": {"name": {"type": "string"}}, "required": ["name"]},
)


TURIN = "Book a table for 2 at an Italian restaurant in Turin at 20:00."


@pytest.mark.parametrize(
    ("parameter", "value", "made_up"),
    [
        ("restaurant_id", "1234567890", True),  # eighth loop set: before the restaurant was looked up
        ("restaurantId", "R-1", True),
        ("restaurant_id", "R-77", False),  # the search's result gave it
        ("restaurant_id", 2, False),  # a number the user said
        ("restaurant", "1234567890", False),  # not an id parameter: one grounded value grounds the call
    ],
)
def test_a_made_up_id_is_made_up_whatever_else_the_call_got_right(parameter: str, value: Any, made_up: bool) -> None:
    tool = ToolSpec(
        "reserve_table",
        "Book a table.",
        {
            "properties": {parameter: {}, "time": {"type": "string"}, "people": {"type": "integer"}},
            "required": [parameter, "time", "people"],
        },
    )
    said = grounds(TURIN, '{"name": "Trattoria Sole", "restaurant_id": "R-77"}')
    missing = said.ungrounded(tool, json.dumps({parameter: value, "time": "20:00", "people": 2}))
    assert missing == ([f"{parameter}={json.dumps(value)}"] if made_up else [])


def grounds(*texts: str) -> Grounds:
    return Grounds.of_messages([{"role": "user", "content": text} for text in texts])


@pytest.mark.parametrize(
    ("said", "tool", "args"),
    [
        ("What is the temperature in Oslo, in Fahrenheit?", CONVERT, {"value": 25, "to_unit": "fahrenheit"}),
        ("What's the weather where my colleague Alice lives?", GET_WEATHER, {"city": "Paris"}),
        ("Hi! What is the capital of France?", GET_WEATHER, {"city": "Paris"}),
        ("Convert 1,250 dollars", CURRENCY, {"amount": 125, "from_currency": "EUR", "to": "GBP"}),
        ("How many km is 26.2 miles?", CALCULATOR, {"expression": "2 * (3 + 4)"}),  # the description's example
        ("Landmarks in San Jose, please", ATTRACTIONS_CA, {"location": "San Francisco, CA"}),  # the example's
        ("How many km is 26.2 miles?", GET_WEATHER, {"city": "City 2"}),  # one digit alone grounds nothing
        ("How many people live in Lisbon and in Porto?", GET_WEATHER, {"city": "Lisboa"}),  # another spelling
        ("What is the square root of 81?", LOOKUP, {"name": "81"}),  # digits name no person
        ("Weather at 10001, please", GET_WEATHER, {"city": "10001"}),
        ("Meet at the Marriott downtown", GET_WEATHER, {"city": "Marrakesh"}),  # the same first letters only
    ],
)
def test_a_value_the_conversation_never_gave_is_made_up(said: str, tool: ToolSpec, args: dict[str, Any]) -> None:
    assert grounds(said).ungrounded(tool, json.dumps(args))


@pytest.mark.parametrize(
    ("said", "tool", "args"),
    [
        ("What is the weather in oslo?", GET_WEATHER, {"city": "Oslo, Norway"}),
        ("How much is 250 US dollars in euros?", CURRENCY, {"amount": 250, "from_currency": "USD", "to": "EUR"}),
        ("Convert 1,234.5 dollars", CURRENCY, {"amount": 1234.5, "from_currency": "x", "to": "y"}),
        ("Convert 4,5 euros", CURRENCY, {"amount": 4.5, "from_currency": "x", "to": "y"}),
        ("Book it for two people", CURRENCY, {"amount": 2, "from_currency": "x", "to": "y"}),
        ("the dentists at 9:30", GET_WEATHER, {"city": "Dentist 09:30"}),
        ("book the dentist", GET_WEATHER, {"city": "Dentists"}),
        ("two bookings for Tuesday", GET_WEATHER, {"city": "Tuesdays"}),
        ("東京の天気は?", GET_WEATHER, {"city": "東京"}),
        ("What is 2 * (3 + 4)?", CALCULATOR, {"expression": "2 * (3 + 4)"}),
        ("Landmarks in Paris that children can visit for free?", ATTRACTIONS, {"location": "Paris, FR"}),  # its form
        ("anything", CONVERT, {"value": 1, "to_unit": "celsius"}),  # 0, 1 and the schema's own values
        ("anything", GET_WEATHER, {"city": ""}),
        ("anything", GET_WEATHER, {"other": "Paris"}),  # only required values are judged
        ("Call R2D2 for me", LOOKUP, {"name": "R2D2"}),  # a name with a digit in it is still a name
    ],
)
def test_a_value_from_the_conversation_or_the_schema_is_grounded(
    said: str, tool: ToolSpec, args: dict[str, Any]
) -> None:
    assert grounds(said).ungrounded(tool, json.dumps(args)) == []


def test_tool_results_and_earlier_calls_ground_the_next_call() -> None:
    history = [
        {"role": "user", "content": "Weather where Alice lives, in Fahrenheit?"},
        {"role": "assistant", "tool_calls": [{"function": {"name": "get_colleague", "arguments": '{"n": "Alice"}'}}]},
        {"role": "tool", "content": '{"city": "Lisbon", "temperature_celsius": 21}'},
    ]
    seen = Grounds.of_messages(history)
    assert seen.ungrounded(GET_WEATHER, '{"city": "Lisbon"}') == []
    assert seen.ungrounded(CONVERT, '{"value": 21, "to_unit": "fahrenheit"}') == []
    assert seen.ungrounded(CONVERT, '{"value": 22, "to_unit": "fahrenheit"}') == ["value=22"]


def test_what_cannot_be_judged_is_not_questioned() -> None:
    said = grounds("nothing")
    assert said.ungrounded(None, '{"city": "Paris"}') == []
    assert said.ungrounded(GET_WEATHER, "not json") == []
    assert said.ungrounded(GET_WEATHER, '["Paris"]') == []
    nested = ToolSpec("f", "", {"properties": {"xs": {"type": "array"}}, "required": ["xs"]})
    assert said.ungrounded(nested, '{"xs": []}') == []
    assert said.ungrounded(nested, '{"xs": [{"a": "Paris"}]}') == ['xs=[{"a": "Paris"}]']
    assert grounds("about Paris").ungrounded(nested, '{"xs": [{"a": "Paris"}, true]}') == []


def uncovered_mentions(messages: list[dict[str, Any]]) -> list[str]:
    """The question's names and numbers that the loop has not covered yet (no tools: no topics)."""
    return list(uncovered_in(messages, ()).names)


def test_the_names_a_question_asks_about_and_no_result_covers() -> None:
    question = {"role": "user", "content": "What's the weather in Paris and in Tokyo, on 2025-03-14? Thanks Bob"}
    paris = {"role": "tool", "content": '{"city": "Paris", "date": "2025-03-14"}'}
    assert uncovered_mentions([question, paris]) == ["Tokyo", "Bob"]
    assert uncovered_mentions([question]) == ["Paris", "Tokyo", "2025-03-14", "Bob"]
    assert uncovered_mentions([{"role": "assistant", "content": "x"}]) == []


@pytest.mark.parametrize(
    ("question", "uncovered"),
    [
        # the ninth loop set: "3" is how many tickets, not a thing to look up ("also asks about 3" had the model
        # call a BMI tool with a weight of 3)
        ("How much do 3 adult tickets to the Louvre cost in total?", []),
        ("Book a table for 2 at 20:00 in Turin.", ["20:00", "Turin"]),
        ("How many km are 26.2 miles?", []),
        ("Is order 6611 shipped? And A1234?", ["6611", "A1234"]),  # ids: more digits, or letters
    ],
)
def test_counts_and_amounts_are_no_names_to_look_up(question: str, uncovered: list[str]) -> None:
    result = {"role": "tool", "content": '{"attraction": "Louvre", "adult_price": 22.0}'}
    assert uncovered_mentions([{"role": "user", "content": question}, result]) == uncovered


def test_what_is_uncovered_holds_the_names_then_the_topics_of_unused_tools() -> None:
    tools = [
        ToolSpec("get_uv_index", "Today's UV index in a city.", {"type": "object"}),
        ToolSpec("get_pollen_count", "Today's pollen level in a city.", {"type": "object"}),
    ]
    question = {"role": "user", "content": "What are the UV index and the pollen level in Sydney and Perth?"}
    sydney = exchange({"city": "Sydney"}, '{"city": "Sydney", "uv_index": 9}')
    sydney[0]["tool_calls"][0]["function"]["name"] = "get_uv_index"
    found = uncovered_in([question, *sydney], tools)
    assert (found.names, found.topics, found.words) == (("Perth",), ("pollen", "level"), ("Perth", "pollen", "level"))
    assert found.left_out_by("Perth: 7, pollen low")  # a topic no result covers: any answer about it is made up
    assert uncovered_in([question], tools).topics == ()  # no call yet: no tool is left unused beside one used
    names_only = Uncovered(("Perth",))
    assert names_only.left_out_by("Sydney: 9.") and not names_only.left_out_by("Perth: 7.")
    assert not NOTHING_UNCOVERED and not NOTHING_UNCOVERED.left_out_by("anything")


@pytest.mark.parametrize(
    ("question", "result", "answer", "left_out"),
    [
        # Oslo looked up, Madrid not: an answer that names Madrid tells Oslo's time as Madrid's (the eleventh set)
        ("When does the sun rise in Oslo and in Madrid?", '{"city": "Oslo"}', "09:12 in Oslo and Madrid.", True),
        # nothing of the question looked up as it is written: the name stands for the value the call took
        (
            "What is Apple's share price right now?",
            '{"symbol": "AAPL", "price": 187.44}',
            "Apple's is 187.44 USD.",
            False,
        ),
        ("What is Apple's share price right now?", '{"symbol": "AAPL", "price": 187.44}', "It is 187.44.", True),
        # France only says where Paris is: an answer naming it is no made-up second lookup
        ("What's the weather in Paris, France?", '{"city": "Paris"}', "Paris, France: 18 C.", False),
    ],
)
def test_an_answer_about_a_name_no_result_covers_beside_one_looked_up_is_made_up(
    question: str, result: str, answer: str, left_out: bool
) -> None:
    found = uncovered_in([{"role": "user", "content": question}, *exchange({}, result)], ())
    assert found.left_out_by(answer) is left_out


FOUND, UNKNOWN = '{"ok": true}', '{"error": "ValueError: unknown stop"}'


@pytest.mark.parametrize(
    ("question", "arguments", "result", "next_tools"),
    [
        # listed with the name looked up: the tool that looked it up is the next call's
        ("When does the sun rise in Oslo and in Madrid?", {"city": "Oslo"}, FOUND, ("hours",)),
        ("How high are Mont Blanc and the Matterhorn?", {"place": "Mont Blanc"}, FOUND, ("hours",)),
        # a unit beside the city, a stop beside the destination: no list, no tool named
        ("What's the temperature in Oslo right now, in Fahrenheit?", {"city": "Oslo"}, FOUND, ()),
        ("When does the next bus to the Harbour leave from Central Station?", {"stop": "Harbour"}, FOUND, ()),
        # ...unless the call failed for the one it took: the same tool for the other
        ("When does the next bus to the Harbour leave from Central Station?", {"stop": "Harbour"}, UNKNOWN, ("hours",)),
    ],
)
def test_the_next_call_names_the_tool_that_looked_up_a_listed_name(
    question: str, arguments: dict[str, Any], result: str, next_tools: tuple[str, ...]
) -> None:
    found = uncovered_in([{"role": "user", "content": question}, *exchange(arguments, result)], ())
    assert found.beside_looked_up and (found.topic_tools or found.name_tools) == next_tools


def exchange(arguments: dict[str, Any], result: str, call_id: str = "c1") -> list[dict[str, Any]]:
    call = {"id": call_id, "type": "function", "function": {"name": "hours", "arguments": json.dumps(arguments)}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


MUSEUMS = {"role": "user", "content": "Until when are the Louvre and the Prado open today?"}


@pytest.mark.parametrize(
    ("arguments", "result", "uncovered"),
    [
        # one value for both, answered for the Louvre: the Prado is still to ask about
        ({"museum": "Louvre and the Prado"}, '{"museum": "Louvre", "closes": "18:00"}', ["Prado"]),
        ({"museums": "Louvre, Prado"}, '{"museum": "Prado", "closes": "20:00"}', ["Louvre"]),
        # a result that names neither answers for the value as written (results need not repeat their input)
        ({"museum": "Louvre and the Prado"}, '{"closes": "18:00"}', []),
        # one that names both, or an error about the value, answers for both
        ({"museum": "Louvre and the Prado"}, '{"Louvre": "18:00", "Prado": "20:00"}', []),
        ({"museum": "Louvre and the Prado"}, "Error: unknown museum 'Louvre and the Prado'", []),
        # one name per value: as before
        ({"museum": "Louvre"}, '{"closes": "18:00"}', ["Prado"]),
    ],
)
def test_a_value_that_names_two_things_covers_those_its_result_names(
    arguments: dict[str, Any], result: str, uncovered: list[str]
) -> None:
    assert uncovered_mentions([MUSEUMS, *exchange(arguments, result)]) == uncovered


def test_the_thing_left_over_is_covered_by_its_own_call() -> None:
    both = exchange({"museum": "Louvre and the Prado"}, '{"museum": "Louvre", "closes": "18:00"}')
    prado = exchange({"museum": "Prado"}, '{"museum": "Prado", "closes": "20:00"}', "c2")
    assert uncovered_mentions([MUSEUMS, *both, *prado]) == []
    waiting = [MUSEUMS, both[0]]  # a call whose result has not come: its value as written
    assert uncovered_mentions(waiting) == []
    unpaired = [MUSEUMS, both[0], {"role": "tool", "content": '{"museum": "Louvre"}'}]  # no id: as written
    assert uncovered_mentions(unpaired) == []


@pytest.mark.parametrize(
    ("arguments", "result", "told"),
    [
        # answered for one of the two: told as a call for that one
        ({"museum": "Louvre and the Prado"}, '{"museum": "Louvre", "closes": "18:00"}', {"museum": "Louvre"}),
        ({"where": {"names": ["Louvre, Prado"]}}, '{"museum": "Prado"}', {"where": {"names": ["Prado"]}}),
        # answered for both, for neither, or failed on the value: told as written
        ({"museum": "Louvre and the Prado"}, '{"Louvre": "18:00", "Prado": "20:00"}', None),
        ({"museum": "Louvre and the Prado"}, '{"closes": "18:00"}', None),
        ({"museum": "Louvre and the Prado"}, "Error: unknown museum 'Louvre and the Prado'", None),
        ({"museum": "Louvre", "day": 3}, '{"museum": "Louvre"}', None),
    ],
)
def test_a_call_is_told_as_its_result_answered_it(
    arguments: dict[str, Any], result: str, told: dict[str, Any] | None
) -> None:
    messages = [MUSEUMS, *exchange(arguments, result)]
    before = json.dumps(messages)
    out = answered_as_asked(messages)
    assert json.dumps(messages) == before  # the client's messages are not changed
    call = out[1]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == (told or arguments)
    assert (out[1] is messages[1]) == (told is None)
    assert out[0] is MUSEUMS and out[2] is messages[2]


@pytest.mark.parametrize(
    ("question", "arguments", "result"),
    [
        # numbers of the question inside a value that is no list of names (seen in the eighth loop set: "20:00"
        # was told as "2", and the text message as "10")
        (
            "Book a table for 2 at an Italian restaurant in Turin at 20:00.",
            {"restaurant_id": "1234567890", "time": "20:00", "people": 2},
            "ValueError: no restaurant '1234567890'",
        ),
        (
            "Text +47 555 1234 that I'm running 10 minutes late.",
            {"to": "+47 555 1234", "message": "I'm running 10 minutes late"},
            '{"sent": true, "characters": 10}',
        ),
        # two names in a value that says more than the names
        (
            "Compare the Louvre and the Prado.",
            {"query": "visitor numbers of the Louvre and the Prado"},
            '{"museum": "Louvre", "visitors": 8900000}',
        ),
    ],
)
def test_a_value_that_is_no_list_of_names_is_told_as_written(
    question: str, arguments: dict[str, Any], result: str
) -> None:
    messages = [{"role": "user", "content": question}, *exchange(arguments, result)]
    assert answered_as_asked(messages) == messages


def test_i_and_i_m_are_no_names_the_question_asks_about() -> None:
    question = {"role": "user", "content": "Text Anna that I'm late, and tell me if I'll make it."}
    assert uncovered_mentions([question]) == ["Anna"]


def test_calls_before_the_question_and_unpaired_calls_are_told_as_written() -> None:
    both = exchange({"museum": "Louvre and the Prado"}, '{"museum": "Louvre"}')
    earlier = [{"role": "user", "content": "Is the Louvre or the Prado bigger?"}, *both]
    assert answered_as_asked([*earlier, MUSEUMS]) == [*earlier, MUSEUMS]
    unpaired = [MUSEUMS, both[0], {"role": "tool", "content": '{"museum": "Louvre"}'}]
    assert answered_as_asked(unpaired) == unpaired
    one_name = [{"role": "user", "content": "When does the Louvre close?"}, *both]
    assert answered_as_asked(one_name) == one_name


CITIES = {"role": "user", "content": "What's the weather in Paris and in Tokyo?"}


def test_names_in_calls_of_different_tools_are_not_asked_apart() -> None:
    """The weather in Oslo, then its conversion to Fahrenheit: one answer, not one per name (main loop set)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is the temperature in Oslo, in Fahrenheit?"}]
    messages += exchange({"city": "Oslo"}, '{"celsius": 4}', "c1")
    messages += exchange({"value": 4, "to_unit": "fahrenheit"}, '{"fahrenheit": 39.2}', "c2")
    messages[3]["tool_calls"][0]["function"]["name"] = "convert_temperature"
    assert asked_apart(messages) == []
    messages[3]["tool_calls"][0]["function"]["name"] = "hours"  # one tool for both: apart
    assert asked_apart(messages) == ["Oslo", "Fahrenheit"]


def test_a_failed_call_found_nothing_to_tell_apart() -> None:
    """``get_bus_times(stop="Harbour")`` unknown, then Central Station's departures: one thing found (eleventh set)."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "When does the next bus to the Harbour leave from Central Station?"}
    ]
    messages += exchange({"stop": "Harbour"}, '{"error": "ValueError: unknown: Harbour"}', "c1")
    messages += exchange({"stop": "Central Station"}, '{"next_departures": ["14:20 line 3 to Harbour"]}', "c2")
    assert asked_apart(messages) == []
    messages[2]["content"] = '{"next_departures": ["13:50 line 9 to Central Station"]}'  # both found: apart
    assert asked_apart(messages) == ["Harbour", "Central Station"]


@pytest.mark.parametrize(
    ("question", "calls", "apart"),
    [
        # each name looked up on its own call
        (CITIES, [({"city": "Paris"}, "{}"), ({"city": "Tokyo"}, "{}")], ["Paris", "Tokyo"]),
        # one value for both, answered for one, then the other: apart as answered
        (
            MUSEUMS,
            [({"museum": "Louvre and the Prado"}, '{"museum": "Louvre"}'), ({"museum": "Prado"}, "{}")],
            ["Louvre", "Prado"],
        ),
        # one call names both (a conversion), or only one is asked about so far: not apart
        (
            {"role": "user", "content": "Convert 100 USD to EUR."},
            [({"from": "USD", "to": "EUR", "amount": 100}, "{}")],
            [],
        ),
        (CITIES, [({"city": "Paris"}, "{}")], []),
        (CITIES, [({"city": "Paris"}, "{}"), ({"city": "Paris and Tokyo"}, "{}")], []),
        # numbers are no names to answer for
        (
            {"role": "user", "content": "Are orders 1234 and 5678 shipped?"},
            [({"id": "1234"}, "{}"), ({"id": "5678"}, "{}")],
            [],
        ),
    ],
)
def test_the_names_asked_about_apart(
    question: dict[str, Any], calls: list[tuple[dict[str, Any], str]], apart: list[str]
) -> None:
    messages = [question]
    for i, (arguments, result) in enumerate(calls):
        messages += exchange(arguments, result, f"c{i}")
    assert asked_apart(messages) == apart


@pytest.mark.parametrize(
    ("said", "args", "expected"),
    [
        ("How many people live in Lisbon and in Porto?", {"city": "Lisboa"}, {"city": "Lisbon"}),
        ("Flights to Seville?", {"city": "Sevilla, Spain"}, {"city": "Seville, Spain"}),
        ("hotels in Lisbon", {"cities": ["Lisboa", "Porto"]}, {"cities": ["Lisbon", "Porto"]}),
    ],
)
def test_a_name_the_model_spelled_its_own_way_is_written_as_the_user_wrote_it(
    said: str, args: dict[str, Any], expected: dict[str, Any]
) -> None:
    fixed = grounds(said).respelled_arguments(GET_WEATHER, json.dumps(args))
    assert json.loads(fixed) == expected
    assert grounds(said).ungrounded(GET_WEATHER, fixed) == [] or "cities" in args


@pytest.mark.parametrize(
    ("said", "value"),
    [
        ("What do people speak in Portugal?", "Portuguese"),  # more than two letters apart: another word
        ("I definately want it", "definitely"),  # the user's spelling of a common word is not a name
        ("the dentist in Lisbon", "Dentists"),  # an ending added: the same word, grounded as it is
        ("Meet at the Lisbon office", "Write to Lisboa about the plans for the next quarter now"),  # a text
        ("Flights to Seville or Sevilla?", "Sevilla"),  # the conversation has the model's spelling too
    ],
)
def test_anything_but_a_respelled_name_is_left_as_written(said: str, value: str) -> None:
    arguments = json.dumps({"city": value})
    assert grounds(said).respelled_arguments(GET_WEATHER, arguments) == arguments


def test_schema_values_and_what_cannot_be_read_are_not_respelled() -> None:
    tool = ToolSpec("f", "", {"properties": {"unit": {"enum": ["Celsio"]}}, "required": ["unit"]})
    said = grounds("Celsius, please")
    assert said.respelled_arguments(tool, '{"unit": "Celsio"}') == '{"unit": "Celsio"}'
    assert said.respelled_arguments(tool, '{"other": "Celsio"}') == '{"other":"Celsius"}'
    assert said.respelled_arguments(None, '{"unit": "Celsio"}') == '{"unit": "Celsio"}'
    assert said.respelled_arguments(tool, "not json") == "not json"
    assert grounds("all lower case lisbon").respelled_arguments(GET_WEATHER, '{"city": "Lisboa"}') == (
        '{"city": "Lisboa"}'
    )


# ---- through the proxy ----------------------------------------------------------------------------

CONVERT_TOOL = {
    "type": "function",
    "function": {"name": CONVERT.name, "description": CONVERT.description, "parameters": CONVERT.parameters},
}
TOOLS = [OPENAI_TOOLS["get_weather"], CONVERT_TOOL]
OSLO_F = [{"role": "user", "content": "What is the weather in Oslo right now, in Fahrenheit?"}]


def grounded(fmt: str) -> list[dict[str, Any]]:
    return emulated(fmt, ground_arguments=True)


def offered(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"]) if request["messages"][0]["role"] == "system" else ""


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_made_up_value_asks_again_without_that_tool_and_the_model_s_next_call_is_taken(
    start_proxy, fake_upstream, fmt: str, stream: bool
) -> None:
    proxy = await start_proxy(models=grounded(fmt))
    invented = call_text(fmt, "convert_temperature", {"value": 25, "to_unit": "fahrenheit"})
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(invented))),
        Reply(pieces=text_stream(pieces(call_text(fmt, "get_weather", {"city": "Oslo"})))),
    )
    result = await ask(proxy, stream, messages=OSLO_F, tools=TOOLS)
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert made["function"]["name"] == "get_weather" and json.loads(made["function"]["arguments"]) == {"city": "Oslo"}
    first, second = fake_upstream.requests
    assert "convert_temperature" in offered(first) and "convert_temperature" not in offered(second)
    assert second["messages"][-1] == first["messages"][-1]  # the same question, not the attempt and a message


@pytest.mark.parametrize("stream", [False, True])
async def test_a_respelled_name_reaches_the_client_as_the_user_wrote_it(
    start_proxy, fake_upstream, stream: bool
) -> None:
    proxy = await start_proxy(models=grounded("hermes"))
    lisboa = call_text("hermes", "get_weather", {"city": "Lisboa"})
    fake_upstream.script(Reply(pieces=text_stream(pieces(lisboa))))
    asked = [{"role": "user", "content": "What's the weather in Lisbon?"}]
    result = await ask(proxy, stream, messages=asked, tools=TOOLS)
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert json.loads(made["function"]["arguments"]) == {"city": "Lisbon"}
    assert len(fake_upstream.requests) == 1  # grounded as repaired: no re-ask


@pytest.mark.parametrize("stream", [False, True])
async def test_the_same_made_up_call_written_again_is_taken(start_proxy, fake_upstream, stream: bool) -> None:
    """What the model derived from what it knows ("the capital of France" → Paris) costs one more request."""
    proxy = await start_proxy(models=grounded("hermes"))
    paris = call_text("hermes", "get_weather", {"city": "Paris"})
    fake_upstream.script(Reply(pieces=text_stream(pieces(paris))), Reply(pieces=text_stream(pieces(paris))))
    asked = [{"role": "user", "content": "What's the weather in the capital of France?"}]
    result = await ask(proxy, stream, messages=asked, tools=TOOLS)
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert json.loads(made["function"]["arguments"]) == {"city": "Paris"}
    assert len(fake_upstream.requests) == 2


RESTAURANT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "find_restaurant",
            "description": "Find a restaurant by cuisine in a city: its name and id.",
            "parameters": {
                "type": "object",
                "properties": {"cuisine": {"type": "string"}, "city": {"type": "string"}},
                "required": ["cuisine", "city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "reserve_table",
            "description": "Book a table at a restaurant by its id.",
            "parameters": {
                "type": "object",
                "properties": {"restaurant_id": {"type": "string"}, "time": {"type": "string"}},
                "required": ["restaurant_id", "time"],
            },
        },
    },
]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("instead", "answer"),
    [
        pytest.param("Which restaurant do you mean?", "Which restaurant do you mean?", id="text"),
        pytest.param(
            call_text("hermes", "reserve_table", {"restaurant_id": "42", "time": "20:00"}), NO_ANSWER_CALL, id="again"
        ),
    ],
)
async def test_a_call_with_a_made_up_id_never_stands(
    start_proxy, fake_upstream, stream: bool, instead: str, answer: str
) -> None:
    """Eighth loop set: ``reserve_table(restaurant_id="1234567890")`` before any restaurant was looked up. A made-up
    id names another's booking, or nothing: the call is not made, even when nothing better comes."""
    proxy = await start_proxy(models=grounded("hermes"))
    made_up = call_text("hermes", "reserve_table", {"restaurant_id": "1234567890", "time": "20:00"})
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(made_up))),
        Reply(pieces=text_stream(pieces(instead))),
        Reply(pieces=text_stream(pieces(instead))),
    )
    asked = [{"role": "user", "content": "Book a table at an Italian restaurant in Turin at 20:00."}]
    result = await ask(proxy, stream, messages=asked, tools=RESTAURANT_TOOLS)
    message = result["choices"][0]["message"]
    assert not message.get("tool_calls") and result["choices"][0]["finish_reason"] == "stop"
    assert answer in (message["content"] or "") and "1234567890" not in (message["content"] or ""), message


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "instead",
    [
        pytest.param(call_text("hermes", "convert_temperature", {"value": 25, "to_unit": "celsius"}), id="made-up"),
        pytest.param("I cannot look up the weather.", id="text"),
    ],
)
async def test_with_nothing_better_without_its_tool_the_first_call_stands(
    start_proxy, fake_upstream, stream: bool, instead: str
) -> None:
    """Asked "the weather in the capital of Japan", Tokyo comes from what the model knows, and without the weather
    tool the model only makes up a conversion or gives up: its first call is the answer."""
    proxy = await start_proxy(models=grounded("hermes"))
    tokyo = call_text("hermes", "get_weather", {"city": "Tokyo"})
    fake_upstream.script(Reply(pieces=text_stream(pieces(tokyo))), Reply(pieces=text_stream(pieces(instead))))
    asked = [{"role": "user", "content": "What's the weather like in the capital of Japan?"}]
    result = await ask(proxy, stream, messages=asked, tools=TOOLS)
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert made["function"]["name"] == "get_weather" and json.loads(made["function"]["arguments"]) == {"city": "Tokyo"}
    assert result["choices"][0]["finish_reason"] == "tool_calls" and len(fake_upstream.requests) == 2
    assert not result["choices"][0]["message"]["content"]


DEVICES = [
    {
        "type": "function",
        "function": {
            "name": "list_devices",
            "description": "The user's devices with their ids.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_battery",
            "description": "A device's battery level.",
            "parameters": {
                "type": "object",
                "required": ["device_id"],
                "properties": {"device_id": {"type": "string", "description": "e.g. d-5"}},
            },
        },
    },
]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_broken_call_without_the_made_up_call_s_tool_is_repaired_before_the_first_call_stands(
    start_proxy, fake_upstream, stream: bool
) -> None:
    """The description's example id copied (``d-5``), then, without ``get_battery``, a tool made up: the repair
    re-ask names the tools there are, and the lookup the model then writes is the call; the copy never is."""
    proxy = await start_proxy(models=grounded("hermes"))
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(call_text("hermes", "get_battery", {"device_id": "d-5"})))),
        Reply(pieces=text_stream(pieces(call_text("hermes", "battery_level", {})))),
        Reply(pieces=text_stream(pieces(call_text("hermes", "list_devices", {})))),
    )
    asked = [{"role": "user", "content": "What's the battery level of my laptop?"}]
    result = await ask(proxy, stream, messages=asked, tools=DEVICES)
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert made["function"]["name"] == "list_devices"
    first, second, third = fake_upstream.requests
    assert "get_battery" in offered(first)
    assert "get_battery" not in offered(second) and "get_battery" not in offered(third)
    assert "battery_level" in third["messages"][-1]["content"]  # the repair names the broken call


FLIGHTS = [
    {
        "type": "function",
        "function": {
            "name": "search_flights",
            "description": "Flights between two cities, with their ids and prices.",
            "parameters": {
                "type": "object",
                "required": ["origin", "destination"],
                "properties": {"origin": {"type": "string"}, "destination": {"type": "string"}},
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "book_flight",
            "description": "Book a flight by its id.",
            "parameters": {
                "type": "object",
                "required": ["flight_id"],
                "properties": {"flight_id": {"type": "string"}},
            },
        },
    },
]


# morph_xml reads an element named after no tool as text, not as a broken call: there the attempt has no call
@pytest.mark.parametrize("fmt", [name for name in FORMAT_NAMES if name != "morph_xml"])
@pytest.mark.parametrize("stream", [False, True])
async def test_no_near_miss_name_reaches_the_tool_withheld_for_a_made_up_call(
    start_proxy, fake_upstream, fmt: str, stream: bool
) -> None:
    """``book_flight("12345")`` made up; without ``book_flight`` the model wrote ``book_flights`` with the search's
    arguments (the loop benchmark's cheapest-flight task). The plural resolved to the withheld tool, and its repair
    asked for a ``flight_id``: the model invented one. Now the name is unknown there, the repair names the tools
    offered, and the search the model then writes is the call."""
    proxy = await start_proxy(models=grounded(fmt))
    route = {"origin": "Oslo", "destination": "Rome"}
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(call_text(fmt, "book_flight", {"flight_id": "12345"})))),
        Reply(pieces=text_stream(pieces(call_text(fmt, "book_flights", route)))),
        Reply(pieces=text_stream(pieces(call_text(fmt, "search_flights", route)))),
    )
    asked = [{"role": "user", "content": "Book the cheapest flight from Oslo to Rome."}]
    result = await ask(proxy, stream, messages=asked, tools=FLIGHTS)
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert made["function"]["name"] == "search_flights" and json.loads(made["function"]["arguments"]) == route
    first, second, third = fake_upstream.requests
    assert "book_flight" in offered(first) and "book_flight" not in offered(second)
    repair = str(third["messages"][-1]["content"])
    assert "book_flights" in repair and "search_flights" in repair and "flight_id" not in repair


@pytest.mark.parametrize("stream", [False, True])
async def test_a_made_up_call_for_a_question_no_tool_relates_to_gets_a_plain_answer(
    start_proxy, fake_upstream, stream: bool
) -> None:
    proxy = await start_proxy(models=grounded("hermes"))
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(call_text("hermes", "get_weather", {"city": "Paris"})))),
        Reply(pieces=text_stream(["The capital of France is Paris."])),
    )
    asked = [{"role": "user", "content": "Hi! What is the capital of France?"}]
    result = await ask(proxy, stream, messages=asked, tools=TOOLS)
    message = result["choices"][0]["message"]
    assert message["content"] == "The capital of France is Paris." and not message.get("tool_calls")
    assert result["choices"][0]["finish_reason"] == "stop"
    assert "get_weather" not in offered(fake_upstream.requests[1])


@pytest.mark.parametrize("stream", [False, True])
async def test_a_grounded_call_beside_a_made_up_one_is_returned_alone(start_proxy, fake_upstream, stream: bool) -> None:
    proxy = await start_proxy(models=grounded("hermes"))
    both = call_text("hermes", "get_weather", {"city": "Oslo"}) + call_text(
        "hermes", "convert_temperature", {"value": 25, "to_unit": "fahrenheit"}
    )
    fake_upstream.script(Reply(pieces=text_stream(pieces(both))))
    result = await ask(proxy, stream, messages=OSLO_F, tools=TOOLS, parallel_tool_calls=True)
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert made["function"]["name"] == "get_weather" and len(fake_upstream.requests) == 1


@pytest.mark.parametrize("rule", [{}, {"ground_arguments": True}])
async def test_grounded_calls_and_rules_without_the_option_take_one_request(
    start_proxy, fake_upstream, rule: dict[str, Any]
) -> None:
    proxy = await start_proxy(models=emulated("hermes", **rule))
    made_up = rule == {}
    args = {"value": 25, "to_unit": "fahrenheit"} if made_up else {"value": 1, "to_unit": "fahrenheit"}
    fake_upstream.script(Reply(pieces=text_stream(pieces(call_text("hermes", "convert_temperature", args)))))
    result = await ask(proxy, False, messages=OSLO_F, tools=TOOLS)
    assert result["choices"][0]["message"]["tool_calls"] and len(fake_upstream.requests) == 1


async def test_a_required_tool_choice_is_not_questioned(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=grounded("hermes"))
    fake_upstream.script(Reply(pieces=text_stream(pieces(call_text("hermes", "get_weather", {"city": "Rome"})))))
    result = await ask(proxy, False, messages=OSLO_F, tools=TOOLS, tool_choice="required")
    assert result["choices"][0]["message"]["tool_calls"] and len(fake_upstream.requests) == 1


async def test_folded_results_name_what_the_question_asks_that_they_do_not_cover(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("hermes", ground_arguments=True, tool_history="folded"))
    fake_upstream.script(Reply(pieces=text_stream(["Paris: 18 C."])))
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    messages = [
        {"role": "user", "content": "What's the weather in Paris and in Tokyo?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"city": "Paris", "celsius": 18}'},
    ]
    await ask(proxy, False, messages=messages, tools=TOOLS)
    told = fake_upstream.requests[0]["messages"][-1]["content"]
    assert "The question also asks about Tokyo, which these results do not cover yet." in told
    assert "Paris," not in told.split("also asks about")[1]


HOURS_TOOL = {
    "type": "function",
    "function": {
        "name": "get_opening_hours",
        "description": "Today's opening hours of a museum.",
        "parameters": {"type": "object", "properties": {"museum": {"type": "string"}}, "required": ["museum"]},
    },
}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_for_two_things_answered_for_one_asks_for_the_other(
    start_proxy, fake_upstream, stream: bool
) -> None:
    """``get_opening_hours(museum="Louvre and the Prado")`` got the Louvre's hours (seventh loop set): told the
    Prado is not covered yet, the model calls for it, instead of giving the Louvre's hours for both."""
    proxy = await start_proxy(models=emulated("hermes", ground_arguments=True, tool_history="folded"))
    prado = call_text("hermes", "get_opening_hours", {"museum": "Prado"})
    fake_upstream.script(Reply(pieces=text_stream(pieces(prado))))
    messages = [MUSEUMS, *exchange({"museum": "Louvre and the Prado"}, '{"museum": "Louvre", "closes": "18:00"}')]
    messages[1]["tool_calls"][0]["function"]["name"] = "get_opening_hours"
    result = await ask(proxy, stream, messages=messages, tools=[HOURS_TOOL])
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert json.loads(made["function"]["arguments"]) == {"museum": "Prado"}
    told = fake_upstream.requests[0]["messages"][-1]["content"]
    assert "The question also asks about Prado, which these results do not cover yet." in told
    # the call is told as answered: for the Louvre (the client's own history keeps what it sent)
    assert '- get_opening_hours({"museum": "Louvre"}) returned: ' in told
    assert "Louvre and the Prado" not in told.split("Tool results so far:")[1]


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_to_things_looked_up_apart_names_what_was_found_for_each(
    start_proxy, fake_upstream, stream: bool
) -> None:
    """Told the Louvre's and the Prado's hours, a small model gave one of them for both: asked for an answer,
    it is asked to name what was found for each; an echo of that request is toolshim's text, never the answer."""
    proxy = await start_proxy(models=emulated("hermes", ground_arguments=True, tool_history="folded"))
    fake_upstream.script(Reply(pieces=text_stream(pieces("The Louvre closes at 18:00 and the Prado at 20:00."))))
    messages = [
        MUSEUMS,
        *exchange({"museum": "Louvre"}, '{"museum": "Louvre", "closes": "18:00"}'),
        *exchange({"museum": "Prado"}, '{"museum": "Prado", "closes": "20:00"}', "c2"),
    ]
    for message in messages[1::2]:
        message["tool_calls"][0]["function"]["name"] = "get_opening_hours"
    result = await ask(proxy, stream, messages=messages, tools=[HOURS_TOOL])
    assert result["choices"][0]["message"]["content"] == "The Louvre closes at 18:00 and the Prado at 20:00."
    told = fake_upstream.requests[0]["messages"][-1]["content"]
    assert told.endswith(
        "If these results answer the question, answer it now, naming what they found for each of Louvre and "
        "Prado. Otherwise call the next tool you need."
    )


async def test_the_re_ask_is_counted_as_ground(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=grounded("hermes"))
    invented = call_text("hermes", "convert_temperature", {"value": 25, "to_unit": "fahrenheit"})
    fake_upstream.script(Reply(pieces=text_stream([invented])), Reply(pieces=text_stream(["It is 39 F."])))
    await ask(proxy, False, messages=OSLO_F, tools=TOOLS)
    assert value(await scrape(proxy), "toolshim_reasks_total", model="*", reason="ground") == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_an_echo_of_the_uncovered_note_never_reaches_the_client(start_proxy, fake_upstream, stream: bool) -> None:
    """A model that repeats the last message it was told: the folded results and toolshim's note about what
    they do not cover are toolshim's text, filtered like the rest."""
    proxy = await start_proxy(models=emulated("hermes", ground_arguments=True, tool_history="folded"))
    fake_upstream.script(Reply(respond=last_message))
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    messages = [
        {"role": "user", "content": "What's the weather in Paris and in Tokyo?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"city": "Paris", "celsius": 18}'},
    ]
    result = await ask(proxy, stream, messages=messages, tools=TOOLS)
    content = result["choices"][0]["message"]["content"] or ""
    assert "do not cover yet" not in content and "If these results" not in content, content
    assert "Tool results so far" not in content and content.strip(), content


@pytest.mark.parametrize("stream", [False, True])
async def test_an_echo_of_the_request_for_each_never_reaches_the_client(
    start_proxy, fake_upstream, stream: bool
) -> None:
    proxy = await start_proxy(models=emulated("hermes", ground_arguments=True, tool_history="folded"))
    fake_upstream.script(Reply(respond=last_message), Reply(respond=last_message), Reply(respond=last_message))
    messages = [
        {"role": "user", "content": "What's the weather in Paris and in Tokyo?"},
        *exchange({"city": "Paris"}, '{"city": "Paris", "celsius": 18}'),
        *exchange({"city": "Tokyo"}, '{"city": "Tokyo", "celsius": 25}', "c2"),
    ]
    for message in messages[1::2]:
        message["tool_calls"][0]["function"]["name"] = "get_weather"
    result = await ask(proxy, stream, messages=messages, tools=TOOLS)
    content = result["choices"][0]["message"]["content"] or ""
    assert "for each of" not in content and "If these results" not in content, content
    assert "Tool results so far" not in content and content.strip(), content
    assert "for each of Paris and Tokyo" in fake_upstream.requests[0]["messages"][-1]["content"]


SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_products",
        "description": "Search the shop's catalog.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}
BUY_TOOL = {
    "type": "function",
    "function": {
        "name": "place_stock_order",
        "description": "Buy shares of a stock.",
        "parameters": {
            "type": "object",
            "properties": {"symbol": {"type": "string"}, "shares": {"type": "number"}},
            "required": ["symbol", "shares"],
        },
    },
}
FOUND = '{"results": [{"name": "SoundLite Air", "price_usd": 79}]}'


def after_search(question: str) -> list[dict[str, Any]]:
    search = {"id": "c1", "type": "function", "function": {"name": "search_products", "arguments": '{"query": "x"}'}}
    return [
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [search]},
        {"role": "tool", "tool_call_id": "c1", "content": FOUND},
    ]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_follow_up_call_the_question_does_not_ask_for_is_kept_back(
    start_proxy, fake_upstream, fmt: str, stream: bool
) -> None:
    """Searching the catalog answered "Do you sell wireless headphones?"; buying what it found was nobody's
    request: the model is asked again without that tool, and what it says then is the answer."""
    proxy = await start_proxy(models=grounded(fmt))
    buy = call_text(fmt, "place_stock_order", {"symbol": "SoundLite Air", "shares": 1})
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(buy))), Reply(pieces=text_stream(["Yes: the SoundLite Air, $79."]))
    )
    asked = after_search("Do you sell wireless headphones for under $100?")
    result = await ask(proxy, stream, messages=asked, tools=[SEARCH_TOOL, BUY_TOOL])
    message = result["choices"][0]["message"]
    assert message["content"] == "Yes: the SoundLite Air, $79." and not message.get("tool_calls")
    assert "place_stock_order" not in offered(fake_upstream.requests[1])


ELEVATION_TOOL = {
    "type": "function",
    "function": {
        "name": "get_elevation",
        "description": "The elevation of a mountain or place, in meters.",
        "parameters": {"type": "object", "properties": {"place": {"type": "string"}}, "required": ["place"]},
    },
}


@pytest.mark.parametrize("stream", [False, True])
async def test_the_next_call_of_a_tool_this_loop_already_called_is_taken(
    start_proxy, fake_upstream, stream: bool
) -> None:
    """ "How high are Mont Blanc and the Matterhorn?" shares no word with ``get_elevation``, but the loop called it
    for Mont Blanc: its call for the Matterhorn is the next lookup, not a follow-up nobody asked for."""
    proxy = await start_proxy(models=grounded("hermes"))
    matterhorn = call_text("hermes", "get_elevation", {"place": "Matterhorn"})
    fake_upstream.script(Reply(pieces=text_stream(pieces(matterhorn))))
    asked = [
        {"role": "user", "content": "How high are Mont Blanc and the Matterhorn?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_elevation", "arguments": '{"place": "Mont Blanc"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"place": "Mont Blanc", "elevation_m": 4806}'},
    ]
    result = await ask(proxy, stream, messages=asked, tools=[ELEVATION_TOOL, OPENAI_TOOLS["get_weather"]])
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert json.loads(made["function"]["arguments"]) == {"place": "Matterhorn"}
    assert len(fake_upstream.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_an_unasked_call_written_again_gets_a_plain_answer(start_proxy, fake_upstream, stream: bool) -> None:
    proxy = await start_proxy(models=grounded("hermes"))
    buy = call_text("hermes", "place_stock_order", {"symbol": "SoundLite Air", "shares": 1})
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(buy))),
        Reply(pieces=text_stream(pieces(buy))),
        Reply(pieces=text_stream(["We have the SoundLite Air."])),
    )
    asked = after_search("Do you sell wireless headphones for under $100?")
    result = await ask(proxy, stream, messages=asked, tools=[SEARCH_TOOL, BUY_TOOL])
    message = result["choices"][0]["message"]
    assert message["content"] == "We have the SoundLite Air." and not message.get("tool_calls")
    assert len(fake_upstream.requests) == 3 and not fake_upstream.requests[2].get("tools")


@pytest.mark.parametrize("stream", [False, True])
async def test_a_follow_up_call_the_question_asks_for_is_taken(start_proxy, fake_upstream, stream: bool) -> None:
    proxy = await start_proxy(models=grounded("hermes"))
    buy = call_text("hermes", "place_stock_order", {"symbol": "SoundLite Air", "shares": 1})
    fake_upstream.script(Reply(pieces=text_stream(pieces(buy))))
    asked = after_search("Find the SoundLite Air and buy one share of it.")
    result = await ask(proxy, stream, messages=asked, tools=[SEARCH_TOOL, BUY_TOOL])
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert made["function"]["name"] == "place_stock_order" and len(fake_upstream.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_a_made_up_call_the_question_does_not_ask_for_never_stands(
    start_proxy, fake_upstream, stream: bool
) -> None:
    """After Paris's weather, converting a temperature nobody gave (25) for a question that asks for no
    conversion: without that tool the model repeats Paris's call, and the answer comes from the results."""
    proxy = await start_proxy(models=grounded("hermes"))
    convert = call_text("hermes", "convert_temperature", {"value": 25, "to_unit": "fahrenheit"})
    paris = call_text("hermes", "get_weather", {"city": "Paris"})
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(convert))),
        Reply(pieces=text_stream(pieces(paris))),
        Reply(pieces=text_stream(["It is 18 C and sunny in Paris."])),
    )
    weather = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    asked = [
        {"role": "user", "content": "What's the weather right now in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [weather]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"celsius": 18, "condition": "sunny"}'},
    ]
    result = await ask(proxy, stream, messages=asked, tools=TOOLS)
    message = result["choices"][0]["message"]
    assert message["content"] == "It is 18 C and sunny in Paris." and not message.get("tool_calls")


CLOCK_TOOL = {
    "type": "function",
    "function": {
        "name": "get_local_time",
        "description": "Get the current local time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.mark.parametrize("stream", [False, True])
async def test_an_unasked_tool_s_call_beside_an_asked_one_is_dropped(start_proxy, fake_upstream, stream: bool) -> None:
    """Asked the time in two cities with parallel calls allowed, the model wrote the clock for the first and the
    weather for the second: the weather call goes (the next turn's results say New York is still uncovered)."""
    proxy = await start_proxy(models=grounded("hermes"))
    both = call_text("hermes", "get_local_time", {"city": "Berlin"}) + call_text(
        "hermes", "get_weather", {"city": "New York"}
    )
    fake_upstream.script(Reply(pieces=text_stream(pieces(both))))
    asked = [{"role": "user", "content": "What time is it in Berlin and in New York?"}]
    result = await ask(proxy, stream, messages=asked, tools=[CLOCK_TOOL, TOOLS[0]], parallel_tool_calls=True)
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert made["function"]["name"] == "get_local_time" and len(fake_upstream.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_an_unasked_tool_s_first_call_is_the_model_s_choice(start_proxy, fake_upstream, stream: bool) -> None:
    """Before any result, the question's first call is not questioned for its tool's words (a request may
    name none of the words of the tool it needs: "How much is 394 times 213?")."""
    proxy = await start_proxy(models=grounded("hermes"))
    fake_upstream.script(Reply(pieces=text_stream(pieces(call_text("hermes", "get_weather", {"city": "Berlin"})))))
    asked = [{"role": "user", "content": "Is it cold in Berlin?"}]
    result = await ask(proxy, stream, messages=asked, tools=[CLOCK_TOOL, TOOLS[0]], parallel_tool_calls=True)
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert made["function"]["name"] == "get_weather" and len(fake_upstream.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_kept_back_for_an_uncovered_mention_is_asked_for_again_as_a_call(
    start_proxy, fake_upstream, stream: bool
) -> None:
    """After Berlin's time, the weather tool for New York is nobody's request; asked again without it, the
    model is asked for the call the results still lack (told "answer it now, or call", it made the time up)."""
    proxy = await start_proxy(models=emulated("hermes", ground_arguments=True, tool_history="folded"))
    weather = call_text("hermes", "get_weather", {"city": "New York"})
    clock = call_text("hermes", "get_local_time", {"city": "New York"})
    fake_upstream.script(Reply(pieces=text_stream(pieces(weather))), Reply(pieces=text_stream(pieces(clock))))
    berlin = {"id": "c1", "type": "function", "function": {"name": "get_local_time", "arguments": '{"city": "Berlin"}'}}
    asked = [
        {"role": "user", "content": "What time is it in Berlin and in New York?"},
        {"role": "assistant", "content": None, "tool_calls": [berlin]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"city": "Berlin", "local_time": "14:05"}'},
    ]
    result = await ask(proxy, stream, messages=asked, tools=[CLOCK_TOOL, TOOLS[0]])
    [made] = result["choices"][0]["message"]["tool_calls"]
    assert made["function"]["name"] == "get_local_time" and "New York" in made["function"]["arguments"]
    first, again = (last_message(request) for request in fake_upstream.requests)
    assert first.endswith("Otherwise call the next tool you need.")
    # the tool that looked Berlin up is named for New York, listed with it ("in Berlin and in New York")
    assert again.endswith("New York, which these results do not cover yet. Call `get_local_time` for New York now.")


@pytest.mark.parametrize("stream", [False, True])
async def test_a_lookup_of_digits_for_a_question_no_tool_relates_to_gets_a_plain_answer(
    start_proxy, fake_upstream, stream: bool
) -> None:
    """ "What is the square root of 81?" → ``lookup_contact(name="81")``: the 81 is the user's, but digits name no
    person; the question shares no word with any tool, so the model is asked for a plain answer."""
    proxy = await start_proxy(models=grounded("hermes"))
    contact = {
        "type": "function",
        "function": {"name": LOOKUP.name, "description": LOOKUP.description, "parameters": LOOKUP.parameters},
    }
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(call_text("hermes", "lookup_contact", {"name": "81"})))),
        Reply(pieces=text_stream(["The square root of 81 is 9."])),
    )
    asked = [{"role": "user", "content": "What is the square root of 81?"}]
    result = await ask(proxy, stream, messages=asked, tools=[contact, OPENAI_TOOLS["get_weather"]])
    message = result["choices"][0]["message"]
    assert message["content"] == "The square root of 81 is 9." and not message.get("tool_calls")
    assert len(fake_upstream.requests) == 2


@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_written_again_when_asked_for_a_plain_answer_stands(
    start_proxy, fake_upstream, stream: bool
) -> None:
    """ "I want to buy a house with a garage in Walnut Creek" shares no word with ``Homes_FindHomeByArea`` (home,
    area), and "purchase" is no value the user wrote: asked for a plain answer, the model writes the call again.
    The word match missed: the first call is the answer, not toolshim's note that there is none."""
    proxy = await start_proxy(models=grounded("hermes"))
    homes = {
        "type": "function",
        "function": {
            "name": "Homes_FindHomeByArea",
            "description": "Search for a property to rent or buy.",
            "parameters": {
                "type": "object",
                "properties": {"area": {"type": "string"}, "intent": {"type": "string"}},
                "required": ["area", "intent"],
            },
        },
    }
    call = call_text("hermes", "Homes_FindHomeByArea", {"area": "Walnut Creek, CA", "intent": "purchase"})
    fake_upstream.script(Reply(pieces=text_stream(pieces(call))), Reply(pieces=text_stream(pieces(call))))
    asked = [{"role": "user", "content": "I want a house with a garage"}]
    result = await ask(proxy, stream, messages=asked, tools=[homes])
    choice = result["choices"][0]
    [made] = choice["message"]["tool_calls"]
    assert json.loads(made["function"]["arguments"]) == {"area": "Walnut Creek, CA", "intent": "purchase"}
    assert choice["finish_reason"] == "tool_calls" and not (choice["message"].get("content") or "").strip()
    assert len(fake_upstream.requests) == 2 and "Homes_FindHomeByArea" not in offered(fake_upstream.requests[1])


def test_a_name_every_call_names_is_no_thing_looked_up_apart() -> None:
    """ "Which is closer to Berlin by road, Prague or Vienna?": Berlin is where both lookups start; asked for what
    was found "for each of Berlin and Prague and Vienna", the model copied the results' JSON under each name."""

    def call(call_id: str, to_city: str) -> list[dict[str, Any]]:
        arguments = json.dumps({"from_city": "Berlin", "to_city": to_city})
        function = {"name": "distance_between", "arguments": arguments}
        result = json.dumps({"from": "Berlin", "to": to_city, "road_km": 350})
        return [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": function}],
            },
            {"role": "tool", "tool_call_id": call_id, "content": result},
        ]

    question = {"role": "user", "content": "Which is closer to Berlin by road, Prague or Vienna?"}
    assert asked_apart([question, *call("a", "Vienna"), *call("b", "Prague")]) == ["Prague", "Vienna"]
