"""What opens a foreign call block in lenient recognition: the openers, their closers, the bounds.

Constants and pure pattern helpers shared by ``_foreign.ForeignCalls`` (the state machine) and
``lenient`` (the docstring that describes both); ``Group`` is one open block's bookkeeping. No events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HOLD_CAP = 4096  # an undecided value (opener included) longer than this is released as text
BLOCK_CAP = 1 << 26  # a call-shaped value (64 MiB) longer than this is released as text
OPENER_WINDOW = 128  # enough to decide an opener: a fence line, a tag, [TOOL_CALLS]name[ARGS]
GAP_CAP = 64
MISTRAL = "[TOOL_CALLS]"
MISTRAL_THINK, MISTRAL_THINK_END = "[THINK]", "[/THINK]"  # Magistral's reasoning, at the start of the output
MISTRAL_EOS = "</s>"  # the end of the turn, written right after the calls when special tokens are shown
TOOL_REQUEST, END_TOOL_REQUEST = "[TOOL_REQUEST]", "[END_TOOL_REQUEST]"  # LM Studio's default
TOOL_REQUEST_END = "[TOOL_REQUEST_END]"  # the closer Gemma writes under LM Studio
HARMONY_OPENERS = ("<|start|>", "<|channel|>")
HARMONY_MESSAGE = "<|message|>"
HARMONY_CALL = "<|call|>"
HARMONY_ANALYSIS = "analysis"  # the channel of a harmony message that is reasoning
HARMONY_CHANNELS = (HARMONY_ANALYSIS, "final", "commentary")  # a message on these without a recipient: no call
# What ends a message that is no call: its end token (dropped), or the next message's header (read again).
HARMONY_MESSAGE_END = ("<|end|>", "<|return|>")
HARMONY_MESSAGE_ENDS = (*HARMONY_MESSAGE_END, "<|start|>", "<|channel|>")
# A gpt-oss harmony header up to its message: a call when it names a recipient (to=functions.NAME);
# groups: the recipient before the channel, the channel, the recipient after it.
HARMONY_HEAD = re.compile(
    r"(?:<\|start\|>[ \t]*assistant)?[ \t]*(?:to=(?:functions\.)?([\w.-]{1,64}))?[ \t]*"
    r"(?:<\|channel\|>[ \t]*(\w*))?[ \t]*(?:to=(?:functions\.)?([\w.-]{1,64}))?[ \t]*"
    r"(?:<\|constrain\|>)?[ \t]*(?:json)?[ \t\r\n]*<\|message\|>"
)
TAGS: dict[str, str | None] = {
    "<tool_call>": "</tool_call>",
    "<tool_calls>": "</tool_calls>",
    "<function_call>": "</function_call>",
    "<tools>": "</tools>",
    "<tool>": "</tool>",
    "<json>": "</json>",
    "<response>": "</response>",
    "<|python_tag|>": None,
    "<|python_start|>": "<|python_end|>",  # Llama 4, around a pythonic list
    "<|tool_call|>": None,
}
FUNCTION_CLOSE = "</function>"
FENCE = "```"
FENCE_LANGS = ("", "json", "json5", "tool_call", "tool_code", "javascript")
XML_FENCE_LANGS = ("", "xml", "tool_call", "tool_code")  # a fence whose first line may be a call's tag
TRIGGER = re.compile(r"[{\[<`]")
BLANKS = re.compile(r"[ \t\r\n]*")
GAP = re.compile(r"[ \t\r\n]*[,;]?[ \t\r\n]*")
INLINE_GAP = re.compile(r"[ \t]*")
FENCE_HEAD = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[ \t]*\r?\n[ \t\r\n]*")
FUNCTION_TAG = re.compile(r"<function=([A-Za-z_][\w.:-]{0,63})>")
FUNCTION_PARTIAL = re.compile(r"<(?:f(?:u(?:n(?:c(?:t(?:i(?:o(?:n(?:=(?:[A-Za-z_][\w.:-]{0,63})?)?)?)?)?)?)?)?)?)?\Z")
PY_CALL = re.compile(r"([A-Za-z_][\w.\-]{0,63})[ \t]*\(")  # a pythonic list's first call, after "[" and blanks
PY_PARTIAL = re.compile(r"[A-Za-z_][\w.\-]{0,63}[ \t]*\Z")
MISTRAL_NAME = re.compile(r"([A-Za-z_][\w.-]{0,63})[ \t]*(?:\[CALL_ID\][^\[\]\n]{0,64})?(\[ARGS\])?[ \t\r\n]*")


def fence_tag(window: str) -> int | None:
    """In a window starting with a fence: where the ``<`` of a tag right after an xml/bare fence line is;
    -1 when none is; None while undecided."""
    m = FENCE_HEAD.match(window)
    if m is None or m.end() == len(window):
        undecided = len(window) < OPENER_WINDOW and (m is not None or "\n" not in window)
        return None if undecided else -1
    return m.end() if m.group(1).lower() in XML_FENCE_LANGS and window[m.end()] == "<" else -1


def fence_start(window: str) -> int | None:
    """In a window starting with a fence: where a json/bare fence's call value starts; -1 for a fence of
    anything else; None while undecided."""
    m = FENCE_HEAD.match(window)
    if m is None or m.end() == len(window):
        undecided = len(window) < OPENER_WINDOW and (m is not None or "\n" not in window)
        return None if undecided else -1
    return m.end() if m.group(1).lower() in FENCE_LANGS and window[m.end()] in "{[" else -1


@dataclass(slots=True)
class Group:
    """One foreign block: its opener as written, its closer, and what it has produced so far."""

    kind: str  # the syntax, reported as the repair ``foreign_<kind>``
    opener: str = ""
    closer: str | None = None
    alt: str | None = None  # another closer that ends the block as ``closer`` does (LM Studio's two)
    outer: str | None = None  # what ends the block after ``closer``: a fence around a tag, a tag around a fence
    prefix: str = ""  # markup before the opener (an xml fence line), text with it when the block is none
    fenced: bool = False
    wrapped: bool = False  # an unmistakable wrapper: a broken call in it is Malformed, not text
    name: str | None = None  # the tool name an args-only value is for (Mistral, <function=NAME>)
    calls: int = 0  # calls made from this group
    gap: str = ""  # separators held before the next value
    around: bool = False  # only follows a call of the wrapped parser: what it holds at the end is text
    inline: bool = False  # a bare value after prose on its line: a call only if its line ends after it
    tag: str = ""  # morph_xml: the tool name the element is named after
    ends: tuple[str, ...] = ()  # what ends an XML block
    again: str = ""  # after a block: what starts another block of the same group (qwen3, DeepSeek, Kimi)
