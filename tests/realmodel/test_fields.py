"""The newer OpenAI request fields against the real llama-cpp-python server (issue 31).

llama-cpp-python ignores ``max_completion_tokens`` (asked for 5 tokens, it generated thousands) and
answers 422 to a ``developer`` message. Through toolshim (``field_dialect`` auto: ``compat`` for a
local server) the limit holds and the developer message is read as the system prompt.
"""

from __future__ import annotations

import pytest
from openai import OpenAI

from tests.realmodel.recorder import RecordingRelay

pytestmark = pytest.mark.realmodel

LONG = [{"role": "user", "content": "Write a long story about a lighthouse keeper, at least 500 words."}]
LIMIT = 5


@pytest.mark.parametrize("model", ["qwen-native", "qwen-hermes"])
def test_max_completion_tokens_limits_the_output(client: OpenAI, recorded: RecordingRelay, model: str) -> None:
    answer = client.chat.completions.create(model=model, messages=LONG, temperature=0, max_completion_tokens=LIMIT)
    assert answer.choices[0].finish_reason == "length"
    assert answer.usage is not None and 0 < answer.usage.completion_tokens <= LIMIT
    if model == "qwen-hermes":  # through the recording relay: what the server was sent
        [exchange] = recorded.exchanges
        assert exchange.request["max_tokens"] == LIMIT and "max_completion_tokens" not in exchange.request


def test_a_developer_message_is_served(client: OpenAI) -> None:
    messages = [{"role": "developer", "content": "Answer with one word."}, {"role": "user", "content": "Say hi."}]
    answer = client.chat.completions.create(model="qwen-native", messages=messages, temperature=0, max_tokens=8)
    assert answer.choices[0].message.content
