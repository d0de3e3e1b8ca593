"""Sans-IO: the worked example toolshim's instructions show, and the calls that copy it.

Every format's instructions end with an example call, its string values filled with toolshim's placeholder
(``formats.PLACEHOLDERS``) where the schema gives no value. A small model asked to ship a parcel to Canada
wrote ``get_parcel_fee(weight_kg=3, country="example")``: one value is the user's, the other toolshim's own
text. Such a call is kept back and the same question asked again, once (told about the filler,
the model wrote it again 10 times in 12); what the model writes then is taken. A placeholder the tool's
definition or the conversation holds (a user who wrote it) is a value like any other, and so is one in a call
the client demands (``tool_choice`` required or a named function: "I need an event." gives no values to use).

A call that *is* the example (its tool and values) is the model's when it comes alone ("switch to eco mode"),
and toolshim's text when it comes with the instructions: after an echo of them, or after the lines that lead
to the example in the instructions ("For example:"), which a model that repeats the example repeats with it
(``copied_with``); those lines go with it (``lead_in``, ``opening_at_end``). Each format names the calls its
example shows (``ToolFormat.worked_example``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..formats import PLACEHOLDERS, ToolCallRecord, ToolFormat, ToolSpec
from .grounding import Grounds, definition_text
from .repeats import call_key

MAX_LEAD_IN_LINES = 3  # the lines before the example that lead to it, at most


class WorkedExample:
    """The example of toolshim's instructions: its calls, the lines that lead to it (both worked out lazily) and
    the placeholders it fills in."""

    __slots__ = ("_calls", "_checked", "_conversation", "_format", "_instructions", "_keys", "_lead_in", "_read")

    def __init__(
        self,
        fmt: ToolFormat,
        instructions: str,
        calls: Callable[[], Sequence[tuple[str, Any]]],
        conversation: Callable[[], Grounds],
        placeholders_checked: bool = True,
    ) -> None:
        self._format = fmt
        self._instructions = instructions
        self._calls = calls  # what the example calls: the format's ``worked_example`` of the tools as listed
        self._conversation = conversation  # the client's conversation (built lazily: rarely needed)
        self._keys: frozenset[str] | None = None  # worked out for the first call written
        self._lead_in: str | None = None  # worked out when a call is the example, or a stream may open with it
        self._read: Grounds | None = None
        self._checked = placeholders_checked  # looked for until the model was asked again about one

    def trust_placeholders(self) -> None:
        """The model was asked again about a placeholder: no call is held back for one from now on."""
        self._checked = False

    def shows(self, name: str, arguments: str) -> bool:
        """Whether this call (JSON text arguments) is one the example shows."""
        if self._keys is None:
            self._keys = frozenset(call_key(name, arguments) for name, arguments in self._calls())
        return bool(self._keys) and call_key(name, arguments) in self._keys

    def may_lead_in(self, text: str) -> bool:
        """Whether ``text`` may open the lines that lead to the example: it opens a line of the instructions (a
        C-speed check first, so that an ordinary answer costs nothing more) and starts those lines."""
        return "\n" + text in self._instructions and self.lead_in().startswith(text)

    def copied_with(self, text: str) -> bool:
        """Whether ``text`` (what the model wrote) holds the lines that lead to the example in the instructions:
        a call that is the example, written after them, is the example copied."""
        lead_in = self.lead_in()
        return bool(lead_in) and lead_in in text

    def lead_in(self) -> str:
        """The lines that lead to the example in the instructions ("For example:"); empty when not found."""
        if self._lead_in is None:
            self._lead_in = _lines_before(self._instructions, self._format, self._calls())
        return self._lead_in

    def placeholders(self, tool: ToolSpec | None, arguments: str) -> list[str]:
        """The parameters of this call (JSON text) whose value is a placeholder, as ``name="value"``, while a call
        is held back for one."""
        return self.copied(tool, arguments) if self._checked else []

    def copied(self, tool: ToolSpec | None, arguments: str) -> list[str]:
        """The parameters of this call (JSON text) whose value is a placeholder, as ``name="value"``: such a call
        never stands in for an answer (``Emulator._first_call_stands``)."""
        copied = [(name, value) for name, value in _string_arguments(arguments) if _folded(value) in PLACEHOLDERS]
        if not copied:
            return []
        told = definition_text(tool) if tool is not None else ""
        if self._read is None:
            self._read = self._conversation()
        said = self._read
        kept = [(name, value) for name, value in copied if _folded(value) not in told and not said.has_text(value)]
        return [f"{name}={json.dumps(value)}" for name, value in kept]


def _shown_at(instructions: str, fmt: ToolFormat, calls: Sequence[tuple[str, Any]]) -> tuple[int, str]:
    """Where the example's calls, as the format renders them, stand in the instructions, and that text; -1 and
    empty when there are none, -1 when they are not found."""
    records = [ToolCallRecord("", name, json.dumps(arguments, ensure_ascii=False)) for name, arguments in calls]
    shown = fmt.render_calls(records) if records else ""
    return (instructions.find(shown) if shown else -1), shown


def _lines_before(instructions: str, fmt: ToolFormat, calls: Sequence[tuple[str, Any]]) -> str:
    """The lines that lead to the example's calls in the instructions, back to a blank line ("For example:";
    ReAct's "Example (placeholder values):" and its Thought), stripped; empty when the example is not found as the
    format renders calls."""
    end, _ = _shown_at(instructions, fmt, calls)
    lines: list[str] = []
    while end > 0 and len(lines) < MAX_LEAD_IN_LINES:  # walk back line by line (the example ends the prompt)
        start = instructions.rfind("\n", 0, end - 1) + 1
        line = instructions[start:end].strip()
        if not line and lines:
            break
        if line:
            lines.insert(0, line)
        end = start
    return "\n".join(lines) if any(c.isalpha() for line in lines for c in line) else ""


def without_example(instructions: str, fmt: ToolFormat, calls: Sequence[tuple[str, Any]]) -> str:
    """The instructions without the paragraph that shows the example (the lines that lead to it, the calls, up to
    the next blank line); as they are when the example is not found as the format renders calls, or its paragraph
    holds more than the lines that lead to it. Sent when a call copied the example's placeholder: asked the same
    question with the example in view (at the re-ask's temperature, 0.3), Qwen2.5-Coder-0.5B copied it again 11
    times in 12 into a parcel's postage (``country="example"``); without it never in 12, calling the tool each time."""
    at, shown = _shown_at(instructions, fmt, calls)
    if at < 0:
        return instructions
    start = instructions.rfind("\n\n", 0, at)
    if instructions.count("\n", start + 2 if start >= 0 else 0, at) > MAX_LEAD_IN_LINES:
        return instructions
    end = instructions.find("\n\n", at + len(shown))
    return instructions[: max(start, 0)] + (instructions[end:] if end >= 0 else "")


def opening_at_end(text: str, lead_in: str) -> int:
    """Where the end of ``text`` that is ``lead_in``, or the opening of it, starts (at a line start; the lines
    stripped); ``len(text)`` when there is none. A model's copy of the lines that lead to the example loses the
    parts its parser took as reasoning (ReAct's Thought), so an opening counts."""
    if not lead_in:
        return len(text)
    found, start = len(text), len(text)
    for _ in range(MAX_LEAD_IN_LINES + 1):  # the lines at the end, longest tail last
        start = text.rfind("\n", 0, max(start - 1, 0)) + 1
        tail = "\n".join(line.strip() for line in text[start:].strip().splitlines())
        if tail and lead_in.startswith(tail):
            found = start
        if start == 0:
            break
    return found


def _folded(value: str) -> str:
    return value.strip().casefold()


def _string_arguments(arguments: str) -> Iterable[tuple[str, str]]:
    """The top-level string values of a call's arguments (JSON text), with their parameter names."""
    try:
        parsed: Any = json.loads(arguments)
    except ValueError:
        return ()
    if not isinstance(parsed, dict):
        return ()
    return [(str(name), value) for name, value in parsed.items() if isinstance(value, str)]
