"""Native mode with a real model: toolshim is an exact pass-through, streaming and not.

At temperature 0 the model server is deterministic, so the text through toolshim must equal the
text straight from the server: a byte-level protocol property, independent of what the model says.
"""

from __future__ import annotations

import pytest
from openai import OpenAI

from tests.realmodel.helpers import merge_stream

pytestmark = pytest.mark.realmodel

MESSAGES = [{"role": "user", "content": "Name three primary colours, comma-separated."}]


def test_plain_chat_non_streaming_matches_the_server(client: OpenAI, direct: OpenAI) -> None:
    via = client.chat.completions.create(model="qwen-native", messages=MESSAGES, temperature=0, max_tokens=24)
    straight = direct.chat.completions.create(model="any", messages=MESSAGES, temperature=0, max_tokens=24)
    choice = via.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content, via
    assert not choice.message.tool_calls
    assert choice.finish_reason in ("stop", "length")
    assert choice.message.content == straight.choices[0].message.content
    assert via.usage is not None and via.usage.completion_tokens > 0


def test_plain_chat_streaming_matches_the_server(client: OpenAI, direct: OpenAI) -> None:
    stream = client.chat.completions.create(
        model="qwen-native", messages=MESSAGES, temperature=0, max_tokens=24, stream=True
    )
    merged = merge_stream(stream)
    straight = direct.chat.completions.create(model="any", messages=MESSAGES, temperature=0, max_tokens=24)
    assert merged.chunks > 2, "a streamed answer arrives in several chunks, not buffered whole"
    assert merged.content == straight.choices[0].message.content
    assert not merged.calls
    assert merged.finish_reason in ("stop", "length")
