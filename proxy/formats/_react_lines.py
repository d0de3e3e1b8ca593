"""The ``react`` format's line syntax: classifying lines, reading and writing Action / Action Input.

Markers (``Thought:``, ``Action:``, ``Action Input:``, ``Final Answer:``, ``Observation:``) count
only at the start of a line, after optional indentation, case-insensitive, with the ``**Action:**``
bold variants; a line starting with ``` is a fence. ``classify_line`` decides from at most
``MAX_HOLDBACK`` characters of indentation plus the longest marker variant, so the verdict never
depends on how the text was chunked. The lexical tables the parser scans with live here too.

An ``Action:`` line's name is cleaned of quotes, bold and ``()``; a non-JSON ``Action Input``
(``Action Input: Paris``) fills a tool's single string parameter. Calls are written back as one
``Action:`` line and one compact JSON ``Action Input:`` line, which the parser reads unchanged; the
prompt text that teaches the syntax is here too, and ``Section``, the parser's record of one run of prose
(with the text it keeps for the answer fallback described in ``react``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any

from ._args import canonical_json, parse_json_lenient
from ._prompt import EXAMPLE_ELLIPSIS, NO_TOOL, choice_instruction, describe_tools, example_tool
from ._text import MAX_HOLDBACK, TextKind
from .base import ToolChoice, ToolSpec


class Marker(StrEnum):
    THOUGHT = "Thought"
    ACTION_INPUT = "Action Input"
    ACTION = "Action"
    FINAL_ANSWER = "Final Answer"
    OBSERVATION = "Observation"


class Line(Enum):
    PLAIN = "plain"
    FENCE = "fence"
    MARKER = "marker"


def _variants(word: str) -> tuple[str, ...]:
    return (f"{word}:", f"**{word}:**", f"**{word}**:", f"**{word}:")


_STRICT = tuple((v, m) for m in Marker for v in _variants(m.value))
_LOOSE = tuple((v.lower(), m) for v, m in _STRICT)
_MAX_VARIANT = max(len(v) for v, _ in _STRICT)
_STRICT_PREFIXES = frozenset(v[:3] for v, _ in _STRICT)
_LOOSE_PREFIXES = frozenset(v[:3] for v, _ in _LOOSE)
LINE_PREFIXES = _LOOSE_PREFIXES | {"```"}
FIRST_CHARS = frozenset("tTaAfFoO*`")
INDENT = re.compile(r"[ \t]*")
SPACE = re.compile(r"\s*")
FENCE_TAG = re.compile(r"[\w+.#-]{0,32}")
# Inside an object: everything up to the next brace, unfinished string, or newline that may start a
# marker line (possessive quantifiers: linear, no backtracking).
# A ``/`` stops the run only when it may start a comment (the step skips comments whole).
JSON_RUN = re.compile(
    r"""(?:[^{}"'\n/]++|"[^"\\]*+(?:\\.[^"\\]*+)*+"|'[^'\\]*+(?:\\.[^'\\]*+)*+'"""
    r"""|\n(?=[ \t]*+[^ \tTAFO*`])|/(?=[^/*]))*+""",
    re.S,
)
COMMENT_END = {"//": "\n", "/*": "*/"}
STRING_BODY = {q: re.compile(rf"[^{q}\\]*+(?:\\.[^{q}\\]*+)*+", re.S) for q in "\"'"}
FENCE = "```"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"

LineInfo = tuple[Line, Marker | None, int]
# Characters of a Thought / Observation section kept for the answer fallback (see ``react``).
KEEP_LIMIT = 64 * 1024


@dataclass(slots=True)
class Section:
    """The parser's record of one run of prose on one channel; trailing whitespace is held until more prose follows."""

    channel: TextKind
    strip: bool = True  # drop leading whitespace (not for the output's first section: plain text stays intact)
    started: bool = False
    pending: str = ""
    keep: bool = False  # a Thought / Observation section: keep its text for the answer fallback
    kept: list[str] = field(default_factory=list)
    kept_len: int = 0

    def remember(self, text: str) -> str:
        """Keep ``text`` (about to be emitted) for the answer fallback, up to ``KEEP_LIMIT`` characters
        (a prefix, so the kept text does not depend on chunking); returns ``text``."""
        room = KEEP_LIMIT - self.kept_len
        if self.keep and room > 0 and text:
            piece = text[:room]
            self.kept.append(piece)
            self.kept_len += len(piece)
        return text


def classify_line(buf: str, pos: int, final: bool, strict: bool = False) -> LineInfo | None:
    """What the line starting at ``pos`` begins with; ``None`` while that is still undecided.

    Returns ``(kind, marker, end)`` where ``end`` is just past the marker or fence. ``strict``
    (inside a JSON object) accepts only the canonical capitalisation, so json5 keys like
    ``action:`` stay arguments.
    """
    n = len(buf)
    i = INDENT.match(buf, pos).end()  # type: ignore[union-attr]
    plain: LineInfo = (Line.PLAIN, None, pos)
    if i - pos > MAX_HOLDBACK or (i < n and buf[i] not in FIRST_CHARS):
        return plain
    if i == n:
        return plain if final else None
    if buf[i] == "`":
        if buf.startswith(FENCE, i):
            return (Line.FENCE, None, i + 3)
        return None if not final and n - i < 3 and FENCE.startswith(buf[i:]) else plain
    head = buf[i : i + _MAX_VARIANT]
    table, prefixes = _STRICT, _STRICT_PREFIXES
    if not strict and len(low := head.lower()) == len(head):
        head, table, prefixes = low, _LOOSE, _LOOSE_PREFIXES
    if len(head) >= 3 and head[:3] not in prefixes:
        return plain
    best: tuple[str, Marker] | None = None
    for variant, marker in table:
        if head.startswith(variant):
            if best is None or len(variant) > len(best[0]):
                best = (variant, marker)
        elif not final and len(head) < len(variant) and variant.startswith(head):
            return None
    return (Line.MARKER, best[1], i + len(best[0])) if best else plain


def has_call_line(text: str) -> bool:
    """Whether a line of ``text`` starts with ``Action:`` or ``Action Input:`` (markup, never an answer)."""
    calls = (Marker.ACTION, Marker.ACTION_INPUT)
    pos = 0
    while pos < len(text):
        info = classify_line(text, pos, final=True)
        if info is not None and info[0] is Line.MARKER and info[1] in calls:
            return True
        nl = text.find("\n", pos)
        pos = len(text) if nl == -1 else nl + 1
    return False


def clean_name(raw: str) -> str:
    """The tool name from an ``Action:`` line: no whitespace, backticks, quotes, bold or ``()``."""
    name = raw.strip().strip("`*'\" \t")
    return name.removesuffix("()").strip()


def plain_parameter(spec: ToolSpec | None) -> str | None:
    """The one string parameter a non-JSON ``Action Input`` can fill, if the tool has exactly one."""
    if spec is None:
        return None
    props = spec.parameters.get("properties") or {}
    required = list(spec.parameters.get("required") or ())
    names = required if len(required) == 1 else list(props)
    if len(names) != 1 or not isinstance(props.get(names[0]), Mapping):
        return None
    return names[0] if props[names[0]].get("type") == "string" else None


def input_arguments(text: str, spec: ToolSpec | None) -> tuple[str | dict[str, Any], tuple[str, ...]]:
    """What a stripped Action Input stands for, and the repair that reading took: the text itself (JSON,
    repaired later), or, for non-JSON text, the value of ``spec``'s single string parameter."""
    param = plain_parameter(spec) if text and not text.startswith(("{", "[")) else None
    if param is None:
        return text, ()
    parsed = parse_json_lenient(text)
    value = parsed[0] if parsed is not None and isinstance(parsed[0], str) else text
    return {param: value}, ("plain_input",)


def example_value(schema: Mapping[str, Any]) -> Any:
    """A placeholder value of the right type for the worked example."""
    for key in ("examples", "enum"):
        if isinstance(schema.get(key), list) and schema[key]:
            return schema[key][0]
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    return {"integer": 1, "number": 1.5, "boolean": True, "array": [], "object": {}}.get(str(kind), EXAMPLE_ELLIPSIS)


def example_arguments(spec: ToolSpec) -> dict[str, Any]:
    """Placeholder arguments for the worked example: the required parameters, else the first one."""
    props = spec.parameters.get("properties") or {}
    wanted = list(spec.parameters.get("required") or ()) or list(props)[:1]
    return {p: example_value(props[p]) for p in wanted if isinstance(props.get(p), Mapping)}


def arguments_line(arguments: str) -> str:
    """A call's arguments as one compact JSON line (the parser reads it back unchanged)."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return arguments.strip() or "{}"
    return canonical_json(value)


def prompt_text(tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool) -> str:
    """The system-prompt instructions: the tools, the choice, the line syntax and one worked example."""
    example = example_tool(tools, tool_choice) or NO_TOOL
    several = (
        "To call several tools at once, write one Action / Action Input pair after another, then stop.\n"
        if parallel
        else ""
    )
    return (
        "You can use these tools:\n\n"
        f"{describe_tools(tools)}\n\n"
        f"{choice_instruction(tool_choice, parallel)}\n\n"
        "Use exactly this format, each marker at the start of a line:\n"
        "Thought: your reasoning (optional)\n"
        "Action: the tool name, exactly as listed\n"
        "Action Input: the arguments as one JSON object with double-quoted keys\n"
        "After an Action Input, stop: the system runs the tool and replies with a line\n"
        '"Observation: <result>". Never write an Observation yourself.\n'
        f"{several}"
        "When you answer the user without a tool, write:\n"
        "Thought: your reasoning (optional)\n"
        "Final Answer: your answer\n\n"
        "Example (placeholder values):\n"
        "Thought: I need to use a tool.\n"
        f"Action: {example.name}\n"
        f"Action Input: {canonical_json(example_arguments(example))}"
    )
