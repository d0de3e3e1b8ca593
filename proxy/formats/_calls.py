"""The calls of one response: the bookkeeping every format's parser shares.

``CallSlots`` is composed into each parser (one per response; nothing is shared between
parsers). It owns what is the same in every syntax:

* call slots: indexes 0, 1, ... handed out in order, only to blocks whose tool name resolves
  (exactly or as a near miss, see ``ToolIndex``); ``open`` is the started, unfinished call;
* the cut: a block that starts after ``max_calls`` calls were started emits
  ``SecondToolStarted`` (the parser then ignores the rest of the output);
* the tool spec lookup by name;
* finishing a block: ``finalize_call`` once, then ``ToolCallEnd`` or ``Malformed``; JSON-looking text
  that fails as arguments is tried as the value of the tool's one string parameter (below);
* the truncation rule at ``close()`` (below).

It knows no syntax: where a block starts and ends, its raw text and how its arguments are
read stay with the parser. Events go to the parser's ``EventBuffer``.

Truncation rule, the same for every format: when the output ends inside a call block (an open
call) and the finish reason is ``"length"`` or ``"content_filter"``, the upstream cut the
output mid-call, so the block is ``Malformed`` and never a complete call. With ``"stop"`` (or
no reason) a stop sequence may have eaten the closing marker, and the format completes the
block by its own rule (``close_block``'s ``complete`` callback).

JSON as a string (repair ``json_as_string``): arguments written as text (react's ``Action Input``, a
hermes ``"arguments"`` string) that look like JSON but are not valid arguments, for a tool whose one
parameter is a string (``Action Input: [3, 1, 2]`` for ``sort(numbers: string)``), are that parameter's
value, as LangChain hands such input to the tool. Only when the text parses as JSON that is no object
(an array, a scalar); an object was meant as arguments, even with a wrong key, and text that is no
JSON at all (``{:::}``) is broken arguments: both stay Malformed (for a re-ask) rather than a guess.
Kept only when the result validates.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from ._args import CallOutcome, ToolIndex, finalize_call, parse_json_lenient
from ._react_lines import plain_parameter
from ._text import EventBuffer
from .base import FinishReason, Malformed, SecondToolStarted, ToolCallArgs, ToolCallEnd, ToolCallStart, ToolSpec

TRUNCATING: frozenset[FinishReason] = frozenset(("length", "content_filter"))


def truncated(finish_reason: FinishReason) -> bool:
    """Whether the upstream cut the output (an open call then cannot be complete)."""
    return finish_reason in TRUNCATING


class CallSlots:
    """Call indexes, the ``max_calls`` cut, tool lookup and call endings of one response."""

    __slots__ = ("_out", "count", "max_calls", "open", "tools")

    def __init__(self, tools: Sequence[ToolSpec] | ToolIndex, max_calls: int, out: EventBuffer) -> None:
        """``tools``: the request's tools, or the index another ``CallSlots`` of the response built (a
        lenient rescue runs once per malformed block: rebuilding the index and its validators each
        time was most of the cost of a flood of broken blocks)."""
        self.tools = tools if isinstance(tools, ToolIndex) else ToolIndex(tools)
        self.max_calls = max_calls
        self.count = 0  # call indexes handed out (ToolCallStart events emitted)
        self.open: int | None = None  # the index of a started call that has not ended yet
        self._out = out

    # ---- lookup ------------------------------------------------------------------------------

    def resolve(self, name: str) -> str | None:
        """The request tool ``name`` stands for (near misses included), or None."""
        return self.tools.resolve(name)[0]

    def spec(self, name: str) -> ToolSpec | None:
        """The spec of the tool ``name`` resolves to, or None."""
        resolved = self.resolve(name)
        return self.tools.tools[resolved] if resolved is not None else None

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is exactly one of the request's tools."""
        return name in self.tools

    # ---- starting ----------------------------------------------------------------------------

    @property
    def full(self) -> bool:
        """Whether another call would go past ``max_calls``."""
        return self.count >= self.max_calls

    def cut(self) -> bool:
        """At a new block: past ``max_calls`` report the cut (``SecondToolStarted``) and return True."""
        if not self.full:
            return False
        self._out.push(SecondToolStarted(self.count))
        return True

    def start(self, name: str) -> int | None:
        """A block named ``name`` opened: start a call if the name resolves; its index, or None."""
        resolved = self.resolve(name)
        return self.begin(resolved) if resolved is not None else None

    def begin(self, resolved: str) -> int:
        """Start call ``count`` for the tool ``resolved`` (already resolved)."""
        index, self.open = self.count, self.count
        self.count += 1
        self._out.push(ToolCallStart(index, resolved))
        return index

    def args(self, fragment: str) -> None:
        """Stream raw argument text of the open call (nothing when no call was started)."""
        if self.open is not None and fragment:
            self._out.push(ToolCallArgs(self.open, fragment))

    # ---- ending ------------------------------------------------------------------------------

    def fail(self, raw: str, reason: str) -> None:
        """The block is not a usable call: ``Malformed`` (with the open call's index, if any)."""
        self._out.push(Malformed(raw, reason, self.open))
        self.open = None

    def finish(
        self,
        name: str,
        arguments: str | Mapping[str, Any] | None,
        raw: str,
        *,
        before: Sequence[str] = (),
        after: Sequence[str] = (),
        hide: Collection[str] = (),
        fragment: str | None = None,
    ) -> None:
        """Finalize the block's call once: ``ToolCallEnd`` or ``Malformed``.

        ``before`` / ``after``: the parser's own repairs, reported around ``finalize_call``'s (duplicates
        dropped); ``hide`` names repairs that are this syntax's normal reading, not repairs. A call
        recognised only now (no ``ToolCallStart`` yet) is started here, with ``fragment`` as its
        arguments text when given.
        """
        outcome = finalize_call(self.tools, name, arguments)
        if outcome.error is not None and type(arguments) is str:  # text, not an object as written (RawArgs)
            outcome = self._as_string_parameter(name, arguments) or outcome
        if outcome.error is not None or outcome.arguments is None:
            self.fail(raw, outcome.error or "invalid arguments")
            return
        index = self.open
        if index is None:
            index = self.begin(outcome.name)
            if fragment:
                self._out.push(ToolCallArgs(index, fragment))
        names = (r for r in dict.fromkeys((*before, *outcome.repairs, *after)) if r not in hide)
        self._out.push(ToolCallEnd(index, outcome.name, outcome.arguments, tuple(names)))
        self.open = None

    def _as_string_parameter(self, name: str, text: str) -> CallOutcome | None:
        """JSON-looking text as the value of the tool's one string parameter (module docstring)."""
        spec = self.spec(name)
        param = plain_parameter(spec)
        stripped = text.strip()
        if spec is None or param is None or not stripped.startswith(("{", "[")):
            return None
        parsed = parse_json_lenient(stripped)
        if parsed is None or isinstance(parsed[0], dict):
            return None
        outcome = finalize_call(self.tools, name, {param: stripped})
        if outcome.error is not None:
            return None
        return CallOutcome(outcome.name, outcome.arguments, (*outcome.repairs, "json_as_string"))

    def close_block(self, finish_reason: FinishReason, raw: str, complete: Callable[[], None]) -> None:
        """The output ended inside a block: the truncation rule (module docstring).

        ``length`` / ``content_filter``: ``Malformed``. Otherwise ``complete()``, the format's own
        completion of a block whose closing marker a stop sequence may have eaten.
        """
        if truncated(finish_reason):
            self.fail(raw, f"tool block truncated (finish_reason={finish_reason})")
        else:
            complete()
