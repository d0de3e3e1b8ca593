"""Constrained decoding for emulated calls: the grammar an upstream is told to keep the output in.

Sans-IO. From (format, tools, tool_choice, call limit) it builds a GBNF grammar whose sentences
are exactly what the format's parser reads as valid calls: the format's wrapper syntax, the name
one of the offered tools, the arguments valid against that tool's JSON Schema. With ``required``
or a named function the output is 1..max_calls calls and nothing else; with ``auto`` it is either
free text or such calls. Free text may not start the way a call does (``FREE_TEXT_NOT_FIRST``), so a
model that starts writing a call can only finish it validly.

hermes: where the parser reads bare call objects (the rule's ``lenient``, on by default), the calls may
also be written bare, ``{"name": ...}`` without the wrapper: small Qwen models do, and a grammar without
that branch pushed them into prose instead of a call (BFCL: 11 of 21)::

    root        ::= tool-calls | bare-calls | free-text    # auto; no free-text when a call is demanded
    tool-calls  ::= tool-call ("\\n" tool-call){0,N-1}
    bare-calls  ::= call-object ("\\n" call-object){0,N-1}
    tool-call   ::= "<tool_call>\\n" call-object "\\n</tool_call>"
    call-object ::= "{\\"name\\": " (tool-0 | tool-1) "}"
    tool-0      ::= "\\"get_weather\\", \\"arguments\\": " tool-0-args   # args: llama.cpp's converter

pythonic: one Python list of keyword calls, the values Python literals of each parameter's schema
(required parameters first, in the schema's order, then any of the optional ones, in order, as
llama.cpp orders an object's keys); a tool with a parameter name that is no Python identifier takes its
arguments as one dict (``f({"a-b": 1})``, which the parser reads too)::

    root        ::= call-list | free-text
    call-list   ::= "[" call (", " call){0,N-1} "]"
    call        ::= tool-0 | tool-1
    tool-0      ::= "get_weather(" tool-0-kwargs ")"
    tool-0-kwargs ::= "city=" tool-0-city (", unit=" tool-0-unit)?

Formats whose arguments are not one value per parameter in a syntax a grammar can pin down (xml's
parameter tags, caret's body) or whose calls are free-form lines (react) get no constraint (``build``
returns ``None``) and run as before. The value rules are llama.cpp's own converter (``schema_grammar``).
Grammars are cached per (format, tools, choice, calls) in an LRU, so a repeated tool set costs a
dictionary look-up.

How the grammar travels (``dialect``, an upstream option): ``gbnf`` puts it in ``grammar``
(llama.cpp's server, llama-cpp-python, LocalAI); ``vllm`` in ``structured_outputs.grammar``
(vLLM >= 0.12, whose xgrammar backend reads GBNF). Ollama's ``format`` and LM Studio's
``response_format`` take only a JSON schema for the whole output, which cannot express a call
wrapped in markup: not supported. The value is wrapped in ``Injected`` so the allowlist passes it
only because toolshim set it (a client's own ``grammar`` is still dropped).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..config.allowlist import Injected
from ..config.rules import CONSTRAINED_FORMATS
from ..formats import CALL_CLOSE as CLOSE
from ..formats import CALL_OPEN as OPEN
from ..formats import ToolChoice, ToolSpec, plain_key
from .schema_gbnf import CONVERTER_ERRORS, ConverterMissing, converter, literal, value_rule

log = logging.getLogger(__name__)

Dialect = Literal["gbnf", "vllm", "none"]
DIALECTS: tuple[str, ...] = ("gbnf", "vllm", "none")
SUPPORTED_FORMATS = CONSTRAINED_FORMATS
_CACHE_SIZE = 256
CALL_OBJECT = '{"name": '
CALL_HEAD = OPEN + "\n" + CALL_OBJECT  # as hermes' render_call writes a call
CALL_TAIL = "}\n" + CLOSE
# Free text may not start with these: a call's first character, a blank or NUL. hermes: "<" and "{"
# (wrapped, bare); pythonic: "[" (the list), "`" (a fence, whose calls the parser leaves as text), and
# "<" / "{" (other syntaxes the lenient parser would read without the grammar's checks).
FREE_TEXT_NOT_FIRST = "<{\\x00 \\t\\n\\r"
PYTHONIC_NOT_FIRST = "[`<{\\x00 \\t\\n\\r"


@dataclass(frozen=True, slots=True)
class Grammar:
    """A grammar and what getting it cost (seconds: the key's hash and the look-up, plus the build
    when it was not cached)."""

    text: str
    build_seconds: float
    cached: bool


def _tool_rules(made: Any, tools: Sequence[ToolSpec]) -> list[tuple[str, str]]:
    """One rule per tool: its name as JSON, then its arguments under its schema (converter's rules)."""
    rules = []
    for i, tool in enumerate(tools):
        args_rule = value_rule(made, dict(tool.parameters), f"tool-{i}-args")
        rules.append((f"tool-{i}", literal(json.dumps(tool.name) + ', "arguments": ') + " " + args_rule))
    return rules


def _free_text(not_first: str) -> str:
    return f"free-text ::= [^{not_first}] [^\\x00]*"


def hermes_grammar(tools: Sequence[ToolSpec], demand_call: bool, max_calls: int, bare: bool = True) -> str:
    """The hermes grammar (see the module docstring); raises ``ConverterMissing`` or a converter error.
    ``bare``: the parser reads bare call objects too (lenient recognition), so the grammar offers them."""
    made = converter()
    tool_rules = _tool_rules(made, tools)
    lines = made.format_grammar().splitlines()
    lines += [f"{name} ::= {rule}" for name, rule in tool_rules]
    names = " | ".join(name for name, _ in tool_rules)
    calls = ["tool-calls", *(["bare-calls"] if bare else []), *([] if demand_call else ["free-text"])]
    lines += [
        f"call-object ::= {literal(CALL_OBJECT)} ({names}) {literal('}')}",
        f"tool-call ::= {literal(OPEN + chr(10))} call-object {literal(chr(10) + CLOSE)}",
        f"tool-calls ::= tool-call{_more('tool-call', max_calls)}",
        *([f"bare-calls ::= call-object{_more('call-object', max_calls)}"] if bare else []),
        *([] if demand_call else [_free_text(FREE_TEXT_NOT_FIRST)]),
        "root ::= " + " | ".join(calls),
    ]
    return "\n".join(lines) + "\n"


def _more(rule: str, max_calls: int, separator: str = "\n") -> str:
    """Up to ``max_calls - 1`` more of ``rule``, each after ``separator``."""
    return "" if max_calls <= 1 else f" ({literal(separator)} {rule}){{0,{max_calls - 1}}}"


def _kwargs_rule(made: Any, tool: ToolSpec, prefix: str) -> str:
    """``city="Paris", unit="celsius"`` for one tool: required keywords first, in the schema's order,
    then any of the optional ones in order (the parser reads keywords in any order; one order is
    enough for a model to write a valid call). A parameter name no keyword can spell: one dict."""
    params = dict(tool.parameters)
    props = params.get("properties")
    props = props if isinstance(props, Mapping) else {}
    if not all(plain_key(str(name)) for name in props):
        return value_rule(made, params, f"{prefix}-dict")
    wanted = set(params.get("required") or ())
    required = [n for n in props if n in wanted]
    optional = [n for n in props if n not in required]
    kv = {n: f"{literal(f'{n}=')} {value_rule(made, props[n], f'{prefix}-{n}')}" for n in props}
    rule = f" {literal(', ')} ".join(kv[n] for n in required)
    if not optional:
        return rule or '""'
    # tails[i]: any of optional[i:], in order, each after a comma (a named rule each: linear in size).
    tails = [""] * (len(optional) + 1)
    for i in range(len(optional) - 1, -1, -1):
        tails[i] = made._add_rule(f"{prefix}-rest-{i}", f"({literal(', ')} {kv[optional[i]]})? {tails[i + 1]}".strip())
    if required:
        return f"{rule} {tails[0]}"
    # No required keyword: the first one written has no comma before it.
    return "(" + " | ".join(f"{kv[n]} {tails[i + 1]}".strip() for i, n in enumerate(optional)) + ")?"


def pythonic_grammar(tools: Sequence[ToolSpec], demand_call: bool, max_calls: int, bare: bool = True) -> str:
    """The pythonic grammar (see the module docstring); raises ``ConverterMissing`` or a converter error."""
    del bare  # a bare call is one the prompt does not ask for; the list is the form the grammar offers
    made = converter(python=True)
    tool_rules = [
        (f"tool-{i}", f"{literal(t.name + '(')} {_kwargs_rule(made, t, f'tool-{i}')} {literal(')')}")
        for i, t in enumerate(tools)
    ]
    lines = made.format_grammar().splitlines()
    lines += [f"{name} ::= {rule}" for name, rule in tool_rules]
    lines += [
        "call ::= " + " | ".join(name for name, _ in tool_rules),
        f'call-list ::= "[" call{_more("call", max_calls, ", ")} "]"',
        *([] if demand_call else [_free_text(PYTHONIC_NOT_FIRST)]),
        "root ::= " + " | ".join(["call-list", *([] if demand_call else ["free-text"])]),
    ]
    return "\n".join(lines) + "\n"


GrammarBuilder = Callable[[Sequence[ToolSpec], bool, int, bool], str]
BUILDERS: dict[str, GrammarBuilder] = {"hermes": hermes_grammar, "pythonic": pythonic_grammar}


class GrammarCache:
    """Built grammars by a hash of (format, tools, choice, calls), least recently used dropped first.

    ``None`` is cached too: a tool set the converter cannot express is not tried on every request."""

    def __init__(self, size: int = _CACHE_SIZE) -> None:
        self._size = size
        self._items: OrderedDict[str, str | None] = OrderedDict()

    def get(
        self, fmt: str, tools: Sequence[ToolSpec], choice: ToolChoice, max_calls: int, bare: bool = True
    ) -> Grammar | None:
        """The grammar for this request, or ``None`` where none fits (format, schema, no converter).
        ``bare``: bare call objects are calls too (the rule's ``lenient``)."""
        if fmt not in SUPPORTED_FORMATS or not tools or choice.mode == "none":
            return None
        started = time.perf_counter()
        demand = choice.mode in ("required", "named")
        key = _key(fmt, tools, demand, max_calls, bare)
        if key in self._items:
            self._items.move_to_end(key)
            text = self._items[key]
            return None if text is None else Grammar(text, time.perf_counter() - started, cached=True)
        built = self._build(fmt, tools, demand, max_calls, bare)
        self._items[key] = built
        if len(self._items) > self._size:
            self._items.popitem(last=False)
        return None if built is None else Grammar(built, time.perf_counter() - started, cached=False)

    @staticmethod
    def _build(fmt: str, tools: Sequence[ToolSpec], demand: bool, max_calls: int, bare: bool) -> str | None:
        try:
            return BUILDERS[fmt](tools, demand, max_calls, bare)
        except ConverterMissing as exc:
            log.warning("%s", exc)
            return None
        except CONVERTER_ERRORS as exc:
            log.warning("no grammar for this tool set (the schema converter failed: %s)", str(exc)[:200])
            return None


def _key(fmt: str, tools: Sequence[ToolSpec], demand: bool, max_calls: int, bare: bool) -> str:
    spec = [[t.name, t.parameters] for t in tools]
    raw = json.dumps([fmt, spec, demand, max_calls, bare], sort_keys=True, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()


GRAMMARS = GrammarCache()  # process-wide: pure, bounded, keyed on everything a grammar depends on


@dataclass(frozen=True, slots=True)
class Constraining:
    """One request's constraint: the body fields that carry it and what to do if the upstream balks."""

    fields: dict[str, Any]
    on_rejected: Callable[[], None]  # remember, per upstream, to send no constraint for a while

    def rejected(self, status: int, message: str) -> bool:
        """Did the upstream refuse the request because of the constraint (retry without it)?"""
        return status in (400, 422) and names_constraint(message)


def body_fields(dialect: str, grammar: str) -> dict[str, Any]:
    """The upstream body fields that carry ``grammar`` in ``dialect`` (wrapped for the allowlist)."""
    if dialect == "gbnf":
        return {"grammar": Injected(grammar)}
    if dialect == "vllm":
        return {"structured_outputs": Injected({"grammar": grammar})}
    return {}


def names_constraint(message: str) -> bool:
    """Does an upstream's error message point at the constraint (so a retry without it may work)?"""
    lowered = message.lower()
    return any(word in lowered for word in ("grammar", "structured_output", "structured output", "gbnf"))
