"""Constrained decoding for emulated calls: the grammar an upstream is told to keep the output in.

Sans-IO. From (format, tools, tool_choice, call limit) it builds a GBNF grammar whose sentences
are exactly what the format's parser reads as valid calls: the format's wrapper syntax, the name
one of the offered tools, the arguments valid against that tool's JSON Schema. With ``required``
or a named function the output is 1..max_calls calls and nothing else; with ``auto`` it is either
free text or such calls. Where the parser reads bare call objects (the rule's ``lenient``, on by
default), the calls may also be written bare, ``{"name": ...}`` without the wrapper: small Qwen models
do, and a grammar without that branch pushed them into prose instead of a call (BFCL: 11 of 21). Free
text may not start with ``<``, ``{`` or a blank, so a model that starts a call can only finish it validly. For hermes::

    root        ::= tool-calls | bare-calls | free-text    # auto; no free-text when a call is demanded
    tool-calls  ::= tool-call ("\\n" tool-call){0,N-1}
    bare-calls  ::= call-object ("\\n" call-object){0,N-1}
    tool-call   ::= "<tool_call>\\n" call-object "\\n</tool_call>"
    call-object ::= "{\\"name\\": " (tool-0 | tool-1) "}"
    tool-0      ::= "\\"get_weather\\", \\"arguments\\": " tool-0-args   # args: llama.cpp's converter

Only hermes is supported: its arguments are one JSON object. Formats whose arguments are not one
JSON value (xml's parameter tags, caret's body) or whose calls are free-form lines (react) get no
constraint (``build`` returns ``None``) and run as before.

The JSON-Schema-to-GBNF step is llama.cpp's own converter, the one its server uses for
``json_schema``, as llama-cpp-python ships it (its pure-Python ``llama_grammar.py``, loaded on first use without
the package, so no native library is loaded). Why not the others: llguidance and outlines-core do not emit
GBNF (llguidance's Lark dialect needs a llama.cpp built with it, outlines-core emits a regex);
xgrammar's EBNF is close to GBNF but it pulls a deep-learning stack. That copy of the converter
ignores numeric bounds; integers get them here (``intrange``, an exact digit-range rule), numbers
(floats) with bounds stay unbounded in the grammar and are checked after, as every call is. Grammars are cached per
(format, tools, choice, calls) in an LRU, so a repeated tool set costs a dictionary look-up.

How the grammar travels (``dialect``, an upstream option): ``gbnf`` puts it in ``grammar``
(llama.cpp's server, llama-cpp-python, LocalAI); ``vllm`` in ``structured_outputs.grammar``
(vLLM >= 0.12, whose xgrammar backend reads GBNF). Ollama's ``format`` and LM Studio's
``response_format`` take only a JSON schema for the whole output, which cannot express a call
wrapped in markup: not supported. The value is wrapped in ``Injected`` so the allowlist passes it
only because toolshim set it (a client's own ``grammar`` is still dropped).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from .allowlist import Injected
from .formats import ToolChoice, ToolSpec
from .formats._hermes_markup import CLOSE, OPEN
from .intrange import integer_bounds, integer_range_rule
from .rules import CONSTRAINED_FORMATS

log = logging.getLogger(__name__)

Dialect = Literal["gbnf", "vllm", "none"]
DIALECTS: tuple[str, ...] = ("gbnf", "vllm", "none")
SUPPORTED_FORMATS = CONSTRAINED_FORMATS
_CACHE_SIZE = 256
CALL_OBJECT = '{"name": '
CALL_HEAD = OPEN + "\n" + CALL_OBJECT  # as hermes' render_call writes a call
CALL_TAIL = "}\n" + CLOSE
# Free text may not start with these: "<" and "{" start the calls (wrapped, bare), the rest is a blank or NUL.
FREE_TEXT_NOT_FIRST = "<{\\x00 \\t\\n\\r"

# The errors llama.cpp's converter raises on a schema it cannot express (it uses asserts).
_CONVERTER_ERRORS = (AssertionError, ValueError, KeyError, TypeError, IndexError, RecursionError, NotImplementedError)


class ConverterMissing(RuntimeError):
    """llama-cpp-python (its ``llama_grammar.py``) is not installed: toolshim's ``constrain`` extra."""


@dataclass(frozen=True, slots=True)
class Grammar:
    """A grammar and what getting it cost (seconds: the key's hash and the look-up, plus the build
    when it was not cached)."""

    text: str
    build_seconds: float
    cached: bool


def _literal(value: str) -> str:
    """``value`` as a GBNF string literal (GBNF escapes as JSON does)."""
    return json.dumps(value, ensure_ascii=False)


@functools.cache
def _grammar_module() -> ModuleType:
    """llama-cpp-python's ``llama_grammar.py`` loaded on its own: it imports nothing of the package,
    and importing it as ``llama_cpp.llama_grammar`` would load the native library for nothing."""
    spec = importlib.util.find_spec("llama_cpp")  # finds the package without running its __init__
    path = Path(spec.origin).parent / "llama_grammar.py" if spec and spec.origin else None
    module_spec = importlib.util.spec_from_file_location("toolshim._llama_grammar", path) if path else None
    if path is None or not path.is_file() or module_spec is None or module_spec.loader is None:
        raise ConverterMissing(
            "constrained decoding needs llama.cpp's JSON-Schema converter: pip install 'toolshim[constrain]'"
        )
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


@functools.cache
def _bounded_converter_class() -> type[Any]:
    """llama.cpp's ``SchemaConverter`` plus integer bounds, which its copy ignores (see ``intrange``).

    A subclass because the converter recurses through ``self.visit``: a bounded integer anywhere
    (a property, an array item, an ``anyOf`` branch) reaches this override."""
    module = _grammar_module()

    class BoundedConverter(module.SchemaConverter):  # type: ignore[misc,name-defined]
        def visit(self, schema: Any, name: str) -> Any:
            bounds = integer_bounds(schema) if isinstance(schema, dict) else None
            if bounds is None:
                return super().visit(schema, name)
            rule_name = name + "-" if name in module.RESERVED_NAMES else name or "root"
            return self._add_rule(rule_name, f"({integer_range_rule(*bounds)}) space")

    return BoundedConverter


def _converter() -> Any:
    """A fresh converter (llama.cpp's, with integer bounds; no remote ``$ref`` fetching)."""
    return _bounded_converter_class()(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)


def _tool_rules(converter: Any, tools: Sequence[ToolSpec]) -> list[tuple[str, str]]:
    """One rule per tool: its name as JSON, then its arguments under its schema (converter's rules)."""
    rules = []
    for i, tool in enumerate(tools):
        schema = converter.resolve_refs(json.loads(json.dumps(dict(tool.parameters))), "tool")
        args_rule = converter.visit(schema, f"tool-{i}-args")
        rules.append((f"tool-{i}", _literal(json.dumps(tool.name) + ', "arguments": ') + " " + args_rule))
    return rules


def hermes_grammar(tools: Sequence[ToolSpec], demand_call: bool, max_calls: int, bare: bool = True) -> str:
    """The hermes grammar (see the module docstring); raises ``ConverterMissing`` or a converter error.
    ``bare``: the parser reads bare call objects too (lenient recognition), so the grammar offers them."""
    converter = _converter()
    tool_rules = _tool_rules(converter, tools)
    lines = converter.format_grammar().splitlines()
    lines += [f"{name} ::= {rule}" for name, rule in tool_rules]
    names = " | ".join(name for name, _ in tool_rules)
    calls = ["tool-calls", *(["bare-calls"] if bare else []), *([] if demand_call else ["free-text"])]
    lines += [
        f"call-object ::= {_literal(CALL_OBJECT)} ({names}) {_literal('}')}",
        f"tool-call ::= {_literal(OPEN + chr(10))} call-object {_literal(chr(10) + CLOSE)}",
        f"tool-calls ::= tool-call{_more('tool-call', max_calls)}",
        *([f"bare-calls ::= call-object{_more('call-object', max_calls)}"] if bare else []),
        *([] if demand_call else [f"free-text ::= [^{FREE_TEXT_NOT_FIRST}] [^\\x00]*"]),
        "root ::= " + " | ".join(calls),
    ]
    return "\n".join(lines) + "\n"


def _more(rule: str, max_calls: int) -> str:
    """Up to ``max_calls - 1`` more of ``rule``, each on a new line."""
    return "" if max_calls <= 1 else f' ("\\n" {rule}){{0,{max_calls - 1}}}'


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
        built = self._build(tools, demand, max_calls, bare)
        self._items[key] = built
        if len(self._items) > self._size:
            self._items.popitem(last=False)
        return None if built is None else Grammar(built, time.perf_counter() - started, cached=False)

    @staticmethod
    def _build(tools: Sequence[ToolSpec], demand: bool, max_calls: int, bare: bool) -> str | None:
        try:
            return hermes_grammar(tools, demand, max_calls, bare)
        except ConverterMissing as exc:
            log.warning("%s", exc)
            return None
        except _CONVERTER_ERRORS as exc:
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
