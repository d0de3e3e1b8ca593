"""Relevance order of the tools in the emulated prompt (``toolrank``, rule option ``tool_order``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from toolshim.chat.policies import apply_policies
from toolshim.chat.rewrite import build_plan
from toolshim.chat.toolrank import (
    asks_for_several,
    first_user_text,
    in_asked_order,
    listing_order,
    ranked,
    related_tools,
    stems,
    unused_tool_topics,
)
from toolshim.chat.turn import ChatTurn
from toolshim.config.rules import ModelRule
from toolshim.formats import ToolSpec, get_format


def tool(name: str, description: str = "", *params: str) -> ToolSpec:
    return ToolSpec(name, description, {"type": "object", "properties": {p: {"type": "string"} for p in params}})


LAWSUITS = [
    tool("get_collectables_in_season", "Retrieve collectable items in a game during a season.", "game_name", "season"),
    tool("game_score_highest", "Retrieve the highest score of any player in a game.", "game", "platform"),
    tool("lawsuit_details_find", "Find details of lawsuits involving a company from a given year.", "company_name"),
    tool("calculate_binomial_probability", "Binomial probability of successes in trials.", "number_of_trials"),
]


def names(tools: list[ToolSpec]) -> list[str]:
    return [t.name for t in tools]


def test_the_tool_the_request_is_about_comes_first() -> None:
    order = names(ranked(LAWSUITS, "Find details of patent lawsuits involving the company 'Apple Inc.' from 2010."))
    assert order[0] == "lawsuit_details_find"
    assert sorted(order) == sorted(names(LAWSUITS))  # nothing dropped


def test_words_are_split_and_compared_by_their_stem() -> None:
    assert {"weathe", "foreca"} <= stems("getWeatherForecast")
    assert "lawsui" in stems("lawsuits") & stems("lawsuit_details")
    assert stems("the tests") == stems("test") == {"test"}  # a plural's s comes off before the cut
    assert stems("glass bus") == {"glass", "bus"}
    assert stems("the and of to 42 a") == set()


@pytest.mark.parametrize("request_text", ["", "hello there", "What is 2 + 2?"])
def test_a_request_naming_no_tool_keeps_the_clients_order(request_text: str) -> None:
    assert names(ranked(LAWSUITS, request_text)) == names(LAWSUITS)


def test_ties_keep_the_clients_order() -> None:
    twins = [tool("weather_a", "Current weather."), tool("weather_b", "Current weather."), tool("stocks")]
    assert names(ranked(twins, "weather in Paris")) == ["weather_a", "weather_b", "stocks"]
    assert names(ranked(list(reversed(twins)), "weather in Paris")) == ["weather_b", "weather_a", "stocks"]


def test_a_word_every_tool_carries_does_not_decide() -> None:
    tools = [
        tool("city_weather", "Weather of a city.", "city"),
        tool("city_population", "Population of a city.", "city"),
    ]
    assert names(ranked(tools, "What is the population of the city of Lyon?"))[0] == "city_population"


def test_a_language_name_in_the_request_counts() -> None:
    tools = [tool("run_shell", "Run a shell command."), tool("run_python", "Run Python code and return its output.")]
    assert names(ranked(tools, "Use Python to compute the mean of 3, 5 and 9"))[0] == "run_python"


def test_a_word_in_the_name_outweighs_one_in_a_description() -> None:
    tools = [tool("send_email", "Send a message; can attach a flight ticket."), tool("book_flight", "Book a trip.")]
    assert names(ranked(tools, "I need a flight to Rome"))[0] == "book_flight"


def test_related_tools_says_which_tools_a_request_shares_words_with() -> None:
    # "lawsuits" in a description; "probability" in a name and description
    assert related_tools(LAWSUITS, "Any lawsuit against Tesla?") == [False, False, True, False]
    assert related_tools(LAWSUITS, "What is the probability of rain?") == [False, False, False, True]
    assert related_tools(LAWSUITS, "The highest score in this game, and its lawsuits?") == [True, True, True, False]
    assert related_tools(LAWSUITS, "Who painted the Mona Lisa?") == [False] * 4
    # no comparable word: no judgement (a greeting, another script)
    assert related_tools(LAWSUITS, "hi") is None
    assert related_tools(LAWSUITS, "谁画了蒙娜丽莎") is None
    assert related_tools([], "Who painted the Mona Lisa?") == []
    # a system prompt (context) only adds; it never makes a request with no comparable word judged
    assert related_tools(LAWSUITS, "Any lawsuit against Tesla?", "Highest scores too.") == [False, True, True, False]
    assert related_tools(LAWSUITS, "17 * 23?", "You answer lawsuit questions.") is None


def test_related_tools_reads_what_the_schema_tells_the_model() -> None:
    service = ToolSpec(
        "find_provider",
        "Find a provider near a city.",
        {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City and state, e.g. 'Santa Rosa, CA'"},
                "kind": {"type": "string", "enum": ["Psychologist", "Dentist"]},
                "filters": {"type": "array", "items": {"type": "object", "properties": {"insurance": {}}}},
            },
        },
    )
    assert related_tools([service], "I need a psychologist.") == [True]  # an enum value
    assert related_tools([service], "Anyone near Santa Rosa?") == [True]  # a parameter's description
    assert related_tools([service], "Which ones take my insurance?") == [True]  # a nested property's name
    # JSON Schema's own words ("string", "object", "array", "type") are not the tool's words
    assert related_tools([service], "What type of object is a string array?") == [False]


def test_first_user_text_reads_strings_and_text_parts() -> None:
    parts = [{"type": "text", "text": "weather"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text"}]
    with_parts = [{"role": "system", "content": "s"}, {"role": "user", "content": parts}]
    assert first_user_text(with_parts).startswith("weather")
    assert first_user_text([{"role": "user", "content": "first"}, {"role": "user", "content": "second"}]) == "first"
    assert first_user_text([{"role": "system", "content": "only"}]) == ""
    assert first_user_text([{"role": "user", "content": None}]) == ""


def openai_tool(spec: ToolSpec) -> dict[str, Any]:
    function = {"name": spec.name, "description": spec.description, "parameters": spec.parameters}
    return {"type": "function", "function": function}


def instructions(order: str, messages: list[dict[str, Any]]) -> str:
    body = {"model": "m", "messages": messages, "tools": [openai_tool(t) for t in LAWSUITS]}
    rule = ModelRule(match="m", upstream="u", tool_mode="pythonic", tool_order=order)  # type: ignore[arg-type]
    return build_plan(ChatTurn.from_body(body), rule, get_format("pythonic"), "m").instructions


def listed(text: str) -> list[str]:
    return [line.removeprefix("### ") for line in text.splitlines() if line.startswith("### ")]


ASK = [{"role": "user", "content": "Any patent lawsuits against Apple Inc. in 2010?"}]


def test_the_prompt_lists_the_relevant_tool_first_only_when_the_rule_says() -> None:
    assert listed(instructions("relevance", ASK))[0] == "lawsuit_details_find"
    assert listed(instructions("request", ASK)) == names(LAWSUITS)


def test_a_later_turn_keeps_the_order_so_the_prompt_prefix_stays_the_same() -> None:
    later = [*ASK, {"role": "assistant", "content": "None found."}, {"role": "user", "content": "Highest game score?"}]
    assert instructions("relevance", later) == instructions("relevance", ASK)


def test_the_rules_refuse_an_unknown_order() -> None:
    with pytest.raises(ValueError, match="tool_order"):
        ModelRule(match="m", upstream="u", tool_order="alphabetical")  # type: ignore[arg-type]


@pytest.mark.parametrize(("order", "kept"), [("relevance", "lawsuit_details_find"), ("request", LAWSUITS[0].name)])
def test_a_tool_budget_keeps_the_relevant_tools_when_the_rule_ranks(order: str, kept: str) -> None:
    body = {"model": "m", "messages": ASK, "tools": [openai_tool(t) for t in LAWSUITS]}
    rule = ModelRule(match="m", upstream="u", tool_mode="pythonic", max_tools=1, tool_order=order)  # type: ignore[arg-type]
    result = apply_policies(ChatTurn.from_body(body), rule)
    assert [t.name for t in result.turn.tools] == [kept]


PLANNER = [
    tool("concert_ticket_buy", "Buy a concert ticket.", "artist", "date"),
    tool("train_ticket_buy", "Buy a train ticket.", "origin", "destination", "date"),
    tool("musical_ticket_buy", "Buy a ticket for a musical show.", "show", "date"),
    tool("math_factorial", "Calculate the factorial of a number.", "number"),
]


def test_several_calls_list_the_tools_in_the_order_the_request_asks_for_them() -> None:
    request = "First the factorial of 7, then a ticket to the Mamma Mia musical, and a train from Boston to Chicago."
    assert names(in_asked_order(PLANNER, request)) == [
        "math_factorial",  # "factorial", asked first
        "musical_ticket_buy",  # "musical": only this tool carries it
        "train_ticket_buy",
        "concert_ticket_buy",  # only words other tools carry too ("ticket", "buy"): after those with their own
    ]


def test_a_tool_the_request_names_nothing_of_stays_last_in_the_clients_order() -> None:
    request = "A train to Chicago, and the factorial of 5."
    assert names(in_asked_order(PLANNER, request)) == [
        "train_ticket_buy",
        "math_factorial",
        "concert_ticket_buy",  # shares no word ("ticket" is not in this request)
        "musical_ticket_buy",
    ]
    assert names(in_asked_order(PLANNER, "hello")) == names(PLANNER)
    assert names(in_asked_order(PLANNER[:1], "factorial")) == ["concert_ticket_buy"]


@pytest.mark.parametrize(("several", "first"), [(True, "math_factorial"), (False, "train_ticket_buy")])
def test_the_listing_follows_the_request_only_when_several_calls_may_come(several: bool, first: str) -> None:
    request = "The factorial of 7, and a train ticket from Boston to Chicago, a train ticket, the train."
    assert names(listing_order(PLANNER, request, several_calls=several))[0] == first


@pytest.mark.parametrize(("parallel", "first"), [(True, "math_factorial"), (None, "train_ticket_buy")])
def test_the_prompt_lists_in_the_request_order_when_the_client_allows_parallel_calls(
    parallel: bool | None, first: str
) -> None:
    ask = [{"role": "user", "content": "The factorial of 7, then a train ticket: train from Boston, train to Chicago."}]
    body: dict[str, Any] = {"model": "m", "messages": ask, "tools": [openai_tool(t) for t in PLANNER]}
    if parallel is not None:
        body["parallel_tool_calls"] = parallel
    rule = ModelRule(match="m", upstream="u", tool_mode="pythonic", tool_order="relevance")
    plan = build_plan(ChatTurn.from_body(body), rule, get_format("pythonic"), "m")
    assert listed(plan.instructions)[0] == first


def test_a_request_for_one_thing_keeps_the_best_match_first_even_when_several_calls_may_come() -> None:
    request = "Find details of patent lawsuits involving the company 'Apple Inc.' from 2010."
    assert not asks_for_several(LAWSUITS, request)
    assert listing_order(LAWSUITS, request, several_calls=True) == ranked(LAWSUITS, request)
    books = [
        tool("library_reserve_book", "Reserve a book in a library branch.", "title", "branch_id"),
        tool("library_search_book", "Search for a book in the library of a city.", "title", "city"),
    ]
    request = "Find a book 'The Alchemist' in the library of New York city."
    assert names(listing_order(books, request, several_calls=True))[0] == "library_search_book"


BFCL_NOTE = " Note that the provided function is in Python 3 syntax."  # BFCL's descriptions end so
RECIPES = [  # BFCL parallel_multiple_55's tools
    tool(
        "recipe_prep_time",
        "Calculate the estimated preparation and cooking time for a specified recipe." + BFCL_NOTE,
        "recipe",
    ),
    tool(
        "recipe_nutrition_info",
        "Provide detailed nutritional information for a specified recipe." + BFCL_NOTE,
        "recipe",
    ),
    tool(
        "recipe_search",
        "Search for a recipe based on a particular ingredient or dietary requirement." + BFCL_NOTE,
        "ingredient",
        "dietary_requirements",
        "isHomemade",
    ),
]


def test_the_order_is_the_same_in_every_process() -> None:
    """Equal scores summed in a set's order came out a bit apart in some processes (the hash seed
    differs), so two workers listed one request's tools in two orders: two prompts, no shared cache."""
    request = (
        "I want a homemade healthy spaghetti recipe that is gluten free, how long will it take to prepare and cook,"
        " and what nutritional information could it provide me."
    )
    script = (
        "import json, sys; from toolshim.formats import ToolSpec; from toolshim.chat.toolrank import ranked; "
        "tools = [ToolSpec(*t) for t in json.loads(sys.argv[1])]; "
        "print([t.name for t in ranked(tools, sys.argv[2])])"
    )
    specs = json.dumps([[t.name, t.description, t.parameters] for t in RECIPES])
    orders = {
        subprocess.run(
            [sys.executable, "-c", script, specs, request],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(6)
    }
    assert len(orders) == 1, orders


def _spec(name: str, description: str = "") -> ToolSpec:
    return ToolSpec(name, description, {"type": "object", "properties": {"city": {"type": "string"}}})


UV = _spec("get_uv_index", "Today's UV index in a city.")
POLLEN = _spec("get_pollen_count", "Today's pollen level in a city.")


@pytest.mark.parametrize(
    ("request_text", "used", "told", "topics"),
    [
        # the ninth loop set: the UV index looked up, the pollen level not yet
        (
            "What are the UV index and the pollen level in Sydney today?",
            {"get_uv_index"},
            '{"uv_index": 9}',
            ["pollen", "level"],  # "level": the pollen tool's description
        ),
        # both looked up: nothing left
        ("What are the UV index and the pollen level in Sydney?", {"get_uv_index", "get_pollen_count"}, "", []),
        # a result that speaks of it covers it
        ("What are the UV index and the pollen level?", {"get_uv_index"}, '{"pollen": "low"}', []),
        # "today" is in the used tool's description too: covered
        ("What is the UV index in Sydney today?", {"get_uv_index"}, '{"uv_index": 9}', []),
        # the other way round ("uv" is too short to compare)
        ("What is the UV index?", {"get_pollen_count"}, "", ["index"]),
        ("Is it sunny?", {"get_uv_index"}, "", []),  # the question names no tool
    ],
)
def test_the_words_of_a_request_that_name_a_tool_no_call_used(
    request_text: str, used: set[str], told: str, topics: list[str]
) -> None:
    found = unused_tool_topics([UV, POLLEN], request_text, used, told, limit=4)
    assert [word for word, _ in found] == topics
    assert {tool for _, tool in found} <= {"get_uv_index", "get_pollen_count"} - used


def test_a_word_a_used_tool_describes_is_covered() -> None:
    weather = _spec("get_weather", "The current weather and temperature in a city.")
    convert = _spec("convert_temperature", "Convert a temperature between Celsius and Fahrenheit.")
    request = "What is the temperature in Oslo right now?"
    assert unused_tool_topics([weather, convert], request, {"get_weather"}, '{"celsius": 4}', limit=4) == []
    forecast = _spec("get_weather_forecast", "The forecast for the coming days.")
    asked = "What's the weather forecast for Oslo?"
    assert unused_tool_topics([weather, forecast], asked, {"get_weather"}, "{}", limit=4) == [
        ("forecast", "get_weather_forecast")
    ]


def test_a_word_of_an_unused_tools_description_is_a_topic() -> None:
    """The tenth loop set: the phone number looked up for Tom himself; the directory's record holds his manager."""
    employee = _spec("get_employee", "An employee's record in the company directory: team and manager.")
    phone = _spec("get_phone_number", "A person's work phone number.")
    request = "What is the phone number of Tom's manager?"
    failed = "ValueError: unknown: 'Tom'"
    assert unused_tool_topics([employee, phone], request, {"get_phone_number"}, failed, limit=4) == [
        ("manager", "get_employee")
    ]
    assert unused_tool_topics([employee, phone], request, {"get_employee", "get_phone_number"}, "", limit=4) == []
