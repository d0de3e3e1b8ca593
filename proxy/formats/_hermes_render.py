"""The prompt half of the hermes format: the tools prompt and calls as the model is asked to write them.

Stateless text building for ``hermes.HermesFormat``; nothing here parses model output.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ._hermes_markup import CLOSE, OPEN
from ._prompt import EXAMPLE_TEXT, NO_TOOL, choice_instruction, describe_tools, example_calls, example_tool
from .base import ToolCallRecord, ToolChoice, ToolSpec


def _example_value(schema: Any) -> Any:
    """A plausible value for a parameter in the worked example."""
    if not isinstance(schema, dict):
        return EXAMPLE_TEXT
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    samples = {"integer": 1, "number": 1.5, "boolean": True, "array": [], "object": {}, "null": None}
    return samples.get(kind, EXAMPLE_TEXT) if isinstance(kind, str) else EXAMPLE_TEXT


def _example_arguments(spec: ToolSpec) -> dict[str, Any]:
    """Arguments for the worked example: the required parameters, else the first one."""
    props = spec.parameters.get("properties") or {}
    if not isinstance(props, dict):
        return {}
    names = [n for n in spec.parameters.get("required") or () if n in props] or list(props)[:1]
    return {n: _example_value(props[n]) for n in names}


def render_call(name: str, arguments: Any) -> str:
    """One call in its own ``<tool_call>`` block, as strict JSON."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{OPEN}\n{body}\n{CLOSE}"


def tools_prompt(tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool) -> str:
    """The system-prompt section that describes the tools and how to call them."""
    sample = example_tool(tools, tool_choice) or NO_TOOL
    # Qwen2.5's own template wording (what Qwen and Hermes models are trained on) with the shared
    # tool list; the choice sentence last, where small models heed it best.
    return "\n".join(
        [
            "# Tools",
            "",
            "You may call one or more functions to assist with the user query.",
            "",
            "You are provided with function signatures within <tools></tools> XML tags:",
            "<tools>",
            describe_tools(tools),
            "</tools>",
            "",
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:",
            "<tool_call>",
            '{"name": <function-name>, "arguments": <args-json-object>}',
            "</tool_call>",
            "Each call goes in its own <tool_call></tool_call> tags, as strict JSON (double quotes, newlines "
            "inside strings as \\n). After a call, stop: the result comes back inside "
            "<tool_response></tool_response> tags.",
            "",
            "For example:",
            render_call(sample.name, _example_arguments(sample)),
            "",
            choice_instruction(tool_choice, parallel),
        ]
    )


def worked_example(tools: Sequence[ToolSpec], tool_choice: ToolChoice) -> list[tuple[str, dict[str, Any]]]:
    """The example call ``tools_prompt`` shows."""
    return example_calls(tools, tool_choice, _example_arguments)


def render_calls(calls: Sequence[ToolCallRecord]) -> str:
    """Earlier calls from the history, one block each."""
    blocks = []
    for call in calls:
        try:
            arguments: Any = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError:  # not JSON: hand it back as the string the client sent
            arguments = call.arguments
        blocks.append(render_call(call.name, arguments))
    return "\n".join(blocks)
