"""The call objects of one hermes response: when a call starts, argument streaming and finalizing.

``CallAssembler`` is the part of ``hermes.HermesParser`` that turns a scanned call object into
events: ``ToolCallStart`` as soon as a known tool's name is read, ``ToolCallArgs`` for the raw
``arguments`` object text as it arrives (only ever appended), and ``ToolCallEnd`` or ``Malformed``
once ``finalize_call`` has validated (and, once, repaired) the arguments. Call indexes, the cut and
finishing go through the parser's ``CallSlots`` (``_calls``). It owns no parser state: which text is
a call, and where the response is cut, stay with the parser.

Arguments written as a string that holds no JSON object (``"arguments": "17 * 23 + 4"``) are read
as react reads a plain ``Action Input``: the value of the tool's single string parameter, with the
repair ``plain_input``; a tool without one makes the call Malformed. The call is never prose.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ._calls import CallSlots
from ._hermes_markup import OPEN
from ._jsonrepair import guessed_parse
from ._jsonscan import ObjectScanner, RawArgs, call_parts, extract_call, parse_call_list
from ._react_lines import plain_parameter


def _plain_string(args: Any) -> bool:
    """Whether ``args`` is a string value (not raw text) that holds no JSON object or array."""
    if not isinstance(args, str) or isinstance(args, RawArgs):
        return False
    head = args.lstrip()
    return bool(head) and not head.startswith(("{", "["))


class CallAssembler:
    """The call object in scan and how much of its arguments was streamed; calls go to ``CallSlots``."""

    def __init__(self, calls: CallSlots) -> None:
        self.calls = calls
        self.sc: ObjectScanner | None = None  # the object being scanned, if any
        self._name_tried = self._stream_args = False
        self._args_sent = 0  # offset in the object up to which arguments were streamed

    def scanner(self) -> ObjectScanner:
        assert self.sc is not None, "no object is being scanned"
        return self.sc

    def new_object(self, outside: re.Pattern[str]) -> None:
        self.sc = ObjectScanner(outside)
        self._name_tried = self._stream_args = False
        self._args_sent = 0

    def fragment(self, raw: str) -> str | None:
        """The raw ``arguments`` object text of a complete object, to stream in one piece."""
        sc = self.scanner()
        if sc.args_kind == "{" and sc.args_start is not None and sc.args_end is not None:
            return raw[sc.args_start : sc.args_end]
        return None

    def commit(self, seg: str) -> None:
        """Consume scanned block text: start the call once its name is read, stream its arguments."""
        sc, calls = self.scanner(), self.calls
        base = sc.size
        sc.commit(seg)
        if calls.open is None and not self._name_tried and sc.name is not None:
            self._name_tried = True
            if calls.start(sc.name) is not None:
                self._stream_args = not sc.args_before_name
        if calls.open is None or not self._stream_args or sc.args_kind != "{" or sc.args_start is None:
            return
        lo = max(self._args_sent, sc.args_start, base)
        hi = sc.size if sc.args_end is None else sc.args_end
        if hi > lo:
            calls.args(seg[lo - base : hi - base])
            self._args_sent = hi

    def bare_call(self, raw: str) -> tuple[str, Any] | None:
        """Name and arguments of a balanced bare object, when it names a known tool and has arguments."""
        sc = self.scanner()
        found = extract_call(raw, sc) if sc.name is None or sc.name in self.calls else None
        if found is None or not found[2] or found[0] not in self.calls:
            return None
        return found[0], found[1]

    def finish_object(self, raw: str, raw_block: str, after_arguments: bool = False) -> None:
        """Finalize a scanned object (its missing closing brackets supplied). ``after_arguments``: the output
        ended after the call's name and whole arguments were read (``call_read``), in what followed them: the
        call as read (``cut_after_arguments``), the rest no part of it."""
        sc = self.scanner()
        closers = "" if after_arguments else sc.closers()
        found = extract_call(raw + closers, sc)
        if found is None:
            self.calls.fail(raw_block, 'no JSON object with a "name" in <tool_call>')
            return
        name = sc.name if self.calls.open is not None and sc.name is not None else found[0]
        extra = ("cut_after_arguments",) if after_arguments else ("unclosed_brackets",) if closers else ()
        self.finish_call(name, found[1], raw_block, extra, self.fragment(raw + closers))

    def finish_open_string(self, text: str, raw_block: str) -> None:
        """The block ended inside a string (an odd number of unescaped quotes in a value, or ``"C:\"``): the
        object read again with its inner quotes escaped (``inner_quotes``) or its last backslash kept as one
        (``trailing_backslash``); a call only if its arguments validate."""
        parsed = guessed_parse(text)
        found = call_parts(parsed[0]) if parsed is not None else None
        if parsed is None or found is None:
            self.calls.fail(raw_block, "<tool_call> block ends inside a JSON string")
            return
        sc = self.scanner()
        name = sc.name if self.calls.open is not None and sc.name is not None else found[0]
        self.finish_call(name, found[1], raw_block, parsed[1], None)

    def finish_call(self, name: str, args: Any, raw_block: str, extra: tuple[str, ...], fragment: str | None) -> None:
        """Validate and repair the arguments once; end the call, starting it first if it was not."""
        if _plain_string(args):
            spec = self.calls.spec(name)
            param = plain_parameter(spec) if spec is not None else None
            if param is None:
                self.calls.fail(raw_block, f"arguments must be a JSON object, got the string {args[:60]!r}")
                return
            args, extra = {param: args}, (*extra, "plain_input")
        self.calls.finish(name, args, raw_block, before=extra, fragment=fragment)

    def finish_raw(self, body: str, cut: Callable[[], bool]) -> None:
        """Finalize a block body that did not open with ``{``: a list of calls, a fenced object...

        ``cut`` is asked before each call found: it reports the cut and returns True past ``max_calls``.
        A block is Malformed once however many of its values are no call (``lenient`` reads a Malformed
        block again as a foreign syntax: twice would make its calls twice).
        """
        raw_block = OPEN + body
        items, repairs = parse_call_list(body)
        if not items:
            self.calls.fail(raw_block, "<tool_call> holds no JSON call object")
        broken = False
        for item in items:
            found = call_parts(item)
            if found is None:
                if not broken:
                    self.calls.fail(raw_block, 'no JSON object with a "name" in <tool_call>')
                broken = True
            elif cut():
                return
            else:
                self.finish_call(found[0], found[1], raw_block, repairs, None)
