"""``ResponseAssembler`` (sans-IO): chat chunks → Responses events and the Response object.

A streamed answer and the same answer as one completion (``split_completion(accumulate(chunks))``)
give the same Response; events are numbered, balanced and in OpenAI's order.
"""

from __future__ import annotations

import itertools
from typing import Any

from toolshim.chat.chunks import ChunkFactory, accumulate, split_completion
from toolshim.responses.events import ResponseAssembler

from tests.test_responses import check_events


def ids() -> Any:
    counter = itertools.count()
    return lambda prefix: f"{prefix}_{next(counter)}"


def chat_chunks() -> list[dict[str, Any]]:
    f = ChunkFactory(model="m")
    return [
        f.role(),
        f.reasoning("think"),
        f.reasoning("ing"),
        f.content("Let me "),
        f.content("check."),
        f.call_header(0, "call_a", "get_weather"),
        f.call_arguments(0, '{"city":'),
        f.call_arguments(0, '"Paris"}'),
        f.call_header(1, "call_b", "get_time"),
        f.call_arguments(1, "{}"),
        f.finish("tool_calls"),
        f.usage({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}),
    ]


def assemble(chunks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    assembler = ResponseAssembler("m", {"tools": []}, ids=ids(), created_at=1)
    events = assembler.start() + assembler.feed_all(chunks) + assembler.finish()
    return events, assembler.response


def test_stream_and_whole_completion_agree() -> None:
    events, streamed = assemble(chat_chunks())
    check_events(events)
    _, whole = assemble(split_completion(accumulate(chat_chunks())))
    assert streamed == whole
    assert [item["type"] for item in streamed["output"]] == ["reasoning", "message", "function_call", "function_call"]
    assert streamed["output"][2]["call_id"] == "call_a" and streamed["output"][2]["arguments"] == '{"city":"Paris"}'
    assert streamed["usage"]["input_tokens"] == 3 and streamed["usage"]["output_tokens"] == 4
    assert streamed["status"] == "completed"


def test_event_order_per_item() -> None:
    events, _ = assemble(chat_chunks())
    kinds = [e["type"] for e in events]
    assert kinds[:6] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
    ]
    message = kinds.index("response.content_part.added")
    assert kinds[message - 1] == "response.output_item.added"
    assert kinds[-1] == "response.completed"


def test_failure_and_length() -> None:
    assembler = ResponseAssembler("m", {}, ids=ids())
    events = assembler.start() + assembler.feed(ChunkFactory(model="m").content("Hel"))
    events += assembler.fail("upstream_disconnected", "dropped")
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert events[-1]["response"]["error"] == {"code": "upstream_disconnected", "message": "dropped"}
    _, response = assemble([ChunkFactory(model="m").content("cut"), ChunkFactory(model="m").finish("length")])
    assert response["status"] == "incomplete" and response["incomplete_details"] == {"reason": "max_output_tokens"}
