"""An "echo model" never gets toolshim's own text or markup to the client (issue 31).

The upstream is a FakeUpstream that answers with what it was told: the last message it was sent (the
user's question, a tool result in the format's wrapper, a re-ask's corrective message) or its system
prompt (the tool instructions, a loop policy's instruction, a forced answer's). That is what a small
model does after a re-ask or once a policy withdrew the tools. Through the real ``openai`` SDK, chat
completions and ``/v1/responses``, streamed and not, in every format, the client's text must hold no run
of six words of any text toolshim put into the conversation (found by cutting the client's own texts out
of what the upstream was sent), no markup, no call written as plain lines, and must not be empty.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from openai import AsyncOpenAI
from openai.lib.streaming.chat import ChatCompletionStreamState

from tests.checked import checked_openai
from tests.fakes import FakeUpstream, Reply, last_message, system_prompt, text_stream
from tests.formats.tools import OPENAI_TOOLS
from tests.test_emulation import FORMAT_NAMES, call_text, pieces

WEATHER = [OPENAI_TOOLS["get_weather"]]
QUESTION = "What is the weather in Madrid today?"
RESULT = '{"temperature": 21, "sky": "sunny"}'
ARGS = '{"city": "Madrid"}'
ECHOES = {"last": last_message, "system": system_prompt}
SCENARIOS = ["first", "result", "looped", "reasked", "none"]
MARKUP = ("<", ">", "^^^", "```", "Action:", "Observation:", "Result of", "[get_weather", "tool_response", "tool_call")
_WORD = re.compile(r"[^\W_]+")


def history(calls: int) -> list[dict[str, Any]]:
    """The question, then ``calls`` rounds of the same call and its result."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    for n in range(calls):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "get_weather", "arguments": ARGS}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": RESULT},
        ]
    return messages


def setup(fake: FakeUpstream, fmt: str, scenario: str, echo: str) -> dict[str, Any]:
    """Script the upstream; the request's fields besides the model."""
    respond = Reply(respond=ECHOES[echo])
    if scenario == "reasked":  # a broken call first (a parameter the tool lacks), then the echo of the re-ask
        fake.script(Reply(pieces=text_stream(pieces(call_text(fmt, args={"town": "Madrid"})))), respond)
    elif scenario == "none":  # the call again although no call may be made, then the echo
        fake.script(Reply(pieces=text_stream(pieces(call_text(fmt, args={"city": "Madrid"})))), respond)
    else:
        fake.script(respond)
    calls = {"first": 0, "result": 1, "looped": 3, "reasked": 0, "none": 1}[scenario]
    return {"messages": history(calls), **({"tool_choice": "none"} if scenario == "none" else {})}


def words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]


def injected_runs(fake: FakeUpstream) -> set[tuple[str, ...]]:
    """Every run of six words of the text toolshim sent upstream that the client did not write."""
    runs: set[tuple[str, ...]] = set()
    for body in fake.requests:
        for message in body.get("messages", []):
            content = message.get("content")
            if not isinstance(content, str):
                continue
            for own in (QUESTION, RESULT):
                content = content.replace(own, "\0")
            for piece in content.split("\0"):
                found = words(piece)
                runs.update(zip(*(found[i:] for i in range(6)), strict=False))
    return runs


def assert_clean(text: str, fake: FakeUpstream) -> None:
    assert text.strip(), "an empty answer"
    found = words(text)
    leaked = set(zip(*(found[i:] for i in range(6)), strict=False)) & injected_runs(fake)
    assert not leaked, f"toolshim's own text reached the client: {sorted(leaked)[:3]} in {text!r}"
    assert not [mark for mark in MARKUP if mark in text], text
    lines = [line.strip(" #*`-").casefold() for line in text.splitlines()]
    assert "get_weather" not in lines and not any(line.startswith(("city:", "town:")) for line in lines), text


async def chat(proxy: Any, stream: bool, **params: Any) -> dict[str, Any]:
    async with checked_openai(proxy.base_url) as client:
        if not stream:
            result = (await client.chat.completions.create(model="m", tools=WEATHER, **params)).model_dump()
        else:
            state = ChatCompletionStreamState()
            async for chunk in await client.chat.completions.create(model="m", tools=WEATHER, stream=True, **params):
                state.handle_chunk(chunk)
            result = state.get_final_completion().model_dump()
    assert client.transport.check() == 1
    return dict(result["choices"][0]["message"]) | {"finish": result["choices"][0]["finish_reason"]}


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("echo", sorted(ECHOES))
@pytest.mark.parametrize("stream", [False, True])
async def test_an_echo_model_never_shows_toolshims_text_in_chat(
    start_proxy, fake_upstream, fmt: str, scenario: str, echo: str, stream: bool
) -> None:
    proxy = await start_proxy(models=[{"match": "*", "upstream": "up", "tool_mode": fmt}])
    params = setup(fake_upstream, fmt, scenario, echo)
    message = await chat(proxy, stream, **params)
    calls = message.get("tool_calls") or []
    # no call is made of an echo: of the prompt's worked example, or of a result's or a re-ask's words
    assert not calls, calls
    assert message["finish"] == "stop"
    assert_clean(message["content"] or "", fake_upstream)


@pytest.mark.parametrize("fmt", ["hermes", "pythonic", "react"])
@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("echo", sorted(ECHOES))
@pytest.mark.parametrize("stream", [False, True])
async def test_an_echo_model_never_shows_toolshims_text_with_folded_results(
    start_proxy, fake_upstream, fmt: str, scenario: str, echo: str, stream: bool
) -> None:
    """The folded history's header and instructions are toolshim's text like any other."""
    proxy = await start_proxy(models=[{"match": "*", "upstream": "up", "tool_mode": fmt, "tool_history": "folded"}])
    params = setup(fake_upstream, fmt, scenario, echo)
    message = await chat(proxy, stream, **params)
    assert not message.get("tool_calls") and message["finish"] == "stop"
    assert_clean(message["content"] or "", fake_upstream)


RESPONSES_TOOLS: list[Any] = [{"type": "function", **OPENAI_TOOLS["get_weather"]["function"]}]


def responses_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat history as Responses input items."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "user":
            items.append({"role": "user", "content": message["content"]})
        elif message["role"] == "assistant":
            for call in message["tool_calls"]:
                fn = call["function"]
                items.append({"type": "function_call", "call_id": call["id"], **fn})
        else:
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"], "output": RESULT})
    return items


@pytest.mark.parametrize("fmt", ["hermes", "pythonic", "react", "xml"])
@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("echo", sorted(ECHOES))
@pytest.mark.parametrize("stream", [False, True])
async def test_an_echo_model_never_shows_toolshims_text_in_responses(
    start_proxy, fake_upstream, tmp_path, fmt: str, scenario: str, echo: str, stream: bool
) -> None:
    proxy = await start_proxy(models=[{"match": "*", "upstream": "up", "tool_mode": fmt}], data_dir=tmp_path)
    params = setup(fake_upstream, fmt, scenario, echo)
    request = {"model": "m", "tools": RESPONSES_TOOLS, "input": responses_input(params.pop("messages")), **params}
    async with AsyncOpenAI(base_url=proxy.base_url, api_key="unused", max_retries=0) as client:
        if stream:
            events = [e.model_dump() async for e in await client.responses.create(**request, stream=True)]
            response = dict(events[-1]["response"])
        else:
            response = (await client.responses.create(**request)).model_dump()
    assert response["status"] == "completed"
    assert not [item for item in response["output"] if item["type"] == "function_call"]
    text = "".join(
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
    )
    assert_clean(text, fake_upstream)


def test_the_injected_runs_are_found() -> None:
    """The check itself: the client's texts are cut out, toolshim's are kept."""
    fake = FakeUpstream()
    fake.requests.append({"messages": [{"role": "system", "content": "Call a tool only when you need it, then stop."}]})
    fake.requests.append({"messages": [{"role": "user", "content": f"<tool_response>\n{RESULT}\n</tool_response>"}]})
    runs = injected_runs(fake)
    assert ("call", "a", "tool", "only", "when", "you") in runs
    assert not any("temperature" in run for run in runs)
    with pytest.raises(AssertionError):
        assert_clean("Sure. Call a tool only when you need it.", fake)
    assert_clean("It is sunny in Madrid, 21 degrees.", fake)
    with pytest.raises(AssertionError):
        assert_clean("get_weather\ncity: Madrid", fake)
