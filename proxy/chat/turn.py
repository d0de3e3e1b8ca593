"""The typed chat request: one frozen ``ChatTurn``, built once from the validated body.

Everything after the handler (policies, the mode choice, the request rewrite, the response
builder) reads this object instead of digging ``tools``, ``functions`` and ``tool_choice`` out
of the raw dict again. The legacy ``functions`` / ``function_call`` dialect is understood here
and nowhere else: the turn records that the client spoke it (``legacy_functions``), and
``native_body`` writes the tools back in the dialect the client used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from ..formats import ToolChoice, ToolSpec
from ..wire.errors import InvalidRequest
from .schemas import validate_chat

Message = dict[str, Any]

TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call")
_TYPED_FIELDS = frozenset({"model", "messages", *TOOL_FIELDS})
_RESULT_ROLES = ("tool", "function")


@dataclass(frozen=True)
class ChatTurn:
    """One chat-completions request, typed. Replace fields with ``dataclasses.replace``."""

    model: str
    messages: tuple[Message, ...]
    tool_defs: tuple[Mapping[str, Any], ...] = ()  # the client's tool entries, as sent (native needs them)
    tool_choice: ToolChoice | None = None  # None: the client did not say
    tool_choice_wire: Any = None  # tool_choice / function_call exactly as sent (native forwards it)
    parallel: bool | None = None  # parallel_tool_calls as sent
    legacy_functions: bool = False  # the client used ``functions``: answer with ``function_call``
    options: Mapping[str, Any] = field(default_factory=dict)  # every other field (temperature, stop, n, ...)
    # texts toolshim put into ``messages`` (a policy's instruction, a cut marker): the model must not echo them
    injected: tuple[str, ...] = ()

    @classmethod
    def from_body(cls, raw: Any) -> ChatTurn:
        """Validate a request body and type it; ``InvalidRequest`` names the first bad field."""
        validate_chat(raw)
        legacy = not raw.get("tools") and bool(raw.get("functions"))
        defs = raw.get("functions") if legacy else raw.get("tools")
        choice_key = (
            "function_call" if legacy or ("tool_choice" not in raw and "function_call" in raw) else "tool_choice"
        )
        wire = raw.get(choice_key)
        return cls(
            model=raw["model"],
            messages=tuple(raw["messages"]),
            tool_defs=tuple(defs or ()),
            tool_choice=None if wire is None else ToolChoice.from_openai(wire),
            tool_choice_wire=wire,
            parallel=raw.get("parallel_tool_calls"),
            legacy_functions=legacy,
            options={k: v for k, v in raw.items() if k not in _TYPED_FIELDS},
        )

    # ---- derived facts --------------------------------------------------------------------

    @cached_property
    def tools(self) -> tuple[ToolSpec, ...]:
        """The function tools among ``tool_defs``, typed; built on first use (native never needs them)."""
        return function_specs(self.tool_defs, self.legacy_functions)

    @property
    def stream(self) -> bool:
        return bool(self.options.get("stream"))

    @property
    def include_usage(self) -> bool:
        """Usage in the answer: always when not streaming, on request when streaming."""
        stream_options = self.options.get("stream_options")
        asked = isinstance(stream_options, Mapping) and bool(stream_options.get("include_usage"))
        return asked or not self.stream

    @property
    def relay_only(self) -> bool:
        """Only the upstream's own answer has what was asked: several choices, or logprobs
        (the emulated path writes one choice, without them)."""
        return (self.options.get("n") or 1) > 1 or bool(self.options.get("logprobs"))

    @property
    def choice(self) -> ToolChoice:
        return self.tool_choice or ToolChoice("auto")

    @property
    def parallel_allowed(self) -> bool:
        """Several calls per turn: unless the client said no; never in the legacy dialect."""
        return self.parallel is not False and not self.legacy_functions

    @property
    def parallel_request(self) -> bool | None:
        """``parallel_tool_calls`` as the call limit reads it: ``False`` in the legacy dialect."""
        return False if self.legacy_functions else self.parallel

    @property
    def offers_tools(self) -> bool:
        """Tools offered and not switched off by ``tool_choice: "none"``."""
        return bool(self.tool_defs) and self.choice.mode != "none"

    @property
    def uses_tools(self) -> bool:
        """Does serving this need tool support: tools offered, or calls / results in the history?"""
        return bool(self.tool_defs) or any(_is_tool_message(m) for m in self.messages)

    @property
    def has_tool_results(self) -> bool:
        return any(m.get("role") in _RESULT_ROLES for m in self.messages)

    def named_tool(self) -> str | None:
        """The tool a named ``tool_choice`` forces, checked against the tools offered."""
        choice = self.choice
        if choice.mode != "named":
            return None
        if choice.name not in {tool.name for tool in self.tools}:
            param = "function_call" if self.legacy_functions else "tool_choice"
            raise InvalidRequest(
                f"Invalid value for '{param}': no tool named '{choice.name}' in the request.", param=param
            )
        return choice.name

    # ---- changes (each returns a new turn) ------------------------------------------------

    def with_messages(self, messages: Iterable[Message]) -> ChatTurn:
        return replace(self, messages=tuple(messages))

    def with_options(self, options: Mapping[str, Any]) -> ChatTurn:
        return replace(self, options=dict(options))

    def with_injected(self, *texts: str) -> ChatTurn:
        """Note texts toolshim added to the messages (the emulated answer keeps them out of the model's text)."""
        return replace(self, injected=(*self.injected, *(t for t in texts if t)))

    def with_tool_defs(self, defs: Iterable[Mapping[str, Any]]) -> ChatTurn:
        return replace(self, tool_defs=tuple(defs))

    def with_tool_choice(self, choice: ToolChoice) -> ChatTurn:
        return replace(self, tool_choice=choice, tool_choice_wire=choice_to_wire(choice, self.legacy_functions))

    def without_tools(self) -> ChatTurn:
        return replace(self, tool_defs=(), tool_choice=None, tool_choice_wire=None, parallel=None)

    # ---- back to the wire -----------------------------------------------------------------

    def native_body(self, upstream_model: str) -> dict[str, Any]:
        """The request as the client sent it (tools in its dialect), with the model renamed."""
        body: dict[str, Any] = {**self.options, "model": upstream_model, "messages": list(self.messages)}
        if self.tool_defs:
            body["functions" if self.legacy_functions else "tools"] = list(self.tool_defs)
        if self.tool_choice_wire is not None:
            body["function_call" if self.legacy_functions else "tool_choice"] = self.tool_choice_wire
        if self.parallel is not None:
            body["parallel_tool_calls"] = self.parallel
        return body


def function_specs(defs: Sequence[Mapping[str, Any]], legacy: bool) -> tuple[ToolSpec, ...]:
    """The function tools among ``tools`` entries (or every legacy ``functions`` entry), typed."""
    if legacy:
        return tuple(ToolSpec.from_openai(d) for d in defs)
    return tuple(ToolSpec.from_openai(d) for d in defs if d.get("type", "function") == "function")


def choice_to_wire(choice: ToolChoice, legacy: bool) -> Any:
    """A ``ToolChoice`` as OpenAI's ``tool_choice`` (or legacy ``function_call``) value."""
    if choice.mode != "named":
        return choice.mode
    return {"name": choice.name} if legacy else {"type": "function", "function": {"name": choice.name}}


def tool_name(tool: Mapping[str, Any]) -> str:
    """The name of a ``tools`` entry or a legacy ``functions`` entry."""
    fn = tool.get("function", tool)
    return str(fn.get("name", "")) if isinstance(fn, Mapping) else ""


def _is_tool_message(message: Mapping[str, Any]) -> bool:
    return message.get("role") in _RESULT_ROLES or bool(message.get("tool_calls") or message.get("function_call"))
