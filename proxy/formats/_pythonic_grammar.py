"""The pythonic grammar: one Python list of keyword calls, the values Python literals of each schema.

Required parameters first, in the schema's order, then any of the optional ones, in order, as llama.cpp
orders an object's keys; a tool with a parameter name that is no Python identifier takes its arguments
as one dict (``f({"a-b": 1})``, which the parser reads too)::

    root        ::= call-list | free-text
    call-list   ::= "[" call (", " call){0,N-1} "]"
    call        ::= tool-0 | tool-1
    tool-0      ::= "get_weather(" tool-0-kwargs ")"
    tool-0-kwargs ::= "city=" tool-0-city (", unit=" tool-0-unit)?
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ._gbnf import free_text, literal, more
from ._pythonic_values import plain_key
from .base import CallGrammar, SchemaRules, ToolSpec

# Free text may not start with "[" (the list), "`" (a fence, whose calls the parser leaves as text),
# "<" / "{" (other syntaxes the lenient parser would read without the grammar's checks), a blank or NUL.
PYTHONIC_NOT_FIRST = "[`<{\\x00 \\t\\n\\r"


def _kwargs_rule(rules: SchemaRules, tool: ToolSpec, prefix: str) -> str:
    """``city="Paris", unit="celsius"`` for one tool: required keywords first, in the schema's order,
    then any of the optional ones in order (the parser reads keywords in any order; one order is
    enough for a model to write a valid call). A parameter name no keyword can spell: one dict."""
    params = dict(tool.parameters)
    props = params.get("properties")
    props = props if isinstance(props, Mapping) else {}
    if not all(plain_key(str(name)) for name in props):
        return rules.value(params, f"{prefix}-dict")
    wanted = set(params.get("required") or ())
    required = [n for n in props if n in wanted]
    optional = [n for n in props if n not in required]
    kv = {n: f"{literal(f'{n}=')} {rules.value(props[n], f'{prefix}-{n}')}" for n in props}
    rule = f" {literal(', ')} ".join(kv[n] for n in required)
    if not optional:
        return rule or '""'
    # tails[i]: any of optional[i:], in order, each after a comma (a named rule each: linear in size).
    tails = [""] * (len(optional) + 1)
    for i in range(len(optional) - 1, -1, -1):
        tails[i] = rules.add(f"{prefix}-rest-{i}", f"({literal(', ')} {kv[optional[i]]})? {tails[i + 1]}".strip())
    if required:
        return f"{rule} {tails[0]}"
    # No required keyword: the first one written has no comma before it.
    return "(" + " | ".join(f"{kv[n]} {tails[i + 1]}".strip() for i, n in enumerate(optional)) + ")?"


def pythonic_grammar(
    rules: SchemaRules, tools: Sequence[ToolSpec], demand_call: bool, max_calls: int, bare: bool
) -> str:
    """The pythonic grammar (see the module docstring). ``bare`` is ignored: a bare call is one the
    prompt does not ask for; the list is the form the grammar offers."""
    del bare
    tool_rules = [
        (f"tool-{i}", f"{literal(t.name + '(')} {_kwargs_rule(rules, t, f'tool-{i}')} {literal(')')}")
        for i, t in enumerate(tools)
    ]
    lines = rules.lines()
    lines += [f"{name} ::= {rule}" for name, rule in tool_rules]
    lines += [
        "call ::= " + " | ".join(name for name, _ in tool_rules),
        f'call-list ::= "[" call{more("call", max_calls, ", ")} "]"',
        *([] if demand_call else [free_text(PYTHONIC_NOT_FIRST)]),
        "root ::= " + " | ".join(["call-list", *([] if demand_call else ["free-text"])]),
    ]
    return "\n".join(lines) + "\n"


PYTHONIC_GRAMMAR = CallGrammar(pythonic_grammar, python_literals=True)
