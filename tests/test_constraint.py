"""Constrained decoding (issue 11 item 1): the grammar built from the request's tools, how it
travels upstream (and only when toolshim set it), and the retry without it when refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
from toolshim.chat import modes
from toolshim.config.loading import lint, load_rules
from toolshim.config.rules import RulesError
from toolshim.constrain.grammars import GrammarCache, body_fields
from toolshim.formats import FORMATS, CallGrammar, SchemaRules, ToolCallRecord, ToolChoice, ToolSpec, get_format
from toolshim.formats._hermes_grammar import CALL_HEAD, CALL_TAIL

from tests.fakes import Reply, text_stream
from tests.formats.tools import OPENAI_TOOLS
from tests.gbnf import accepts, parses
from tests.test_bad_writing import ask_raw
from tests.test_emulation import ask, call_text, pieces

TOOLS = [ToolSpec.from_openai(t) for t in OPENAI_TOOLS.values()]


def constrained(constrained: Any = True, fmt: str = "hermes") -> list[dict[str, Any]]:
    return [{"match": "*", "upstream": "up", "tool_mode": fmt, "constrained": constrained}]


@pytest.mark.parametrize("mode", ["auto", "required", "named"])
@pytest.mark.parametrize("max_calls", [1, 3])
def test_hermes_grammar_parses_and_names_every_tool(mode: str, max_calls: int) -> None:
    choice = ToolChoice(mode, "get_weather" if mode == "named" else None)  # type: ignore[arg-type]
    tools = TOOLS[:1] if mode == "named" else TOOLS
    grammar = GrammarCache().get("hermes", tools, choice, max_calls)
    assert grammar is not None and not grammar.cached and parses(grammar.text)
    lines = dict(line.split(" ::= ", 1) for line in grammar.text.splitlines())
    assert lines["root"] == ("tool-calls | bare-calls | free-text" if mode == "auto" else "tool-calls | bare-calls")
    assert ("{0,2}" in lines["tool-calls"]) == (max_calls == 3)
    for i, tool in enumerate(tools):
        assert lines[f"tool-{i}"].startswith(json.dumps(json.dumps(tool.name) + ', "arguments": '))


def render(*calls: tuple[str, dict[str, Any]]) -> str:
    records = [ToolCallRecord(f"c{i}", name, json.dumps(args)) for i, (name, args) in enumerate(calls)]
    return get_format("hermes").render_calls(records)


def test_the_parse_check_can_fail() -> None:
    assert parses('root ::= "a" [^<\\x00]*') and not parses('root ::= "a" (')


def test_grammar_wraps_calls_as_hermes_writes_them() -> None:
    rendered = render(("get_weather", {"city": "Paris"}))
    assert rendered.startswith(CALL_HEAD + '"get_weather", "arguments": ') and rendered.endswith(CALL_TAIL)


def test_grammar_accepts_valid_calls_and_rejects_the_rest() -> None:
    """llama.cpp's own sampler, token by token: what the grammar lets the model write."""
    required = GrammarCache().get("hermes", TOOLS, ToolChoice("required"), 2)
    auto = GrammarCache().get("hermes", TOOLS, ToolChoice("auto"), 1)
    assert required is not None and auto is not None
    paris, limit = ("get_weather", {"city": "Paris", "unit": "celsius"}), ("search_docs", {"query": "x", "limit": 3})
    assert accepts(required.text, render(paris))
    assert accepts(required.text, render(paris, limit))  # two calls: the limit is 2
    assert not accepts(required.text, render(paris, paris, paris))  # past the limit
    assert not accepts(required.text, render(("get_weather", {"city": "Paris", "unit": "kelvin"})))  # enum
    assert not accepts(required.text, render(("get_weather", {"unit": "celsius"})))  # required city
    assert not accepts(required.text, render(("search_docs", {"query": "x", "limit": "3"})))  # integer
    assert not accepts(required.text, render(("delete_everything", {})))  # not offered
    assert not accepts(required.text, "Sure, let me check.")  # a call was demanded
    assert accepts(auto.text, "It is sunny in Paris.") and accepts(auto.text, render(paris))
    assert not accepts(auto.text, render(paris, paris))  # one call allowed
    assert accepts(auto.text, "Use `x < y` and {braces} inside the text.")
    bare = '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}'
    assert accepts(auto.text, bare) and accepts(required.text, bare)  # lenient parsers read bare calls
    assert not accepts(auto.text, bare.replace("celsius", "kelvin")) and not accepts(auto.text, bare + "\n" + bare)
    for markup_first in ('{"name": "get_weather"}', '{"name": "delete_everything", "arguments": {}}', " <tool_call>"):
        assert not accepts(auto.text, markup_first), markup_first  # only a valid call starts like a call
    strict = GrammarCache().get("hermes", TOOLS, ToolChoice("auto"), 1, bare=False)
    assert strict is not None and not accepts(strict.text, bare) and accepts(strict.text, render(paris))


def bounded(schema: dict[str, Any]) -> str:
    """The required-call grammar for one tool ``f`` whose argument ``n`` has ``schema``."""
    params = {"type": "object", "properties": {"n": schema}, "required": ["n"]}
    grammar = GrammarCache().get("hermes", [ToolSpec("f", parameters=params)], ToolChoice("required"), 1)
    assert grammar is not None and parses(grammar.text)
    return grammar.text


@pytest.mark.parametrize(
    ("schema", "allowed", "refused"),
    [
        ({"minimum": 5, "maximum": 480}, [5, 45, 480, 99, 100], [4, 481, 1000, -1, 0, 4800]),
        ({"minimum": -50, "maximum": -3}, [-50, -17, -3], [-51, -2, 0, 3, -500]),
        ({"minimum": -7, "maximum": 7}, [-7, 0, 7], [-8, 8, 70]),
        ({"minimum": 5}, [5, 480, 123456789], [4, 0, -5]),
        ({"minimum": -20}, [-20, -1, 0, 99999], [-21, -200]),
        ({"maximum": -10}, [-10, -999], [-9, 0, 10]),
        ({"maximum": 100}, [100, 0, -100000], [101, 1000]),
        ({"exclusiveMinimum": 0, "exclusiveMaximum": 10}, [1, 9], [0, 10, -1]),
        ({"minimum": 0, "exclusiveMinimum": True, "maximum": 3.5}, [1, 3], [0, 4]),  # draft 4, float bound
    ],
)
def test_grammar_holds_integer_bounds(schema: dict[str, Any], allowed: list[int], refused: list[int]) -> None:
    """Issue 11: llama.cpp's sampler lets the model write an in-range integer and nothing else."""
    text = bounded({"type": "integer", **schema})
    for n in allowed:
        assert accepts(text, render(("f", {"n": n}))), n
    for n in refused:
        assert not accepts(text, render(("f", {"n": n}))), n
    assert not accepts(text, render(("f", {"n": allowed[0] + 0.5})))  # still an integer


def test_bounds_hold_inside_arrays_and_unions() -> None:
    """The converter reaches the bounded rule wherever the integer sits (items, anyOf branches)."""
    item = {"type": "integer", "minimum": 1, "maximum": 3}
    listed = bounded({"type": "array", "items": item})
    assert accepts(listed, render(("f", {"n": [1, 3]}))) and not accepts(listed, render(("f", {"n": [1, 4]})))
    union = bounded({"anyOf": [item, {"type": "string"}]})
    assert accepts(union, render(("f", {"n": 2}))) and accepts(union, render(("f", {"n": "x"})))
    assert not accepts(union, render(("f", {"n": 0})))


def test_number_bounds_are_left_to_the_check_after() -> None:
    """Floats with bounds are not held by the grammar (documented); the call is validated after."""
    assert accepts(bounded({"type": "number", "minimum": 5}), render(("f", {"n": 1.5})))


def test_no_grammar_for_an_empty_integer_range() -> None:
    params = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 4}}}
    assert GrammarCache().get("hermes", [ToolSpec("f", parameters=params)], ToolChoice("required"), 1) is None


def test_cache_returns_the_same_grammar_without_building() -> None:
    cache = GrammarCache(size=2)
    first = cache.get("hermes", TOOLS, ToolChoice("required"), 1)
    again = cache.get("hermes", TOOLS, ToolChoice("required"), 1)
    assert first is not None and again is not None
    assert again.cached and not first.cached and again.text == first.text
    assert cache.get("hermes", TOOLS, ToolChoice("auto"), 1) is not None  # another key
    assert cache.get("hermes", TOOLS[:1], ToolChoice("auto"), 1) is not None  # evicts the first
    rebuilt = cache.get("hermes", TOOLS, ToolChoice("required"), 1)
    assert rebuilt is not None and not rebuilt.cached


def pythonic(*calls: tuple[str, dict[str, Any]]) -> str:
    records = [ToolCallRecord(f"c{i}", name, json.dumps(args)) for i, (name, args) in enumerate(calls)]
    return get_format("pythonic").render_calls(records)


def test_pythonic_grammar_accepts_valid_calls_and_rejects_the_rest() -> None:
    """The pythonic list as its renderer writes it, under each tool's schema, through llama.cpp's sampler."""
    required = GrammarCache().get("pythonic", TOOLS, ToolChoice("required"), 2)
    auto = GrammarCache().get("pythonic", TOOLS, ToolChoice("auto"), 1)
    assert required is not None and auto is not None and parses(required.text) and parses(auto.text)
    paris, limit = ("get_weather", {"city": "Paris", "unit": "celsius"}), ("search_docs", {"query": "x", "limit": 3})
    full = ("search_docs", {"query": "x", "limit": 3, "tags": ["a"], "exact": True, "filters": {"lang": "en"}})
    for ok in [(paris,), (paris, limit), (full,), (("get_weather", {"city": 'say "hi"\n'}),)]:
        assert accepts(required.text, pythonic(*ok)), ok
    assert accepts(required.text, '[search_docs(query="x", exact=false)]')  # JSON's spelling is read too
    assert not accepts(required.text, pythonic(paris, paris, paris))  # past the limit
    assert not accepts(required.text, pythonic(("get_weather", {"city": "Paris", "unit": "kelvin"})))  # enum
    assert not accepts(required.text, pythonic(("get_weather", {"unit": "celsius"})))  # required city
    assert not accepts(required.text, pythonic(("search_docs", {"query": "x", "limit": "3"})))  # integer
    assert not accepts(required.text, pythonic(("search_docs", {"query": "x", "limit": 0})))  # minimum 1
    assert not accepts(required.text, pythonic(("delete_everything", {})))  # not offered
    assert not accepts(required.text, '[get_weather(city="a\\/b")]')  # Python reads \/ otherwise than JSON
    assert not accepts(required.text, "Sure, let me check.")  # a call was demanded
    assert accepts(auto.text, "It is sunny in Paris.") and accepts(auto.text, pythonic(paris))
    assert not accepts(auto.text, pythonic(paris, paris))  # one call allowed
    for markup_first in ("[delete_everything()]", " [get_weather(", "```python\n[", '<tool_call>\n{"name"'):
        assert not accepts(auto.text, markup_first), markup_first  # only a valid call starts like a call


@pytest.mark.parametrize(
    ("properties", "required", "allowed", "refused"),
    [
        (
            {"a": {"type": "integer"}, "b": {"type": "integer"}},
            [],
            ["f()", "f(a=1)", "f(b=2)", "f(a=1, b=2)"],
            ["f(b=2, a=1)", "f(, b=2)", "f(a=1,)"],
        ),
        ({}, [], ["f()"], ["f(a=1)"]),
        ({"a-b": {"type": "integer"}}, ["a-b"], ['f({"a-b": 1})'], ["f(a_b=1)"]),  # no keyword spells it
        ({"class": {"type": "string"}}, [], ['f({"class": "x"})', "f({})"], ['f(class="x")']),
    ],
)
def test_pythonic_keywords(
    properties: dict[str, Any], required: list[str], allowed: list[str], refused: list[str]
) -> None:
    params = {"type": "object", "properties": properties, "required": required}
    grammar = GrammarCache().get("pythonic", [ToolSpec("f", parameters=params)], ToolChoice("required"), 1)
    assert grammar is not None and parses(grammar.text)
    for text in allowed:
        assert accepts(grammar.text, f"[{text}]"), text
    for text in refused:
        assert not accepts(grammar.text, f"[{text}]"), text


def test_pythonic_calls_the_grammar_allows_are_read_back_as_calls() -> None:
    """What the grammar lets through, the pythonic parser reads as the same structured calls."""
    calls = [("get_weather", {"city": "Paris"}), ("search_docs", {"query": "x", "exact": True, "tags": []})]
    parser = get_format("pythonic").new_parser(TOOLS, 2)
    events = [*parser.feed(pythonic(*calls)), *parser.close("stop")]
    ended = [json.loads(e.arguments) for e in events if type(e).__name__ == "ToolCallEnd"]
    assert ended == [args for _, args in calls]


def test_no_grammar_where_none_fits() -> None:
    cache = GrammarCache()
    for fmt in sorted(set(FORMATS) - {"hermes", "pythonic"}):
        assert cache.get(fmt, TOOLS, ToolChoice("required"), 1) is None, fmt
    assert cache.get("hermes", TOOLS, ToolChoice("none"), 1) is None
    assert cache.get("hermes", [], ToolChoice("auto"), 1) is None
    remote = ToolSpec("f", parameters={"$ref": "https://example.invalid/schema.json"})
    assert cache.get("hermes", [remote], ToolChoice("auto"), 1) is None  # never fetched


def test_body_fields_per_dialect() -> None:
    assert body_fields("none", "g") == {}
    assert body_fields("gbnf", "g")["grammar"].value == "g"
    assert body_fields("vllm", "g")["structured_outputs"].value == {"grammar": "g"}


def test_constrained_true_needs_a_dialect(tmp_path: Path) -> None:
    path = tmp_path / "rules.json5"
    rules = {"upstreams": {"up": {"base_url": "http://127.0.0.1:1/v1"}}, "models": constrained(True)}
    path.write_text(json.dumps(rules))
    with pytest.raises(RulesError, match="constraint_dialect"):
        load_rules(path)
    rules["models"] = constrained("auto")
    path.write_text(json.dumps(rules))
    assert load_rules(path).models[0].constrained == "auto"
    assert lint(load_rules(path)) == []
    rules["models"] = constrained("auto", fmt="react")
    path.write_text(json.dumps(rules))
    assert any("'react' has no grammar" in line for line in lint(load_rules(path)))
    rules["models"] = constrained("auto", fmt="pythonic")
    path.write_text(json.dumps(rules))
    assert lint(load_rules(path)) == []


def test_each_format_says_whether_it_has_a_grammar(tmp_path: Path) -> None:
    with_grammar = sorted(name for name, fmt in FORMATS.items() if fmt.grammar is not None)
    assert with_grammar == ["hermes", "pythonic"]
    rules = {
        "upstreams": {"up": {"base_url": "http://127.0.0.1:1/v1", "constraint_dialect": "gbnf"}},
        "models": constrained("auto", fmt="xml"),
    }
    path = tmp_path / "rules.json5"
    path.write_text(json.dumps(rules))
    assert any("(only 'hermes', 'pythonic')" in line for line in lint(load_rules(path)))


def test_the_cache_builds_what_the_format_s_grammar_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """A format plugs its grammar in by its ``grammar`` alone: no list elsewhere names it."""
    seen: list[tuple[bool, int, bool]] = []

    def build(rules: SchemaRules, tools: Any, demand_call: bool, max_calls: int, bare: bool) -> str:
        seen.append((demand_call, max_calls, bare))
        value = rules.value(dict(tools[0].parameters), "args")
        return "\n".join([*rules.lines(), f'root ::= "go(" {value} ")"']) + "\n"

    class Plugged:
        name = "plugged"
        grammar = CallGrammar(build)

    monkeypatch.setitem(FORMATS, "plugged", Plugged())  # type: ignore[arg-type]
    grammar = GrammarCache().get("plugged", TOOLS[:1], ToolChoice("required"), 2, bare=False)
    assert grammar is not None and 'root ::= "go(" args ")"' in grammar.text
    assert parses(grammar.text)
    assert seen == [(True, 2, False)]
    monkeypatch.setattr(Plugged, "grammar", None)
    assert GrammarCache().get("plugged", TOOLS[:1], ToolChoice("required"), 2) is None


@pytest.mark.parametrize("dialect", ["gbnf", "vllm"])
@pytest.mark.parametrize("stream", [False, True])
async def test_grammar_goes_upstream(start_proxy, fake_upstream, dialect: str, stream: bool) -> None:
    proxy = await start_proxy(models=constrained(True), upstream_extra={"constraint_dialect": dialect})
    fake_upstream.script(Reply(pieces=text_stream(pieces(call_text("hermes")))))
    hostile = 'root ::= "<tool_call>{\\"name\\": \\"rm_rf\\"}"'
    result = await ask(proxy, stream, tool_choice="required", extra_body={"grammar": hostile})
    assert result["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    body = fake_upstream.requests[-1]
    grammar = body["grammar"] if dialect == "gbnf" else body["structured_outputs"]["grammar"]
    assert parses(grammar) and "get_weather" in grammar and "rm_rf" not in grammar
    assert grammar.splitlines()[-1] == "root ::= tool-calls | bare-calls"
    if dialect == "vllm":
        assert "grammar" not in body
    # parallel_tool_calls absent: the prompt asks for one call, and so does the grammar
    assert "tool-calls ::= tool-call\n" in grammar + "\n"


@pytest.mark.parametrize("setting", [False, "auto"])
async def test_client_grammar_is_dropped_when_toolshim_sets_none(start_proxy, fake_upstream, setting: Any) -> None:
    """Security issue 15: a client's ``grammar`` never reaches the upstream on its own."""
    proxy = await start_proxy(models=constrained(setting))  # "auto" with no dialect: no constraint
    fake_upstream.script(Reply(pieces=text_stream(pieces("Hello"))))
    await ask(proxy, False, extra_body={"grammar": 'root ::= "x"', "structured_outputs": {"regex": "x"}})
    body = fake_upstream.requests[-1]
    assert "grammar" not in body and "structured_outputs" not in body


async def test_refused_grammar_is_retried_without_and_remembered(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=constrained("auto"), upstream_extra={"constraint_dialect": "gbnf"})
    refused = Reply(status=400, body={"error": {"message": "Unrecognized parameter: grammar", "type": "x"}})
    answer = Reply(pieces=text_stream(pieces(call_text("hermes"))))
    fake_upstream.script(refused, answer)
    result = await ask(proxy, False, tool_choice="required")
    assert result["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert ["grammar" in body for body in fake_upstream.requests] == [True, False]
    await ask(proxy, True, tool_choice="required")
    assert "grammar" not in fake_upstream.requests[-1], "the refusal was not remembered"
    assert proxy.metrics.policy_actions.labels("*", "constraint_refused")._value.get() == 1


async def test_other_upstream_errors_are_not_retried(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=constrained("auto"), upstream_extra={"constraint_dialect": "gbnf"})
    fake_upstream.script(Reply(status=400, body={"error": {"message": "context length exceeded", "type": "x"}}))
    with pytest.raises(openai.BadRequestError):
        await ask(proxy, False, tool_choice="required")
    assert len(fake_upstream.requests) == 1


async def test_grammar_cost_is_reported_built_then_cached(start_proxy, fake_upstream, monkeypatch) -> None:
    """The ``x-toolshim-grammar`` header and the grammar histogram: built once, then from the cache."""
    monkeypatch.setattr(modes, "GRAMMARS", GrammarCache())
    proxy = await start_proxy(models=constrained(True), upstream_extra={"constraint_dialect": "gbnf"})
    fake_upstream.script(*[Reply(pieces=text_stream(pieces(call_text("hermes")))) for _ in range(2)])
    seen = []
    for _ in range(2):
        _, headers = await ask_raw(proxy, tool_choice="required")
        seen.append(headers["x-toolshim-grammar"].split())
    assert [(how, unit) for how, _, unit in seen] == [("built", "ms"), ("cached", "ms")]
    assert all(float(ms) >= 0 for _, ms, _ in seen)
    histogram = proxy.metrics.grammar_seconds
    assert [histogram.labels("hermes", flag)._sum.get() > 0 for flag in ("false", "true")] == [True, True]
