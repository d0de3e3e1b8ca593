"""A client that leaves mid-stream must make the model server stop generating.

The llama.cpp server generates one request at a time (``--interrupt_requests False`` queues the
next one), so "it stopped" is observable from outside: a one-token request sent right after the
disconnect completes in about a second. Had the long generation run on, that request would wait
for it: minutes (3,500 tokens at ~20-30 tokens/s on 2 cores), far past the threshold even on a
busy machine.
"""

from __future__ import annotations

import time

import pytest
from openai import APITimeoutError, OpenAI

pytestmark = pytest.mark.realmodel

LONG_PROMPT = [{"role": "user", "content": "Count from 1 to 2000, separated by commas. Do not stop early."}]
LONG_TOKENS = 3500  # prompt + this must fit the server's 4,096-token context
IDLE_WITHIN_S = 20.0


@pytest.mark.parametrize("model", ["qwen-native", "qwen-hermes-direct"])
def test_disconnect_mid_stream_stops_generation(client: OpenAI, direct: OpenAI, model: str) -> None:
    stream = client.chat.completions.create(
        model=model, messages=LONG_PROMPT, temperature=0, max_tokens=LONG_TOKENS, stream=True
    )
    received = ""
    for chunk in stream:
        assert not (chunk.choices and chunk.choices[0].finish_reason), "the generation ended before the test left"
        received += (chunk.choices[0].delta.content or "") if chunk.choices else ""
        if len(received) >= 20:
            break
    assert len(received) >= 20, "the stream ended too early to test a disconnect"
    stream.close()

    started = time.monotonic()
    try:
        probe = direct.chat.completions.create(
            model="any", messages=[{"role": "user", "content": "Hi"}], max_tokens=1, timeout=IDLE_WITHIN_S * 1.5
        )
    except APITimeoutError:
        pytest.fail(f"the model server was still generating {IDLE_WITHIN_S * 1.5:.0f} s after the client left")
    waited = time.monotonic() - started
    assert probe.choices, probe
    assert waited < IDLE_WITHIN_S, f"the model server was still busy {waited:.1f} s after the client left"
