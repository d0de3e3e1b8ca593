"""Parallel calls in emulation (issue 11 item 4): how many calls a turn may carry, which stop
sequences go upstream for it, and the cut when a model repeats its call instead of stopping."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from toolshim.config.rules import PARALLEL_CALLS_DEFAULT, ModelRule
from toolshim.formats import get_format

from tests.fakes import Reply, text_stream
from tests.test_emulation import FORMAT_NAMES, ask, call_text, emulated, pieces


def rule(**extra: Any) -> ModelRule:
    return ModelRule.model_validate({"match": "*", "upstream": "up", **extra})


def test_call_limit_reads_the_request() -> None:
    """Only ``false`` means one call: OpenAI's default is true. Absent, the emulated prompt still asks for one."""
    hermes = rule(tool_mode="hermes")
    assert [hermes.call_limit(p) for p in (None, False, True)] == [PARALLEL_CALLS_DEFAULT, 1, PARALLEL_CALLS_DEFAULT]
    assert [hermes.prompted_calls(p) for p in (None, False, True)] == [1, 1, PARALLEL_CALLS_DEFAULT]
    capped = rule(tool_mode="hermes", max_tool_calls=3)
    assert [capped.call_limit(p) for p in (None, False, True)] == [3, 1, 3]
    assert [capped.prompted_calls(p) for p in (None, False, True)] == [3, 1, 3]
    native = rule()
    assert [native.call_limit(p) for p in (None, False, True)] == [128, 1, 128]
    assert rule(tool_mode="auto").call_limit(True) == PARALLEL_CALLS_DEFAULT


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_explicit_parallel_allows_several_calls_by_default(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    output = "\n".join(call_text(fmt, args={"city": c}) for c in ("Paris", "Berlin", "Rome"))
    fake_upstream.script(Reply(pieces=text_stream(pieces(output))))
    for stream in (False, True):
        result = await ask(proxy, stream, parallel_tool_calls=True)
        calls = result["choices"][0]["message"]["tool_calls"]
        assert [json.loads(c["function"]["arguments"])["city"] for c in calls] == ["Paris", "Berlin", "Rome"]
        body = fake_upstream.requests[-1]
        between = get_format(fmt).stops_between_calls()
        assert not set(between) & set(body.get("stop", [])), "a stop between calls would end the turn"


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("parallel", [None, False])
async def test_one_call_keeps_the_format_stops(start_proxy, fake_upstream, fmt: str, parallel: bool | None) -> None:
    """Without ``parallel_tool_calls: true`` the prompt asks for one call and the format's stops go upstream.
    A second call the model writes anyway (where no stop ends the turn between calls) is the client's
    unless it said ``false``: OpenAI clients take several calls by default."""
    proxy = await start_proxy(models=emulated(fmt))
    output = "\n".join(call_text(fmt, args={"city": c}) for c in ("Paris", "Berlin"))
    fake_upstream.script(Reply(pieces=text_stream(pieces(output))))
    result = await ask(proxy, False, parallel_tool_calls=parallel)
    stops = list(get_format(fmt).stop_sequences())
    assert fake_upstream.requests[-1]["stop"][: len(stops)] == stops
    assert "at most one tool per turn" in fake_upstream.requests[-1]["messages"][0]["content"]
    written = 1 if get_format(fmt).stops_between_calls() else 2  # a stop between calls ends the model's turn
    assert len(result["choices"][0]["message"]["tool_calls"]) == (1 if parallel is False else written)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_repeated_call_ends_the_turn(start_proxy, fake_upstream, fmt: str, stream: bool) -> None:
    """The measured 20-120 s: with several calls allowed a small model writes its call again and
    again. The first repeat closes the upstream; the client gets each distinct call once."""
    proxy = await start_proxy(models=emulated(fmt))
    paris, berlin = call_text(fmt, args={"city": "Paris"}), call_text(fmt, args={"city": "Berlin"})
    script = text_stream([*pieces(paris + "\n" + berlin + "\n"), *pieces((paris + "\n") * 30)])
    fake_upstream.script(Reply(pieces=script, delay=0.01))
    result = await ask(proxy, stream, parallel_tool_calls=True)
    calls = result["choices"][0]["message"]["tool_calls"]
    assert [json.loads(c["function"]["arguments"])["city"] for c in calls] == ["Paris", "Berlin"]
    assert result["choices"][0]["finish_reason"] == "tool_calls"
    for _ in range(50):
        if fake_upstream.disconnected and fake_upstream.disconnected[0]:
            break
        await asyncio.sleep(0.02)
    assert fake_upstream.disconnected[0], "the upstream connection was not closed at the repeat"
    assert fake_upstream.pieces_sent[0] < len(script) // 2, "the upstream sent its whole output"
    assert proxy.metrics.stream_cuts.labels("*", fmt)._value.get() == 1
