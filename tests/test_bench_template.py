"""bench/template_mode.py without a model: GGUF metadata, template rendering, llama.cpp's Hermes 2 Pro parsing."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from bench.template_mode import (
    GENERIC_INSTRUCTION,
    TOOLS_POLYFILL,
    ChatTemplate,
    GgufError,
    Parsed,
    TemplateError,
    TemplatePrompt,
    generic_schema,
    parse_generic,
    parse_hermes,
    read_gguf_metadata,
)

TINY = (
    "{%- if tools %}<tools>{% for tool in tools %}{{ tool | tojson }}{% endfor %}</tools>\n{% endif %}"
    "{%- for message in messages %}"
    "{%- if message.role not in ['system', 'user'] %}{{ raise_exception('no ' + message.role) }}{% endif %}"
    "<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TOOLS = [{"type": "function", "function": {"name": "f", "description": "a < b & c", "parameters": {}}}]


def gguf_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(path: Path, template: str) -> None:
    pairs = [
        gguf_string("general.name") + struct.pack("<I", 8) + gguf_string("tiny"),
        gguf_string("tokenizer.ggml.tokens")
        + struct.pack("<IIQ", 9, 8, 3)
        + b"".join(gguf_string(t) for t in ("<s>", "x", "<|im_end|>")),
        gguf_string("tokenizer.ggml.bos_token_id") + struct.pack("<II", 4, 0),
        gguf_string("tokenizer.ggml.eos_token_id") + struct.pack("<II", 4, 2),
        gguf_string("tokenizer.ggml.scores") + struct.pack("<IIQ3f", 9, 6, 3, 0.0, 1.0, 2.0),
        gguf_string("tokenizer.chat_template") + struct.pack("<I", 8) + gguf_string(template),
    ]
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(pairs)) + b"".join(pairs))


def test_the_template_and_special_tokens_come_out_of_the_gguf_metadata(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    write_gguf(path, TINY)
    meta = read_gguf_metadata(path)
    assert meta["general.name"] == "tiny" and meta["tokenizer.ggml.scores"] == [0.0, 1.0, 2.0]
    assert read_gguf_metadata(path, ["tokenizer.chat_template"]) == {"tokenizer.chat_template": TINY}
    template = ChatTemplate.from_gguf(path)
    assert (template.source, template.bos_token, template.eos_token, template.stops) == (
        TINY,
        "<s>",
        "<|im_end|>",
        ("<|im_end|>",),
    )
    path.write_bytes(b"GGML" + path.read_bytes()[4:])
    with pytest.raises(GgufError, match="not a GGUF"):
        read_gguf_metadata(path)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string("cut"))
    with pytest.raises(GgufError, match="cut short"):
        read_gguf_metadata(path)


def test_the_template_renders_the_tools_as_plain_json_and_the_generation_prompt() -> None:
    template = ChatTemplate.with_stops(TINY, eos_token="</s>")
    assert template.stops == ("</s>", "<|im_end|>")
    prompt = template.render([{"role": "user", "content": "hi"}], TOOLS)
    assert prompt == (
        '<tools>{"type": "function", "function": {"name": "f", "description": "a < b & c", "parameters": {}}}</tools>\n'
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert template.render([{"role": "user", "content": "hi"}], []).startswith("<|im_start|>user")
    with pytest.raises(TemplateError, match="no tool"):
        template.render([{"role": "tool", "content": "1"}], None)


def test_the_template_runs_sandboxed() -> None:
    with pytest.raises(Exception, match=r"unsafe|not safely callable|access"):
        ChatTemplate("{{ messages.__class__.__mro__ }}{{ ''.__class__.__subclasses__() }}").render([], None)


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        (
            '<tool_call>\n{"name": "f", "arguments": {"a": 1, "b": "é"}}\n</tool_call>',
            Parsed(None, (("f", '{"a":1,"b":"é"}'),)),
        ),
        (
            'Sure.\n<tool_call>{"name": "f", "arguments": {}}</tool_call>\n'
            '<tool_call>{"name": "g", "arguments": {"x": [1]}}</tool_call>',
            Parsed("Sure.", (("f", "{}"), ("g", '{"x":[1]}'))),
        ),
        ('{"name": "f", "arguments": {"a": 1}}', Parsed(None, (("f", '{"a":1}'),))),  # a bare object
        ('```json\n{"name": "f", "arguments": {}}\n```', Parsed(None, (("f", "{}"),))),
        ('<function_call>{"name": "f", "arguments": {}}</function_call>', Parsed(None, (("f", "{}"),))),
        ('<function=f>{"a": 1}</function>', Parsed(None, (("f", '{"a":1}'),))),
        ('<function name="f">{"a": 1}</function> done', Parsed("done", (("f", '{"a":1}'),))),
        ('<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>', Parsed(None, (("f", '"{\\"a\\": 1}"'),))),
        ('<tool_call>{"name": "f"}</tool_call>', Parsed(None, (("f", ""),))),  # no arguments: llama.cpp sends ""
        (
            '<tool_call>{"name": "f", "arguments": {}}</tool_call>\n```',
            Parsed("```", (("f", "{}"),)),
        ),  # no fence opened
        ("The answer is 42.", Parsed("The answer is 42.")),
        ("", Parsed("")),
    ],
)
def test_completions_parse_as_llama_cpp_reads_them(completion: str, expected: Parsed) -> None:
    assert parse_hermes(completion) == expected


@pytest.mark.parametrize(
    "completion",
    [
        '<tool_call>{"name": "f", "arguments": {"a": 1}}',  # the closing tag is missing
        '<tool_call>{"name": "f", "arguments": {"a": 1}</tool_call>',  # the JSON is cut short
        '<tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>{"name": ',  # one bad call drops them all
        '<tool_call>{"name": "", "arguments": {}}</tool_call>',  # no name
    ],
)
def test_a_call_llama_cpp_cannot_finish_turns_the_whole_completion_into_content(completion: str) -> None:
    assert parse_hermes(completion) == Parsed(completion)


def test_not_json_after_a_function_tag_is_skipped_like_llama_cpp() -> None:
    assert parse_hermes('<function=f>oops <function=g>{"a": 1}</function>') == Parsed("oops", (("g", '{"a":1}'),))


PLAIN = (  # a chat template that knows no tools, like SmolLM2's
    "{%- for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def test_a_template_that_renders_tools_keeps_its_own_prompt_and_decodes_free() -> None:
    template = ChatTemplate.with_stops(TINY, eos_token="<|im_end|>")
    assert template.knows_tools()
    prompt = template.prompt_for([{"role": "user", "content": "hi"}], TOOLS, parallel=True)
    assert prompt == TemplatePrompt(template.render([{"role": "user", "content": "hi"}], TOOLS))
    assert prompt.parse('<tool_call>{"name": "f", "arguments": {}}</tool_call>').calls == (("f", "{}"),)


def test_a_template_without_tools_gets_llama_cpps_generic_format_in_the_system_turn() -> None:
    template = ChatTemplate.with_stops(PLAIN, eos_token="<|im_end|>")
    assert not template.knows_tools()
    messages = [{"role": "user", "content": "Weather in Oslo?"}]
    prompt = template.prompt_for(messages, WEATHER, parallel=False)
    assert prompt.generic and prompt.grammar
    system = prompt.prompt.split("<|im_end|>")[0]
    assert system.startswith(f"<|im_start|>system\n{GENERIC_INSTRUCTION}\n\n{TOOLS_POLYFILL}[\n  {{")
    assert '"name": "get_weather"' in system and prompt.prompt.endswith(
        "Weather in Oslo?<|im_end|>\n<|im_start|>assistant\n"
    )
    with_own = template.prompt_for([{"role": "system", "content": "Be brief."}, *messages], WEATHER, parallel=False)
    assert with_own.prompt.startswith(f"<|im_start|>system\nBe brief.\n\n{GENERIC_INSTRUCTION}\n\n{TOOLS_POLYFILL}")
    assert template.prompt_for(messages, [], parallel=False) == TemplatePrompt(template.render(messages, None))


def test_the_generic_schema_is_one_call_a_list_of_calls_with_ids_or_a_response() -> None:
    single = generic_schema(WEATHER, parallel=False)
    call = single["anyOf"][0]["properties"]["tool_call"]
    assert call["properties"]["name"] == {"type": "string", "const": "get_weather"}
    assert call["properties"]["arguments"] == WEATHER[0]["function"]["parameters"]
    assert single["anyOf"][1] == {
        "type": "object",
        "properties": {"response": {"type": "string"}},
        "required": ["response"],
    }
    both = generic_schema([*WEATHER, *TOOLS], parallel=True)
    items = both["anyOf"][0]["properties"]["tool_calls"]["items"]
    assert [c["properties"]["name"]["const"] for c in items["anyOf"]] == ["get_weather", "f"]
    assert all(c["required"] == ["name", "arguments", "id"] for c in items["anyOf"])


def test_the_generic_grammar_is_llama_cpps_gbnf_for_that_schema() -> None:
    pytest.importorskip("llama_cpp")
    grammar = ChatTemplate.with_stops(PLAIN).prompt_for([], WEATHER, parallel=False).grammar
    assert grammar is not None and "root ::=" in grammar
    assert '"\\"get_weather\\""' in grammar and "response" in grammar


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        (
            '{"tool_call": {"name": "get_weather", "arguments": {"city": "Oslo"}}}',
            Parsed(None, (("get_weather", '{"city":"Oslo"}'),)),
        ),
        (
            ' {"tool_calls": [{"name": "a", "arguments": {}, "id": "1234"}, '
            '{"name": "b", "arguments": {"x": 1}, "id": "5678"}]}\n',
            Parsed(None, (("a", "{}"), ("b", '{"x":1}'))),
        ),
        ('{"response": "It is sunny."}', Parsed("It is sunny.")),
        ('{"response": {"x": 1}}', Parsed('{\n  "x": 1\n}')),
        (
            '{"tool_call": {"name": "get_weather", "arguments": {"city": "Os',
            Parsed('{"tool_call": {"name": "get_weather", "arguments": {"city": "Os'),
        ),
        ('{"tool_call": {"arguments": {}}}', Parsed('{"tool_call": {"arguments": {}}}')),
        ('{"answer": "x"}', Parsed('{"answer": "x"}')),
        ('Sunny. {"response": "x"}', Parsed('Sunny. {"response": "x"}')),
        ('{"response": "x"} and more', Parsed('{"response": "x"} and more')),
    ],
)
def test_generic_completions_parse_as_llama_cpp_reads_them(completion: str, expected: Parsed) -> None:
    assert parse_generic(completion) == expected
    assert TemplatePrompt("", "root ::= x", generic=True).parse(completion) == expected
