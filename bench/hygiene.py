"""What a client must never get, judged from outside: markup, toolshim's own instructions, nothing at all.

The benchmarks (``bench/bfcl.py``, ``bench/local_model.py``) ask real questions through toolshim the
way a client library does and count, per answer:

* ``leaked``: visible content carries tool markup of any format (hermes, react, xml, caret, the
  Qwen3 / Morph XML tags, a tag named after an offered tool, a pythonic ``[tool(`` list), a JSON call
  object or what is left of one (three ``"key": value`` members in a row), outside code fences tagged
  with a programming language (a ```` ```python ```` block building a dict ``{"name": ...}`` is code, not
  markup; a ```` ```json ```` or bare fence is still checked);
* ``echoed``: visible content repeats toolshim's tool instructions: a run of ``ECHO_WORDS`` words
  (case and punctuation aside) that occurs in the instructions the format renders for this request,
  not in the request's own tool definitions (a model may quote a tool's description), and has a word
  of toolshim's own wording (tool and parameter names with ``name``/``arguments`` around them are a
  call the model wrote, not an echo);
* ``empty``: no call and no visible text;
* ``usage``: a non-streaming answer carries ``usage`` with both token counts;
* ``invalid_args``: a call whose arguments are not a JSON object valid against its tool's schema
  (``jsonschema``), or a call to a tool that was not offered.

Independent of toolshim's own filters on purpose: the instructions are rendered by the format
plugin, but the comparison is this module's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import jsonschema
from toolshim.chat.rewrite import TOOL_RESULTS_ARE_DATA
from toolshim.formats import ToolChoice, ToolSpec, get_format

ECHO_WORDS = 6
# What is left of a call object a model ran away in: three "key": value members in a row (quotes escaped
# or not), outside code fences, e.g. ``"food_name": "asparagus", "portion_amount": 4.0, "meal_name": ...``.
_KEY = r'\\?"[A-Za-z_]\w{0,40}\\?"\s*:\s*'
_JSON_RUN = rf'(?:{_KEY}(?:\\?"[^"\n]{{0,80}}?\\?"|-?\d[\d.]*|true|false|null)\s*,\s*){{2}}{_KEY}'

_WORD = re.compile(r"[^\W_]+")
_FIXED_MARKUP = (
    r"</?tool_call|Action( Input)?:|</?tool:|\^\^\^|<function=|<parameter=|</?tool_response|"
    r"</?function_calls?|</?invoke|\{\s*\\?\"name\\?\"\s*:"
)


def markup_pattern(tool_names: Iterable[str] = (), lists: bool = True) -> re.Pattern[str]:
    """Tool markup of every format, and ``<name>`` / ``</name>`` / ``<name/>`` for each offered tool, and
    (``lists``) a Python list of calls opening with one (``[name(``, the pythonic format) and the remains of
    a JSON call object (three ``"key": value`` members in a row)."""
    names = "|".join(re.escape(name) for name in sorted(set(tool_names), key=len, reverse=True))
    tags = rf"|</?(?:{names})\s*/?>" if names else ""
    calls = rf"|\[\s*(?:{names})\s*\(" if names and lists else ""
    remains = f"|{_JSON_RUN}" if lists else ""  # a pythonic call's dict argument is the call where lists are text
    return re.compile(_FIXED_MARKUP + tags + calls + remains)


_CODE_FENCE = re.compile(r"^```[ \t]*([A-Za-z][\w+#.-]*)[^\n]*\n.*?^```", re.M | re.S)
_MARKUP_FENCES = frozenset(("json", "xml", "tool_call", "tool_code", "text", "plaintext"))


# A tag's name alone in inline code ("the results are inside the `<tool_response>` tags") is a mention, not markup:
# every format keeps a backticked tag as text by design (it may be what the user asked about).
_TAG_MENTION = re.compile(r"`</?[A-Za-z_][\w:.=-]*/?>`")


def without_code(content: str) -> str:
    """``content`` without the bodies of fences tagged with a programming language, nor tag names in inline code."""
    content = _CODE_FENCE.sub(lambda m: m.group() if m.group(1).lower() in _MARKUP_FENCES else "", content)
    return _TAG_MENTION.sub("", content)


def has_markup(content: str | None, tool_names: Iterable[str] = (), lists: bool = True) -> bool:
    """Markup in ``content``; ``lists=False`` where calls are ``[f(a=1)]`` text by design (BFCL's prompt mode)."""
    return markup_pattern(tool_names, lists).search(without_code(content or "")) is not None


def _windows(text: str) -> set[tuple[str, ...]]:
    words = [w.casefold() for w in _WORD.findall(text)]
    return {tuple(words[i : i + ECHO_WORDS]) for i in range(len(words) - ECHO_WORDS + 1)}


def instruction_windows(format_name: str, tools: Sequence[Mapping[str, Any]], parallel: bool) -> set[tuple[str, ...]]:
    """The word runs of toolshim's instructions for these tools that the tools themselves do not carry."""
    specs = [ToolSpec.from_openai(tool) for tool in tools]
    rendered = get_format(format_name).render_tools(specs, ToolChoice.from_openai("auto"), parallel)
    own = _windows(rendered + "\n" + TOOL_RESULTS_ARE_DATA)
    tool_text = json.dumps(list(tools), ensure_ascii=False)
    call_words = {w.casefold() for w in _WORD.findall(tool_text)} | {"name", "arguments", "parameters"}
    return {window for window in own - _windows(tool_text) if not call_words.issuperset(window)}


def echoes(content: str | None, windows: set[tuple[str, ...]]) -> bool:
    return bool(content) and not _windows(content or "").isdisjoint(windows)


def is_empty(message: Any) -> bool:
    return not message.tool_calls and not (message.content or "").strip()


def has_usage(response: Any) -> bool:
    usage = getattr(response, "usage", None)
    return usage is not None and usage.prompt_tokens is not None and usage.completion_tokens is not None


def invalid_args(calls: Sequence[tuple[str, str]], tools: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any ``(name, arguments JSON)`` call breaks its offered tool's schema (or names none)."""
    schemas = {tool["function"]["name"]: tool["function"].get("parameters") or {} for tool in tools}
    for name, arguments in calls:
        if name not in schemas:
            return True
        try:
            value = json.loads(arguments)
            jsonschema.validate(value, schemas[name])
        except (ValueError, jsonschema.ValidationError):
            return True
        except jsonschema.SchemaError:
            continue  # a schema jsonschema cannot read judges nothing
        if not isinstance(value, dict):
            return True
    return False
