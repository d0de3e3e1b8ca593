"""The newer OpenAI request fields reach each upstream as it understands them (``field_dialect``).

Through a running toolshim with the OpenAI SDK as the client; the fake upstream records what it
receives. By default a local (or any non-OpenAI) server gets ``compat``: ``max_completion_tokens``
as ``max_tokens``, ``developer`` messages as ``system``, OpenAI-only fields left out;
``field_dialect: "openai"`` sends them as they came. Also: an emulated rule reads ``<think>`` and
counts usage the same with and without tools.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from openai import AsyncOpenAI
from toolshim.config.rules import UpstreamConfig

from tests.checked import checked_openai
from tests.fakes import FakeUpstream, Reply, completion, text_stream
from tests.test_emulation import WEATHER, ask, emulated, pieces

USER: list[Any] = [{"role": "user", "content": "hi"}]
DEVELOPER: list[Any] = [{"role": "developer", "content": "Answer in French."}, *USER]
USAGE = {"prompt_tokens": 21, "completion_tokens": 5, "total_tokens": 26}
# fields only OpenAI's platform acts on; a compatible server ignores them or answers 400/422
OPENAI_ONLY: dict[str, Any] = {
    "store": True,
    "metadata": {"run": "7"},
    "service_tier": "flex",
    "verbosity": "low",
    "prompt_cache_key": "agent-1",
    "safety_identifier": "user-hash",
    "prediction": {"type": "content", "content": "Bonjour"},
    "modalities": ["text"],
    "web_search_options": {},
}
# fields compatible servers implement: passed in both dialects
SHARED: dict[str, Any] = {"seed": 7, "user": "u-1", "reasoning_effort": "low", "logprobs": True, "top_logprobs": 2}


def native(**upstream: Any) -> dict[str, Any]:
    return {"models": [{"match": "*", "upstream": "up", "tool_mode": "native"}], "upstream_extra": upstream}


def client(proxy: Any) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=proxy.base_url, api_key="unused", max_retries=0)


def reply_for(tool_mode: str) -> Reply:
    """The upstream's answer: emulation always streams from the upstream; native relays the client's choice."""
    return Reply(pieces=text_stream(["Bon", "jour"])) if tool_mode != "native" else Reply(body=completion("Bonjour"))


def roles(body: dict[str, Any]) -> list[str]:
    return [message["role"] for message in body["messages"]]


# ---- max_completion_tokens ---------------------------------------------------------------------


@pytest.mark.parametrize("tool_mode", ["native", "hermes"])
async def test_max_completion_tokens_reaches_a_local_server_as_max_tokens(
    start_proxy: Any, fake_upstream: FakeUpstream, tool_mode: str
) -> None:
    """llama-cpp-python ignores ``max_completion_tokens``: asked for 5 tokens, it wrote thousands."""
    fake_upstream.script(reply_for(tool_mode))
    proxy = await start_proxy(models=emulated(tool_mode))
    answer = await ask(proxy, False, messages=USER, tools=WEATHER, max_completion_tokens=5)
    assert answer["choices"][0]["message"]["content"] == "Bonjour"
    [sent] = fake_upstream.requests
    assert sent["max_tokens"] == 5 and "max_completion_tokens" not in sent


@pytest.mark.parametrize(("max_tokens", "max_completion_tokens"), [(50, 5), (5, 50)])
async def test_of_two_limits_the_smaller_is_sent(
    start_proxy: Any, fake_upstream: FakeUpstream, max_tokens: int, max_completion_tokens: int
) -> None:
    proxy = await start_proxy(**native())
    async with checked_openai(proxy.base_url) as sdk:
        await sdk.chat.completions.create(
            model="m", messages=USER, max_tokens=max_tokens, max_completion_tokens=max_completion_tokens
        )
    [sent] = fake_upstream.requests
    assert sent["max_tokens"] == 5 and "max_completion_tokens" not in sent


# ---- max_output_tokens (the rule's output limit) -----------------------------------------------


@pytest.mark.parametrize("tool_mode", ["native", "hermes"])
@pytest.mark.parametrize(
    ("client_limits", "sent_limit"),
    [
        ({}, 300),  # none from the client: the rule's (a small model without one writes until its context is full)
        ({"max_tokens": 5}, 5),  # the client's when lower
        ({"max_completion_tokens": 5000}, 300),  # the rule's when the client's is higher
        ({"max_tokens": 50, "max_completion_tokens": 5000}, 50),
    ],
)
async def test_the_rule_s_output_limit_holds_for_every_request(
    start_proxy: Any, fake_upstream: FakeUpstream, tool_mode: str, client_limits: dict[str, int], sent_limit: int
) -> None:
    fake_upstream.script(reply_for(tool_mode))
    proxy = await start_proxy(models=emulated(tool_mode, max_output_tokens=300))
    answer = await ask(proxy, False, messages=USER, tools=WEATHER, **client_limits)
    assert answer["choices"][0]["message"]["content"] == "Bonjour"
    [sent] = fake_upstream.requests
    assert sent["max_tokens"] == sent_limit and "max_completion_tokens" not in sent


async def test_the_rule_s_output_limit_reaches_an_openai_upstream_by_its_new_name(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    """OpenAI's reasoning models refuse ``max_tokens``: the limit toolshim adds is ``max_completion_tokens``."""
    proxy = await start_proxy(
        models=[{"match": "*", "upstream": "up", "tool_mode": "native", "max_output_tokens": 300}],
        upstream_extra={"field_dialect": "openai"},
    )
    async with checked_openai(proxy.base_url) as sdk:
        await sdk.chat.completions.create(model="m", messages=USER)
    [sent] = fake_upstream.requests
    assert sent["max_completion_tokens"] == 300 and "max_tokens" not in sent


async def test_the_rule_s_output_limit_holds_for_a_responses_request(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(Reply(pieces=text_stream(["Bon", "jour"])))
    proxy = await start_proxy(models=emulated("hermes", max_output_tokens=300))
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{proxy.base_url}/responses", json={"model": "m", "input": "hi", "store": False}) as r:
            assert r.status == 200, await r.text()
            [message] = (await r.json())["output"]
            assert message["content"][0]["text"] == "Bonjour"
    [sent] = fake_upstream.requests
    assert sent["max_tokens"] == 300


# ---- the developer role --------------------------------------------------------------------------


async def test_developer_message_reaches_a_native_rule_as_system(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    proxy = await start_proxy(**native())
    async with checked_openai(proxy.base_url) as sdk:
        await sdk.chat.completions.create(model="m", messages=DEVELOPER)
    assert fake_upstream.requests[0]["messages"] == [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "hi"},
    ]


async def test_system_and_developer_become_one_system_message(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    """Codex sends instructions, then developer items: many chat templates take one system message only."""
    proxy = await start_proxy(**native())
    messages = [{"role": "system", "content": "You are terse."}, *DEVELOPER, {"role": "assistant", "content": "Oui."}]
    messages += [{"role": "developer", "content": [{"type": "text", "text": "Now in German."}]}, *USER]
    async with checked_openai(proxy.base_url) as sdk:
        await sdk.chat.completions.create(model="m", messages=messages)
    assert fake_upstream.requests[0]["messages"] == [
        {"role": "system", "content": "You are terse.\n\nAnswer in French."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Oui."},
        {"role": "system", "content": [{"type": "text", "text": "Now in German."}]},
        {"role": "user", "content": "hi"},
    ]


@pytest.mark.parametrize("system", [None, "You are terse."])
async def test_developer_message_joins_the_tool_prompt_of_an_emulated_rule(
    start_proxy: Any, fake_upstream: FakeUpstream, system: str | None
) -> None:
    """One system message: the client's system and developer text, then toolshim's tool instructions."""
    fake_upstream.script(reply_for("hermes"))
    proxy = await start_proxy(models=emulated("hermes"))
    messages = [*([{"role": "system", "content": system}] if system else []), *DEVELOPER]
    await ask(proxy, False, messages=messages, tools=WEATHER)
    [sent] = fake_upstream.requests
    assert roles(sent) == ["system", "user"]
    prompt = sent["messages"][0]["content"]
    expected_start = f"{system}\n\nAnswer in French.\n\n" if system else "Answer in French.\n\n"
    assert prompt.startswith(expected_start) and "get_weather" in prompt


async def test_an_emulated_rule_sends_no_developer_role_even_to_an_openai_upstream(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    """Toolshim writes the tool prompt into the system message; a developer message would be a second one."""
    fake_upstream.script(reply_for("hermes"))
    proxy = await start_proxy(models=emulated("hermes"), upstream_extra={"field_dialect": "openai"})
    await ask(proxy, False, messages=DEVELOPER, tools=WEATHER, max_completion_tokens=9)
    [sent] = fake_upstream.requests
    assert roles(sent) == ["system", "user"] and sent["max_completion_tokens"] == 9 and "max_tokens" not in sent


# ---- which fields go where -----------------------------------------------------------------------


async def test_openai_only_fields_stay_out_of_a_compatible_server(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    proxy = await start_proxy(**native())
    async with checked_openai(proxy.base_url) as sdk:
        await sdk.chat.completions.create(model="m", messages=USER, **SHARED, **OPENAI_ONLY)
    [sent] = fake_upstream.requests
    assert not set(OPENAI_ONLY) & set(sent)
    assert {name: sent[name] for name in SHARED} == SHARED


async def test_openai_dialect_sends_every_field_as_it_came(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    proxy = await start_proxy(**native(field_dialect="openai"))
    async with checked_openai(proxy.base_url) as sdk:
        await sdk.chat.completions.create(
            model="m", messages=DEVELOPER, max_completion_tokens=5, **SHARED, **OPENAI_ONLY
        )
    [sent] = fake_upstream.requests
    assert sent["messages"] == DEVELOPER and sent["max_completion_tokens"] == 5 and "max_tokens" not in sent
    assert {name: sent[name] for name in (*SHARED, *OPENAI_ONLY)} == {**SHARED, **OPENAI_ONLY}


@pytest.mark.parametrize("dialect", ["compat", "openai"])
async def test_parallel_tool_calls_goes_only_with_tools(
    start_proxy: Any, fake_upstream: FakeUpstream, dialect: str
) -> None:
    """OpenAI itself answers 400 to ``parallel_tool_calls`` without ``tools``."""
    proxy = await start_proxy(**native(field_dialect=dialect))
    async with checked_openai(proxy.base_url) as sdk:
        await sdk.chat.completions.create(model="m", messages=USER, parallel_tool_calls=False)
        await sdk.chat.completions.create(model="m", messages=USER, parallel_tool_calls=False, tools=WEATHER)
    without, with_tools = fake_upstream.requests
    assert "parallel_tool_calls" not in without and with_tools["parallel_tool_calls"] is False


async def test_stream_options_go_only_with_a_stream(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    """vLLM answers 400 to ``stream_options`` on a request that does not stream."""
    proxy = await start_proxy(**native())
    async with aiohttp.ClientSession() as session:
        body = {"model": "m", "messages": USER, "stream": False, "stream_options": {"include_usage": True}}
        async with session.post(proxy.base_url + "/chat/completions", json=body) as resp:
            assert resp.status == 200, await resp.text()
    assert "stream_options" not in fake_upstream.requests[0]


@pytest.mark.parametrize(
    ("upstream", "dialect"),
    [
        ({"base_url": "https://api.openai.com/v1"}, "openai"),
        ({"base_url": "http://127.0.0.1:8080/v1"}, "compat"),
        ({"base_url": "https://api.groq.com/openai/v1"}, "compat"),
        ({"provider": "litellm"}, "openai"),  # litellm translates per provider itself
        ({"base_url": "http://127.0.0.1:8080/v1", "field_dialect": "openai"}, "openai"),
        ({"base_url": "https://api.openai.com/v1", "field_dialect": "compat"}, "compat"),
    ],
)
def test_auto_dialect_by_upstream_kind(upstream: dict[str, Any], dialect: str) -> None:
    assert UpstreamConfig.model_validate(upstream).dialect == dialect


# ---- the Responses API ---------------------------------------------------------------------------


@pytest.mark.parametrize("tool_mode", ["native", "hermes"])
async def test_responses_instructions_and_developer_items_reach_a_local_server_as_one_system_message(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Any, tool_mode: str
) -> None:
    """Codex and the Agents SDK: ``instructions`` plus developer input items, and ``max_output_tokens``."""
    fake_upstream.script(reply_for(tool_mode))
    proxy = await start_proxy(models=emulated(tool_mode), data_dir=tmp_path)
    async with client(proxy) as sdk:
        answer = await sdk.responses.create(
            model="m",
            instructions="You are terse.",
            input=[{"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "hi"}],
            max_output_tokens=16,
        )
    assert answer.output_text == "Bonjour"
    [sent] = fake_upstream.requests
    assert sent["messages"] == [
        {"role": "system", "content": "You are terse.\n\nAnswer in French."},
        {"role": "user", "content": "hi"},
    ]
    assert sent["max_tokens"] == 16 and "max_completion_tokens" not in sent


# ---- an emulated rule without tools: usage and thinking as with tools ------------------------------


@pytest.mark.parametrize("reported", [USAGE, None])
async def test_stream_without_tools_gets_its_usage_chunk(
    start_proxy: Any, fake_upstream: FakeUpstream, reported: dict[str, int] | None
) -> None:
    """llama-cpp-python puts no usage in a stream: an emulated rule counts it, as it does with tools."""
    fake_upstream.tokenizer = "llama-cpp-python"
    fake_upstream.script(Reply(pieces=text_stream(["Bon", "jour tout le monde"], usage=reported)))
    proxy = await start_proxy(models=emulated("hermes"))
    async with checked_openai(proxy.base_url) as sdk:
        stream = await sdk.chat.completions.create(
            model="m", messages=USER, stream=True, stream_options={"include_usage": True}
        )
        chunks = [chunk async for chunk in stream]
    usage = chunks[-1].usage
    assert usage is not None and chunks[-1].choices == []
    if reported:
        assert usage.model_dump(exclude_none=True) == reported
    else:
        assert usage.completion_tokens == 4 and usage.prompt_tokens > 0  # the tokenizer's count
    assert fake_upstream.requests[0]["stream_options"] == {"include_usage": True}


async def test_native_stream_without_tools_relays_the_upstream_usage(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(Reply(pieces=text_stream(["Bonjour"], usage=USAGE)))
    proxy = await start_proxy(**native())
    async with checked_openai(proxy.base_url) as sdk:
        stream = await sdk.chat.completions.create(
            model="m", messages=USER, stream=True, stream_options={"include_usage": True}
        )
        chunks = [chunk async for chunk in stream]
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 26
    assert fake_upstream.requests[0]["stream_options"] == {"include_usage": True}


THOUGHT_ANSWER = "<think>The user greets me.</think>\nBonjour ! Un exemple : <tool_call>x</tool_call>"


@pytest.mark.parametrize("fmt", ["hermes", "pythonic", "react"])
@pytest.mark.parametrize("stream", [False, True])
async def test_think_is_reasoning_with_and_without_tools(
    start_proxy: Any, fake_upstream: FakeUpstream, fmt: str, stream: bool
) -> None:
    """A turn without tools reads ``<think>`` as one with tools does; call markup in it stays text (no
    tool exists to call, and it is not asked again)."""
    fake_upstream.script(Reply(pieces=text_stream(pieces("<think>The user greets me.</think>\nBonjour !"))))
    proxy = await start_proxy(models=emulated(fmt))
    with_tools = (await ask(proxy, stream))["choices"][0]["message"]
    without = (await ask(proxy, stream, tools=None))["choices"][0]["message"]
    for message in (with_tools, without):  # (hermes keeps the line break after </think>, the others drop it)
        assert message["reasoning_content"] == "The user greets me."
        assert message["content"].lstrip() == "Bonjour !"
    fake_upstream.script(Reply(pieces=text_stream(pieces(THOUGHT_ANSWER))))
    markup = (await ask(proxy, stream, tools=None))["choices"][0]["message"]
    assert markup["reasoning_content"] == "The user greets me."
    assert markup["content"] == "Bonjour ! Un exemple : <tool_call>x</tool_call>"
    assert len(fake_upstream.requests) == 3


async def test_several_choices_without_tools_are_the_upstream_s_own(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    """Emulation writes one choice without logprobs: ``n`` > 1 and ``logprobs`` are relayed as before."""
    two = completion("Bonjour")
    two["choices"].append({**two["choices"][0], "index": 1})
    fake_upstream.script(Reply(body=two))
    proxy = await start_proxy(models=emulated("hermes"))
    async with client(proxy) as sdk:  # (the raw check reads one choice)
        answer = await sdk.chat.completions.create(model="m", messages=USER, n=2)
        await sdk.chat.completions.create(model="m", messages=USER, logprobs=True)
    assert len(answer.choices) == 2
    assert fake_upstream.requests[0]["n"] == 2 and fake_upstream.requests[1]["logprobs"] is True
    assert "stream" not in fake_upstream.requests[0]
