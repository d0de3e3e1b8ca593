"""Sans-IO: the worked example toolshim's instructions show, and the calls that copy it.

Every format's instructions end with an example call, its string values filled with toolshim's placeholder
(``formats.PLACEHOLDERS``) where the schema gives no value. A small model asked to ship a parcel to Canada
wrote ``get_parcel_fee(weight_kg=3, country="example")``: one value is the user's, the other toolshim's own
text. Such a call is kept back and the same question asked again, once (told about the filler,
the model wrote it again 10 times in 12); what the model writes then is taken. A placeholder the tool's
definition or the conversation holds (a user who wrote it) is a value like any other, and so is one in a call
the client demands (``tool_choice`` required or a named function: "I need an event." gives no values to use).

The example calls themselves are read back from the instructions with the format's parser, only when a
model's echo of the instructions came with a call (``call_keys``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..formats import PLACEHOLDERS, ToolCallEnd, ToolSpec
from .grounding import Grounds, definition_text
from .repeats import call_key


class WorkedExample:
    """The example of toolshim's instructions: its calls (parsed lazily) and the placeholders it fills in."""

    __slots__ = ("_checked", "_conversation", "_keys", "_parse", "_read")

    def __init__(
        self,
        parse: Callable[[], Sequence[ToolCallEnd]],
        conversation: Callable[[], Grounds],
        placeholders_checked: bool = True,
    ) -> None:
        self._parse = parse  # the instructions through the format's parser (milliseconds: done lazily)
        self._conversation = conversation  # the client's conversation (built lazily: rarely needed)
        self._keys: frozenset[str] | None = None
        self._read: Grounds | None = None
        self._checked = placeholders_checked  # looked for until the model was asked again about one

    def trust_placeholders(self) -> None:
        """The model was asked again about a placeholder: no call is held back for one from now on."""
        self._checked = False

    def call_keys(self) -> frozenset[str]:
        """The example calls (``repeats.call_key``)."""
        if self._keys is None:
            self._keys = frozenset(call_key(call.name, call.arguments) for call in self._parse())
        return self._keys

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
