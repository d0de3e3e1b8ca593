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
    hermes = rule(tool_mode="hermes")
    assert [hermes.call_limit(p) for p in (None, False, True)] == [1, 1, PARALLEL_CALLS_DEFAULT]
    capped = rule(tool_mode="hermes", max_tool_calls=3)
    assert [capped.call_limit(p) for p in (None, False, True)] == [3, 1, 3]
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
    proxy = await start_proxy(models=emulated(fmt))
    output = "\n".join(call_text(fmt, args={"city": c}) for c in ("Paris", "Berlin"))
    fake_upstream.script(Reply(pieces=text_stream(pieces(output))))
    result = await ask(proxy, False, parallel_tool_calls=parallel)
    assert len(result["choices"][0]["message"]["tool_calls"]) == 1
    stops = list(get_format(fmt).stop_sequences())
    assert fake_upstream.requests[-1]["stop"][: len(stops)] == stops


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
