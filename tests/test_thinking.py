"""The rule option ``thinking`` end to end: an output that starts inside a thought (the template opened it)."""

from __future__ import annotations

import json

import pytest

from tests.fakes import Reply, text_stream
from tests.test_emulation import FORMAT_NAMES, ask, call_text, emulated, pieces

THOUGHT = "The user asks about Paris, so I call the weather tool."


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("mode", ["auto", "template"])
@pytest.mark.parametrize("stream", [False, True])
async def test_leading_thought_is_reasoning(start_proxy, fake_upstream, fmt: str, mode: str, stream: bool) -> None:
    proxy = await start_proxy(models=emulated(fmt, thinking=mode))
    output = THOUGHT + "\n</think>\n\n" + call_text(fmt)
    fake_upstream.script(Reply(pieces=text_stream(pieces(output, 4))))
    message = (await ask(proxy, stream))["choices"][0]["message"]
    assert message["reasoning_content"].strip() == THOUGHT
    assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == [{"city": "Paris"}]
    assert not message["content"]


async def test_off_by_default_streams_plain_text(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("hermes"))
    fake_upstream.script(Reply(pieces=text_stream(pieces("Just an answer."))))
    message = (await ask(proxy, True))["choices"][0]["message"]
    assert message["content"] == "Just an answer." and not message.get("reasoning_content")
