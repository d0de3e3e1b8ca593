"""The Responses API end to end: the real OpenAI SDK (``responses.create``, ``stream=True``,
``responses.stream``) → the proxy → a scripted chat-completions upstream, in every emulated format
and native; the second turn with ``function_call_output`` items and with ``previous_response_id``;
the store endpoints; bad input; the raw event stream.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from openai import AsyncOpenAI

from tests.fakes import FakeUpstream, Reply, chunk, completion, sse, text_stream
from tests.test_emulation import FORMAT_NAMES, call_text, pieces

USAGE = {"prompt_tokens": 21, "completion_tokens": 5, "total_tokens": 26}
TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]
QUESTION = "What is the weather in Paris?"
MODES = [*FORMAT_NAMES, "native"]
WAYS = ["create", "stream", "helper"]


def rules(mode: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"match": "*", "upstream": "up", "tool_mode": mode, **extra}]


def client(proxy: Any) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=proxy.base_url, api_key="unused", max_retries=0)


def native_call_stream() -> list[str]:
    first = {"index": 0, "id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    return [
        sse(chunk({"role": "assistant", "content": None, "tool_calls": [first]})),
        sse(chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]})),
        sse(chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty":"Paris"}'}}]})),
        sse(chunk({}, "tool_calls")),
        sse({**chunk({}), "choices": [], "usage": USAGE}),
        sse("[DONE]"),
    ]


def call_reply(mode: str, stream: bool) -> Reply:
    if mode != "native":
        return Reply(pieces=text_stream(pieces(call_text(mode)), usage=USAGE))
    if stream:
        return Reply(pieces=native_call_stream())
    call = {"id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    return Reply(body=completion(None, tool_calls=[call], finish="tool_calls", usage=USAGE))


def text_reply(mode: str, stream: bool, text: str = "It is sunny in Paris.") -> Reply:
    if mode == "native" and not stream:
        return Reply(body=completion(text, usage=USAGE))
    return Reply(pieces=text_stream(pieces(text, 5), usage=USAGE))


def check_events(events: list[dict[str, Any]]) -> None:
    """Contiguous sequence numbers, the opening pair, one terminal event at the end, balanced items."""
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
    terminal = {"response.completed", "response.incomplete", "response.failed"}
    assert events[-1]["type"] in terminal and not any(e["type"] in terminal for e in events[:-1])
    added = [e["output_index"] for e in events if e["type"] == "response.output_item.added"]
    done = [e["output_index"] for e in events if e["type"] == "response.output_item.done"]
    assert added == list(range(len(added))) and set(done) <= set(added)
    if events[-1]["type"] != "response.failed":
        assert sorted(done) == added
    closed: set[int] = set()
    for event in events:
        if event["type"].endswith(".delta"):
            assert event["output_index"] in added[: event["output_index"] + 1] and event["output_index"] not in closed
        if event["type"] == "response.output_item.done":
            closed.add(event["output_index"])


async def respond(proxy: Any, way: str, **params: Any) -> dict[str, Any]:
    """One request through the SDK, the way given; the final Response as a dict."""
    async with client(proxy) as c:
        if way == "create":
            return (await c.responses.create(**params)).model_dump()
        if way == "stream":
            events = [e.model_dump() async for e in await c.responses.create(**params, stream=True)]
            check_events(events)
            return dict(events[-1]["response"])
        async with c.responses.stream(**params) as stream:
            events = [e.model_dump(warnings=False) async for e in stream]
            final = await stream.get_final_response()
        check_events(events)
        assert final.output_text == text_of(events[-1]["response"])
        # the SDK's own ParsedResponse generics warn when dumped (its issue, not the data's)
        return final.model_dump(warnings=False)


def calls_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for item in response["output"] if item["type"] == "function_call"]


def text_of(response: dict[str, Any]) -> str:
    return "".join(
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("way", WAYS)
async def test_call_then_result_finishes_in_text(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, mode: str, way: str
) -> None:
    stream = way != "create"
    fake_upstream.script(call_reply(mode, stream), text_reply(mode, stream))
    proxy = await start_proxy(models=rules(mode), data_dir=tmp_path)
    first = await respond(proxy, way, model="m", input=QUESTION, tools=TOOLS, instructions="Be brief.")
    assert first["id"].startswith("resp_") and first["status"] == "completed"
    calls = calls_of(first)
    assert len(calls) == 1 and calls[0]["name"] == "get_weather" and calls[0]["id"].startswith("fc_")
    assert json.loads(calls[0]["arguments"]) == {"city": "Paris"}
    assert first["usage"]["input_tokens"] == 21 and first["usage"]["total_tokens"] == 26
    call = calls[0]
    second_input = [
        {"role": "user", "content": QUESTION},
        {"type": "function_call", "call_id": call["call_id"], "name": call["name"], "arguments": call["arguments"]},
        {"type": "function_call_output", "call_id": call["call_id"], "output": '{"temp_c": 21}'},
    ]
    second = await respond(proxy, way, model="m", input=second_input, tools=TOOLS)
    assert second["status"] == "completed" and not calls_of(second)
    assert text_of(second) == "It is sunny in Paris."
    sent = fake_upstream.requests[1]
    assert "tools" not in sent if mode != "native" else sent["tools"][0]["function"]["name"] == "get_weather"
    assert any('{"temp_c": 21}' in str(message["content"]) for message in sent["messages"])
    if mode == "native":
        assert sent["messages"][1]["tool_calls"][0]["id"] == call["call_id"]
        assert sent["messages"][2] == {"role": "tool", "tool_call_id": call["call_id"], "content": '{"temp_c": 21}'}
    assert fake_upstream.requests[0]["messages"][0]["role"] == "system"
    assert "Be brief." in fake_upstream.requests[0]["messages"][0]["content"]


@pytest.mark.parametrize("mode", ["hermes", "native"])
@pytest.mark.parametrize("way", WAYS)
async def test_previous_response_id_continues(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, mode: str, way: str
) -> None:
    stream = way != "create"
    fake_upstream.script(call_reply(mode, stream), text_reply(mode, stream))
    proxy = await start_proxy(models=rules(mode), data_dir=tmp_path)
    first = await respond(proxy, way, model="m", input=QUESTION, tools=TOOLS)
    call = calls_of(first)[0]
    second = await respond(
        proxy,
        way,
        model="m",
        previous_response_id=first["id"],
        tools=TOOLS,
        input=[{"type": "function_call_output", "call_id": call["call_id"], "output": "21 C"}],
    )
    assert text_of(second) == "It is sunny in Paris."
    assert second["previous_response_id"] == first["id"]
    history = "".join(str(message["content"]) for message in fake_upstream.requests[1]["messages"])
    assert QUESTION in history and "21 C" in history
    async with client(proxy) as c:
        got = await c.responses.retrieve(second["id"])
        assert got.id == second["id"] and got.output_text == "It is sunny in Paris."
        items = await c.responses.input_items.list(second["id"])
        assert [i.type for i in items.data] == ["function_call_output"]
        first_items = await c.responses.input_items.list(first["id"], order="asc")
        assert first_items.data[0].type == "message"
        await c.responses.delete(first["id"])
        with pytest.raises(openai.NotFoundError):
            await c.responses.retrieve(first["id"])
        with pytest.raises(openai.NotFoundError) as err:
            await c.responses.create(model="m", previous_response_id=first["id"], input="and now?")
    assert err.value.body["param"] == "previous_response_id"  # type: ignore[index]


async def post(proxy: Any, body: dict[str, Any]) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.post(proxy.base_url + "/responses", json=body) as resp:
        text = await resp.text()
        return resp.status, (json.loads(text) if resp.content_type == "application/json" else text)


def sse_events(text: str) -> list[dict[str, Any]]:
    events = []
    for block in text.split("\n\n"):
        lines = block.strip().splitlines()
        if not lines:
            continue
        name = lines[0].removeprefix("event: ")
        payload = json.loads("".join(line.removeprefix("data: ") for line in lines[1:]))
        assert payload["type"] == name
        events.append(payload)
    return events


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m", "input": "hi", "tools": [{"type": "web_search_preview"}]}, "tools[0].type"),
        ({"model": "m", "input": "hi", "tools": [{"type": "function", "name": "bad name!"}]}, "tools[0].name"),
        ({"model": "m", "input": [{"type": "computer_call_output", "call_id": "x"}]}, "input[0].type"),
        ({"model": "m", "input": [{"role": "robot", "content": "hi"}]}, "input[0].role"),
        ({"model": "m", "input": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "input[0].content[0].type"),
        (
            {
                "model": "m",
                "input": [
                    {"role": "user", "content": "hi"},
                    {"type": "function_call_output", "call_id": "nope", "output": "x"},
                ],
            },
            "input[1].call_id",
        ),
        ({"model": "m", "input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input[0].call_id"),
        ({"model": "m", "input": 42}, "input"),
        ({"model": "m"}, "input"),
        ({"input": "hi"}, "model"),
        ({"model": "m", "input": "hi", "tool_choice": {"type": "file_search"}}, "tool_choice"),
        ({"model": "m", "input": "hi", "temperature": 7}, "temperature"),
        ({"model": "m", "input": "hi", "text": {"format": {"type": "yaml"}}}, "text.format.type"),
    ],
)
async def test_bad_input_is_a_400_naming_the_field(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, body: dict[str, Any], param: str
) -> None:
    proxy = await start_proxy(models=rules("hermes"), data_dir=tmp_path)
    status, answer = await post(proxy, body)
    assert status == 400, answer
    assert answer["error"]["param"] == param and answer["error"]["type"] == "invalid_request_error"
    assert fake_upstream.requests == [] and not (tmp_path / "responses.sqlite3").exists()


async def test_unknown_previous_response_is_a_404(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    proxy = await start_proxy(models=rules("hermes"), data_dir=tmp_path)
    status, answer = await post(proxy, {"model": "m", "input": "hi", "previous_response_id": "resp_nope"})
    assert status == 404 and answer["error"]["param"] == "previous_response_id"
    async with aiohttp.ClientSession() as session:
        for method, path in (
            ("GET", "/responses/resp_nope"),
            ("DELETE", "/responses/resp_nope"),
            ("GET", "/responses/resp_nope/input_items"),
        ):
            async with session.request(method, proxy.base_url + path) as resp:
                assert resp.status == 404 and (await resp.json())["error"]["code"] == "response_not_found"


async def test_store_false_keeps_nothing(start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path) -> None:
    fake_upstream.script(text_reply("native", False))  # no tools: served natively
    proxy = await start_proxy(models=rules("hermes"), data_dir=tmp_path)
    status, answer = await post(proxy, {"model": "m", "input": "hi", "store": False})
    assert status == 200, answer
    assert answer["store"] is False
    async with aiohttp.ClientSession() as session, session.get(f"{proxy.base_url}/responses/{answer['id']}") as r:
        assert r.status == 404


async def test_expired_response_is_gone(start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path) -> None:
    fake_upstream.script(text_reply("native", False))
    proxy = await start_proxy(models=rules("hermes"), data_dir=tmp_path, responses_ttl=0.01)
    status, answer = await post(proxy, {"model": "m", "input": "hi"})
    assert status == 200
    import asyncio

    await asyncio.sleep(0.05)
    status, again = await post(proxy, {"model": "m", "input": "more", "previous_response_id": answer["id"]})
    assert status == 404, again


@pytest.mark.parametrize("stream", [False, True])
async def test_length_is_incomplete(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, stream: bool
) -> None:
    fake_upstream.script(Reply(pieces=text_stream(["It is", " sun"], finish="length")))
    proxy = await start_proxy(models=rules("react"), data_dir=tmp_path)
    status, answer = await post(
        proxy, {"model": "m", "input": "hi", "max_output_tokens": 2, "stream": stream, "tools": TOOLS}
    )
    assert status == 200
    if stream:
        events = sse_events(answer)
        check_events(events)
        assert events[-1]["type"] == "response.incomplete"
        answer = events[-1]["response"]
    assert answer["status"] == "incomplete" and answer["incomplete_details"] == {"reason": "max_output_tokens"}
    assert fake_upstream.requests[0]["max_tokens"] == 2


async def test_event_stream_shape(start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path) -> None:
    text = "<think>cold?</think>Let me check." + call_text("hermes")
    fake_upstream.script(Reply(pieces=text_stream(pieces(text), usage=USAGE)))
    proxy = await start_proxy(models=rules("hermes"), data_dir=tmp_path)
    status, raw = await post(proxy, {"model": "m", "input": QUESTION, "tools": TOOLS, "stream": True})
    assert status == 200
    events = sse_events(raw)
    check_events(events)
    kinds = [e["type"] for e in events]
    assert kinds[2] == "response.output_item.added" and events[2]["item"]["type"] == "reasoning"
    assert "response.reasoning_text.delta" in kinds and "response.output_text.delta" in kinds
    assert kinds[-3:] == ["response.function_call_arguments.done", "response.output_item.done", "response.completed"]
    final = events[-1]["response"]
    assert [item["type"] for item in final["output"]] == ["reasoning", "message", "function_call"]
    assert final["output"][1]["content"][0]["text"] == "Let me check."
    assert final["output"][0]["content"][0]["text"] == "cold?"
    assert all(item["id"].startswith(p) for item, p in zip(final["output"], ("rs_", "msg_", "fc_"), strict=True))


async def test_failure_mid_stream_ends_with_error_and_failed(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    broken = [
        sse(chunk({"role": "assistant", "content": ""})),
        sse(chunk({"content": "Hel"})),
        sse({"error": {"message": "model crashed"}}),
    ]
    fake_upstream.script(Reply(pieces=broken))
    proxy = await start_proxy(models=rules("native"), data_dir=tmp_path)
    status, raw = await post(proxy, {"model": "m", "input": "hi", "stream": True})
    assert status == 200
    events = sse_events(raw)
    check_events(events)
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert events[-2]["code"] == "upstream_protocol_error"
    assert events[-1]["response"]["status"] == "failed"
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{proxy.base_url}/responses/{events[0]['response']['id']}") as resp,
    ):
        assert resp.status == 404  # failed responses are not stored


async def test_upstream_error_before_output_is_an_http_error(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    fake_upstream.script(Reply(status=429, body={"error": {"message": "slow down", "type": "rate_limit"}}))
    proxy = await start_proxy(models=rules("hermes"), data_dir=tmp_path)
    async with client(proxy) as c:
        with pytest.raises(openai.RateLimitError):
            await c.responses.create(model="m", input="hi", stream=True)


async def test_auto_mode_falls_back(start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path) -> None:
    rejection = Reply(status=400, body={"error": {"message": "model does not support tools"}})
    fake_upstream.script(rejection, Reply(pieces=text_stream(pieces(call_text("react")))))
    proxy = await start_proxy(models=rules("auto", fallback_format="react"), data_dir=tmp_path)
    answer = await respond(proxy, "helper", model="m", input=QUESTION, tools=TOOLS)
    assert calls_of(answer)[0]["name"] == "get_weather"
    assert "tools" in fake_upstream.requests[0] and "tools" not in fake_upstream.requests[1]


async def test_required_and_options_reach_the_upstream(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    fake_upstream.script(Reply(body=completion("{}")))
    proxy = await start_proxy(models=rules("native", upstream_model="real"), data_dir=tmp_path)
    schema = {"type": "object", "properties": {}}
    async with client(proxy) as c:
        await c.responses.create(
            model="m",
            input="hi",
            tools=TOOLS,
            tool_choice={"type": "function", "name": "get_weather"},
            parallel_tool_calls=False,
            temperature=0.2,
            top_p=0.9,
            metadata={"k": "v"},
            text={"format": {"type": "json_schema", "name": "out", "schema": schema}},
        )
    sent = fake_upstream.requests[0]
    assert sent["model"] == "real" and sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent["parallel_tool_calls"] is False and sent["temperature"] == 0.2 and sent["top_p"] == 0.9
    assert sent["response_format"] == {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}}
    assert "metadata" not in sent and "store" not in sent


async def test_responses_passthrough_rule(start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path) -> None:
    fake_upstream.script(Reply(body={"id": "resp_up", "object": "response", "output": []}))
    proxy = await start_proxy(
        models=rules("native", upstream_model="real", responses_passthrough=True), data_dir=tmp_path
    )
    status, answer = await post(proxy, {"model": "m", "input": "hi", "tools": [{"type": "web_search_preview"}]})
    assert status == 200 and answer["id"] == "resp_up"
    assert fake_upstream.paths == ["/v1/responses"]
    assert fake_upstream.requests[0] == {"model": "real", "input": "hi", "tools": [{"type": "web_search_preview"}]}


async def test_metrics_and_log_label_the_endpoint(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake_upstream.script(call_reply("hermes", True))
    proxy = await start_proxy(models=rules("hermes"), data_dir=tmp_path)
    with caplog.at_level("INFO", logger="toolshim.access"):
        await respond(proxy, "stream", model="m", input=QUESTION, tools=TOOLS)
    metrics = proxy.metrics
    assert metrics.endpoint_requests.labels("responses", "2xx")._value.get() == 1
    assert metrics.endpoint_requests.labels("chat", "2xx")._value.get() == 0
    assert metrics.requests.labels("*", "hermes", "true", "2xx")._value.get() == 1
    assert metrics.tool_calls.labels("*", "hermes")._value.get() == 1
    fields = [r.fields for r in caplog.records if getattr(r, "fields", None)]  # type: ignore[attr-defined]
    assert fields and fields[-1]["endpoint"] == "responses" and fields[-1]["path"] == "/v1/responses"


@pytest.mark.parametrize("way", ["create", "stream"])
async def test_item_references_resolve_from_the_store(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, way: str
) -> None:
    text = "Let me check." + call_text("hermes")
    fake_upstream.script(Reply(pieces=text_stream(pieces(text))), text_reply("hermes", True))
    proxy = await start_proxy(models=rules("hermes"), data_dir=tmp_path)
    first = await respond(proxy, way, model="m", input=QUESTION, tools=TOOLS)
    message, call = first["output"]
    assert message["type"] == "message" and call["type"] == "function_call"
    second = await respond(
        proxy,
        way,
        model="m",
        tools=TOOLS,
        input=[
            {"role": "user", "content": QUESTION},
            {"type": "item_reference", "id": message["id"]},
            {"type": "item_reference", "id": call["id"]},
            {"type": "function_call_output", "call_id": call["call_id"], "output": "21 C"},
        ],
    )
    assert text_of(second) == "It is sunny in Paris."
    history = "".join(str(m["content"]) for m in fake_upstream.requests[1]["messages"])
    assert "Let me check." in history and "21 C" in history
    status, answer = await post(proxy, {"model": "m", "input": [{"type": "item_reference", "id": "msg_nope"}]})
    assert status == 400 and answer["error"]["param"] == "input[0].id"


async def test_other_tools_can_be_left_out_by_rule(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    fake_upstream.script(Reply(pieces=text_stream(pieces(call_text("hermes")))))
    proxy = await start_proxy(models=rules("hermes", responses_other_tools="drop"), data_dir=tmp_path)
    codex_like = [
        *TOOLS,
        {"type": "web_search", "external_web_access": False},
        {"type": "namespace", "name": "agents", "tools": [{"type": "function", "name": "spawn"}]},
    ]
    answer = await respond(proxy, "create", model="m", input=QUESTION, tools=codex_like)
    assert calls_of(answer)[0]["name"] == "get_weather"
    assert [tool["name"] for tool in answer["tools"]] == ["get_weather"]
    assert "spawn" not in fake_upstream.requests[0]["messages"][0]["content"]


async def test_a_fresh_data_directory_is_created_on_the_first_stored_response(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    """A fresh install has no data directory: the first stored response creates it, nested or not."""
    data_dir = tmp_path / "fresh" / "nested"
    fake_upstream.script(text_reply("native", False))
    proxy = await start_proxy(models=rules("hermes"), data_dir=data_dir)
    status, answer = await post(proxy, {"model": "m", "input": "hi"})
    assert status == 200, answer
    assert (data_dir / "responses.sqlite3").is_file()
    async with aiohttp.ClientSession() as session, session.get(f"{proxy.base_url}/responses/{answer['id']}") as r:
        assert r.status == 200 and (await r.json())["id"] == answer["id"]


async def test_a_store_that_cannot_be_created_is_a_500_without_a_retry_hint_or_a_path(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The data directory would sit under a file: the client is told not to retry, the log says where."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    fake_upstream.script(text_reply("native", False), text_reply("native", False))
    proxy = await start_proxy(models=rules("hermes"), data_dir=blocker / "data")
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{proxy.base_url}/responses", json={"model": "m", "input": "hi"}) as resp,
    ):
        body = await resp.json()
        assert resp.status == 500 and resp.headers["x-should-retry"] == "false"
    assert body["error"]["code"] == "store_unavailable" and str(tmp_path) not in body["error"]["message"]
    assert any("TOOLSHIM_DATA_DIR" in r.getMessage() and str(blocker) in r.getMessage() for r in caplog.records)
    status, answer = await post(proxy, {"model": "m", "input": "hi", "store": False})
    assert status == 200, answer
