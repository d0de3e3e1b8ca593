"""Request side of emulation: tools → prompt, history → text, stop sequences merged.

Pure functions over the client's JSON body; the result is a body any chat model accepts
(no ``tools``, no ``tool`` role, no ``tool_calls``) plus what the response side needs to know.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import InvalidRequest
from .formats import ToolCallRecord, ToolChoice, ToolFormat, ToolSpec
from .formats.history import merge_system_prompt, render_history
from .rules import ModelRule

TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call")


@dataclass(frozen=True, slots=True)
class EmulationPlan:
    """Everything the response side needs: the format, the tools offered, the limits."""

    format: ToolFormat
    tools: tuple[ToolSpec, ...]  # the tools offered (only the named one when forced, none for "none")
    parse_tools: tuple[ToolSpec, ...]  # the tools the parser recognises: with "none", all, to keep calls out
    tool_choice: ToolChoice
    parallel: bool
    max_calls: int
    legacy_functions: bool  # the client used ``functions``: answer with ``function_call``
    body: dict[str, Any]  # what goes upstream

    @property
    def wants_call(self) -> bool:
        """``required`` or a named function: an answer without a valid call gets a re-ask."""
        return self.tool_choice.mode in ("required", "named") and bool(self.tools)


def request_tools(raw: dict[str, Any]) -> tuple[list[ToolSpec], bool]:
    """The request's function tools (``tools`` or legacy ``functions``) and whether legacy was used."""
    if raw.get("tools"):
        return [ToolSpec.from_openai(t) for t in raw["tools"] if t.get("type", "function") == "function"], False
    if raw.get("functions"):
        return [ToolSpec.from_openai(f) for f in raw["functions"]], True
    return [], False


def uses_tools(raw: dict[str, Any]) -> bool:
    """Does the request need emulation: tools offered, or tool calls / results in the history?"""
    if raw.get("tools") or raw.get("functions"):
        return True
    for message in raw.get("messages") or ():
        if message.get("role") in ("tool", "function") or message.get("tool_calls") or message.get("function_call"):
            return True
    return False


def _choice(raw: dict[str, Any], tools: list[ToolSpec]) -> ToolChoice:
    value = raw.get("tool_choice", raw.get("function_call"))
    choice = ToolChoice.from_openai(value)
    if choice.mode == "named" and choice.name not in {t.name for t in tools}:
        param = "tool_choice" if "tool_choice" in raw else "function_call"
        raise InvalidRequest(f"Invalid value for '{param}': no tool named '{choice.name}' in the request.",
                             param=param)
    return choice


def merge_adjacent_user_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join back-to-back plain-text user messages (a tool result, then the user's next turn).

    Many chat templates (Gemma, some Llama/Mistral ones) reject two user turns in a row.
    Messages with content-part lists (images) are left as they are.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        prev = out[-1] if out else None
        if (prev is not None and prev.get("role") == message.get("role") == "user"
                and isinstance(prev.get("content"), str) and isinstance(message.get("content"), str)
                and set(prev) <= {"role", "content"} and set(message) <= {"role", "content"}):
            out[-1] = {"role": "user", "content": prev["content"] + "\n\n" + message["content"]}
        else:
            out.append(message)
    return out


def format_stops(fmt: ToolFormat, max_calls: int) -> tuple[str, ...]:
    """The format's stop sequences; with several calls allowed, none that would end the turn
    between two call blocks (hermes' ``</tool_call>``), so the model can write them all."""
    stops = fmt.stop_sequences()
    if max_calls <= 1:
        return stops
    sample = ToolCallRecord("call_1", "tool_name", '{"key": "value"}')
    two_calls = fmt.render_calls([sample, sample])
    return tuple(stop for stop in stops if stop not in two_calls)


def merge_stops(format_stops: tuple[str, ...], client_stop: str | list[str] | None, limit: int) -> list[str]:
    """The format's stop sequences first, then the client's, without duplicates, up to ``limit``."""
    client = [client_stop] if isinstance(client_stop, str) else list(client_stop or [])
    merged: list[str] = []
    for stop in (*format_stops, *client):
        if stop and stop not in merged:
            merged.append(stop)
    return merged[:limit]


def build_plan(raw: dict[str, Any], rule: ModelRule, fmt: ToolFormat, upstream_model: str,
               tools: list[ToolSpec] | None = None) -> EmulationPlan:
    """The upstream body and the parsing plan for one emulated request."""
    all_tools, legacy = request_tools(raw)
    offered = all_tools if tools is None else tools
    choice = _choice(raw, all_tools)
    if (raw.get("n") or 1) > 1:
        raise InvalidRequest("'n' greater than 1 is not supported with emulated tool calling.", param="n")
    parallel = bool(raw.get("parallel_tool_calls", True)) and not legacy
    if choice.mode == "named":
        offered = [t for t in all_tools if t.name == choice.name]
    if choice.mode == "none":
        offered = []
    max_calls = rule.call_limit(parallel)
    messages = merge_adjacent_user_turns(render_history(fmt, list(raw["messages"])))
    if offered:
        messages = merge_system_prompt(messages, fmt.render_tools(offered, choice, max_calls > 1))
    body = {k: v for k, v in raw.items() if k not in TOOL_FIELDS}
    body["model"] = upstream_model
    body["messages"] = messages
    stops = merge_stops(format_stops(fmt, max_calls) if offered else (), raw.get("stop"), rule.max_stop_sequences)
    if stops:
        body["stop"] = stops
    else:
        body.pop("stop", None)
    parse_tools = all_tools if choice.mode == "none" else offered
    return EmulationPlan(fmt, tuple(offered), tuple(parse_tools), choice, parallel, max_calls, legacy, body)
