"""Constrained decoding for emulated calls: the grammar an upstream is told to keep the output in.

Sans-IO. From (format, tools, tool_choice, call limit) it builds a GBNF grammar whose sentences
are exactly what the format's parser reads as valid calls: the format's wrapper syntax, the name
one of the offered tools, the arguments valid against that tool's JSON Schema. With ``required``
or a named function the output is 1..max_calls calls and nothing else; with ``auto`` it is either
free text or such calls, and free text may not start the way a call does.

The format owns its grammar: its ``grammar`` (a ``formats.CallGrammar``, e.g. hermes' and pythonic's
in their ``_hermes_grammar``/``_pythonic_grammar`` modules) writes the wrapper syntax; this module hands
it llama.cpp's converter for the value rules (``schema_gbnf.schema_rules``), caches the result and
wraps it for the upstream. Formats whose arguments are not one value per parameter in a syntax a
grammar can pin down (xml's parameter tags, caret's body) or whose calls are free-form lines (react)
have no grammar (``grammar is None``), get no constraint and run as before. Grammars are cached per
(format, tools, choice, calls) in an LRU, so a repeated tool set costs a dictionary look-up.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..config.allowlist import Injected
from ..formats import FORMATS, CallGrammar, ToolChoice, ToolSpec
from .schema_gbnf import CONVERTER_ERRORS, ConverterMissing, schema_rules

log = logging.getLogger(__name__)

Dialect = Literal["gbnf", "vllm", "none"]
DIALECTS: tuple[str, ...] = ("gbnf", "vllm", "none")
_CACHE_SIZE = 256


@dataclass(frozen=True, slots=True)
class Grammar:
    """A grammar and what getting it cost (seconds: the key's hash and the look-up, plus the build
    when it was not cached)."""

    text: str
    build_seconds: float
    cached: bool


def grammar_of(fmt: str) -> CallGrammar | None:
    """The registered format's grammar, or ``None`` (no such format, or its calls take no grammar)."""
    found = FORMATS.get(fmt)
    return None if found is None else found.grammar


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
        spec = grammar_of(fmt)
        if spec is None or not tools or choice.mode == "none":
            return None
        started = time.perf_counter()
        demand = choice.mode in ("required", "named")
        key = _key(fmt, tools, demand, max_calls, bare)
        if key in self._items:
            self._items.move_to_end(key)
            text = self._items[key]
            return None if text is None else Grammar(text, time.perf_counter() - started, cached=True)
        built = self._build(spec, tools, demand, max_calls, bare)
        self._items[key] = built
        if len(self._items) > self._size:
            self._items.popitem(last=False)
        return None if built is None else Grammar(built, time.perf_counter() - started, cached=False)

    @staticmethod
    def _build(spec: CallGrammar, tools: Sequence[ToolSpec], demand: bool, max_calls: int, bare: bool) -> str | None:
        try:
            return spec.build(schema_rules(python=spec.python_literals), tools, demand, max_calls, bare)
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
