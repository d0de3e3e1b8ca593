"""Amplification and odd input (issue 16, items 2 and 3): every refusal is OpenAI-shaped, never a 500.

Compressed request bodies are refused unread (415); a request past a count or depth limit is a 400
naming the field and the setting; a malformed tool schema is a 400 whose ``param`` points into it,
for chat and Responses, native and emulated; a schema that passes is safe in every format (prompt
rendering, argument validation). Upstream events larger than ``max_upstream_event_bytes`` end a
stream with an error event (a 502 before the first byte or for a whole body), and the proxy stops
reading at the cap: an endless line is dropped, not buffered.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from toolshim.formats import FORMATS, ToolCallRecord

from tests.fakes import FakeUpstream, Reply, chunk, completion, sse, text_stream
from tests.test_core_errors import assert_error, post, read_stream

USER = [{"role": "user", "content": "hi"}]
CHAT = {"model": "m", "messages": USER}
EMULATED = [{"match": "*", "upstream": "up", "tool_mode": "react"}]


def tool(parameters: Any, name: str = "f") -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def responses_tool(parameters: Any, name: str = "f") -> dict[str, Any]:
    return {"type": "function", "name": name, "parameters": parameters}


# ---- compressed bodies -------------------------------------------------------------------------


@pytest.mark.parametrize(("encoding", "compress"), [("gzip", gzip.compress), ("deflate", zlib.compress)])
@pytest.mark.parametrize("path", ["/chat/completions", "/responses", "/embeddings"])
async def test_compressed_body_is_refused_unread(
    start_proxy: Any, fake_upstream: FakeUpstream, encoding: str, compress: Any, path: str
) -> None:
    proxy = await start_proxy()
    body = compress(json.dumps({**CHAT, "input": "hi"}).encode())
    headers = {"Content-Encoding": encoding, "Content-Type": "application/json"}
    status, answer = await post(proxy.base_url + path, data=body, headers=headers)
    assert status == 415
    err = assert_error(answer, code="unsupported_content_encoding", type_="invalid_request_error")
    assert encoding in err["message"]
    assert fake_upstream.requests == []


async def test_identity_encoding_is_served(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    proxy = await start_proxy()
    headers = {"Content-Encoding": "identity", "Content-Type": "application/json"}
    status, _ = await post(proxy.base_url + "/chat/completions", data=json.dumps(CHAT), headers=headers)
    assert status == 200


async def test_the_server_does_not_inflate_request_bodies(start_proxy: Any, caplog: Any) -> None:
    """The listener runs with ``auto_decompress`` off: the refused body is drained as raw bytes. With
    it on, aiohttp inflates what the handler left unread (the lingering read after the answer): a
    gzip bomb would cost its full size in CPU, and a body that is not gzip breaks the connection."""
    proxy = await start_proxy()
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as session:
        async with session.post(proxy.base_url + "/chat/completions", data=b"not gzip" * 100, headers=headers) as resp:
            assert resp.status == 415
            assert resp.content_type == "application/json"
            assert_error(await resp.json(), code="unsupported_content_encoding", type_="invalid_request_error")
        async with session.get(proxy.url + "/healthz") as resp:
            assert resp.status == 200
    assert not [r for r in caplog.records if r.name.startswith("aiohttp")], caplog.records


# ---- counts and depths -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "param", "setting"),
    [
        ("/chat/completions", {**CHAT, "messages": USER * 4}, "messages", "TOOLSHIM_MAX_MESSAGES"),
        ("/responses", {"model": "m", "input": USER * 4}, "input", "TOOLSHIM_MAX_MESSAGES"),
        ("/chat/completions", {**CHAT, "tools": [tool({}, f"t{i}") for i in range(3)]}, "tools", "TOOLSHIM_MAX_TOOLS"),
        (
            "/chat/completions",
            {**CHAT, "functions": [{"name": f"t{i}"} for i in range(3)]},
            "functions",
            "TOOLSHIM_MAX_TOOLS",
        ),
        (
            "/responses",
            {"model": "m", "input": "hi", "tools": [responses_tool({}, f"t{i}") for i in range(3)]},
            "tools",
            "TOOLSHIM_MAX_TOOLS",
        ),
    ],
)
async def test_counts_past_the_limit_are_a_400_naming_it(
    start_proxy: Any, fake_upstream: FakeUpstream, path: str, body: dict[str, Any], param: str, setting: str
) -> None:
    proxy = await start_proxy(max_messages=3, max_tools=2)
    status, answer = await post(proxy.base_url + path, json=body)
    assert status == 400
    err = assert_error(answer, code="too_many_items", type_="invalid_request_error", param=param)
    assert setting in err["message"] and "limit is" in err["message"]
    assert fake_upstream.requests == []


async def test_counts_at_the_limit_are_served(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    proxy = await start_proxy(max_messages=3, max_tools=2)
    body = {**CHAT, "messages": USER * 3, "tools": [tool({}, "a"), tool({}, "b")]}
    status, _ = await post(proxy.base_url + "/chat/completions", json=body)
    assert status == 200


def nested_schema(depth: int) -> dict[str, Any]:
    """An object schema whose JSON nests ``depth`` levels (each property level adds two)."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range((depth - 1) // 2):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        (
            "/chat/completions",
            {**CHAT, "tools": [tool({}, "ok"), tool(nested_schema(41))]},
            "tools[1].function.parameters",
        ),
        (
            "/chat/completions",
            {**CHAT, "functions": [{"name": "f", "parameters": nested_schema(41)}]},
            "functions[0].parameters",
        ),
        (
            "/responses",
            {"model": "m", "input": "hi", "tools": [responses_tool(nested_schema(41))]},
            "tools[0].parameters",
        ),
    ],
)
async def test_schema_deeper_than_the_limit_is_a_400(
    start_proxy: Any, fake_upstream: FakeUpstream, path: str, body: dict[str, Any], param: str
) -> None:
    proxy = await start_proxy(max_schema_depth=20)
    status, answer = await post(proxy.base_url + path, json=body)
    assert status == 400
    err = assert_error(answer, code="schema_too_deep", type_="invalid_request_error", param=param)
    assert "TOOLSHIM_MAX_SCHEMA_DEPTH" in err["message"]
    assert fake_upstream.requests == []


async def test_schema_at_the_depth_limit_is_served_emulated(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    proxy = await start_proxy(models=EMULATED, max_schema_depth=21)
    fake_upstream.script(Reply(pieces=text_stream(["Final Answer: done"])))
    status, answer = await post(proxy.base_url + "/chat/completions", json={**CHAT, "tools": [tool(nested_schema(21))]})
    assert status == 200, answer


def nested_list(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("path", ["/chat/completions", "/responses", "/embeddings"])
async def test_body_nested_past_the_json_depth_limit_is_a_400(
    start_proxy: Any, fake_upstream: FakeUpstream, path: str
) -> None:
    """Deeper than any real request, but well inside what the JSON parser takes (and what orjson
    cannot write: 255 levels): refused before anything else reads it."""
    proxy = await start_proxy()
    body = {"model": "m", "input": "hi", "messages": [{"role": "user", "content": nested_list(400)}]}
    status, answer = await post(proxy.base_url + path, json=body)
    assert status == 400
    err = assert_error(answer, code="invalid_request", type_="invalid_request_error")
    assert "TOOLSHIM_MAX_JSON_DEPTH" in err["message"]
    assert fake_upstream.requests == []


async def test_limits_are_settings_from_the_environment() -> None:
    from toolshim.config.settings import load_settings

    env = {
        "TOOLSHIM_MAX_MESSAGES": "5",
        "TOOLSHIM_MAX_TOOLS": "6",
        "TOOLSHIM_MAX_JSON_DEPTH": "40",
        "TOOLSHIM_MAX_SCHEMA_DEPTH": "8",
        "TOOLSHIM_MAX_UPSTREAM_EVENT_BYTES": "4096",
    }
    settings = load_settings(env=env)
    assert (settings.max_messages, settings.max_tools, settings.max_json_depth) == (5, 6, 40)
    assert (settings.max_schema_depth, settings.max_upstream_event_bytes) == (8, 4096)
    defaults = load_settings(env={})
    assert defaults.max_upstream_event_bytes == 32 * 1024 * 1024


# ---- tool schemas --------------------------------------------------------------------------------

BAD_SCHEMAS = [
    ({"type": "object", "properties": [1, 2]}, ".properties"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": 5}, ".required"),
    ({"type": "object", "required": ["a", 3]}, ".required[1]"),
    ({"type": "string"}, ".type"),
    ({"type": "object", "properties": {"a": 5}}, ".properties.a"),
    ({"type": "object", "properties": {"a": {"type": "strin"}}}, ".properties.a.type"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}}, ".properties.a.pattern"),
    ({"type": "object", "properties": {"a": {"enum": 3}}}, ".properties.a.enum"),
    ({"$schema": 5}, ".$schema"),
]
BAD_IDS = [
    "props-list",
    "required-number",
    "required-int",
    "not-object",
    "prop-5",
    "bad-type",
    "bad-regex",
    "enum",
    "dialect",
]


@pytest.mark.parametrize(("schema", "suffix"), BAD_SCHEMAS, ids=BAD_IDS)
@pytest.mark.parametrize("mode", ["native", "react"])
async def test_malformed_schema_is_a_400_pointing_into_it(
    start_proxy: Any, fake_upstream: FakeUpstream, schema: Any, suffix: str, mode: str
) -> None:
    proxy = await start_proxy(models=[{"match": "*", "upstream": "up", "tool_mode": mode}])
    cases = [
        ("/chat/completions", {**CHAT, "tools": [tool({}, "ok"), tool(schema)]}, "tools[1].function.parameters"),
        ("/chat/completions", {**CHAT, "stream": True, "tools": [tool(schema)]}, "tools[0].function.parameters"),
        ("/chat/completions", {**CHAT, "functions": [{"name": "f", "parameters": schema}]}, "functions[0].parameters"),
        ("/responses", {"model": "m", "input": "hi", "tools": [responses_tool(schema)]}, "tools[0].parameters"),
    ]
    for path, body, param in cases:
        status, answer = await post(proxy.base_url + path, json=body)
        assert status == 400, (path, answer)
        assert_error(answer, code="invalid_tool_schema", type_="invalid_request_error", param=param + suffix)
    assert fake_upstream.requests == []


# valid JSON Schemas with every odd corner the renderers and the argument validator must survive
ODD_VALID_SCHEMAS = [
    {"type": "object", "properties": {"a": True, "b": False, "c": {}}, "required": ["a"]},
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"a": {"type": "array", "items": [{"type": "string"}]}},
        "required": ["a"],
    },
    {
        "type": ["object", "null"],
        "properties": {"a": {"anyOf": [{"type": "string"}, True]}, "e": {"enum": [None, {"x": [1]}, 1.5]}},
    },
    {
        "properties": {"a": {"type": "object", "properties": {"b": {"type": "array", "items": {"$ref": "#/$defs/x"}}}}},
        "$defs": {"x": {"type": "integer"}},
        "required": ["a"],
    },
    {"type": "object", "additionalProperties": False, "properties": {"a": {"type": "string", "pattern": "^x+$"}}},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}, "required": ["a"]},
]


@pytest.mark.parametrize("schema", ODD_VALID_SCHEMAS, ids=[f"schema{i}" for i in range(len(ODD_VALID_SCHEMAS))])
async def test_every_schema_that_passes_is_served_in_every_format(
    start_proxy: Any, fake_upstream: FakeUpstream, schema: dict[str, Any]
) -> None:
    """The prompt is rendered and a call validated against the schema in each format: no 500."""
    models = [{"match": f"m-{name}", "upstream": "up", "tool_mode": name} for name in FORMATS]
    proxy = await start_proxy(models=models)
    for name, fmt in FORMATS.items():
        call = fmt.render_calls([ToolCallRecord("call_1", "f", json.dumps({"a": "xx", "b": [1]}))])
        fake_upstream.script(Reply(pieces=text_stream([call])))
        for stream in (False, True):
            body = {**CHAT, "model": f"m-{name}", "stream": stream, "tools": [tool(schema)]}
            status, answer = await post(proxy.base_url + "/chat/completions", json=body)
            assert status == 200, (name, stream, answer)


# ---- upstream events past max_upstream_event_bytes -------------------------------------------------

CAP = 4096
BIG = "x" * (3 * CAP)


def big_event_stream() -> list[str]:
    """Two normal content chunks, then one event over the cap, then a proper end."""
    good = text_stream(["a", "b"])
    return [*good[:3], sse(chunk({"content": BIG})), *good[3:]]


async def test_native_stream_with_an_event_over_the_cap_ends_with_an_error_event(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    proxy = await start_proxy(max_upstream_event_bytes=CAP)
    fake_upstream.script(Reply(pieces=big_event_stream()))
    status, events = await read_stream(proxy.base_url + "/chat/completions", {**CHAT, "stream": True})
    assert status == 200
    assert [e["choices"][0]["delta"].get("content") for e in events[1:3]] == ["a", "b"]
    assert "[DONE]" not in events
    err = assert_error(events[-1], code="upstream_event_too_large", type_="upstream_error")
    assert str(CAP) in err["message"] and "TOOLSHIM_MAX_UPSTREAM_EVENT_BYTES" in err["message"]


async def test_emulated_stream_with_an_event_over_the_cap_ends_with_an_error_event(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    proxy = await start_proxy(models=EMULATED, max_upstream_event_bytes=CAP)
    fake_upstream.script(Reply(pieces=big_event_stream()))
    body = {**CHAT, "stream": True, "tools": [tool({"type": "object"})]}
    status, events = await read_stream(proxy.base_url + "/chat/completions", body)
    assert status == 200
    assert "[DONE]" not in events
    assert_error(events[-1], code="upstream_event_too_large", type_="upstream_error")


async def test_responses_stream_with_an_event_over_the_cap_fails_in_band(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    proxy = await start_proxy(max_upstream_event_bytes=CAP)
    fake_upstream.script(Reply(pieces=big_event_stream()))
    async with aiohttp.ClientSession() as session:
        body = {"model": "m", "input": "hi", "stream": True}
        async with session.post(proxy.base_url + "/responses", json=body) as resp:
            assert resp.status == 200
            raw = (await resp.read()).decode()
    names = [line.removeprefix("event: ") for line in raw.splitlines() if line.startswith("event: ")]
    assert names[-2:] == ["error", "response.failed"], names
    assert "upstream_event_too_large" in raw and "response.completed" not in names


@pytest.mark.parametrize("models", [None, EMULATED], ids=["native", "emulated"])
async def test_non_stream_answer_over_the_cap_is_a_502(
    start_proxy: Any, fake_upstream: FakeUpstream, models: Any
) -> None:
    """A whole native body, or one event of the stream an emulated answer is built from."""
    proxy = await start_proxy(models=models, max_upstream_event_bytes=CAP)
    fake_upstream.script(Reply(body=completion(BIG)) if models is None else Reply(pieces=big_event_stream()))
    body = {**CHAT, "tools": [tool({"type": "object"})]}
    status, answer = await post(proxy.base_url + "/chat/completions", json=body)
    assert status == 502
    assert_error(answer, code="upstream_event_too_large", type_="upstream_error")


async def test_endless_line_is_dropped_at_the_cap_not_read_to_its_end(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    """An upstream that writes one line without end: the proxy stops reading near the cap and closes
    the connection (memory held is bounded by the cap); the stream had not started, so a 502."""
    proxy = await start_proxy(max_upstream_event_bytes=CAP)
    fake_upstream.script(Reply(pieces=["data: " + "x" * 1024] * 200, delay=0.01))
    status, events = await read_stream(proxy.base_url + "/chat/completions", {**CHAT, "stream": True})
    assert status == 502
    assert_error(events[0], code="upstream_event_too_large", type_="upstream_error")
    for _ in range(100):  # the fake notices the closed connection on its next write
        if fake_upstream.disconnected[0]:
            break
        await asyncio.sleep(0.01)
    assert fake_upstream.disconnected[0]
    assert fake_upstream.pieces_sent[0] < 50


async def test_events_up_to_the_cap_are_relayed(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    proxy = await start_proxy(max_upstream_event_bytes=CAP)
    fake_upstream.script(Reply(pieces=text_stream(["y" * (CAP - 300)])))
    status, events = await read_stream(proxy.base_url + "/chat/completions", {**CHAT, "stream": True})
    assert status == 200 and events[-1] == "[DONE]"
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1]) == "y" * (CAP - 300)


# ---- odd input that once gave a 500, on both front ends ------------------------------------------


@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
async def test_json_nested_past_the_parser_is_a_400(start_proxy: Any, fake_upstream: FakeUpstream, path: str) -> None:
    proxy = await start_proxy()
    body = '{"model": "m", "input": ' + "[" * 5000 + "]" * 5000 + "}"
    status, answer = await post(proxy.base_url + path, data=body.encode(), headers={"Content-Type": "application/json"})
    assert status == 400
    assert_error(answer, code="invalid_request", type_="invalid_request_error")
    assert fake_upstream.requests == []


@pytest.mark.parametrize(
    "text",
    [
        b'{"a": 123456789012345678901234567890, "b": -99999999999999999999}',  # past 64 bits: exact ints
        b'{"a": 18446744073709551615, "b": 1.5e300, "c": [1, 2.0, "x"]}',
        b'{"a": NaN, "b": -Infinity}',  # json reads them; orjson refuses
        b'{"a": "\\ud800", "b": "\xc3\xbc"}',  # a lone surrogate escaped, UTF-8 text
        b'{"a": 1, "a": 2}',
        b"\xef\xbb\xbf{}",  # a byte order mark: json skips it, orjson refuses it
        '{"a": "\u00fc", "b": 12345678901234567890123}',  # text, not bytes
    ],
)
def test_the_body_parser_reads_what_json_reads(text: bytes | str) -> None:
    """``jsoncodec.loads`` (orjson where it reads the same) gives exactly ``json.loads``'s value and types."""
    from toolshim.wire.jsoncodec import loads

    got, want = loads(text), json.loads(text)
    assert repr(got) == repr(want)  # repr: NaN compares unequal to itself, and 1 == 1.0


@pytest.mark.parametrize("text", [b"{", b"\xff", b"[" * 5000 + b"]" * 5000])
def test_the_body_parser_refuses_what_json_refuses(text: bytes) -> None:
    from toolshim.wire.jsoncodec import loads

    with pytest.raises((ValueError, RecursionError)) as want:
        json.loads(text)
    with pytest.raises(want.type):
        loads(text)


async def test_an_integer_past_64_bits_reaches_the_upstream_exactly(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    proxy = await start_proxy()
    fake_upstream.script(Reply(body=completion("ok")))
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "seed": 123456789012345678901234567890}'
    status, answer = await post(
        proxy.base_url + "/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    assert status == 200, answer
    assert fake_upstream.requests[0]["seed"] == 123456789012345678901234567890


async def test_lone_surrogate_in_a_responses_body_is_served(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    proxy = await start_proxy(data_dir=tmp_path)
    fake_upstream.script(Reply(body=completion("ok")))
    body = (
        '{"model": "m", "input": "a\\ud800b", "tools": [{"type": "function", "name": "f", "description": "d\\udfff"}]}'
    )
    status, answer = await post(
        proxy.base_url + "/responses", data=body.encode(), headers={"Content-Type": "application/json"}
    )
    assert status == 200, answer
    assert fake_upstream.requests[0]["messages"][-1]["content"] == "a\ud800b"
    async with aiohttp.ClientSession() as session:  # stored (as valid UTF-8) and read back unchanged
        async with session.get(f"{proxy.base_url}/responses/{answer['id']}/input_items") as resp:
            assert resp.status == 200
            items = await resp.json()
    assert items["data"][0]["content"][0]["text"] == "a\ud800b"


async def raw_request(port: int, request: bytes) -> tuple[int, bytes]:
    """One HTTP/1.1 request written byte for byte (clients cannot send non-UTF-8 header bytes)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


@pytest.mark.parametrize(
    ("method", "path", "header"),
    [
        (b"GET", b"/v1/models", b"Authorization: Bearer \xff\xfe"),
        (b"GET", b"/v1/models", b"api-key: k\xff"),
        (b"POST", b"/admin/reload", b"Authorization: Bearer \xff"),
    ],
)
async def test_key_headers_that_are_not_utf8_are_a_401(
    start_proxy: Any, method: bytes, path: bytes, header: bytes
) -> None:
    proxy = await start_proxy(api_keys=("k",), admin_key="adm")
    port = int(proxy.url.rsplit(":", 1)[1])
    request = method + b" " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + header + b"\r\n"
    status, body = await raw_request(port, request + b"Content-Length: 0\r\nConnection: close\r\n\r\n")
    assert status == 401
    assert_error(json.loads(body), code="invalid_api_key", type_="invalid_request_error")


async def test_a_huge_upstream_error_body_is_not_read_whole(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    """Only the start of an error body matters (its message is cut to 2,000 characters)."""
    proxy = await start_proxy()
    fake_upstream.script(Reply(status=500, pieces=["e" * 1024] * 400, delay=0.005, content_type="text/plain"))
    status, answer = await post(proxy.base_url + "/chat/completions", json=CHAT)
    assert status == 500
    assert len(answer["error"]["message"]) <= 2100
    for _ in range(100):
        if fake_upstream.disconnected[0]:
            break
        await asyncio.sleep(0.01)
    assert fake_upstream.disconnected[0] and fake_upstream.pieces_sent[0] < 200
