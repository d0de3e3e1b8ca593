"""Shared pieces of the tool system prompt: a compact tool list and the tool_choice sentence.

Every format renders its own syntax and worked example; the way tools and the choice are
described is the same for all, so it lives here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .base import ToolChoice, ToolSpec

# What a worked example fills a string parameter with (a value from the schema where it gives one): toolshim's
# own text, never a user's value; a call that copies it is caught (chat/example.py). Tried and left: "..."
# instead of the word "example". Straight against Qwen2.5-Coder-0.5B it was copied into a parcel-fee call 3 times
# in 12 against 8, but in whole agent loops the two-city weather task then ended right 1 time in 14 against 4 in
# 7 (its answers left the temperatures out).
EXAMPLE_TEXT = "example"
EXAMPLE_ELLIPSIS = "..."  # ReAct's filler
PLACEHOLDERS = frozenset({EXAMPLE_TEXT, EXAMPLE_ELLIPSIS})
NO_TOOL = ToolSpec("tool_name")  # what a worked example calls when no tool is offered


def example_tool(tools: Sequence[ToolSpec], tool_choice: ToolChoice) -> ToolSpec | None:
    """The tool a worked example calls: the named one (``tool_choice``), else the first listed."""
    named = [t for t in tools if tool_choice.mode == "named" and t.name == tool_choice.name]
    return (named or list(tools))[0] if tools else None


def example_calls(
    tools: Sequence[ToolSpec], tool_choice: ToolChoice, arguments: Callable[[ToolSpec], dict[str, Any]]
) -> list[tuple[str, dict[str, Any]]]:
    """The calls of a worked example that calls ``example_tool`` with ``arguments`` (``ToolFormat.worked_example``)."""
    sample = example_tool(tools, tool_choice)
    return [] if sample is None else [(sample.name, arguments(sample))]


def _type_of(schema: Mapping[str, Any]) -> str:
    """A short type label: ``string``, ``integer``, ``"a" | "b"``, ``array of string``, ``object``."""
    if "enum" in schema:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array":
        items = schema.get("items")
        return f"array of {_type_of(items)}" if isinstance(items, Mapping) else "array"
    if kind == "object" and isinstance(schema.get("properties"), Mapping):
        inner = ", ".join(f"{k}: {_type_of(v)}" for k, v in schema["properties"].items() if isinstance(v, Mapping))
        return "object {" + inner + "}"
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(_type_of(s) for s in schema[key] if isinstance(s, Mapping))
    return str(kind or "any")


def describe_parameters(spec: ToolSpec) -> list[str]:
    """One line per parameter: ``- name (type, required): description``."""
    props = spec.parameters.get("properties") or {}
    required = set(spec.parameters.get("required") or ())
    lines = []
    for pname, schema in props.items():
        if not isinstance(schema, Mapping):
            continue
        flag = ", required" if pname in required else ""
        desc = str(schema.get("description") or "").strip()
        lines.append(f"  - {pname} ({_type_of(schema)}{flag})" + (f": {desc}" if desc else ""))
    return lines


def describe_tools(tools: Sequence[ToolSpec]) -> str:
    """The tool list, compact enough for small context windows."""
    blocks = []
    for spec in tools:
        head = f"### {spec.name}"
        if spec.description:
            head += f"\n{spec.description.strip()}"
        params = describe_parameters(spec)
        blocks.append(head + ("\nParameters:\n" + "\n".join(params) if params else "\nParameters: none"))
    return "\n\n".join(blocks)


def choice_instruction(tool_choice: ToolChoice, parallel: bool, several: str = "one block after another") -> str:
    """The sentence that tells the model when (and how many) tools to call; ``several``: how calls follow
    each other in the format's syntax."""
    if tool_choice.mode == "required":
        first = "You MUST call one of the tools now; do not answer directly."
    elif tool_choice.mode == "named":
        first = f"You MUST call the tool `{tool_choice.name}` now; do not answer directly."
    else:
        first = "Call a tool only when you need it; otherwise answer the user directly."
    many = (
        f"You may call several tools in one turn, {several}."
        if parallel
        else "Call at most one tool per turn, then stop and wait for its result."
    )
    return f"{first} {many}"
