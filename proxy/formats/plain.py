"""A malformed call block as plain words: the last resort for content, with no markup left.

When every attempt of a response wrote only a broken call block, the client still gets an answer,
but never the block's raw markup (issue 18): ``plain_text`` removes what every format (and lenient
recognition) uses as markup, keeping the words the model wrote:

* tags: wrappers (``<tool_call>``, ``<think>``), closing tags and a tag cut off at the end removed,
  ``<tool:x>`` / ``<function=x>`` keep the name ``x``, ``<parameter=k=v>`` becomes ``k: v``,
  ``<param:k>`` / ``<parameter=k>`` / ``<k>`` become ``k:``;
* code fence lines, caret marker lines (``^^^``, ``---``): removed; ``^^^name`` keeps the name;
* ReAct keywords at a line start (``Action:``, ``Action Input:``, ``Thought:``): removed, the rest kept;
* JSON punctuation (braces, brackets, quotes, separating commas): removed, ``key: value`` kept;
* a pythonic call ``[name(key=value)]``: the name on its own line, ``key=`` as ``key:``, the parentheses gone.

A block cut off by the length limit is shown the same way (its words, no markup), and the response ends with
``finish_reason: "length"``. Pure and linear: one regex pass each.
"""

from __future__ import annotations

import re

_TAG = re.compile(
    r"<(/?)\|?([A-Za-z_][\w.\-]{0,128})\|?(?:[:=]([\w.\-]{0,128}))?(?:=([^<>\n]{0,256}))?(?:[ \t][^<>\n]{0,256})?/?>"
)
_WRAPPERS = frozenset(("tool_call", "tool_calls", "tool_response", "function_call", "tools", "tool", "think", "json"))
_FENCE_LINE = re.compile(r"^[ \t]*```[^\n]*$", re.MULTILINE)
_CARET_LINE = re.compile(r"^[ \t]*(?:\^{3,}|-{3,})[ \t]*", re.MULTILINE)
_KEYWORD = re.compile(r"^[ \t]*(?:action(?:[ \t_]*input)?|thought|observation)[ \t]*:[ \t]*", re.I | re.M)
_JSON_PUNCT = re.compile(r"[{}\[\]\"]+")
_COMMA = re.compile(r"[ \t]*,[ \t]*(?=\S)")
_BLANK_RUN = re.compile(r"[ \t]*\n(?:[ \t]*\n)+")
_NAME_KEYS = re.compile(r"\b(?:name|arguments|parameters)[ \t]*:[ \t]*(?=\S)")
_KEY_SPACE = re.compile(r"\A([\w.\-]{1,128}):(?=[^\s/])")  # "city:Paris" (from JSON) as "city: Paris"
_PARTIAL_TAG = re.compile(r"<[/|]?[\w.\-=:|]{0,128}\Z")  # a tag the length limit cut off
_PY_HEAD = re.compile(r"\A[ \t]*\[?[ \t]*([A-Za-z_][\w.\-]*)[ \t]*\(")
_PY_KEYWORD = re.compile(r"(?<=[(,\s])([A-Za-z_]\w*)[ \t]*=(?!=)[ \t]*")
_PY_END = re.compile(r"\)[ \t]*\]?[ \t]*\Z")


def plain_text(raw: str) -> str:
    """``raw`` (a call block as written) without markup: the words, one ``key: value`` per line."""
    text = _TAG.sub(_tag, _PARTIAL_TAG.sub("", _python_call(raw)))
    text = _FENCE_LINE.sub("", text)
    text = _CARET_LINE.sub("", text)
    text = _KEYWORD.sub("", text)
    text = _JSON_PUNCT.sub("", text)
    text = _NAME_KEYS.sub("", text)
    text = _COMMA.sub("\n", text)
    text = _BLANK_RUN.sub("\n", text)
    lines = (_KEY_SPACE.sub(r"\1: ", line.strip(), count=1) for line in text.split("\n"))
    return "\n".join(line for line in lines if line and line not in (":", ","))


def _python_call(raw: str) -> str:
    """A pythonic call ``name(key=value, ...)`` as ``name`` and ``key: value`` words; other text unchanged."""
    head = _PY_HEAD.match(raw)
    if head is None:
        return raw
    body = _PY_KEYWORD.sub(r"\1: ", "(" + _PY_END.sub("", raw[head.end() :]))[1:]
    return f"{head.group(1)}\n{body}"


def _tag(m: re.Match[str]) -> str:
    """A tag as words: a call's name on its own line, a parameter's name before its value, else nothing."""
    closing, tag, name, value = m.group(1), m.group(2), m.group(3), m.group(4)
    if closing or (tag.lower() in _WRAPPERS and not name):
        return ""
    if value is not None:  # <parameter=city=Paris>, a value written into the tag
        return f"{name or tag}: {value.strip()}\n"
    if name is not None:
        return f"{name}\n" if tag in ("tool", "function") else f"{name}: "
    return f"{tag}: "
