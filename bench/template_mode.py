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

What is not emulated: the ``<think>`` reasoning split (Qwen2.5-Coder does not think) and the lazy
grammar llama-server adds once a call starts (this mode decodes unconstrained, as Ollama does).

The template comes straight out of the GGUF file's metadata (``read_gguf_metadata``, standard
library only, no weights read) and is rendered with jinja2 in a sandbox, the way Hugging Face's
``apply_chat_template`` does (``trim_blocks``, ``lstrip_blocks``, ``tojson`` without HTML escaping,
``raise_exception``, ``strftime_now``).
"""

from __future__ import annotations

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
