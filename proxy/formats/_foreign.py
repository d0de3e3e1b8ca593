"""The foreign call recognizer of lenient recognition (``lenient``): a sans-IO state machine over Text.

It sees only the Text the prompted format's parser emitted, finds the foreign call syntaxes listed in
``lenient``'s docstring, and turns them into calls through the response's ``CallSlots``. States, the
bounds of the hold-back and the rules: ``lenient``'s docstring, which is the one description of both.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum, auto
from typing import Any

from ._calls import CallSlots, truncated
from ._foreign_gemma import GEMMA_CLOSE, GEMMA_OPEN, decode_gemma
from ._foreign_invoke import INVOKE_BLOCKS, decode_invoke
from ._foreign_open import (
    BLANKS,
    BLOCK_CAP,
    END_TOOL_REQUEST,
    FENCE,
    FUNCTION_CLOSE,
    FUNCTION_PARTIAL,
    FUNCTION_TAG,
    GAP,
    GAP_CAP,
    HARMONY_ANALYSIS,
    HARMONY_CALL,
    HARMONY_CHANNELS,
    HARMONY_HEAD,
    HARMONY_MESSAGE,
    HARMONY_MESSAGE_END,
    HARMONY_MESSAGE_ENDS,
    HARMONY_OPENERS,
    HOLD_CAP,
    INLINE_GAP,
    MISTRAL,
    MISTRAL_EOS,
    MISTRAL_NAME,
    MISTRAL_THINK,
    MISTRAL_THINK_END,
    OPENER_WINDOW,
    PY_CALL,
    PY_PARTIAL,
    TAGS,
    TOOL_REQUEST,
    TOOL_REQUEST_END,
    TRIGGER,
    Group,
    fence_start,
    fence_tag,
)
from ._foreign_pythonic import ListScanner, decode_list
from ._foreign_scan import Call, ValueScanner, read_calls, unknown_call
from ._foreign_tokens import GLM_END, OPENERS, STYLES, decode_glm, decode_token_call, glm_head
from ._foreign_xml import (
    FUNCTION,
    QWEN3_ENDS,
    TOOL_CALL_END,
    decode,
    morph_attr_tag,
    morph_body,
    morph_partial,
    morph_tag,
    partial,
)
from ._foreign_xml import qwen3_body as qwen3_head
from ._text import EventBuffer, find_first, partial_marker_len
from .base import (
    FinishReason,
    Reasoning,
    Text,
    ToolSpec,
)

_OPENERS = (*TAGS, *OPENERS, *INVOKE_BLOCKS, GEMMA_OPEN, *HARMONY_OPENERS)  # what a held ``<`` may still become
_TAG_KINDS = frozenset(tag.strip("<>|") for tag in TAGS)  # the wrapper tags' groups (a fence may be inside)


def _decode(kind: str, block: str, tools: list[ToolSpec]) -> list[tuple[str, Any]] | None:
    """The calls of a complete (or cut) held block of ``kind``."""
    style = STYLES.get(kind)
    if style is not None:
        return decode_token_call(style, block, tools)
    if kind == "invoke":
        return decode_invoke(block, tools)
    if kind == "gemma4":
        return decode_gemma(block)
    return decode_glm(block, tools) if kind == "glm" else decode(kind, block, tools)


class _State(IntEnum):
    PROSE = auto()
    FENCE = auto()
    HEAD = auto()
    VALUE = auto()
    SKIP = auto()
    XML = auto()
    LIST = auto()
    MESSAGE = auto()
    AFTER = auto()
    DONE = auto()


class ForeignCalls:
    """Sans-IO recognizer of foreign call syntaxes in a Text stream; see the module docstring."""

    def __init__(self, calls: CallSlots, out: EventBuffer) -> None:
        self._calls, self._out = calls, out
        self._state = _State.PROSE
        self._buf, self._i = "", 0  # undecided input from the cursor ``_i`` on
        self._prev = ""  # the input character before ``buf[0]`` (a backtick makes a marker a mention)
        self._resume = _State.PROSE  # where SKIP goes back to: PROSE, or FENCE inside a code fence
        self._group: Group | None = None
        self._sc = ValueScanner()
        self._parts: list[str] = []  # the value's text consumed so far
        self._pending: tuple[list[Call], str, tuple[str, ...]] | None = None  # calls, raw, repairs
        self._blank_line = True  # only blanks were released since the last newline
        self._held = 0  # characters of the XML block (or pythonic list) held so far
        self._list = ListScanner()  # the open pythonic list's brackets and strings
        self._in_message = False  # in a harmony final / commentary message: its end token is markup
        # MESSAGE (reasoning) ends at one of these; the first ones are its end tokens (dropped), the rest
        # start what follows (read again): harmony's, or Mistral's [THINK] block's
        self._message_ends: tuple[str, ...] = HARMONY_MESSAGE_ENDS
        self._message_drops = len(HARMONY_MESSAGE_END)
        self._spoke = False  # text other than blanks was released (a [THINK] block opens only before it)
        # The second character of every tag opener (a wrapper, <function=, an offered tool's element).
        self._tag_seconds = frozenset("tfjmr|\uff5c").union(name[:1] for name in calls.tools.tools)
        # The character after a "[" that may open something: Mistral / LM Studio, JSON, a pythonic list.
        firsts = "".join(name[:1] for name in calls.tools.tools)
        self._bracket_seconds = frozenset("T{ \t\r\n" + firsts.lower() + firsts.upper())
        self._steps: dict[_State, Callable[[], bool]] = {
            _State.PROSE: self._step_prose,
            _State.FENCE: self._step_fence,
            _State.HEAD: self._step_head,
            _State.VALUE: self._step_value,
            _State.SKIP: self._step_skip,
            _State.XML: self._step_xml,
            _State.LIST: self._step_list,
            _State.MESSAGE: self._step_message,
            _State.AFTER: self._step_after,
            _State.DONE: lambda: False,
        }

    @property
    def done(self) -> bool:
        return self._state is _State.DONE

    @property
    def idle(self) -> bool:
        """Nothing held and no block open: another event of the wrapped parser's call changes nothing."""
        return self._i == len(self._buf) and self._pending is None and self._state in (_State.PROSE, _State.AFTER)

    def plain(self, text: str) -> bool:
        """Text that cannot start or continue a foreign block, seen in prose with nothing held: noted as
        released without going through the buffer (the caller passes it on as it is); False otherwise."""
        if self._i < len(self._buf):
            return False
        if self._state is _State.PROSE:
            if TRIGGER.search(text) is not None:
                return False
        elif self._state is not _State.FENCE or "`" in text:  # in a code fence only its end matters
            return False
        self._note(text)
        self._buf, self._i, self._prev = "", 0, text[-1]
        return True

    def feed(self, text: str) -> None:
        """Consume Text the wrapped parser emitted; events go to the shared buffer."""
        if self._state is _State.DONE or not text:
            return
        if self._i:
            self._prev, self._buf = self._buf[self._i - 1], self._buf[self._i :]
        self._buf, self._i = self._buf + text, 0
        steps = self._steps
        while steps[self._state]():
            pass

    def close(self, finish: FinishReason) -> None:
        """End of output: release or finish what is held."""
        if self._pending is not None:
            self._commit()
        state = self._state
        if state is _State.VALUE:
            self._close_value(finish)
        elif state is _State.XML:
            self._close_xml(finish)
        elif state is _State.LIST:
            self._close_list(finish)
        elif state is _State.MESSAGE:
            self._out.text(Reasoning, self._rest())
        elif state is _State.HEAD:
            self._release(self._rest())
        elif state is _State.AFTER and not (self._group is not None and self._group.around):
            self._rest()  # separators or a partial closing tag after a call: markup
        if not self.done:
            self._emit(self._rest())
            self._state = _State.PROSE
        self._group = None

    def boundary(self, call: bool) -> None:
        """Another kind of event follows: what is held is decided now, as if the output was cut.

        ``call``: the event is part of a call of the wrapped parser. An opener held just before it
        (``<tools>`` around a call the wrapped parser read) is markup of that call, and after it, as
        after a foreign call, separators before a next call are markup too (AFTER).
        """
        if self._pending is not None:  # what follows ends the line: the pending calls are calls
            self._commit()
        state, group = self._state, self._group
        if state is _State.DONE:
            return
        if call and state is _State.PROSE and self._blank_line and self._array_opened(state):  # "[" on its line
            group = self._group = Group("json")
            group.closer, state = "]", _State.HEAD
        if call and group is not None and state in (_State.HEAD, _State.VALUE) and self._array_opened(state):
            group.closer, group.outer = "]", group.closer  # the array's "[" was markup of the call
            self._parts, state = [], _State.HEAD
        if call and group is not None and (state is _State.HEAD or (state is _State.AFTER and self._gap_only(group))):
            self._rest()
            group.calls += 1
            self._state = _State.AFTER
            return
        if state in (_State.HEAD, _State.VALUE, _State.XML, _State.LIST, _State.AFTER, _State.MESSAGE):
            self.close("length")
        else:
            self._emit(self._rest())
        if call and not self.done:
            self._group, self._state = Group("json", calls=1, around=True), _State.AFTER

    def _gap_only(self, group: Group) -> bool:
        """In AFTER: whether what is held is markup before the wrapped parser's next call (nothing, or the
        separators inside a wrapper of the group's own)."""
        return self._i == len(self._buf) or (not group.around and GAP.fullmatch(self._buf, self._i) is not None)

    def _array_opened(self, state: _State) -> bool:
        """Whether what is held (in PROSE), after the opener (HEAD) or of the value (VALUE) is only an
        array's ``[``."""
        if (state is _State.VALUE and self._sc.size > GAP_CAP) or len(self._buf) - self._i > OPENER_WINDOW:
            return False  # more than a bracket and blanks (checked in bounded work)
        held = "".join(self._parts) if state is _State.VALUE else ""
        return (held + self._buf[self._i :]).strip(" \t\r\n") == "["

    # ---- text ------------------------------------------------------------------------------

    def _rest(self) -> str:
        rest, self._buf, self._i = self._buf[self._i :], "", 0
        self._prev = rest[-1] if rest else self._prev
        return rest

    def _emit(self, text: str) -> None:
        if text:
            self._out.text(Text, text)
            self._note(text)

    def _note(self, text: str) -> None:
        """Released text: whether the line it ends in is blank so far, whether any was more than blanks."""
        self._spoke = self._spoke or not text.isspace()
        nl = text.rfind("\n")
        if nl >= 0:
            self._blank_line = not text[nl + 1 :].strip(" \t\r")
        elif self._blank_line:
            self._blank_line = not text.strip(" \t\r")

    def _release(self, tail: str) -> None:
        """The group is not a call after all: its opener and ``tail`` are text, as written."""
        group, self._group = self._group, None
        self._emit((group.prefix + group.opener if group else "") + tail)
        self._state = _State.FENCE if group is not None and group.fenced else _State.PROSE

    # ---- prose -----------------------------------------------------------------------------

    def _step_prose(self) -> bool:
        s, start = self._buf, self._i
        i = start
        while (m := TRIGGER.search(s, i)) is not None:
            p = i = m.start()
            mention = (s[p - 1] if p else self._prev) == "`" and s[p] != "`"
            if not mention and self._may_open(s, p):
                self._emit(s[start:p])
                self._i = start = p
                verdict = self._open(p)
                if verdict is None:
                    return False
                if verdict:
                    return True
            i += 1
        self._emit(s[start:])
        self._i = len(s)
        return False

    def _may_open(self, s: str, p: int) -> bool:
        """A cheap look at the character after a trigger: False when no opener can start at ``p``."""
        if p + 1 >= len(s):
            return True
        c, after = s[p], s[p + 1]
        if c == "<":
            return after in self._tag_seconds
        if c == "[":
            return after in self._bracket_seconds
        if c == "`":
            return after == "`"
        return True

    def _open(self, p: int) -> bool | None:
        """Whether ``buf[p]`` opens a foreign syntax (state changed); None: undecided yet."""
        s = self._buf
        c = s[p]
        if c == "{":
            return self._begin(Group("json", inline=not self._blank_line), p, p)
        if c == "[":
            return self._open_bracket(s, p)
        if c == "<":
            return self._open_tag(s, p)
        return self._open_fence(s, p)

    def _open_bracket(self, s: str, p: int) -> bool | None:
        if s.startswith(MISTRAL, p):
            group = Group("mistral", wrapped=True, outer=MISTRAL_EOS)
            return self._begin(group, p, p + len(MISTRAL), head=True)
        if s.startswith(TOOL_REQUEST, p):
            group = Group("tool_request", closer=END_TOOL_REQUEST, alt=TOOL_REQUEST_END, wrapped=True)
            return self._begin(group, p, p + len(TOOL_REQUEST), head=True)
        if s.startswith(MISTRAL_THINK, p) and not self._spoke:  # Magistral's reasoning: up to [/THINK]
            self._message_ends, self._message_drops = (MISTRAL_THINK_END, MISTRAL), 1
            self._i, self._state = p + len(MISTRAL_THINK), _State.MESSAGE
            return True
        if partial(s, p, (MISTRAL, TOOL_REQUEST, MISTRAL_THINK)):
            return None
        k = BLANKS.match(s, p + 1).end()  # type: ignore[union-attr]
        if k - p > GAP_CAP:
            return False
        if k == len(s):
            return None
        if s[k] == "{":
            return self._begin(Group("json", inline=not self._blank_line), p, p)
        verdict = self._list_call(s, p, k)
        if verdict:
            self._group = Group("pythonic", inline=not self._blank_line)
            self._open_list(p)
        return verdict

    def _list_call(self, s: str, p: int, k: int) -> bool | None:
        """After ``[`` at ``p`` and blanks: whether an offered tool's ``name(`` starts a pythonic list at ``k``."""
        m = PY_CALL.match(s, k)
        if m is None:
            undecided = k == len(s) or PY_PARTIAL.match(s, k) is not None
            return None if undecided and len(s) - p < OPENER_WINDOW else False
        return self._calls.resolve(m.group(1)) is not None

    def _open_list(self, p: int) -> None:
        """The open group's pythonic list starts with the ``[`` at ``p``: held to its end (LIST)."""
        self._list, self._parts, self._held = ListScanner(), ["["], 1
        self._i, self._state = p + 1, _State.LIST

    def _open_tag(self, s: str, p: int) -> bool | None:
        if p + 1 < len(s) and s[p + 1] not in self._tag_seconds:
            return False
        if self._in_message:  # the end token of a harmony message read as prose: dropped
            ended = next((t for t in HARMONY_MESSAGE_END if s.startswith(t, p)), None)
            if ended is not None:
                self._i, self._in_message = p + len(ended), False
                return True
            if partial(s, p, HARMONY_MESSAGE_END):
                return None
        for opener, style in OPENERS.items():  # DeepSeek, Kimi: held to the call's end
            if s.startswith(opener, p):
                group = Group(style.kind, opener=opener, closer=style.section_end, outer=style.trailer, wrapped=True)
                group.ends, group.again = (style.call_end, style.section_end), style.call_begin
                return self._hold_block(group, p)
        for opener, block_end in INVOKE_BLOCKS.items():  # MiniMax, DeepSeek DSML: held to the block's end
            if s.startswith(opener, p):
                return self._hold_block(Group("invoke", opener=opener, wrapped=True, ends=(block_end,)), p)
        if s.startswith(GEMMA_OPEN, p):  # Gemma 4: held to its closer
            return self._hold_block(Group("gemma4", opener=GEMMA_OPEN, wrapped=True, ends=(GEMMA_CLOSE,)), p)
        if s.startswith(HARMONY_OPENERS, p):
            return self._open_harmony(s, p)
        for tag, closer in TAGS.items():
            if s.startswith(tag, p):
                group = Group(tag.strip("<>|"), closer=closer, wrapped=True)
                return self._begin(group, p, p + len(tag), head=True)
        m = FUNCTION_TAG.match(s, p)
        if m is not None:  # a name no tool has is read too: a made-up call is malformed, not text
            group = Group("function_tag", closer=FUNCTION_CLOSE, wrapped=True, name=m.group(1))
            return self._begin(group, p, m.end(), head=True)
        tools = self._calls.tools.tools
        morph = morph_tag(s, p, tools)
        if morph is None:
            attributed = morph_attr_tag(s, p, tools)
            if attributed is None:
                return None
            morph = attributed or None
        if morph is not None:
            group = Group("morph_xml", wrapped=True, tag=morph[0], ends=(f"</{morph[0]}>",))
            if not morph[2]:
                return self._begin(group, p, morph[1], head=True)
            self._group, self._i = group, morph[1]
            self._finish_xml(s[p : morph[1]])
            return True
        at_end = len(s) - p < OPENER_WINDOW
        if at_end and (FUNCTION_PARTIAL.match(s, p) or any(t.startswith(s[p:]) for t in _OPENERS)):
            return None
        return None if at_end and morph_partial(s, p, tools) else False

    def _hold_block(self, group: Group, p: int) -> bool:
        """A special-token block opens with ``group.opener`` at ``p``: held to one of ``group.ends`` (XML)."""
        opener = group.opener
        self._group, self._parts, self._held = group, [opener], len(opener)
        self._i, self._state = p + len(opener), _State.XML
        return True

    def _open_harmony(self, s: str, p: int) -> bool | None:
        """A gpt-oss harmony header: a call when it names a recipient; its JSON message is the arguments."""
        end = s.find(HARMONY_MESSAGE, p, p + OPENER_WINDOW)
        if end < 0:
            return None if len(s) - p < OPENER_WINDOW else False
        m = HARMONY_HEAD.fullmatch(s, p, end + len(HARMONY_MESSAGE))
        name = m.group(1) or m.group(3) if m is not None else None
        if not name and m is not None and m.group(2) in HARMONY_CHANNELS:  # a message that is no call
            self._i = end + len(HARMONY_MESSAGE)
            if m.group(2) == HARMONY_ANALYSIS:  # reasoning, never content
                self._message_ends, self._message_drops = HARMONY_MESSAGE_ENDS, len(HARMONY_MESSAGE_END)
                self._state = _State.MESSAGE
            else:  # content, read as prose (calls in it too); its end token is markup
                self._in_message = True
            return True
        if not name:
            return False
        group = Group("harmony", closer=HARMONY_CALL, wrapped=True, name=name)
        return self._begin(group, p, end + len(HARMONY_MESSAGE), head=True)

    def _open_fence(self, s: str, p: int) -> bool | None:
        window = s[p : p + OPENER_WINDOW]
        if not window.startswith(FENCE):
            return None if FENCE.startswith(window) else False
        at = fence_start(window)
        if at is None:
            return None
        if at >= 0:
            return self._begin(Group("fence", closer=FENCE, fenced=True), p, p + at)
        tag = fence_tag(window)
        if tag is None:
            return None
        if tag >= 0:  # a call's tag as the fence's first line (```xml): the fence is the call's markup
            verdict = self._open_tag(s, p + tag)
            if verdict is None:
                return None
            if verdict:
                group = self._group
                if group is not None:
                    group.prefix, group.fenced = s[p : p + tag], True
                    if group.closer is None:
                        group.closer = FENCE
                    else:
                        group.outer = FENCE
                return True
        self._emit(FENCE)
        self._i, self._state = p + len(FENCE), _State.FENCE
        return True

    def _step_fence(self) -> bool:
        s, i = self._buf, self._i
        q = s.find(FENCE, i)
        if q < 0:
            keep = 2 if s.endswith("``") else 1 if s.endswith("`") else 0
            self._emit(s[i : len(s) - keep])
            self._i = len(s) - keep
            return False
        self._emit(s[i : q + len(FENCE)])
        self._i, self._state = q + len(FENCE), _State.PROSE
        return True

    # ---- a group -----------------------------------------------------------------------------

    def _begin(self, group: Group, p: int, q: int, head: bool = False) -> bool:
        """A group opens at ``buf[p]``; its opener is ``buf[p:q]``; HEAD next, or the value at ``q``."""
        group.opener = self._buf[p:q]
        self._group, self._i = group, q
        if head:
            self._state = _State.HEAD
        else:
            self._start_value()
        return True

    def _start_value(self) -> None:
        name = self._group.name if self._group is not None else None
        self._sc, self._parts, self._state = ValueScanner(name), [], _State.VALUE

    def _step_head(self) -> bool:
        group, s = self._group, self._buf
        assert group is not None
        k = BLANKS.match(s, self._i).end()  # type: ignore[union-attr]
        if self._too_long(k):
            return self._not_a_call(k)
        if k == len(s):
            return False
        if group.kind in ("mistral", "tool_request") and group.name is None and s[k] not in "{[":
            m = MISTRAL_NAME.match(s, k)
            if m is None or self._too_long(m.end()):
                return self._not_a_call(k)
            if m.end() == len(s) or (not m.group(2) and partial(s, m.end(), ("[ARGS]", "[CALL_ID]"))):
                return False
            if self._calls.resolve(m.group(1)) is None or s[m.end()] != "{":
                return self._not_a_call(k)
            group.name = m.group(1)
            k = m.end()
        xml = self._xml_head(group, s, k)
        if xml is None:
            return False
        if xml:
            group.opener += s[self._i : k]
            self._parts, self._held, self._i, self._state = [group.opener], len(group.opener), k, _State.XML
            return True
        if s[k] == "`" and group.name is None and not group.fenced and group.kind in _TAG_KINDS:
            return self._fence_in_tag(group, s, k)
        if s[k] == "[" and group.name is None and group.kind in _TAG_KINDS:  # a pythonic list in a wrapper
            listed = self._list_call(s, k, BLANKS.match(s, k + 1).end())  # type: ignore[union-attr]
            if listed is None:
                return False
            if listed:
                group.opener += s[self._i : k]
                self._open_list(k)
                return True
        if s[k] not in "{[" or (group.name is not None and s[k] != "{") or group.kind == "morph_xml":
            return self._not_a_call(k)
        group.opener += s[self._i : k]
        self._i = k
        self._start_value()
        return True

    def _fence_in_tag(self, group: Group, s: str, k: int) -> bool:
        """A json / bare fence right inside a wrapper tag: the call's value follows its fence line; the
        fence's end, then the tag's, close the block."""
        at = fence_start(s[k : k + OPENER_WINDOW])
        if at is None:
            return False
        if at < 0:
            return self._not_a_call(k)
        group.opener += s[self._i : k + at]
        group.fenced, group.closer, group.outer = True, FENCE, group.closer
        self._i = k + at
        self._start_value()
        return True

    def _xml_head(self, group: Group, s: str, k: int) -> bool | None:
        """Whether an XML block starts at ``k`` after the opener (kind, ends and closer set); None: wait."""
        if group.kind == "morph_xml":
            return morph_body(s, k, group.tag)
        if group.kind == "function_tag" and s[k] != "{":
            verdict = qwen3_head(s, k)
            if verdict:
                group.kind, group.ends, group.closer, group.name = "qwen3_xml", QWEN3_ENDS, None, None
                group.again = FUNCTION
            return verdict
        if group.kind == "tool_call" and s[k] == "<":
            if s.startswith(FUNCTION, k):
                group.kind, group.ends, group.closer, group.again = "qwen3_xml", QWEN3_ENDS, TOOL_CALL_END, FUNCTION
                return True
            return None if partial(s, k, (FUNCTION,)) else False
        if group.kind == "tool_call" and (s[k].isalpha() or s[k] == "_"):  # GLM: a bare name, then <arg_key>
            verdict = glm_head(s, k)
            if verdict:
                group.kind, group.ends, group.closer = "glm", (GLM_END,), None
            return verdict
        return False

    def _step_xml(self) -> bool:
        """An XML block, held until its end marker (at most ``BLOCK_CAP`` characters), then decoded."""
        group, s, i = self._group, self._buf, self._i
        assert group is not None
        found = find_first(s, group.ends, i)
        if found is None:
            cut = max(i, len(s) - partial_marker_len(s, group.ends))
            self._parts.append(s[i:cut])
            self._held += cut - i
            self._i = cut
            if self._held > BLOCK_CAP:
                self._calls.fail("".join(self._parts), f"{group.kind} block longer than {BLOCK_CAP} characters")
                self._group, self._parts, self._state = None, [], _State.PROSE
                return True
            return False
        q, marker = found
        self._parts.append(s[i : q + len(marker)])
        self._i = q + len(marker)
        if marker == group.closer:  # </tool_call> ended the function and its wrapper
            group.closer = None
        self._finish_xml("".join(self._parts))
        return True

    def _finish_xml(self, block: str) -> None:
        """A complete (or cut) XML block: its calls, or Malformed."""
        group = self._group
        assert group is not None
        self._parts, group.opener, self._state = [], "", _State.AFTER
        calls = _decode(group.kind, block, list(self._calls.tools.tools.values()))
        if calls is None:
            self._calls.fail(block, f"no usable call in {group.kind} block")
            return
        self._pending = (calls, block, (f"foreign_{group.kind}",))
        self._commit()

    def _step_list(self) -> bool:
        """A pythonic list, held to its matching ``]`` (at most ``BLOCK_CAP`` characters), then decoded."""
        s, i = self._buf, self._i
        p, verdict = self._list.scan(s, i)
        self._parts.append(s[i:p])
        self._held += p - i
        self._i = p
        if verdict is False or (verdict is None and self._held > BLOCK_CAP):  # prose that began like a list
            text, self._parts = "".join(self._parts), []
            self._release(text)
            return True
        if verdict:
            self._finish_list("".join(self._parts))
            return True
        return False

    def _finish_list(self, block: str) -> None:
        """A whole (or completed) pythonic list: its calls, Malformed, or text as written."""
        group = self._group
        assert group is not None
        self._parts = []
        found = decode_list(block, list(self._calls.tools.tools.values()))
        if found is None:
            self._release(block)
            return
        self._state = _State.AFTER
        if isinstance(found, str):
            self._calls.fail(block, found)
            return
        self._pending = (list(found), block, (f"foreign_{group.kind}",))
        if not (group.inline and not group.calls):
            self._commit()

    def _step_message(self) -> bool:
        """A harmony analysis message or a Mistral [THINK] block: reasoning up to its end token (dropped) or
        what follows it (the next header, [TOOL_CALLS]: read again)."""
        s, i, ends = self._buf, self._i, self._message_ends
        found = find_first(s, ends, i)
        end = len(s) - partial_marker_len(s[max(i, len(s) - 16) :], ends) if found is None else found[0]
        self._out.text(Reasoning, s[i:end])
        self._i = end
        if found is None:
            return False
        if found[1] in ends[: self._message_drops]:
            self._i += len(found[1])
        self._state = _State.PROSE
        return True

    def _too_long(self, k: int) -> bool:
        """Whether the opener read up to ``k`` is past the window an opener is decided in."""
        group = self._group
        return group is not None and len(group.opener) + k - self._i > OPENER_WINDOW

    def _not_a_call(self, k: int) -> bool:
        """What followed the opener is no call: the opener is text (what follows is prose again)."""
        group = self._group
        assert group is not None
        if group.calls:  # after calls, an opener repeated with nothing usable: dropped
            self._group, self._state = None, _State.PROSE
            return True
        head = self._buf[self._i : k]
        self._i = k
        self._release(head)
        return True

    def _step_value(self) -> bool:
        group, sc, s, i = self._group, self._sc, self._buf, self._i
        assert group is not None
        cap = BLOCK_CAP if sc.verdict else HOLD_CAP - len(group.opener) - len(group.gap)
        p, closed = sc.scan(s, i, min(len(s), i + max(0, cap - sc.size)))
        self._parts.append(s[i:p])
        self._i = p
        if sc.verdict is False:  # not a call: text, and the rest of the value too (SKIP)
            self._flush_unused()
            self._resume, self._state = self._state, _State.SKIP
            return True
        if closed:
            self._finish_value("".join(self._parts), ())
            return True
        if sc.size >= cap:  # undecided or call-shaped, too long to hold: text
            self._flush_unused()
            return True
        return p < len(s)

    def _flush_unused(self) -> None:
        """Emit the group's held text (a value that is not a call) and forget the group."""
        group, text = self._group, "".join(self._parts)
        self._parts = []
        if group is not None and group.calls:
            self._group = None
            self._emit(group.gap + text)
        else:
            self._release(group.gap + text if group else text)
        fenced = group is not None and group.fenced
        self._state = _State.FENCE if fenced else _State.PROSE

    def _step_skip(self) -> bool:
        sc, s, i = self._sc, self._buf, self._i
        budget = HOLD_CAP - sc.size
        p, closed = sc.scan(s, i, min(len(s), i + max(0, budget)), stop_on_reject=False)
        self._emit(s[i:p])
        self._i = p
        if closed or sc.size >= HOLD_CAP:
            self._state = self._resume
            return True
        return False

    def _finish_value(self, text: str, repairs: tuple[str, ...], shown: str | None = None) -> None:
        """A complete value: its calls, or text (``shown``, else ``text``; Malformed inside a wrapper
        that holds a call)."""
        group = self._group
        assert group is not None
        self._parts = []
        known = self._calls.resolve
        if group.name is not None and known(group.name) is None:
            self._fail_value(text, self._calls.tools.describe_unresolved(group.name))
            return
        if group.name is not None:
            found: tuple[list[tuple[str, object]], tuple[str, ...]] | None = ([(group.name, text)], ())
        else:
            found = read_calls(text, lambda n: known(n) is not None, not group.wrapped)
        if found is None:
            made_up = None if group.inline else unknown_call(text, lambda n: known(n) is not None)
            if made_up is not None:
                self._fail_value(text, self._calls.tools.describe_unresolved(made_up))
                return
            if group.wrapped and self._sc.verdict:
                self._fail_value(text, f"no usable call in {group.kind} block")
                return
            self._parts = [text if shown is None else shown]
            self._flush_unused()
            return
        self._pending = (found[0], text, (f"foreign_{group.kind}", *repairs, *found[1]))
        group.gap, group.name = "", None
        self._state = _State.AFTER
        if not (group.inline and not group.calls):
            self._commit()

    def _fail_value(self, text: str, reason: str) -> None:
        """The group's value is a call that cannot be made: Malformed, then AFTER (its closer is dropped)."""
        group = self._group
        assert group is not None
        self._calls.fail(group.opener + text, reason)
        group.gap, group.name = "", None
        self._state = _State.AFTER

    def _commit(self) -> None:
        """Make the pending calls; past ``max_calls`` report the cut (DONE)."""
        group, pending, self._pending = self._group, self._pending, None
        assert group is not None and pending is not None
        calls, text, repairs = pending
        for name, args in calls:
            if self._calls.cut():
                self._state, self._buf, self._i = _State.DONE, "", 0
                return
            self._calls.finish(name, args, group.opener + text, before=repairs)
            group.calls += 1

    def _line_end(self) -> bool | None:
        """After a call written inside a line of prose: whether only blanks, a separator or a next call
        follow on its line (it is a call); False: prose follows (it is a mention); None: undecided."""
        s, i = self._buf, self._i
        k = INLINE_GAP.match(s, i).end()  # type: ignore[union-attr]
        if k - i > GAP_CAP:
            return False
        if k == len(s):
            return None
        return s[k] in "\r\n;,{["

    def _step_after(self) -> bool:
        group, s, i = self._group, self._buf, self._i
        assert group is not None
        if self._pending is not None:
            verdict = self._line_end()
            if verdict is None:
                return False
            if not verdict:  # a call-shaped mention in prose: text as written
                text, self._pending = self._pending[1], None
                self._emit(text)
                return self._end_group(i)
            self._commit()
            return True
        k = GAP.match(s, i).end()  # type: ignore[union-attr]
        if k - i > GAP_CAP:
            return self._end_group(i)
        if k == len(s):
            return False
        if s[k] == "[" and partial(s, k, (MISTRAL, TOOL_REQUEST)):
            return False
        if s.startswith(TOOL_REQUEST, k) or (s.startswith(MISTRAL, k) and group.kind != "mistral"):
            return self._end_group(k)  # another block of its own opener: read from PROSE
        if group.again and s[k] == "<":  # another function in the same wrapper / section
            if s.startswith(group.again, k):
                self._parts, self._held, self._i, self._state = [], 0, k, _State.XML
                return True
            if partial(s, k, (group.again,)):
                return False
        for n, closer in enumerate((group.closer, group.alt, group.outer)):
            if closer is None:
                continue
            if s.startswith(closer, k):
                self._i = k + len(closer)
                if n == 0 and group.outer is not None:  # the inner closer: the outer one may follow
                    group.closer, group.alt, group.outer = group.outer, None, None
                    group.fenced = group.fenced and closer != FENCE
                else:  # the block ends; blanks after it are held as after a call
                    self._group = Group("json", calls=group.calls)
                return True
            if len(s) - k < len(closer) and closer.startswith(s[k:]):
                return False
        if s[k] in "{[" and not s.startswith(MISTRAL, k):
            group.gap = s[i:k]
            group.opener, self._i = "", k
            self._start_value()
            return True
        if group.kind == "mistral" and s.startswith(MISTRAL, k):
            group.opener, self._i, self._state = "", k + len(MISTRAL), _State.HEAD
            return True
        return self._end_group(k if s[k] == "<" and not s[i:k].strip(" \t\r\n") else i)

    def _end_group(self, k: int) -> bool:
        """Prose follows the group: what is held from ``k`` on is prose again (blanks before a tag,
        which may start the next block, are dropped with the group)."""
        group, self._group = self._group, None
        self._i = k
        self._state = _State.FENCE if group is not None and group.fenced else _State.PROSE
        return True

    # ---- end of output -------------------------------------------------------------------------

    def _close_xml(self, finish: FinishReason) -> None:
        """The output ended inside an XML block: decoded as it is after a ``stop``, else Malformed."""
        group = self._group
        assert group is not None
        block = "".join(self._parts) + self._rest()
        if truncated(finish):
            self._calls.fail(block, f"{group.kind} block truncated (finish_reason={finish})")
            self._parts, self._state = [], _State.PROSE
        else:
            self._finish_xml(block)

    def _close_list(self, finish: FinishReason) -> None:
        """The output ended inside a pythonic list: completed after a ``stop`` (not inside a string)."""
        block = "".join(self._parts) + self._rest()
        self._parts = []
        if self._list.quote is None and not truncated(finish):
            self._finish_list(block + self._list.closers())
            if self._pending is not None:  # the output's end ends the line
                self._commit()
            return
        self._group, self._state = None, _State.PROSE
        self._calls.fail(block, f"pythonic list cut inside a string or by finish_reason={finish}")

    def _close_value(self, finish: FinishReason) -> None:
        """The output ended inside a value: a call-shaped one is completed after a ``stop``, or after any cut
        that came once its name and whole arguments were read (``cut_after_arguments``); one cut before that,
        naming an offered tool, is Malformed."""
        group, sc = self._group, self._sc
        assert group is not None
        text = "".join(self._parts) + self._rest()
        if sc.verdict and not sc.in_string and not truncated(finish):
            closers = sc.closers()
            self._parts = []
            self._finish_value(text + closers, ("unclosed_brackets",) if closers else (), shown=text)
            return
        end = sc.call_end
        if end is not None and (sc.in_string or truncated(finish)):  # cut after the call's arguments
            self._parts = []
            self._finish_value(text[:end] + "}", ("cut_after_arguments",), shown=text)
            return
        if sc.verdict and not truncated(finish):  # a string never closed: "C:\" may have escaped its quote
            self._finish_value(text, (), shown=text)
            return
        if sc.verdict and (group.wrapped or (sc.name is not None and self._calls.resolve(sc.name))):
            self._calls.fail(group.opener + text, f"{group.kind} block truncated (finish_reason={finish})")
            self._group, self._parts, self._state = None, [], _State.PROSE
            return
        self._parts = [text]
        self._flush_unused()
