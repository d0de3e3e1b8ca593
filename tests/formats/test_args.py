"""Tests for proxy.formats._args: JSON repair, name resolution, coercion, validation, robustness."""

from __future__ import annotations

import functools
import json
import logging
import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolshim.formats._args import CallOutcome, ToolIndex, canonical_json, finalize_call, parse_json_lenient
from toolshim.formats._jsonrepair import escape_inner_quotes, unescape_closing_quotes
from toolshim.formats._reconcile import reconciled_schema
from toolshim.formats.base import ToolSpec

from tests.formats.tools import TOOLS
from tests.formats.work import ADVERSARIAL_ARGUMENTS, adversarial_arguments, assert_linear


@pytest.fixture()
def index() -> ToolIndex:
    return ToolIndex(TOOLS)


def tool(name: str, parameters: Any = None) -> ToolSpec:
    return ToolSpec(name=name, parameters=parameters if parameters is not None else {"type": "object"})


# ---- parse_json_lenient: one case per repair ----------------------------------------------------

REPAIR_CASES = [
    (
        '{"a": 1, # the "a" value, with a } brace\n "b": "x # not a comment"}',
        {"a": 1, "b": "x # not a comment"},
        ("comments",),
    ),
    ('{"a": "x", // a "quoted" </tool_call> mention\n "b": 2 /* "c": 3 } */}', {"a": "x", "b": 2}, ("comments",)),
    ('{"a": 1}', {"a": 1}, ()),
    ('  {"a": [1, 2.5, "x", null, true]}\n', {"a": [1, 2.5, "x", None, True]}, ()),
    ('```json\n{"a": 1}\n```', {"a": 1}, ("code_fence",)),
    ('```\n{"a": 1}\n```', {"a": 1}, ("code_fence",)),
    ('```json\n{"a": 1}', {"a": 1}, ("code_fence",)),
    ('Here you go:\n```json\n{"a": 1}\n```\nDone.', {"a": 1}, ("code_fence", "leading_text", "trailing_text")),
    ('Sure! The arguments are {"a": 1}', {"a": 1}, ("leading_text",)),
    ('{"a": 1}\nI hope this helps.', {"a": 1}, ("trailing_text",)),
    ('{"a": 1}}', {"a": 1}, ("trailing_text",)),
    ("{'a': 'b'}", {"a": "b"}, ("single_quotes",)),
    ("{'a': 'say \"hi\", it\\'s'}", {"a": 'say "hi", it\'s'}, ("single_quotes",)),
    ('{"a": True, "b": False, "c": None}', {"a": True, "b": False, "c": None}, ("python_literals",)),
    ('{"a": [1, 2,],}', {"a": [1, 2]}, ("trailing_commas",)),
    ("{a: 1, b_2: 'x', $c: 3}", {"a": 1, "b_2": "x", "$c": 3}, ("unquoted_keys", "single_quotes")),
    ('{"a": "line1\nline2\ttab"}', {"a": "line1\nline2\ttab"}, ("control_chars",)),
    ('{"a": "it\\\'s"}', {"a": "it's"}, ("invalid_escapes",)),
    ('{"path": "C:\\Users\\me"}', {"path": "C:\\Users\\me"}, ("invalid_escapes",)),
    ('{"a": 1, // note\n "b": /* block */ 2}', {"a": 1, "b": 2}, ("comments",)),
    ('{"a": {"b": [1, 2', {"a": {"b": [1, 2]}}, ("unclosed_brackets",)),
    ('{"a": 1,', {"a": 1}, ("trailing_commas", "unclosed_brackets")),
    ('{"a": 0x1F, "b": +1, "c": .5}', {"a": 31, "b": 1, "c": 0.5}, ("json5",)),
    ('```json\n{"a": 0x10}\n```', {"a": 16}, ("code_fence", "json5")),
    ("True", True, ("python_literals",)),
    ("[1, 2,]", [1, 2], ("trailing_commas",)),
    ('"plain"', "plain", ()),
]


@pytest.mark.parametrize(("raw", "value", "repairs"), REPAIR_CASES)
def test_parse_json_lenient_repairs(raw: str, value: Any, repairs: tuple[str, ...]) -> None:
    assert parse_json_lenient(raw) == (value, repairs)


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "   ",
        "hello world",
        "{",
        '{"a": ',
        '{"a" 1}',
        '{"a": "unterminated',
        "{'a': 'b",
        '{"a": NaN}',
        '{"a": Infinity}',
        '{"a": -Infinity}',
        "{a b: 1}",
        "[" * 5000 + "]" * 5000,
        "/*",
        "{1 2 3}",
        "<tool_call>",
    ],
)
def test_parse_json_lenient_hopeless(raw: str) -> None:
    assert parse_json_lenient(raw) is None


def test_parse_json_lenient_rejects_non_strings() -> None:
    assert parse_json_lenient(None) is None  # type: ignore[arg-type]
    assert parse_json_lenient(b'{"a": 1}') is None  # type: ignore[arg-type]


def test_value_with_fence_inside_string_is_untouched() -> None:
    raw = json.dumps({"content": "```python\nprint('x')\n```\n"})
    assert parse_json_lenient(raw) == ({"content": "```python\nprint('x')\n```\n"}, ())
    repaired = parse_json_lenient(raw[:-1] + ",}")
    assert repaired == ({"content": "```python\nprint('x')\n```\n"}, ("trailing_commas",))


def test_prose_with_braces_before_the_object() -> None:
    raw = 'Using the {city} template: {"city": "Paris"}'
    assert parse_json_lenient(raw) == ({"city": "Paris"}, ("leading_text",))


def test_escaped_quotes_and_backslashes_survive_repairs() -> None:
    content = 'print("a\\\\b")\n'
    raw = "{'content': " + json.dumps(content) + ", }"
    assert parse_json_lenient(raw) == ({"content": content}, ("single_quotes", "trailing_commas"))


# ---- canonical_json -------------------------------------------------------------------------------


def test_canonical_json_is_compact_utf8_and_ordered() -> None:
    assert canonical_json({"b": 1, "a": "é"}) == '{"b":1,"a":"é"}'


def test_canonical_json_escapes_lone_surrogates() -> None:
    text = canonical_json({"a": "\ud800x"})
    text.encode("utf-8")
    assert json.loads(text) == {"a": "\ud800x"}


def test_canonical_json_rejects_nan() -> None:
    with pytest.raises(ValueError):
        canonical_json({"a": float("nan")})


# ---- name resolution ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "resolved", "repairs"),
    [
        ("get_weather", "get_weather", ()),
        ("  get_weather\n", "get_weather", ()),
        ("Get_Weather", "get_weather", ("name_case",)),
        ("get-weather", "get_weather", ("name_separator",)),
        ("get weather", "get_weather", ("name_separator",)),
        ("get.weather", "get_weather", ("name_separator",)),  # a dotted module path (BFCL: math.hypot -> math_hypot)
        ("GET-WEATHER", "get_weather", ("name_separator", "name_case")),
        ("`get_weather`", "get_weather", ("name_quotes",)),
        ('"get_weather"', "get_weather", ("name_quotes",)),
        ("'get_weather'", "get_weather", ("name_quotes",)),
        ("functions.get_weather", "get_weather", ("name_prefix",)),
        ("Functions.Get_Weather", "get_weather", ("name_prefix", "name_case")),
        ("`functions.search-docs`", "search_docs", ("name_quotes", "name_prefix", "name_separator")),
        ("default_api.write_file", "write_file", ("name_prefix",)),
    ],
)
def test_resolve_near_misses(index: ToolIndex, written: str, resolved: str, repairs: tuple[str, ...]) -> None:
    assert index.resolve(written) == (resolved, repairs)
    assert written in index


@pytest.mark.parametrize(
    "written",
    ["", "   ", "weather", "get_weathr", "functions.", "get_weather()", "functions.foo", "get_weather(city='Oslo')"],
)
def test_resolve_unknown(index: ToolIndex, written: str) -> None:
    assert index.resolve(written) == (None, ())
    assert written not in index


# BFCL's live tools: namespaces before two-word actions, several tools per namespace
_NAMESPACED_TOOLS = [
    "Media_3_FindMovies",
    "Media_3_PlayMovie",
    "Movies_1_FindMovies",
    "Travel_1_FindAttractions",
    "github.create_issue",
    "mcp__files__read_dir",
    "read_file",
]


@pytest.mark.parametrize(
    ("written", "resolved"),
    [
        ("Media_3_FindAttractions", "Travel_1_FindAttractions"),  # another tool's namespace
        ("FindAttractions", "Travel_1_FindAttractions"),  # none
        ("find_attractions", "Travel_1_FindAttractions"),
        ("Travel_2_Find-Attractions", "Travel_1_FindAttractions"),
        ("gitlab.create_issue", "github.create_issue"),
        ("create_issue", "github.create_issue"),
        ("mcp__disk__read_dir", "mcp__files__read_dir"),
        ("files.read_file", "read_file"),
    ],
)
def test_a_namespace_written_wrong_resolves_by_the_action(written: str, resolved: str) -> None:
    idx = ToolIndex([tool(name) for name in _NAMESPACED_TOOLS])
    assert idx.resolve(written) == (resolved, ("name_namespace",))
    assert idx.mentioned_in(f'<tool_call>{{"name": "{written}"}}')


@pytest.mark.parametrize(
    "written",
    [
        "FindMovies",  # two namespaces have it: ambiguous
        "Media_3_FindPlaces",  # another action
        "delete_file",  # another verb
        "write_dir",
        "Travel_1_Find",  # one word: not an action
        "issue",
        "create_issue()",
        "x." * 150 + "create_issue",  # too long to be a tool's name
    ],
)
def test_a_namespace_never_stands_for_another_action(written: str) -> None:
    idx = ToolIndex([tool(name) for name in _NAMESPACED_TOOLS])
    assert idx.resolve(written) == (None, ())


@pytest.mark.parametrize(
    ("written", "resolved"),
    [("book_flights", "book_flight"), ("Book-Flights", "book_flight"), ("get_devices_battery", "get_device_battery")],
)
def test_a_plural_written_for_a_singular_is_the_tool(written: str, resolved: str) -> None:
    idx = ToolIndex([tool("book_flight"), tool("get_device_battery"), tool("search_flights")])
    assert idx.resolve(written)[0] == resolved and "name_plural" in idx.resolve(written)[1]


def test_a_plural_never_stands_for_two_tools_or_another_word() -> None:
    idx = ToolIndex([tool("get_item"), tool("get_items"), tool("list_class")])
    assert idx.resolve("get_items") == ("get_items", ())  # exact first
    assert idx.resolve("GET_ITEMS") == ("get_items", ("name_case",))
    assert idx.resolve("get-itemss") == (None, ())
    assert idx.resolve("list_classes") == (None, ())  # "classes" is no plain plural "s"
    assert ToolIndex([tool("get_item"), tool("get_items")]).resolve("Get_Itemz") == (None, ())


def test_a_tool_read_only_under_its_exact_name_takes_no_near_miss() -> None:
    """A tool withheld from an attempt (``exact_only``): its exact name is still read (the call is kept out), but
    no near miss reaches it, and the tools a re-ask lists are those offered."""
    withheld = replace(tool("book_flight"), exact_only=True)
    idx = ToolIndex([tool("search_flights"), withheld, replace(tool("Travel_1_BookHotel"), exact_only=True)])
    assert idx.resolve("book_flight") == ("book_flight", ())
    for near in ("book_flights", "Book_Flight", "book-flight", "BookHotel", "Media_2_BookHotel"):
        assert idx.resolve(near) == (None, ()), near
    assert idx.describe_unresolved("book_flights") == ("'book_flights' is not a tool; the tools are: search_flights()")
    assert ToolIndex([withheld]).describe_unresolved("x") == "'x' is not a tool; no tools are available"


def test_an_ambiguous_action_is_named_so() -> None:
    idx = ToolIndex([tool(name) for name in _NAMESPACED_TOOLS])
    assert finalize_call(idx, "Other_9_FindMovies", "{}").error == (
        "ambiguous tool name 'Other_9_FindMovies': could be Media_3_FindMovies, Movies_1_FindMovies"
    )


def test_exact_match_wins_over_near_misses() -> None:
    idx = ToolIndex([tool("get-data"), tool("get_data"), tool("Get_Data")])
    assert idx.resolve("get-data") == ("get-data", ())
    assert idx.resolve("Get_Data") == ("Get_Data", ())


@pytest.mark.parametrize(
    ("written", "candidates"),
    [("GET_DATA", ("Get_Data", "get_data")), ("get data", ("get-data", "get_data")), ("get-DATA", ("GET-data",))],
)
def test_ambiguous_names_do_not_resolve(written: str, candidates: tuple[str, ...]) -> None:
    idx = ToolIndex([tool("get-data"), tool("get_data"), tool("Get_Data"), tool("GET-data")])
    assert idx.resolve(written) == (None, ())
    outcome = finalize_call(idx, written, "{}")
    assert not outcome.ok and outcome.error is not None
    assert outcome.error.startswith(f"ambiguous tool name {written!r}: could be ")
    assert all(c in outcome.error for c in candidates)


def test_closest_level_wins() -> None:
    """Separator-only differences beat case differences; a level with one candidate resolves."""
    idx = ToolIndex([tool("get-data"), tool("get_data"), tool("Get_Data")])
    assert idx.resolve("Get-Data") == ("Get_Data", ("name_separator",))
    assert idx.resolve("GET-DATA") == ("get-data", ("name_case",))
    idx = ToolIndex([tool("fetch_url"), tool("Fetch-URL")])
    assert idx.resolve("fetch-url") == ("fetch_url", ("name_separator",))
    assert idx.resolve("FETCH_URL") == ("fetch_url", ("name_case",))


def test_non_string_names_are_unknown(index: ToolIndex) -> None:
    assert index.resolve(None) == (None, ())  # type: ignore[arg-type]
    assert 5 not in index
    outcome = finalize_call(index, None, "{}")  # type: ignore[arg-type]
    assert not outcome.ok and outcome.error is not None


@pytest.mark.parametrize("written", ["get_weather(city, unit)", "get_weather(city)", " `get_weather( city )` "])
def test_a_name_written_with_the_parameters_a_reask_showed_is_the_tool(index: ToolIndex, written: str) -> None:
    """The unknown-tool re-ask lists ``name(param, ...)``; a small model copies that as the name."""
    assert index.resolve(written)[0] == "get_weather"
    assert "name_signature" in index.resolve(written)[1]


def test_unknown_tool_message_lists_tools(index: ToolIndex) -> None:
    outcome = finalize_call(index, "foo", "{}")
    error = (
        "'foo' is not a tool; the tools are: get_weather(city, unit), write_file(path, content), "
        "search_docs(query, limit, tags, exact, filters)"
    )
    assert outcome == CallOutcome("foo", None, (), error)


def test_unknown_tool_message_is_bounded() -> None:
    idx = ToolIndex([tool(f"tool_{i}") for i in range(50)])
    outcome = finalize_call(idx, "x" * 10_000, "{}")
    assert outcome.error is not None and len(outcome.error) < 600
    assert outcome.error.endswith("…")
    assert finalize_call(ToolIndex([]), "foo", "{}").error == "'foo' is not a tool; no tools are available"


# ---- finalize_call: arguments, coercion, validation -------------------------------------------------


def test_clean_call(index: ToolIndex) -> None:
    outcome = finalize_call(index, "get_weather", '{"city": "Paris", "unit": "celsius"}')
    assert outcome == CallOutcome("get_weather", '{"city":"Paris","unit":"celsius"}', (), None)
    assert outcome.ok


@pytest.mark.parametrize("raw", [None, "", "  \n", {}])
def test_empty_arguments_are_an_empty_object(raw: Any) -> None:
    idx = ToolIndex([tool("ping")])
    assert finalize_call(idx, "ping", raw) == CallOutcome("ping", "{}", (), None)


def test_mapping_arguments_are_coerced_and_not_mutated(index: ToolIndex) -> None:
    raw = {"query": "x", "limit": "3", "filters": {"since": "2.5"}}
    outcome = finalize_call(index, "search_docs", raw)
    assert outcome.arguments == '{"query":"x","limit":3,"filters":{"since":2.5}}'
    assert raw == {"query": "x", "limit": "3", "filters": {"since": "2.5"}}


@pytest.mark.parametrize(
    ("args", "expected", "repairs"),
    [
        ({"query": "x", "limit": "5"}, {"query": "x", "limit": 5}, ("coerce_types",)),
        ({"query": "x", "limit": " -7 "}, None, ("coerce_types",)),  # coerced, then fails minimum
        ({"query": "x", "limit": 5.0}, {"query": "x", "limit": 5}, ("coerce_types",)),
        ({"query": "x", "exact": "true"}, {"query": "x", "exact": True}, ("coerce_types",)),
        ({"query": "x", "exact": "False"}, {"query": "x", "exact": False}, ("coerce_types",)),
        ({"query": "x", "filters": {"since": "2.5"}}, {"query": "x", "filters": {"since": 2.5}}, ("coerce_types",)),
        ({"query": "x", "filters": {"since": "3"}}, {"query": "x", "filters": {"since": 3}}, ("coerce_types",)),
        ({"query": 42}, {"query": "42"}, ("coerce_types",)),
        ({"query": "x", "tags": "a"}, {"query": "x", "tags": ["a"]}, ("wrap_array",)),
        ({"query": "x", "tags": '["a", "b"]'}, {"query": "x", "tags": ["a", "b"]}, ("embedded_json",)),
        ({"query": "x", "tags": "['a', 'b']"}, {"query": "x", "tags": ["a", "b"]}, ("embedded_json", "single_quotes")),
        ({"query": "x", "filters": '{"lang": "py"}'}, {"query": "x", "filters": {"lang": "py"}}, ("embedded_json",)),
    ],
)
def test_coercions(index: ToolIndex, args: dict[str, Any], expected: Any, repairs: tuple[str, ...]) -> None:
    outcome = finalize_call(index, "search_docs", json.dumps(args))
    assert outcome.repairs == repairs
    assert (json.loads(outcome.arguments) if outcome.arguments else None) == expected


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"query": "x", "limit": "five"}, "'limit' must be integer"),
        ({"query": "x", "limit": "5.5"}, "'limit' must be integer"),
        ({"query": "x", "exact": "yes"}, "'exact' must be boolean"),
        ({"query": "x", "filters": {"since": "recently"}}, "'filters.since' must be number"),
        ({"query": "x", "tags": "[broken"}, "'tags' must be array"),
        ({"query": "x", "tags": [{"a": 1}]}, "'tags[0]' must be string"),
        ({"query": "x", "filters": "not an object"}, "'filters' must be object"),
        ({"query": "x", "limit": 0}, "'limit': 0 is less than the minimum of 1"),
        ({"query": True}, "'query' must be string"),
        ({"query": None}, "'query' must be string"),
    ],
)
def test_lossy_values_are_not_coerced(index: ToolIndex, args: dict[str, Any], error: str) -> None:
    outcome = finalize_call(index, "search_docs", json.dumps(args))
    assert not outcome.ok
    assert outcome.arguments is None
    assert outcome.error == error


# BFCL live's Services_1_FindProvider: a type no value of the enum has (converted from a Python signature)
_CONTRADICTED = {
    "type": "function",
    "function": {
        "name": "find_provider",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "is_unisex": {"type": "boolean", "enum": ["True", "False", "dontcare"], "default": "dontcare"},
                "rooms": {"type": "array", "items": {"type": "integer", "enum": ["1", "2"]}},
            },
            "required": ["city"],
        },
    },
}


@pytest.mark.parametrize(
    ("arguments", "expected", "repairs"),
    [
        ({"city": "Sunnyvale", "is_unisex": "dontcare"}, {"city": "Sunnyvale", "is_unisex": "dontcare"}, ()),
        ({"city": "Sunnyvale", "is_unisex": "True"}, {"city": "Sunnyvale", "is_unisex": "True"}, ()),
        ({"city": "Sunnyvale", "is_unisex": True}, {"city": "Sunnyvale", "is_unisex": "True"}, ("coerce_types",)),
        ({"city": "Sunnyvale", "is_unisex": "false"}, {"city": "Sunnyvale", "is_unisex": "False"}, ("enum_case",)),
        ({"city": "Sunnyvale", "rooms": [2]}, {"city": "Sunnyvale", "rooms": ["2"]}, ("coerce_types",)),
    ],
)
def test_an_enum_outranks_a_type_none_of_its_values_has(
    arguments: dict[str, Any], expected: dict[str, Any], repairs: tuple[str, ...]
) -> None:
    idx = ToolIndex([ToolSpec.from_openai(_CONTRADICTED)])
    outcome = finalize_call(idx, "find_provider", json.dumps(arguments))
    assert outcome.error is None
    assert (json.loads(outcome.arguments or ""), outcome.repairs) == (expected, repairs)


def test_a_contradicted_enum_still_holds() -> None:
    """The enum stands: a value outside it is no argument (optional here: left out, the tool's default stands)."""
    idx = ToolIndex([ToolSpec.from_openai(_CONTRADICTED)])
    outcome = finalize_call(idx, "find_provider", '{"city": "Sunnyvale", "is_unisex": "maybe"}')
    assert (outcome.arguments, outcome.repairs) == ('{"city":"Sunnyvale"}', ("invalid_optional_dropped",))


def test_a_type_some_enum_value_has_is_kept() -> None:
    spec = {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {"unit": {"type": ["string", "null"], "enum": ["c", None, 3]}},
            },
        },
    }
    assert ToolSpec.from_openai(spec).parameters == spec["function"]["parameters"]  # type: ignore[index]
    assert ToolSpec.from_openai(spec).parameters is spec["function"]["parameters"]  # type: ignore[index]


def test_contradictions_are_reconciled_at_every_depth() -> None:
    wrong = {"type": "integer", "enum": ["a", "b"]}
    schema = {
        "type": "object",
        "properties": {"x": {"anyOf": [wrong, {"type": "null"}]}, "y": {"$ref": "#/$defs/y"}},
        "$defs": {"y": {"type": "object", "additionalProperties": wrong}},
    }
    fixed = reconciled_schema(schema)
    assert fixed["properties"]["x"]["anyOf"] == [{"enum": ["a", "b"]}, {"type": "null"}]
    assert fixed["$defs"]["y"]["additionalProperties"] == {"enum": ["a", "b"]}
    assert fixed["properties"]["y"] is schema["properties"]["y"]  # what needed nothing is the client's own
    assert schema["properties"]["x"]["anyOf"][0] == wrong  # the client's schema is not changed


def test_enum_case_is_fixed_only_when_unique(index: ToolIndex) -> None:
    outcome = finalize_call(index, "get_weather", '{"city": "Paris", "unit": "Celsius"}')
    assert (outcome.arguments, outcome.repairs) == ('{"city":"Paris","unit":"celsius"}', ("enum_case",))
    idx = ToolIndex([tool("t", {"type": "object", "properties": {"m": {"enum": ["A", "a"]}}, "required": ["m"]})])
    assert finalize_call(idx, "t", '{"m": "A"}').ok
    outcome = finalize_call(idx, "t", '{"m": "b"}')
    assert outcome.error == '\'m\' must be one of: "A", "a"'


def _show(required: list[str]) -> ToolIndex:
    show_type = {"type": "string", "enum": ["regular", "3d", "imax", "dontcare"]}
    props = {"location": {"type": "string"}, "show_type": show_type, "limit": {"type": "integer", "minimum": 1}}
    return ToolIndex([tool("find_movies", {"type": "object", "properties": props, "required": required})])


def test_an_optional_value_outside_its_enum_is_left_out() -> None:
    """The model's ``"any"`` is none of the tool's values: the call is made without it (the tool's default);
    a required one, another kind of error, or one beside it still fails, so the model is asked again."""
    outcome = finalize_call(_show(["location"]), "find_movies", '{"location": "Larkspur", "show_type": "any"}')
    assert (outcome.arguments, outcome.repairs) == ('{"location":"Larkspur"}', ("invalid_optional_dropped",))
    required = finalize_call(_show(["location", "show_type"]), "find_movies", '{"location": "L", "show_type": "any"}')
    assert required.error == '\'show_type\' must be one of: "regular", "3d", "imax", "dontcare"'
    both = finalize_call(_show(["location"]), "find_movies", '{"location": "L", "show_type": "any", "limit": 0}')
    assert both.error is not None and "limit" in both.error
    missing = finalize_call(_show(["location"]), "find_movies", '{"show_type": "any"}')
    assert missing.error is not None and "location" in missing.error


def test_missing_required(index: ToolIndex) -> None:
    outcome = finalize_call(index, "write_file", '{"path": "a.py"}')
    assert outcome.error == "missing required parameter 'content'"
    outcome = finalize_call(index, "write_file", "{}")
    assert outcome.error == "missing required parameter 'path'; missing required parameter 'content'"


def test_nested_required_and_additional_properties() -> None:
    schema = {
        "type": "object",
        "properties": {
            "opts": {
                "type": "object",
                "properties": {"k": {"type": "string"}},
                "required": ["k"],
                "additionalProperties": False,
            }
        },
        "additionalProperties": False,
    }
    idx = ToolIndex([tool("t", schema)])
    assert finalize_call(idx, "t", '{"opts": {}}').error == "missing required parameter 'opts.k'"
    assert finalize_call(idx, "t", '{"opts": {"k": "v", "z": 1}}').error == "unexpected parameter 'opts.z'"


@pytest.mark.parametrize(
    ("extra", "kept"),
    [
        ({}, False),  # undeclared: a function's signature takes only what it declares
        ({"additionalProperties": False}, False),
        ({"additionalProperties": True}, True),
        ({"additionalProperties": {"type": "integer"}}, True),
        ({"patternProperties": {"^res": {}}}, True),
    ],
)
def test_an_argument_the_schema_does_not_declare_is_dropped(extra: dict[str, Any], kept: bool) -> None:
    """Seen with the 0.5B model: ``add(a=200, b=70, result=270)``; the client's function has no ``result``."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], **extra}
    outcome = finalize_call(ToolIndex([tool("add", schema)]), "add", '{"a": 200, "result": 270}')
    assert outcome.ok and json.loads(outcome.arguments or "") == ({"a": 200, "result": 270} if kept else {"a": 200})
    assert ("unknown_arguments" in outcome.repairs) is not kept
    free = finalize_call(ToolIndex([tool("f", {"type": "object"})]), "f", '{"anything": 1}')
    assert free.ok and free.arguments == '{"anything":1}' and not free.repairs  # no properties: nothing declared


def test_errors_are_short_for_huge_values() -> None:
    idx = ToolIndex([tool("t", {"type": "object", "properties": {"s": {"type": "string", "maxLength": 3}}})])
    outcome = finalize_call(idx, "t", json.dumps({"s": "x" * 100_000}))
    assert outcome.error is not None and len(outcome.error) < 200 and outcome.error.startswith("'s': ")


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("[1, 2]", "arguments must be a JSON object, got array"),
        ('"text"', "arguments must be a JSON object, got string"),
        ("42", "arguments must be a JSON object, got number"),
        ("null", "arguments must be a JSON object, got null"),
        ("not json at all", "arguments are not valid JSON: Expecting value at line 1 column 1"),
        ('{"city": NaN}', "arguments are not valid JSON: NaN and Infinity are not valid JSON"),
        (["city"], "arguments must be a JSON object, got list"),
        (12, "arguments must be a JSON object, got int"),
    ],
)
def test_bad_argument_shapes(index: ToolIndex, raw: Any, error: str) -> None:
    outcome = finalize_call(index, "get_weather", raw)
    assert outcome == CallOutcome("get_weather", None, (), error)


def test_double_encoded_arguments(index: ToolIndex) -> None:
    outcome = finalize_call(index, "get_weather", json.dumps(json.dumps({"city": "Paris"})))
    assert (outcome.arguments, outcome.repairs) == ('{"city":"Paris"}', ("double_encoded",))


def test_name_and_argument_repairs_are_reported_together(index: ToolIndex) -> None:
    outcome = finalize_call(index, "Search-Docs", "```json\n{'query': 'x', 'limit': '2',}\n```")
    assert outcome.ok
    assert outcome.arguments == '{"query":"x","limit":2}'
    assert outcome.repairs == (
        "name_separator",
        "name_case",
        "code_fence",
        "single_quotes",
        "trailing_commas",
        "coerce_types",
    )


# ---- schemas: drafts, refs, combinators, broken schemas ---------------------------------------------


def test_refs_and_defs_are_followed_for_coercion_and_validation() -> None:
    schema = {
        "type": "object",
        "$defs": {"count": {"type": "integer"}},
        "properties": {"n": {"$ref": "#/$defs/count"}, "items": {"type": "array", "items": {"$ref": "#/$defs/count"}}},
    }
    idx = ToolIndex([tool("t", schema)])
    assert finalize_call(idx, "t", '{"n": "4", "items": ["1", 2]}').arguments == '{"n":4,"items":[1,2]}'
    assert finalize_call(idx, "t", '{"n": "four"}').error == "'n' must be integer"


def test_type_lists_and_any_of() -> None:
    schema = {
        "type": "object",
        "properties": {
            "maybe": {"type": ["integer", "null"]},
            "either": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
            "free": {"anyOf": [{"type": "integer"}, {}]},
        },
    }
    idx = ToolIndex([tool("t", schema)])
    assert finalize_call(idx, "t", '{"maybe": "3", "either": "true"}').arguments == '{"maybe":3,"either":true}'
    assert finalize_call(idx, "t", '{"maybe": null, "either": 2}').repairs == ()
    assert finalize_call(idx, "t", '{"free": "3"}').arguments == '{"free":"3"}'


def test_recursive_schema_does_not_loop() -> None:
    schema = {"type": "object", "properties": {"node": {"$ref": "#"}, "v": {"type": "integer"}}}
    idx = ToolIndex([tool("t", schema)])

    def nested(depth: int, leaf: Any) -> dict[str, Any]:
        value: dict[str, Any] = {"v": leaf}
        for _ in range(depth):
            value = {"node": value, "v": 1}
        return value

    shallow = finalize_call(idx, "t", json.dumps(nested(3, "1")))  # the $ref is followed: "1" becomes 1
    assert shallow.ok and json.loads(shallow.arguments or "") == nested(3, 1) and shallow.repairs == ("coerce_types",)
    deep = finalize_call(idx, "t", json.dumps(nested(100, "1")))  # coercion stops at a depth limit
    assert deep.error is not None and deep.error.endswith("must be integer") and deep.arguments is None


def test_declared_draft_is_used() -> None:
    # Draft 4: exclusiveMaximum is a boolean modifier; in 2020-12 it would be an invalid schema.
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "integer", "maximum": 5, "exclusiveMaximum": True}},
    }
    idx = ToolIndex([tool("t", schema)])
    assert finalize_call(idx, "t", '{"n": 4}').ok
    assert not finalize_call(idx, "t", '{"n": 5}').ok
    assert idx.schema_problems == {}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"n": {"type": "integr"}}, "required": ["n"]},
        {"type": "object", "properties": {"s": {"type": "string", "pattern": "(["}}, "required": ["n"]},
        {"$schema": 5, "type": "object", "required": ["n"]},
        {"$schema": ["x"], "type": "object", "required": ["n"]},
        {"type": "object", "properties": {"n": {"$ref": "https://example.invalid/schema"}}, "required": ["n"]},
    ],
)
def test_invalid_schema_only_checks_required(schema: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    idx = ToolIndex([tool("t", schema)])
    with caplog.at_level(logging.WARNING, logger="toolshim.formats._args"):
        assert finalize_call(idx, "t", '{"n": 1, "s": "x"}').ok
        assert finalize_call(idx, "t", '{"s": "x"}').error == "missing required parameter 'n'"
    assert "t" in idx.schema_problems
    assert any("unusable parameters schema" in r.message for r in caplog.records)


def test_non_mapping_parameters() -> None:
    idx = ToolIndex([ToolSpec(name="t", parameters=["not", "a", "schema"])])  # type: ignore[arg-type]
    assert finalize_call(idx, "t", '{"a": 1}') == CallOutcome("t", '{"a":1}', (), None)


def test_validators_are_cached_per_index(index: ToolIndex) -> None:
    first = index.validator("get_weather")
    assert first is not None and index.validator("get_weather") is first


# ---- robustness ---------------------------------------------------------------------------------------


def test_deep_nesting_is_an_error_not_a_crash(index: ToolIndex) -> None:
    for raw in ('{"query": ' + "[" * 100_000 + "]" * 100_000 + "}", '{"a": ' * 50_000, "[" * 200_000):
        outcome = finalize_call(index, "search_docs", raw)
        assert not outcome.ok and outcome.error


def test_huge_integers_and_strings_do_not_crash(index: ToolIndex) -> None:
    assert not finalize_call(index, "search_docs", '{"query": "x", "limit": ' + "9" * 5000 + "}").ok
    assert not finalize_call(index, "search_docs", '{"query": "x", "limit": "' + "9" * 5000 + '"}').ok


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("{}[]\"':,`\\/* \nabTrueNn01.-_")), max_size=80))
def test_never_raises_on_json_like_garbage(raw: str) -> None:
    parsed = parse_json_lenient(raw)
    if parsed is not None:
        canonical_json(parsed[0])  # always JSON-representable
    assert_one_result(finalize_call(ToolIndex(TOOLS), "search_docs", raw))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60), st.text(max_size=200))
def test_never_raises_on_arbitrary_text(name: str, raw: str) -> None:
    assert_one_result(finalize_call(ToolIndex(TOOLS), name, raw))


def assert_one_result(outcome: CallOutcome) -> None:
    """Either canonical JSON object arguments or a non-empty error, never both, never neither."""
    if outcome.error is None:
        assert isinstance(json.loads(outcome.arguments or ""), dict)
    else:
        assert outcome.error.strip() and outcome.arguments is None


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
        max_leaves=20,
    )
)
def test_valid_json_round_trips_without_repairs(value: Any) -> None:
    assert parse_json_lenient(json.dumps(value)) == (value, ())


# ---- linear time: no wall-clock thresholds (tests/formats/work.py); figures: bench/parsers.py ----------


@functools.cache
def _big_content(size: int) -> str:
    rng = random.Random(7)
    lines, total = [], 0
    while total < size:
        n = rng.randint(0, 999)
        lines.append(f'    value_{n} = "q\\"{n}" + \'s\' if x < {n} else None  # ü\n')
        total += len(lines[-1])
    return "".join(lines)


WRAPS: dict[str, Callable[[str], str]] = {
    "clean": lambda s: s,
    "fenced": lambda s: "```json\n" + s + "\n```",
    "trailing_text": lambda s: s + "\nThat writes the file.",
    "trailing_comma": lambda s: s[:-1] + ",}",
    "unclosed": lambda s: s[:-1],
}


@pytest.mark.parametrize("wrap", WRAPS.values(), ids=WRAPS.keys())
def test_large_arguments_are_repaired_in_linear_time(index: ToolIndex, wrap: Callable[[str], str]) -> None:
    def raw(size: int) -> str:
        return wrap(json.dumps({"path": "big.py", "content": _big_content(size)}))

    outcome = finalize_call(index, "write_file", raw(1_000_000))
    assert outcome.ok and json.loads(outcome.arguments or "")["content"] == _big_content(1_000_000)
    assert_linear(lambda k: raw(60_000 * k), lambda text: finalize_call(index, "write_file", text))


def test_single_quoted_large_argument_is_linear(index: ToolIndex) -> None:
    def raw(size: int) -> str:
        body = _big_content(size).replace("\\", "\\\\").replace("'", "\\'")
        return "{'path': 'a', 'content': '" + body + "'}"

    def repair(text: str) -> None:
        assert finalize_call(index, "write_file", text).ok

    outcome = finalize_call(index, "write_file", raw(100_000))
    assert outcome.ok and json.loads(outcome.arguments or "")["content"] == _big_content(100_000)
    assert_linear(lambda k: raw(40_000 * k), repair)  # over 32 KB: past the json5 fallback at every scale


@pytest.mark.parametrize("kind", sorted(ADVERSARIAL_ARGUMENTS))
def test_adversarial_inputs_are_linear(kind: str) -> None:
    def run(raw: str) -> None:
        parse_json_lenient(raw)
        finalize_call(ToolIndex(TOOLS), "search_docs", raw)

    assert_linear(lambda k: adversarial_arguments(kind, k), run)


# ---- guessing repairs: unescaped inner quotes, kept only when the result validates -------------

SAY = tool(
    "say",
    {
        "type": "object",
        "properties": {"text": {"type": "string"}, "times": {"type": "integer"}},
        "required": ["text"],
        "additionalProperties": False,
    },
)


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        ('{"text": "He said "hi" there"}', 'He said "hi" there'),
        ('{"text": "a "quoted, with comma" word", "times": 2}', 'a "quoted, with comma" word'),
        ('{"text": "say "go", then leave"}', 'say "go", then leave'),
        ('{"text": "ends with "x""}', 'ends with "x"'),
        ('{"text": "x "y" z", // a "comment"\n "times": 1}', 'x "y" z'),
        ('```json\n{"text": "He said "hi" there"}\n```', 'He said "hi" there'),
    ],
)
def test_inner_quotes_repaired_when_the_result_validates(raw: str, text: str) -> None:
    outcome = finalize_call(ToolIndex([SAY]), "say", raw)
    assert outcome.error is None and outcome.arguments is not None, outcome
    assert json.loads(outcome.arguments)["text"] == text
    assert "inner_quotes" in outcome.repairs


@pytest.mark.parametrize(
    "raw",
    [
        '{"text": "He said "hi" there", "times": "many"}',  # repaired, but does not validate
        '{"txt": "He said "hi" there"}',  # unknown key: additionalProperties false
        '{"text": "He said "hi}',  # unterminated: nothing to guess from
    ],
)
def test_inner_quotes_not_guessed_when_invalid(raw: str) -> None:
    outcome = finalize_call(ToolIndex([SAY]), "say", raw)
    assert outcome.arguments is None and outcome.error is not None


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        ('{"text": "dir /b /s C:\\"}', "dir /b /s C:\\"),
        ('{"text": "cd D:\\", "times": 2}', "cd D:\\"),
        ('{"text": "a \\"quoted\\" C:\\"}', 'a "quoted" C:\\'),  # the inner escapes stay escapes
    ],
)
def test_a_backslash_before_a_closing_quote_is_kept_when_the_result_validates(raw: str, text: str) -> None:
    outcome = finalize_call(ToolIndex([SAY]), "say", raw)
    assert outcome.error is None and outcome.arguments is not None, outcome
    assert json.loads(outcome.arguments)["text"] == text
    assert outcome.repairs[0] == "trailing_backslash"


def test_unescape_closing_quotes_touches_only_quotes_that_can_close() -> None:
    assert unescape_closing_quotes('{"a": "say \\"hi\\", then go"}') is None  # prose after the comma
    assert unescape_closing_quotes('{"a": "x\\\\"}') is None  # an escaped backslash
    assert unescape_closing_quotes('{"a": "C:\\", "b": "D:\\"}') == '{"a": "C:\\\\", "b": "D:\\\\"}'


def test_unescape_closing_quotes_is_linear() -> None:
    assert_linear(lambda n: '{"a": "' + 'x \\" y ' * (n * 1000) + 'C:\\"}', unescape_closing_quotes)


def test_comments_with_quotes_and_markup() -> None:
    raw = '{\n  // the "text" is the </tool_call> tag\'s content\n  "text": "x", /* "times" } ] */ "times": 2\n}'
    outcome = finalize_call(ToolIndex([SAY]), "say", raw)
    assert json.loads(outcome.arguments or "") == {"text": "x", "times": 2}
    assert "comments" in outcome.repairs


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=12,
    )
)
def test_escape_inner_quotes_leaves_valid_json_alone(value: Any) -> None:
    """Valid JSON (any spacing) has no quote that cannot close its string: nothing is changed."""
    for text in (json.dumps(value), json.dumps(value, indent=1), json.dumps(value, separators=(",", ":"))):
        assert escape_inner_quotes(text) is None


def test_escape_inner_quotes_is_linear() -> None:
    assert_linear(lambda n: '{"a": "' + 'x "y" ' * (n * 1000) + '"} // "c"', escape_inner_quotes)


def test_a_schema_is_compiled_once_per_process_and_the_cache_is_bounded() -> None:
    """Checking a schema costs milliseconds and every request sends the same tools: one validator per
    distinct schema (key order aside), at most ``_SCHEMA_CACHE_SIZE`` of them, none past the key size."""
    from toolshim.formats import _args

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    reordered = {"required": ["city"], "properties": {"city": {"type": "string"}}, "type": "object"}
    assert _args.compiled_schema(schema) is _args.compiled_schema(reordered)
    for n in range(_args._SCHEMA_CACHE_SIZE + 40):
        _args.compiled_schema({"type": "object", "properties": {f"p{n}": {"type": "integer"}}})
    assert _args._compiled_from_key.cache_info().currsize == _args._SCHEMA_CACHE_SIZE
    big = {"type": "object", "description": "x" * (_args._MAX_CACHED_SCHEMA + 1)}
    assert _args.compiled_schema(big) is not _args.compiled_schema(big)
    broken = {"type": "object", "properties": {"a": {"type": 5}}}
    assert isinstance(_args.compiled_schema(broken), str) and isinstance(_args.compiled_schema(broken), str)
