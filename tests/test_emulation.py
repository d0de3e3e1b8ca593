"""Emulated tool calling end to end: the real OpenAI SDK → proxy → a scripted upstream.

Model outputs are written in each format's own syntax (``render_calls``), streamed in small
pieces, so every registered format is checked the same way, stream and non-stream.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import aiohttp
import httpx
import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from toolshim.chat.builder import NO_ANSWER_CALL
from toolshim.formats import FORMATS, ToolCallRecord, get_format

from tests.checked import RecordingTransport, checked_openai
from tests.deltas import check_deltas, parse_sse, streamed_calls
from tests.fakes import Reply, text_stream
from tests.formats.tools import OPENAI_TOOLS

WEATHER = [OPENAI_TOOLS["get_weather"]]
ALL_TOOLS = list(OPENAI_TOOLS.values())
FORMAT_NAMES = sorted(FORMATS)
USER = [{"role": "user", "content": "What is the weather in Paris?"}]
CALLED = {"name": "get_weather", "arguments": '{"city": "Paris"}'}


def call_text(fmt: str, name: str = "get_weather", args: dict[str, Any] | None = None) -> str:
    args = {"city": "Paris"} if args is None else args
    return get_format(fmt).render_calls([ToolCallRecord("call_1", name, json.dumps(args))])


def pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def emulated(fmt: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"match": "*", "upstream": "up", "tool_mode": fmt, **extra}]


def without_none(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if value is not None}


async def ask(proxy: Any, stream: bool, **kwargs: Any) -> dict[str, Any]:
    """One request through the SDK; streamed answers are merged by the SDK's own helper. The raw
    answer the SDK read is checked too (``check_deltas`` / ``check_completion``). A ``None`` leaves a field out."""
    params = without_none({"model": "m", "messages": USER, "tools": WEATHER, **kwargs})
    async with checked_openai(proxy.base_url) as client:
        if not stream:
            result = (await client.chat.completions.create(**params)).model_dump()
        else:
            state = ChatCompletionStreamState()  # the SDK's own stream accumulator (its .stream() helper's core)
            async for chunk in await client.chat.completions.create(**params, stream=True):
                state.handle_chunk(chunk)
            result = state.get_final_completion().model_dump()
    assert client.transport.check() == 1
    return result


async def raw_stream(proxy: Any, **body: Any) -> list[dict[str, Any]]:
    """One streamed request read raw with aiohttp: its chunks, after ``check_deltas`` and ``[DONE]``."""
    payload = without_none({"model": "m", "messages": USER, "tools": WEATHER, "stream": True, **body})
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.base_url + "/chat/completions", json=payload) as resp,
    ):
        assert resp.status == 200, await resp.text()
        chunks, done = parse_sse(await resp.text())
    assert done, "the stream did not end with data: [DONE]"
    check_deltas(chunks)
    return chunks


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
async def test_text_then_weather_call(start_proxy, fake_upstream, fmt: str, stream: bool) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    output = "Let me look that up.\n" + call_text(fmt)
    fake_upstream.script(Reply(pieces=text_stream(pieces(output))))
    result = await ask(proxy, stream)
    choice = result["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    calls = choice["message"]["tool_calls"]
    assert len(calls) == 1 and calls[0]["function"]["name"] == "get_weather"
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Paris"}
    assert calls[0]["id"].startswith("call_") and calls[0]["type"] == "function"
    assert "Let me look that up." in (choice["message"]["content"] or "")
    for marker in ("<tool", "Action:", "^^^", "get_weather"):
        assert marker not in (choice["message"]["content"] or "")


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_stream_deltas_follow_openai_rules(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    fake_upstream.script(Reply(pieces=text_stream(pieces("Checking.\n" + call_text(fmt), 3))))
    chunks = await raw_stream(proxy)
    assert [(c["name"], json.loads(c["arguments"])) for c in streamed_calls(chunks)] == [
        ("get_weather", {"city": "Paris"})
    ]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_plain_answer_is_content(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    answer = "It is sunny in Paris, 21 degrees."
    if fmt == "react":
        answer_text = "Thought: I know this.\nFinal Answer: " + answer
    else:
        answer_text = answer
    fake_upstream.script(Reply(pieces=text_stream(pieces(answer_text))))
    for stream in (False, True):
        result = await ask(proxy, stream)
        message = result["choices"][0]["message"]
        assert message["content"].strip() == answer
        assert not message.get("tool_calls")
        assert result["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
async def test_second_call_cuts_the_upstream(start_proxy, fake_upstream, fmt: str, stream: bool) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    first = call_text(fmt, args={"city": "Paris"})
    second = call_text(fmt, args={"city": "Berlin"})
    tail = ["Some more text that should never be generated. "] * 40
    script = text_stream([*pieces(first + "\n"), *pieces(second), *tail])
    fake_upstream.script(Reply(pieces=script, delay=0.02))
    result = await ask(proxy, stream, parallel_tool_calls=False)  # absent: a second call is taken (test_parallel)
    choice = result["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert [json.loads(c["function"]["arguments"]) for c in choice["message"]["tool_calls"]] == [{"city": "Paris"}]
    for _ in range(50):
        if fake_upstream.disconnected and fake_upstream.disconnected[0]:
            break
        await asyncio.sleep(0.02)
    assert fake_upstream.disconnected[0], "the upstream connection was not closed at the cut"
    assert fake_upstream.pieces_sent[0] < len(script) - 20, "the upstream sent its whole output"
    # caret's stop sequence ends its first block: toolshim enforces it (the fake ignores ``stop``), no cut needed
    cuts = proxy.metrics.stream_cuts.labels("*", fmt)._value.get()
    assert cuts + proxy.metrics.stops_enforced.labels("*", fmt)._value.get() == 1


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_parallel_calls_up_to_the_limit(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt, max_tool_calls=2))
    output = "\n".join(call_text(fmt, args={"city": c}) for c in ("Paris", "Berlin", "Rome"))
    fake_upstream.script(Reply(pieces=text_stream(pieces(output))))
    for stream in (False, True):
        result = await ask(proxy, stream, parallel_tool_calls=True)
        calls = result["choices"][0]["message"]["tool_calls"]
        assert [json.loads(c["function"]["arguments"])["city"] for c in calls] == ["Paris", "Berlin"]
        assert len({c["id"] for c in calls}) == 2


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_upstream_body_has_stops_and_no_tools(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    fake_upstream.script(Reply(pieces=text_stream(["Hello"])))
    await ask(proxy, False, stop=["END", "STOP"], parallel_tool_calls=False, tool_choice="auto")
    body = fake_upstream.requests[-1]
    for key in ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"):
        assert key not in body
    stops = get_format(fmt).stop_sequences()
    assert body.get("stop", [])[: len(stops)] == list(stops)
    assert "END" in body["stop"] and "STOP" in body["stop"]
    assert len(body["stop"]) <= 4
    system = body["messages"][0]
    assert system["role"] == "system" and "get_weather" in system["content"]


async def test_stop_sequences_respect_the_rule_limit(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("react", max_stop_sequences=2))
    fake_upstream.script(Reply(pieces=text_stream(["Hello"])))
    await ask(proxy, False, stop=["A", "B", "C"])
    assert fake_upstream.requests[-1]["stop"] == ["\nObservation:", "A"]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_history_round_trips_in_the_format(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    fake_upstream.script(Reply(pieces=text_stream(pieces("It is 21 degrees and sunny in Paris."))))
    messages = [
        {"role": "system", "content": "You are terse."},
        *USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc", "content": "21 C, sunny"},
    ]
    result = await ask(proxy, False, messages=messages)
    assert result["choices"][0]["message"]["content"] == "It is 21 degrees and sunny in Paris."
    sent = fake_upstream.requests[-1]["messages"]
    assert all(m["role"] in ("system", "user", "assistant") for m in sent)
    assert all("tool_calls" not in m and "tool_call_id" not in m for m in sent)
    assert sent[0]["content"].startswith("You are terse.") and "get_weather" in sent[0]["content"]
    assistant = next(m for m in sent if m["role"] == "assistant")
    fmt_obj = get_format(fmt)
    assert (
        fmt_obj.render_calls([ToolCallRecord("call_abc", "get_weather", '{"city":"Paris"}')]).strip()
        in assistant["content"]
    )
    assert fmt_obj.render_result("get_weather", "21 C, sunny").strip() in sent[-1]["content"]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_tool_choice_none_sends_no_instructions(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    fake_upstream.script(Reply(pieces=text_stream(["Just text."])))
    result = await ask(proxy, False, tool_choice="none")
    assert result["choices"][0]["message"]["content"] == "Just text."
    body = fake_upstream.requests[-1]
    assert all("get_weather" not in json.dumps(m) for m in body["messages"])
    assert "stop" not in body


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
async def test_required_choice_reasks_once(start_proxy, fake_upstream, fmt: str, choice: Any) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    for stream in (False, True):
        fake_upstream.script(
            Reply(pieces=text_stream(["I think it is sunny."])), Reply(pieces=text_stream(pieces(call_text(fmt))))
        )
        before = len(fake_upstream.requests)
        result = await ask(proxy, stream, tool_choice=choice)
        message = result["choices"][0]["message"]
        assert message["tool_calls"][0]["function"]["name"] == "get_weather"
        assert not message["content"], "text of the answer without a call must not reach the client"
        assert len(fake_upstream.requests) == before + 2
        reask = fake_upstream.requests[-1]["messages"]
        assert reask[-2] == {"role": "assistant", "content": "I think it is sunny."}
        assert reask[-1]["role"] == "user" and "must call" in reask[-1]["content"]
        system = reask[0]["content"]
        assert "MUST call" in system


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_required_choice_gives_up_after_the_limit(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt, max_required_retries=1, on_missing_call="text"))
    fake_upstream.script(Reply(pieces=text_stream(["No."])))
    result = await ask(proxy, False, tool_choice="required")
    assert len(fake_upstream.requests) == 2
    assert result["choices"][0]["finish_reason"] == "stop"
    assert result["choices"][0]["message"]["content"] == "No."


@pytest.mark.parametrize("stream", [False, True])
async def test_legacy_functions(start_proxy, fake_upstream, stream: bool) -> None:
    proxy = await start_proxy(models=emulated("react"))
    functions = [OPENAI_TOOLS["get_weather"]["function"]]
    fake_upstream.script(Reply(pieces=text_stream(pieces(call_text("react")))))
    result = await ask(proxy, stream, tools=None, functions=functions)
    choice = result["choices"][0]
    assert choice["finish_reason"] == "function_call"
    assert not choice["message"].get("tool_calls")
    assert choice["message"]["function_call"]["name"] == "get_weather"
    assert json.loads(choice["message"]["function_call"]["arguments"]) == {"city": "Paris"}
    assert "functions" not in fake_upstream.requests[-1]
    history = [
        *USER,
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        },
        {"role": "function", "name": "get_weather", "content": "21 C"},
    ]
    fake_upstream.script(Reply(pieces=text_stream(["Thought: done\nFinal Answer: 21 C in Paris."])))
    result = await ask(proxy, stream, tools=None, functions=functions, messages=history)
    assert result["choices"][0]["message"]["content"] == "21 C in Paris."
    assert result["choices"][0]["finish_reason"] == "stop"
    sent = fake_upstream.requests[-1]["messages"]
    assert all(m["role"] != "function" and "function_call" not in m for m in sent)


async def test_legacy_functions_stream_raw(start_proxy, fake_upstream) -> None:
    """OpenAI streams a legacy call as ``delta.function_call`` fragments, finish_reason ``function_call``."""
    proxy = await start_proxy(models=emulated("hermes", stream_arguments=True))
    args = {"path": "a.py", "content": "print('hello world')\n" * 3}
    fake_upstream.script(
        Reply(pieces=text_stream(pieces("Writing it.\n" + call_text("hermes", "write_file", args), 4)))
    )
    chunks = await raw_stream(proxy, tools=None, functions=[OPENAI_TOOLS["write_file"]["function"]])
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert not any(d.get("tool_calls") for d in deltas)
    fragments = [d["function_call"] for d in deltas if d.get("function_call")]
    assert fragments[0]["name"] == "write_file" and len(fragments) > 3
    assert json.loads("".join(f.get("arguments") or "" for f in fragments)) == args
    assert chunks[-1]["choices"][0]["finish_reason"] == "function_call"


@pytest.mark.parametrize("fmt", ["hermes", "react"])
async def test_malformed_block_is_repaired_by_a_reask(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    bad = {
        "hermes": '<tool_call>{"name": "get_weather", "arguments": {"town": "Paris"}}</tool_call>',
        "react": 'Action: get_weather\nAction Input: {"town": "Paris"}',
    }[fmt]
    fake_upstream.script(Reply(pieces=text_stream(pieces(bad))), Reply(pieces=text_stream(pieces(call_text(fmt)))))
    result = await ask(proxy, True)
    message = result["choices"][0]["message"]
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    assert "town" not in (message["content"] or "") and "<tool_call" not in (message["content"] or "")
    reask = fake_upstream.requests[-1]["messages"]
    assert reask[-1]["role"] == "user" and "city" in reask[-1]["content"]
    assert proxy.metrics.reasks.labels("*", "repair")._value.get() == 1


async def test_unfixable_block_never_reaches_the_client(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("hermes", max_repair_retries=0))
    fake_upstream.script(
        Reply(
            pieces=text_stream(
                ["Sure. ", '<tool_call>{"name": "get_weather", "arguments": ', '{"town": 5}}</tool_call>']
            )
        )
    )
    result = await ask(proxy, False)
    message = result["choices"][0]["message"]
    assert not message.get("tool_calls")
    assert message["content"].strip() == "Sure."
    assert result["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("fmt", ["hermes", "react"])
async def test_stream_arguments_streams_fragments(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt, stream_arguments=True))
    args = {"path": "a.py", "content": "print('hello world')\n" * 5}
    fake_upstream.script(Reply(pieces=text_stream(pieces(call_text(fmt, "write_file", args), 4))))
    chunks = await raw_stream(proxy, tools=[OPENAI_TOOLS["write_file"]])
    fragments = [
        c["choices"][0]["delta"]["tool_calls"][0]["function"].get("arguments")
        for c in chunks
        if c["choices"] and c["choices"][0]["delta"].get("tool_calls")
    ]
    assert len([f for f in fragments if f]) > 3, "arguments were not streamed in pieces"
    assert json.loads("".join(f or "" for f in fragments)) == args


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "cut-at-second"])
async def test_stream_arguments_with_several_calls(start_proxy, fake_upstream, fmt: str, parallel: bool) -> None:
    """Streamed argument fragments for two calls (the third over the limit), or one call and the cut."""
    proxy = await start_proxy(models=emulated(fmt, stream_arguments=True, max_tool_calls=2))
    files = [{"path": p, "content": f"x = {i}\n" * 4} for i, p in enumerate(("a.py", "b.py", "c.py"))]
    output = "\n".join(call_text(fmt, "write_file", args) for args in files)
    fake_upstream.script(Reply(pieces=text_stream([*pieces(output, 5), *["Never generated. "] * 30]), delay=0.005))
    chunks = await raw_stream(proxy, tools=[OPENAI_TOOLS["write_file"]], parallel_tool_calls=parallel)
    calls = streamed_calls(chunks)
    assert [json.loads(c["arguments"]) for c in calls] == files[: 2 if parallel else 1]
    assert all(c["name"] == "write_file" for c in calls)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    cuts = proxy.metrics.stream_cuts.labels("*", fmt)._value.get()
    assert cuts + proxy.metrics.stops_enforced.labels("*", fmt)._value.get() == 1  # see above


@pytest.mark.parametrize("stream", [False, True])
async def test_auto_mode_falls_back_and_remembers(start_proxy, fake_upstream, stream: bool) -> None:
    proxy = await start_proxy(
        models=[{"match": "*", "upstream": "up", "tool_mode": "auto", "fallback_format": "react"}]
    )
    rejection = Reply(
        status=400,
        body={"error": {"message": "registry.ollama.ai/library/gemma does not support tools", "type": "api_error"}},
    )
    fake_upstream.script(rejection, Reply(pieces=text_stream(pieces(call_text("react")))))
    result = await ask(proxy, stream)
    assert result["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert "tools" in fake_upstream.requests[0] and "tools" not in fake_upstream.requests[1]
    fake_upstream.script(Reply(pieces=text_stream(pieces(call_text("react")))))
    await ask(proxy, stream)
    assert len(fake_upstream.requests) == 3 and "tools" not in fake_upstream.requests[2]
    assert proxy.metrics.auto_fallbacks.labels("*")._value.get() == 1


async def test_auto_mode_passes_other_errors_through(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=[{"match": "*", "upstream": "up", "tool_mode": "auto"}])
    fake_upstream.script(Reply(status=429, body={"error": {"message": "slow down", "type": "rate_limit"}}))
    async with checked_openai(proxy.base_url) as client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model="m", messages=USER, tools=WEATHER)
    assert getattr(caught.value, "status_code", None) == 429
    assert len(fake_upstream.requests) == 1


async def test_usage_is_passed_on(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("hermes"))
    usage = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
    fake_upstream.script(Reply(pieces=text_stream(pieces(call_text("hermes")), usage=usage)))
    result = await ask(proxy, False)
    assert result["usage"]["prompt_tokens"] == 120 and result["usage"]["completion_tokens"] == 30
    chunks = await raw_stream(proxy, stream_options={"include_usage": True})
    assert chunks[-1]["usage"]["total_tokens"] == 150 and chunks[-1]["choices"] == []
    chunks = await raw_stream(proxy)
    assert all("usage" not in c or c["usage"] is None for c in chunks)


async def test_reasoning_from_think_blocks(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("hermes"))
    fake_upstream.script(Reply(pieces=text_stream(pieces("<think>Paris is in France.</think>" + call_text("hermes")))))
    result = await ask(proxy, False)
    message = result["choices"][0]["message"]
    assert "Paris is in France." in message["reasoning_content"]
    assert message["tool_calls"]


async def test_langchain_bind_tools(start_proxy, fake_upstream) -> None:
    from langchain_openai import ChatOpenAI

    proxy = await start_proxy(models=emulated("hermes"))
    fake_upstream.script(Reply(pieces=text_stream(pieces(call_text("hermes")))))
    transport = RecordingTransport()
    async with httpx.AsyncClient(transport=transport) as http:
        llm = ChatOpenAI(model="m", base_url=proxy.base_url, api_key="k", max_retries=0, http_async_client=http)
        reply = await llm.bind_tools(WEATHER).ainvoke("What is the weather in Paris?")
    assert transport.check() == 1
    assert reply.tool_calls and reply.tool_calls[0]["name"] == "get_weather"
    assert reply.tool_calls[0]["args"] == {"city": "Paris"}


async def test_requests_without_tools_pass_through(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("react"))
    fake_upstream.script(Reply(pieces=text_stream(["Hi ", "there"])))
    async with checked_openai(proxy.base_url) as client:
        stream = await client.chat.completions.create(model="m", messages=USER, stream=True)
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "Hi there"
    assert "stop" not in fake_upstream.requests[-1]


async def test_tool_result_then_new_user_turn_is_one_user_message(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("hermes"))
    fake_upstream.script(Reply(pieces=text_stream(["Berlin is cloudy."])))
    messages = [
        *USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "21 C"},
        {"role": "user", "content": "And Berlin?"},
    ]
    await ask(proxy, False, messages=messages)
    sent = fake_upstream.requests[-1]["messages"]
    roles = [m["role"] for m in sent]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles
    assert "21 C" in sent[-1]["content"] and sent[-1]["content"].endswith("And Berlin?")


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_parallel_calls_drop_stops_that_end_a_block(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt, max_tool_calls=3))
    fake_upstream.script(Reply(pieces=text_stream(["ok"])))
    await ask(proxy, False, parallel_tool_calls=True)
    sent_stops = fake_upstream.requests[-1].get("stop", [])
    two = "\n".join(call_text(fmt, args={"city": c}) for c in ("A", "B"))
    assert not any(stop in two for stop in sent_stops), sent_stops
    await ask(proxy, False, parallel_tool_calls=False)
    assert fake_upstream.requests[-1].get("stop", [])[: len(get_format(fmt).stop_sequences())] == list(
        get_format(fmt).stop_sequences()
    )


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
async def test_call_written_despite_tool_choice_none_stays_out(
    start_proxy, fake_upstream, fmt: str, stream: bool
) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    fake_upstream.script(Reply(pieces=text_stream(pieces("It is sunny.\n" + call_text(fmt)))))
    result = await ask(proxy, stream, tool_choice="none")
    message = result["choices"][0]["message"]
    assert not message.get("tool_calls") and result["choices"][0]["finish_reason"] == "stop"
    assert message["content"].strip() == "It is sunny."


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
async def test_only_a_call_despite_tool_choice_none_is_never_answered_with_its_words(
    start_proxy, fake_upstream, fmt: str, stream: bool
) -> None:
    """Seen in the demo: after a tool result the model called again; with tool_choice "none" the answer was
    empty, then its words (``get_weather`` / ``city: Paris``), which the client kept and the model copied.
    Now: the latest tool results when there are any, else a note that there is no answer."""
    proxy = await start_proxy(models=emulated(fmt, max_repair_retries=0))
    fake_upstream.script(Reply(pieces=text_stream(pieces(call_text(fmt)))))
    result = await ask(proxy, stream, tool_choice="none")
    message = result["choices"][0]["message"]
    assert not message.get("tool_calls") and result["choices"][0]["finish_reason"] == "stop"
    assert message["content"] == NO_ANSWER_CALL
    history = [
        *USER,
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": CALLED}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Sunny, 21 C"},
    ]
    result = await ask(proxy, stream, tool_choice="none", messages=history)
    assert result["choices"][0]["message"]["content"] == "Sunny, 21 C"
    # a result that only reports a failure is told as what went wrong, not as the error object it came in
    failed = [*history[:2], {**history[2], "content": '{"error": "ValueError: no restaurant \'123\'"}'}]
    result = await ask(proxy, stream, tool_choice="none", messages=failed)
    assert result["choices"][0]["message"]["content"] == "ValueError: no restaurant '123'"


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
async def test_only_a_call_despite_tool_choice_none_is_asked_again_for_text(
    start_proxy, fake_upstream, fmt: str, stream: bool
) -> None:
    """Seen in the demo (pythonic): under tool_choice "none" the model wrote a call again. It is asked once
    more for a plain answer, never offered "or call a tool"; the answer it gives is the client's."""
    proxy = await start_proxy(models=emulated(fmt))
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(call_text(fmt)))), Reply(pieces=text_stream(["It is sunny in Paris."]))
    )
    result = await ask(proxy, stream, tool_choice="none")
    reask = fake_upstream.requests[1]["messages"][-1]
    assert reask == {
        "role": "user",
        "content": "No tool can be called in this reply: answer the user now in plain text.",
    }
    assert result["choices"][0]["message"]["content"] == "It is sunny in Paris."


UNKNOWN_CALL = '<tool_call>{"name": "get_comments", "arguments": {"limit": 7}}</tool_call>'
ANSWER_ASKED = {"role": "user", "content": "No tool can be called in this reply: answer the user now in plain text."}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("history", ["turns", "folded"])
async def test_a_call_the_repair_did_not_mend_is_followed_by_one_plain_answer_attempt(
    start_proxy, fake_upstream, stream: bool, history: str
) -> None:
    proxy = await start_proxy(models=emulated("hermes", tool_history=history, max_repair_retries=1))
    fake_upstream.script(
        Reply(pieces=text_stream([UNKNOWN_CALL])),
        Reply(pieces=text_stream([UNKNOWN_CALL])),  # the repair brings the same call back
        Reply(pieces=text_stream(["I can only look up the weather."])),
    )
    result = await ask(proxy, stream)
    assert result["choices"][0]["message"]["content"] == "I can only look up the weather."
    assert result["choices"][0]["finish_reason"] == "stop"
    assert len(fake_upstream.requests) == 3
    answer_request = fake_upstream.requests[-1]
    assert answer_request["messages"] == [*USER, ANSWER_ASKED]  # the broken calls left out: they would be copied
    assert "get_weather" not in json.dumps(answer_request)  # the tools withdrawn
    assert proxy.metrics.reasks.labels("*", "answer")._value.get() == 1


async def test_the_plain_answer_attempt_comes_once(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("hermes", max_repair_retries=2))
    fake_upstream.script(Reply(pieces=text_stream([UNKNOWN_CALL])))  # every attempt: the unknown tool again
    result = await ask(proxy, False)
    assert result["choices"][0]["message"]["content"] == NO_ANSWER_CALL
    assert (
        len(fake_upstream.requests) == 3
    )  # the call, its repair (the same again: repeats end the repairs), the answer


@pytest.mark.parametrize(
    ("rule", "choice", "requests"),
    [({"max_repair_retries": 0}, None, 1), ({}, "required", 2)],
    ids=["no-repairs", "call-required"],
)
async def test_no_plain_answer_attempt_where_none_is_due(
    start_proxy, fake_upstream, rule: dict[str, Any], choice: str | None, requests: int
) -> None:
    proxy = await start_proxy(models=emulated("hermes", on_missing_call="error", **rule))
    fake_upstream.script(Reply(pieces=text_stream([UNKNOWN_CALL])))
    async with aiohttp.ClientSession() as session:
        body = {"model": "m", "messages": USER, "tools": WEATHER, **({"tool_choice": choice} if choice else {})}
        async with session.post(proxy.base_url + "/chat/completions", json=body) as resp:
            await resp.read()
    assert len(fake_upstream.requests) == requests
    assert all("get_weather" in json.dumps(r) for r in fake_upstream.requests)  # never with the tools withdrawn


async def test_text_after_an_unfixable_block_survives_when_repairs_are_spent(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("hermes", max_repair_retries=1))
    bad = '<tool_call>{"name": "get_weather", "arguments": {"town": "Paris"}}</tool_call>'
    fake_upstream.script(
        # the text comes first: after the block, hermes' stop sequence ``</tool_call>`` ends the output
        Reply(pieces=text_stream([bad])),
        Reply(pieces=text_stream(["Sorry, I cannot look that up.\n", bad])),
    )
    result = await ask(proxy, False)
    assert len(fake_upstream.requests) == 2
    assert result["choices"][0]["message"]["content"].strip() == "Sorry, I cannot look that up."
