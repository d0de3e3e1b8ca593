"""The hermes grammar: calls as ``hermes`` writes them, the arguments valid against each tool's schema.

Where the parser reads bare call objects (the rule's ``lenient``, on by default), the calls may also be
written bare, ``{"name": ...}`` without the wrapper: small Qwen models do, and a grammar without that
branch pushed them into prose instead of a call (BFCL: 11 of 21)::

    root        ::= tool-calls | bare-calls | free-text    # auto; no free-text when a call is demanded
    tool-calls  ::= tool-call ("\\n" tool-call){0,N-1}
    bare-calls  ::= call-object ("\\n" call-object){0,N-1}
    tool-call   ::= "<tool_call>\\n" call-object "\\n</tool_call>"
    call-object ::= "{\\"name\\": " (tool-0 | tool-1) "}"
    tool-0      ::= "\\"get_weather\\", \\"arguments\\": " tool-0-args   # args: the schema's value rule
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ._gbnf import free_text, literal, more
from ._hermes_markup import CLOSE, OPEN
from .base import CallGrammar, SchemaRules, ToolSpec

CALL_OBJECT = '{"name": '
CALL_HEAD = OPEN + "\n" + CALL_OBJECT  # as hermes' render_call writes a call
CALL_TAIL = "}\n" + CLOSE
# Free text may not start with these: a call's first character ("<" wrapped, "{" bare), a blank or NUL.
FREE_TEXT_NOT_FIRST = "<{\\x00 \\t\\n\\r"


def _tool_rule(rules: SchemaRules, tool: ToolSpec, index: int) -> str:
    """One tool's call body: its name as JSON, then its arguments under its schema."""
    head = literal(json.dumps(tool.name) + ', "arguments": ')
    return f"{head} {rules.value(dict(tool.parameters), f'tool-{index}-args')}"


def _tool_rules(rules: SchemaRules, tools: Sequence[ToolSpec]) -> list[tuple[str, str]]:
    """One rule per tool, ``tool-<i>``, in the order the tools were offered."""
    return [(f"tool-{i}", _tool_rule(rules, tool, i)) for i, tool in enumerate(tools)]


def hermes_grammar(rules: SchemaRules, tools: Sequence[ToolSpec], demand_call: bool, max_calls: int, bare: bool) -> str:
    """The hermes grammar (see the module docstring). ``bare``: the parser reads bare call objects too
    (lenient recognition), so the grammar offers them."""
    tool_rules = _tool_rules(rules, tools)
    lines = rules.lines()
    lines += [f"{name} ::= {rule}" for name, rule in tool_rules]
    names = " | ".join(name for name, _ in tool_rules)
    calls = ["tool-calls", *(["bare-calls"] if bare else []), *([] if demand_call else ["free-text"])]
    lines += [
        f"call-object ::= {literal(CALL_OBJECT)} ({names}) {literal('}')}",
        f"tool-call ::= {literal(OPEN + chr(10))} call-object {literal(chr(10) + CLOSE)}",
        f"tool-calls ::= tool-call{more('tool-call', max_calls)}",
        *([f"bare-calls ::= call-object{more('call-object', max_calls)}"] if bare else []),
        *([] if demand_call else [free_text(FREE_TEXT_NOT_FIRST)]),
        "root ::= " + " | ".join(calls),
    ]
    return "\n".join(lines) + "\n"


HERMES_GRAMMAR = CallGrammar(hermes_grammar)
