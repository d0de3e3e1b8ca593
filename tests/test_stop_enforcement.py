"""Stop enforcement end to end: an upstream that ignores ``stop`` (the FakeUpstream never honours it).

Per format the model writes one call, then what the stop sequence should have prevented (an invented
tool result, a second call's closing marker) and a long slow tail. toolshim must cut the output at the
stop sequence, close the upstream connection before it finishes, and hand the client (the real
``openai`` SDK, stream and non-stream) exactly one valid call with no markup, as if the server had
honoured ``stop``. The client's own stop sequences beyond the rule's ``max_stop_sequences`` are
enforced the same way on plain text answers.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.fakes import FakeUpstream, Reply, text_stream
from tests.test_emulation import FORMAT_NAMES, ask, call_text, emulated, pieces, raw_stream

TAIL = ["More text the model should never have been allowed to write. "] * 40

# What each format's stop sequence is there to prevent, written right after the first call.
AFTER_CALL = {
    "react": "\nObservation: 18 C and sunny\nThought: I now know.\nFinal Answer: It is 18 C.",
    "xml": '\n<tool_result name="get_weather">18 C and sunny</tool_result>\nIt is 18 C.',
    "hermes": "\n<tool_response>\n18 C and sunny\n</tool_response>\nIt is 18 C.",
    "pythonic": "\n<tool_response>\n18 C and sunny\n</tool_response>\nIt is 18 C.",
    "morph_xml": "\n<tool_response>\n18 C and sunny\n</tool_response>\nIt is 18 C.",
    "caret": "\nIt is 18 C.\n^^^get_weather\ncity: Berlin\n^^^\n",
}


def hallucination(fmt: str) -> str:
    """The first call, then an invented result or a second call (formats added later get a second call)."""
    return call_text(fmt, args={"city": "Paris"}) + AFTER_CALL.get(fmt, "\n" + call_text(fmt, args={"city": "Rome"}))


async def wait_disconnect(fake: FakeUpstream) -> None:
    for _ in range(100):
        if fake.disconnected and fake.disconnected[0]:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the upstream connection was not closed at the stop sequence")


def assert_one_clean_call(result: dict[str, Any]) -> None:
    choice = result["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    calls = choice["message"]["tool_calls"]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    content = choice["message"]["content"] or ""
    for leak in ("<tool", "Action", "Observation", "^^^", "18 C", "</", "Berlin", "Rome"):
        assert leak not in content, content


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
async def test_ignored_stop_is_enforced(start_proxy, fake_upstream, fmt: str, stream: bool) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    script = text_stream([*pieces(hallucination(fmt), 5), *TAIL])
    fake_upstream.script(Reply(pieces=script, delay=0.01))
    result = await ask(proxy, stream)
    assert_one_clean_call(result)
    await wait_disconnect(fake_upstream)
    assert fake_upstream.pieces_sent[0] < len(script) - 20, "the upstream sent its whole output"
    enforced = proxy.metrics.stops_enforced.labels("*", fmt)._value.get()
    cuts = proxy.metrics.stream_cuts.labels("*", fmt)._value.get()
    assert enforced + cuts == 1


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_ignored_stop_stream_deltas_are_valid(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    fake_upstream.script(Reply(pieces=text_stream([*pieces(hallucination(fmt), 3), *TAIL]), delay=0.005))
    chunks = await raw_stream(proxy)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    await wait_disconnect(fake_upstream)


@pytest.mark.parametrize("stream", [False, True])
async def test_client_stop_beyond_the_upstream_limit(start_proxy, fake_upstream, stream: bool) -> None:
    proxy = await start_proxy(models=emulated("react", max_stop_sequences=1))
    output = "Thought: easy.\nFinal Answer: It is sunny in Paris.<END> and then the model rambles on"
    script = text_stream([*pieces(output, 4), *TAIL])
    fake_upstream.script(Reply(pieces=script, delay=0.01))
    result = await ask(proxy, stream, stop=["<END>", "never"])
    assert fake_upstream.requests[-1]["stop"] == ["\nObservation:"]  # the client's did not fit
    choice = result["choices"][0]
    assert choice["message"]["content"] == "It is sunny in Paris."
    assert choice["finish_reason"] == "stop" and not choice["message"].get("tool_calls")
    await wait_disconnect(fake_upstream)
    assert proxy.metrics.stops_enforced.labels("*", "react")._value.get() == 1


async def test_stop_split_across_chunks_and_held_text_kept(start_proxy, fake_upstream) -> None:
    """A stop sequence split over deltas is found; a partial one that never completes is plain text."""
    proxy = await start_proxy(models=emulated("react", max_stop_sequences=1))
    fake_upstream.script(Reply(pieces=text_stream(["Final Answer: a <E", "N", "D2> b <E", "N"])))
    result = await ask(proxy, False, stop=["<END>", "zzz"])
    assert result["choices"][0]["message"]["content"] == "a <END2> b <EN"
    fake_upstream.script(Reply(pieces=text_stream(["Final Answer: a <E", "N", "D> b"])))
    result = await ask(proxy, False, stop=["<END>"])
    assert result["choices"][0]["message"]["content"] == "a "


async def test_reask_history_ends_at_the_stop(start_proxy, fake_upstream) -> None:
    """A malformed block re-asked: the assistant turn sent back is what came before the stop sequence."""
    proxy = await start_proxy(models=emulated("react"))
    bad = "Action: get_weather\nAction Input: {:::}\nObservation: invented result\nmore"
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(bad))),
        Reply(pieces=text_stream(pieces(call_text("react")))),
    )
    result = await ask(proxy, False)
    assert len(fake_upstream.requests) == 2
    history = fake_upstream.requests[1]["messages"]
    assert history[-2] == {"role": "assistant", "content": "Action: get_weather\nAction Input: {:::}"}
    assert [c["function"]["name"] for c in result["choices"][0]["message"]["tool_calls"]] == ["get_weather"]
