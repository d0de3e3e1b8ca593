"""The tool-format plugin interface: what every text protocol for tool calls implements.

A format has two halves, because rendering is stateless and parsing is per-response state:

* ``ToolFormat`` (one per rule, stateless) renders the tool instructions, the model's
  earlier calls and the tool results as text, and names its stop sequences.
* ``StreamParser`` (one per response, sans-IO) is fed model text in any chunking and
  returns ``Event`` objects. It never raises on model output: bad output becomes a
  ``Malformed`` event followed by sanitized text.

Event contract (what the pipeline relies on):

* ``Text`` / ``Reasoning`` carry user-visible content / thinking, never markup.
* For each call ``i`` (0, 1, ... in order): ``ToolCallStart(i, name)`` once the name is
  known, zero or more ``ToolCallArgs(i, fragment)`` (raw argument text as the model
  writes it; only JSON-syntax formats emit these, fragments only append), then exactly
  one of ``ToolCallEnd(i, name, arguments)`` (canonical JSON, schema-valid) or
  ``Malformed(raw, reason, index=i)``.
* When a new tool block starts after ``max_calls`` calls were started, the parser emits
  ``SecondToolStarted(index)`` (the cut point) and ignores all further input.
* Any split of the same text gives the same events once adjacent Text/Reasoning/ToolCallArgs
  events are merged.
* At ``close()``, a call block the output ends in is ``Malformed`` when the finish reason is
  ``"length"`` or ``"content_filter"`` (the upstream cut it off), and completed by the format's own
  rule after ``"stop"`` (a stop sequence may have eaten its closing marker).

Every parser has the same shape: a small ``IntEnum`` of states with the transitions and a literal wire
example at the top of its module, one ``_step_<state>`` method per state (a ``_steps`` table; a step
returns True while it makes progress, False when it needs more input), a ``_run`` loop, an
``EventBuffer`` for its output and a ``CallSlots`` (``_calls``) for call indexes, the cut, finishing
calls and the truncation rule.

A format whose calls a grammar can pin down (one value per parameter, in a syntax GBNF can spell) says so
with ``grammar``, a ``CallGrammar``: the format's wrapper syntax around value rules that ``constrain``
makes from each tool's JSON Schema (``SchemaRules``, llama.cpp's converter behind a small face, handed
in because ``formats`` imports nothing of the package). The others' ``grammar`` is ``None``.

This module imports nothing from the server side; no I/O, no asyncio.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ._reconcile import reconciled_schema


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One function tool from the request: its name, description and JSON Schema."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    # not offered in this attempt (withheld after a made-up call): a call of it is read only under its exact name,
    # and no near miss resolves to it ("book_flights" for the withheld book_flight, when search_flights is offered)
    exact_only: bool = False

    @classmethod
    def from_openai(cls, tool: Mapping[str, Any]) -> ToolSpec:
        """Build from an OpenAI ``tools`` entry or a legacy ``functions`` entry; a ``type`` its own ``enum``
        contradicts is left out of the schema (``_reconcile.py``)."""
        fn = tool.get("function", tool) if tool.get("type", "function") == "function" else tool
        params = reconciled_schema(fn.get("parameters") or {"type": "object", "properties": {}})
        return cls(name=str(fn.get("name", "")), description=str(fn.get("description") or ""), parameters=params)


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """OpenAI's ``tool_choice``, normalised: auto, required, none, or a named function."""

    mode: Literal["auto", "required", "none", "named"] = "auto"
    name: str | None = None

    @classmethod
    def from_openai(cls, value: Any) -> ToolChoice:
        """Accept ``"auto"``/``"required"``/``"none"``, ``{"type": "function", "function": {"name"}}``
        and the legacy ``function_call`` values (``{"name": ...}``)."""
        if value is None or value == "auto":
            return cls("auto")
        if value in ("required", "none"):
            return cls(value)
        if isinstance(value, Mapping):
            fn = value.get("function", value)
            if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
                return cls("named", fn["name"])
        return cls("auto")


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """A call from the conversation history (an assistant message's ``tool_calls`` entry)."""

    id: str
    name: str
    arguments: str  # the JSON string exactly as the client sent it


# ---- events ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Reasoning:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    index: int
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallArgs:
    index: int
    fragment: str


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    index: int
    name: str
    arguments: str  # canonical JSON object text, valid against the tool's schema
    repairs: tuple[str, ...] = ()  # e.g. ("json5", "coerce_types", "name_case"); empty when clean


@dataclass(frozen=True, slots=True)
class SecondToolStarted:
    index: int  # the index the call would have had


@dataclass(frozen=True, slots=True)
class Malformed:
    raw: str
    reason: str
    index: int | None = None  # the call index when a ToolCallStart was already emitted


Event = Text | Reasoning | ToolCallStart | ToolCallArgs | ToolCallEnd | SecondToolStarted | Malformed

FinishReason = Literal["stop", "length", "tool_calls", "content_filter"] | None


# ---- the grammar a format's calls are constrained to ---------------------------------------


class SchemaRules(Protocol):
    """The JSON-Schema-to-GBNF converter as a format's grammar builder sees it (``constrain`` makes it).

    One per grammar: the rules it is asked for accumulate, and ``lines`` writes them all out (the
    converter's primitives included), so a builder asks for every value rule before ``lines``."""

    def value(self, schema: Any, name: str) -> str:
        """The name of a rule for values valid against ``schema`` (``name`` and helpers added)."""
        ...

    def add(self, name: str, rule: str) -> str:
        """Add ``name ::= rule`` (a builder's own helper rule) and return the name to refer to it by."""
        ...

    def lines(self) -> list[str]:
        """Every rule added so far, one ``name ::= rule`` per line."""
        ...


# (rules, tools, demand_call, max_calls, bare) -> the GBNF text; ``demand_call``: no free text (``required``
# or a named function); ``bare``: the parser also reads calls without their wrapper (the rule's ``lenient``).
GrammarBuilder = Callable[[SchemaRules, Sequence[ToolSpec], bool, int, bool], str]


@dataclass(frozen=True, slots=True)
class CallGrammar:
    """How a format writes its calls as a GBNF grammar: the one place that says a format has one.

    ``python_literals``: the values are Python literals (``True``, ``None``), not JSON, so ``constrain``
    hands ``build`` a converter that spells them so. ``build`` may raise what the converter raises on a
    schema it cannot express; ``constrain`` sends no grammar then."""

    build: GrammarBuilder
    python_literals: bool = False


# ---- the plugin interface ---------------------------------------------------------------


class StreamParser(Protocol):
    """Per-response parser state. Push text in, pull events out; no I/O."""

    def feed(self, text: str) -> list[Event]:
        """Consume the next piece of model output (any length, any split)."""
        ...

    def close(self, finish_reason: FinishReason = "stop") -> list[Event]:
        """End of output: flush held-back text, complete or reject an open block.

        ``finish_reason`` is the upstream's: ``"stop"`` (natural end or a stop sequence, whose
        text the server may have left out), ``"length"`` (cut by max_tokens) or ``"content_filter"``
        (cut by the upstream's filter); the last two make an open call block ``Malformed``.
        """
        ...


class ToolFormat(Protocol):
    """A text protocol for tool calls. Stateless; one instance serves many requests."""

    name: str

    @property
    def grammar(self) -> CallGrammar | None:
        """How to constrain this format's calls with a grammar; ``None``: its calls go unconstrained."""
        ...

    def render_tools(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool) -> str:
        """The system-prompt instructions: tool schemas, the choice, one worked example."""
        ...

    def worked_example(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice) -> list[tuple[str, dict[str, Any]]]:
        """The calls (name, arguments) of the worked example ``render_tools`` shows, those of the request's tools:
        a model that repeats the instructions repeats them too, and such a call is toolshim's text, not the user's."""
        ...

    def render_calls(self, calls: Sequence[ToolCallRecord]) -> str:
        """An assistant's earlier tool calls, in the syntax the model is asked to write."""
        ...

    def render_result(self, name: str, content: str) -> str:
        """One tool result, as the model should see it (e.g. ``Observation: ...``)."""
        ...

    def stop_sequences(self) -> tuple[str, ...]:
        """Stop strings that end generation after the first complete tool block."""
        ...

    def stops_between_calls(self) -> tuple[str, ...]:
        """Those of ``stop_sequences()`` that would also end generation between two call blocks.

        A request that allows several calls must leave them out, or the model could write only one
        (hermes: ``</tool_call>``). Exactly the stops found in ``render_calls`` of two calls.
        """
        ...

    def new_parser(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> StreamParser:
        """A fresh parser for one response; ``max_calls`` is where it reports the cut."""
        ...
