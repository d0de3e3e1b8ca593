"""The fair native baseline: the model's own chat template, parsed the way llama.cpp's server parses it.

llama-server ``--jinja`` (and Ollama) render the tools with the GGUF's ``tokenizer.chat_template``;
llama-cpp-python's OpenAI ``tools`` path does not, so ``bench/bfcl.py``'s ``template`` mode renders
the prompt here and sends it as a raw ``/v1/completions`` request, then reads the completion back as
llama.cpp's ``common_chat_parse_hermes_2_pro`` does (the format llama.cpp picks for any template that
mentions ``<tool_call>``, Qwen2.5's among them):

* from the current position, find the next ``{"name"`` (optionally after ``<tool_call>``,
  ``<function_call>``, ``<tool>``, ``<tools>``, ``<response>``, ``<json>``, ``<xml>`` or ``<JSON>``,
  optionally inside a code fence), or ``<function=NAME>`` / ``<function name="NAME">``; the text
  before it is content;
* read one JSON value there; the call's ``arguments`` become their compact JSON dump;
* then, after spaces, the matching closing tag (``</tool_call>`` ...; none for a bare object,
  ``</function>`` for the function forms) and the fence's closing backticks must follow;
* if any call fails (JSON that does not parse or is cut short, no ``name``, a closing tag missing),
  llama.cpp drops every call and the whole completion is content; with calls, content is stripped.

A template that does not render tools (SmolLM2's, and many others) gets what llama-server ``--jinja``
does for it, its *generic* format (``common_chat_params_init_generic`` with minja's polyfills):

* minja's probe decides: a template knows tools when rendering one with a tool puts the tool's name
  in the prompt (``supports_tools``);
* otherwise the system turn gets llama.cpp's "Respond in JSON format, either with `tool_call` ..." line
  and minja's "You can call any of the following tools to satisfy the user's requests: " with the tools
  as indented JSON (each appended to an existing system message after a blank line, else a new one);
* the completion must follow a JSON Schema grammar (not lazy: every answer is JSON) of
  ``{"tool_call": {"name", "arguments"}}``, ``{"tool_calls": [{"name", "arguments", "id"}]}`` when
  parallel calls are allowed, or ``{"response": "..."}``; the grammar is llama.cpp's own
  JSON-Schema-to-GBNF conversion (llama-cpp-python's port), sent as the completion's ``grammar``;
* ``common_chat_parse_generic`` reads the JSON back; a cut-short or unexpected value is all content.

History polyfills (a template that cannot render calls or tool results) are not emulated.

What is not emulated: the ``<think>`` reasoning split (Qwen2.5-Coder does not think) and the lazy
grammar llama-server adds once a call starts (this mode decodes unconstrained, as Ollama does).

The template comes straight out of the GGUF file's metadata (``read_gguf_metadata``, standard
library only, no weights read) and is rendered with jinja2 in a sandbox, the way Hugging Face's
``apply_chat_template`` does (``trim_blocks``, ``lstrip_blocks``, ``tojson`` without HTML escaping,
``raise_exception``, ``strftime_now``).
"""

from __future__ import annotations

import functools
import json
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

# GGUF value types (gguf.GGUFValueType): their struct codes; 8 is a string, 9 an array.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
TEMPLATE_KEY = "tokenizer.chat_template"
# llama.cpp common/chat.cpp (common_chat_params_init_generic) and minja's tools polyfill, word for word.
GENERIC_INSTRUCTION = (
    "Respond in JSON format, either with `tool_call` (a request to call tools) or with `response` reply to the "
    "user's request"
)
TOOLS_POLYFILL = "You can call any of the following tools to satisfy the user's requests: "
_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "some_tool",
        "description": "Some tool.",
        "parameters": {"type": "object", "properties": {"arg": {"type": "string"}}, "required": ["arg"]},
    },
}


class GgufError(ValueError):
    """The file is not GGUF, or its metadata is cut short."""


def _read(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise GgufError("GGUF metadata cut short")
    return data


def _string(stream: BinaryIO) -> str:
    (length,) = struct.unpack("<Q", _read(stream, 8))
    return _read(stream, length).decode("utf-8", errors="replace")


def _value(stream: BinaryIO, kind: int) -> Any:
    if kind == _STRING:
        return _string(stream)
    if kind == _ARRAY:
        item_kind, count = struct.unpack("<IQ", _read(stream, 12))
        if item_kind in _SCALARS:
            code = _SCALARS[item_kind]
            return list(struct.unpack(f"<{count}{code}", _read(stream, count * struct.calcsize(code))))
        return [_value(stream, item_kind) for _ in range(count)]
    if kind not in _SCALARS:
        raise GgufError(f"unknown GGUF value type {kind}")
    code = _SCALARS[kind]
    return struct.unpack("<" + code, _read(stream, struct.calcsize(code)))[0]


def read_gguf_metadata(path: str | Path, keys: Sequence[str] | None = None) -> dict[str, Any]:
    """The key/value metadata at the head of a GGUF (v2/v3) file; only ``keys`` when given."""
    with Path(path).open("rb") as stream:
        if _read(stream, 4) != b"GGUF":
            raise GgufError(f"{path}: not a GGUF file")
        (version,) = struct.unpack("<I", _read(stream, 4))
        if version < 2:
            raise GgufError(f"{path}: GGUF version {version} is not supported")
        _tensors, count = struct.unpack("<QQ", _read(stream, 16))
        metadata: dict[str, Any] = {}
        for _ in range(count):
            key = _string(stream)
            (kind,) = struct.unpack("<I", _read(stream, 4))
            value = _value(stream, kind)
            if keys is None or key in keys:
                metadata[key] = value
        return metadata


@dataclass(frozen=True, slots=True)
class ChatTemplate:
    """A model's chat template and the special tokens it is rendered with."""

    source: str
    bos_token: str = ""
    eos_token: str = ""
    stops: tuple[str, ...] = field(default=())

    @classmethod
    def from_gguf(cls, path: str | Path) -> ChatTemplate:
        """The template in a GGUF file, with its BOS/EOS token texts; stops at EOS (and ``<|im_end|>``
        when the template ends turns with it)."""
        keys = (TEMPLATE_KEY, "tokenizer.ggml.tokens", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id")
        meta = read_gguf_metadata(path, keys)
        if TEMPLATE_KEY not in meta:
            raise GgufError(f"{path}: no {TEMPLATE_KEY} in the metadata")
        tokens = meta.get("tokenizer.ggml.tokens", [])

        def token(key: str) -> str:
            index = meta.get(key)
            return tokens[index] if isinstance(index, int) and 0 <= index < len(tokens) else ""

        bos, eos = token("tokenizer.ggml.bos_token_id"), token("tokenizer.ggml.eos_token_id")
        return cls.with_stops(meta[TEMPLATE_KEY], bos, eos)

    @classmethod
    def with_stops(cls, source: str, bos_token: str = "", eos_token: str = "") -> ChatTemplate:
        stops = [eos_token] if eos_token else []
        if "<|im_end|>" in source and "<|im_end|>" not in stops:
            stops.append("<|im_end|>")
        return cls(source, bos_token, eos_token, tuple(stops))

    def render(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None) -> str:
        """The prompt for the next assistant turn, the tools (OpenAI's list) given to the template."""
        return str(
            _environment()
            .from_string(self.source)
            .render(
                messages=list(messages),
                tools=list(tools) if tools else None,
                add_generation_prompt=True,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
            )
        )

    def knows_tools(self) -> bool:
        """minja's ``supports_tools`` probe: rendering a tool puts its name in the prompt."""
        return _renders_tools(self)

    def prompt_for(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None, parallel: bool
    ) -> TemplatePrompt:
        """What llama-server ``--jinja`` sends the model for a chat request: the template's own tool prompt,
        or, for a template that does not render tools, the generic format's system lines and grammar."""
        if not tools or self.knows_tools():
            return TemplatePrompt(self.render(messages, tools))
        tools_text = TOOLS_POLYFILL + json.dumps(list(tools), indent=2, ensure_ascii=False)
        adjusted = with_system(with_system(messages, GENERIC_INSTRUCTION), tools_text)
        return TemplatePrompt(self.render(adjusted, tools), generic_grammar(tools, parallel), generic=True)


@functools.lru_cache(maxsize=8)
def _renders_tools(template: ChatTemplate) -> bool:
    try:
        return "some_tool" in template.render([{"role": "user", "content": "Hey"}], [_PROBE_TOOL])
    except TemplateError:
        return False


def with_system(messages: Sequence[Mapping[str, Any]], text: str) -> list[dict[str, Any]]:
    """minja's ``add_system``: appended to a leading system message after a blank line, else a new first one."""
    adjusted = [dict(m) for m in messages]
    if adjusted and adjusted[0].get("role") == "system":
        adjusted[0]["content"] = f"{adjusted[0].get('content') or ''}\n\n{text}"
        return adjusted
    return [{"role": "system", "content": text}, *adjusted]


def generic_schema(tools: Sequence[Mapping[str, Any]], parallel: bool) -> dict[str, Any]:
    """The JSON Schema llama.cpp's generic format decodes under (``tool_choice`` auto)."""
    calls = []
    for tool in tools:
        function = tool["function"]
        call: dict[str, Any] = {
            "type": "object",
            "properties": {
                "name": {"type": "string", "const": function["name"]},
                "arguments": function.get("parameters") or {"type": "object"},
            },
            "required": ["name", "arguments"],
        }
        if "description" in function:
            call["description"] = function["description"]
        if parallel:
            call["properties"]["id"] = {"type": "string", "minLength": 4}
            call["required"].append("id")
        calls.append(call)
    one = calls[0] if len(calls) == 1 else {"anyOf": calls}
    if parallel:
        tool_call = {
            "type": "object",
            "properties": {"tool_calls": {"type": "array", "items": one, "minItems": 1}},
            "required": ["tool_calls"],
        }
    else:
        tool_call = {"type": "object", "properties": {"tool_call": one}, "required": ["tool_call"]}
    response = {"type": "object", "properties": {"response": {"type": "string"}}, "required": ["response"]}
    return {"anyOf": [tool_call, response]}


def generic_grammar(tools: Sequence[Mapping[str, Any]], parallel: bool) -> str:
    """llama.cpp's JSON-Schema-to-GBNF conversion of ``generic_schema`` (llama-cpp-python carries its port)."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return str(json_schema_to_gbnf(json.dumps(generic_schema(tools, parallel))))


@dataclass(frozen=True, slots=True)
class TemplatePrompt:
    """A rendered prompt, the grammar the server must decode it under (the generic format's), and how the
    completion is read back."""

    prompt: str
    grammar: str | None = None
    generic: bool = False

    def parse(self, text: str) -> Parsed:
        """The completion as llama-server reads it for this prompt's format."""
        return parse_generic(text) if self.generic else parse_hermes(text)


class TemplateError(Exception):
    """The template called ``raise_exception``."""


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _tojson(value: Any, indent: int | None = None, separators: Any = None, sort_keys: bool = False) -> str:
    # Hugging Face's: plain json.dumps, not jinja2's HTML-escaping tojson.
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)


def _environment() -> Any:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


# llama.cpp common/chat.cpp, common_chat_parse_hermes_2_pro's open_regex, group for group.
_OPEN = re.compile(
    r"(?:(```(?:xml|json)?\n\s*)?"
    r"(<tool_call>|<function_call>|<tool>|<tools>|<response>|<json>|<xml>|<JSON>)?"
    r"(\s*\{\s*\"name\"))"
    r"|<function=([^>]+)>"
    r"|<function name=\"([^\"]+)\">"
)
_SPACES = re.compile(r"\s*")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class Parsed:
    """A completion read as llama-server would answer it: content (``None`` when empty beside calls)
    and the calls as ``(name, arguments JSON)``."""

    content: str | None
    calls: tuple[tuple[str, str], ...] = ()


class _Incomplete(Exception):
    """llama.cpp's common_chat_msg_partial_exception: on a final answer, every call is dropped."""


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))  # nlohmann's compact dump()


def _arguments(value: Any) -> str:
    # try_consume_json_with_dumped_args turns the arguments into their JSON text before add_tool_call
    return _dump(value)


def _json_at(text: str, pos: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise _Incomplete("failed to parse tool call") from exc


def _expect(text: str, pos: int, literal: str) -> int:
    pos = _SPACES.match(text, pos).end()  # type: ignore[union-attr]
    if not text.startswith(literal, pos):
        raise _Incomplete(f"expected {literal!r}")
    return _SPACES.match(text, pos + len(literal)).end()  # type: ignore[union-attr]


def _parse(text: str) -> Parsed:
    content: list[str] = []
    calls: list[tuple[str, str]] = []
    pos = 0
    while match := _OPEN.search(text, pos):
        content.append(text[pos : match.start()])
        fence_end = "```" if match.group(1) else ""
        if match.group(3) is not None:
            tag = match.group(2)
            close = "</" + tag[1:] if tag else ""
            value, pos = _json_at(text, _SPACES.match(text, match.start(3)).end())  # type: ignore[union-attr]
            name = value.get("name") if isinstance(value, dict) else None
            if not isinstance(name, str) or not name:
                raise _Incomplete("incomplete tool call")
            calls.append((name, _arguments(value["arguments"]) if "arguments" in value else ""))
        else:
            name = match.group(4) or match.group(5)
            close = "</function>"
            start = _SPACES.match(text, match.end()).end()  # type: ignore[union-attr]
            try:
                value, pos = _DECODER.raw_decode(text, start)
            except json.JSONDecodeError as exc:
                if exc.pos >= len(text):
                    raise _Incomplete("incomplete tool call") from exc  # cut short: JSON that could go on
                pos = match.end()  # not JSON: llama.cpp drops the tag and looks for the next call
                continue
            calls.append((name, _arguments(value)))
        pos = _expect(text, pos, close)
        if fence_end:
            pos = _expect(text, pos, fence_end)
    content.append(text[pos:])
    joined = "".join(content)
    if calls:
        joined = joined.strip()
    return Parsed(joined or (None if calls else joined), tuple(calls))


def parse_hermes(text: str) -> Parsed:
    """A final (non-streamed) completion as llama.cpp's Hermes 2 Pro parser reads it."""
    try:
        return _parse(text)
    except _Incomplete:
        return Parsed(text)


def parse_generic(text: str) -> Parsed:
    """``common_chat_parse_generic``: one JSON object with ``tool_calls``, ``tool_call`` or ``response``;
    anything else (cut short, text after it, another shape) is all content."""
    try:
        value, end = _DECODER.raw_decode(text, _SPACES.match(text).end())  # type: ignore[union-attr]
    except json.JSONDecodeError:
        return Parsed(text)
    if text[end:].strip() or not isinstance(value, dict):
        return Parsed(text)
    if "tool_calls" in value:
        calls = _generic_calls(value["tool_calls"])
    elif "tool_call" in value:
        calls = _generic_calls([value["tool_call"]])
    elif "response" in value:
        response = value["response"]
        return Parsed(response if isinstance(response, str) else json.dumps(response, indent=2, ensure_ascii=False))
    else:
        return Parsed(text)
    return Parsed(None, calls) if calls else Parsed(text)


def _generic_calls(items: Any) -> tuple[tuple[str, str], ...]:
    """``add_tool_calls``: every item needs a name; one without makes the whole answer content (empty here)."""
    if not isinstance(items, list):
        return ()
    calls = []
    for item in items:
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            return ()
        calls.append((name, _arguments(item["arguments"]) if "arguments" in item else ""))
    return tuple(calls)
