"""When the model writes badly (issue 18, items 2, 3, 4, 7, 8), end to end: the real OpenAI SDK → proxy →
a scripted aiohttp upstream, in every format where the item applies, streamed and not.

- a call block in a code fence is a call, and the fence never reaches content (item 2);
- a tool result the model invents after its call, in any spelling, ends the turn unseen (item 3);
- ``Action Input: {...}, {...}``: the second object is a second call, or the cut; never text (item 4);
- a caret opener written wrong (``^^^name: args``) is a malformed block: re-asked, never bare text (item 7);
- markup cut off by the length limit ends as ``finish_reason: "length"`` with no markup in content (item 8),
  and the content is the block's words, never empty (item 6).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from toolshim.chat.builder import NO_ANSWER_CALL
from toolshim.formats import FORMATS

from tests.fakes import Reply, text_stream
from tests.test_emulation import ask, call_text, emulated, pieces, raw_stream

FORMAT_NAMES = sorted(FORMATS)
# What markup of any format looks like in content: tags, fences, caret markers, ReAct keywords, JSON.
MARKUP = re.compile(r"<[/\w|]|```|\^\^\^|^\s*(?:Action|Observation|Tool result)\b|[{}]|\"arguments\"", re.M)


def calls_of(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message.get("tool_calls") or []]


def assert_no_markup(content: str | None) -> None:
    assert MARKUP.search(content or "") is None, content


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("lang", ["", "xml", "json"])
async def test_call_in_a_code_fence_is_a_call(start_proxy, fake_upstream, fmt: str, stream: bool, lang: str) -> None:
    proxy = await start_proxy(models=emulated(fmt, max_repair_retries=0))
    text = f"Let me check.\n```{lang}\n{call_text(fmt)}\n```\n"
    fake_upstream.script(Reply(pieces=text_stream(pieces(text, 5))))
    result = await ask(proxy, stream)
    message = result["choices"][0]["message"]
    assert calls_of(message) == [("get_weather", {"city": "Paris"})]
    assert (message["content"] or "").strip() == "Let me check."
    assert result["choices"][0]["finish_reason"] == "tool_calls"


INVENTED = [
    '"Observation: It is 20C in Paris."',
    "Observation: It is 20C in Paris.",
    "**Observation:** It is 20C in Paris.",
    "> Tool result: It is 20C in Paris.",
    "Result: It is 20C in Paris.",
    "<tool_response>\nIt is 20C in Paris.\n</tool_response>",
    "<tool_result>It is 20C in Paris.</tool_result>",
]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("invented", INVENTED)
async def test_an_invented_tool_result_never_reaches_the_client(
    start_proxy, fake_upstream, fmt: str, stream: bool, invented: str
) -> None:
    proxy = await start_proxy(models=emulated(fmt, max_repair_retries=0))
    text = f"Let me check.\n{call_text(fmt)}\n{invented}\nFinal Answer: It is 20C."
    fake_upstream.script(Reply(pieces=text_stream(pieces(text, 3))))
    message = (await ask(proxy, stream))["choices"][0]["message"]
    assert calls_of(message) == [("get_weather", {"city": "Paris"})]
    assert "20C" not in (message["content"] or "") and (message["content"] or "").strip() == "Let me check."


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("sep", [", ", ",\n", " ;\n"])
async def test_react_two_input_objects_are_two_calls(start_proxy, fake_upstream, stream: bool, sep: str) -> None:
    proxy = await start_proxy(models=emulated("react", max_repair_retries=0))
    text = f'Action: get_weather\nAction Input: {{"city": "Paris"}}{sep}{{"city": "Lyon"}}\n'
    fake_upstream.script(Reply(pieces=text_stream(pieces(text, 4))))
    message = (await ask(proxy, stream, parallel_tool_calls=True))["choices"][0]["message"]
    assert calls_of(message) == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Lyon"})]
    assert_no_markup(message["content"])
    # one call allowed: the second object is the cut, never content
    fake_upstream.script(Reply(pieces=text_stream(pieces(text, 4))))
    message = (await ask(proxy, stream, parallel_tool_calls=False))["choices"][0]["message"]
    assert calls_of(message) == [("get_weather", {"city": "Paris"})]
    assert not (message["content"] or "").strip()


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "header", ["^^^get_weather: Paris\n^^^", '^^^get_weather(city="Paris")', "^^^get_weather: Paris, top: 5"]
)
async def test_a_caret_opener_written_wrong_is_reasked(start_proxy, fake_upstream, stream: bool, header: str) -> None:
    proxy = await start_proxy(models=emulated("caret", max_repair_retries=1))
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(header, 4))), Reply(pieces=text_stream(pieces(call_text("caret"), 4)))
    )
    message = (await ask(proxy, stream))["choices"][0]["message"]
    assert calls_of(message) == [("get_weather", {"city": "Paris"})]
    assert len(fake_upstream.requests) == 2  # the malformed block was counted and re-asked
    # with no re-ask left: a note, never the block's words (a client keeps them for the model to copy)
    fake_upstream.script(Reply(pieces=text_stream(pieces(header, 4))))
    proxy = await start_proxy(models=emulated("caret", max_repair_retries=0))
    message = (await ask(proxy, stream))["choices"][0]["message"]
    assert not message.get("tool_calls") and message["content"] == NO_ANSWER_CALL


def nested_cut(fmt: str) -> str:
    """A call block whose arguments nest objects until the token limit cuts them (``tool_response`` is
    left out: in morph_xml its tag is the stop sequence, which ends the turn before the cut)."""
    nested: dict[str, Any] = {"city": "Paris"}
    for _ in range(12):
        nested = {"response": nested}
    text = call_text(fmt, args=nested)
    return text[: len(text) * 2 // 3]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("fenced", [False, True])
async def test_markup_cut_by_the_length_limit_ends_as_length(
    start_proxy, fake_upstream, fmt: str, stream: bool, fenced: bool
) -> None:
    proxy = await start_proxy(models=emulated(fmt, max_repair_retries=0))
    text = ("```json\n" if fenced else "") + nested_cut(fmt)
    fake_upstream.script(Reply(pieces=text_stream(pieces(text, 5), finish="length")))
    if stream:  # read raw: the SDK's stream helper raises on a length finish
        chunks = await raw_stream(proxy)
        deltas = [c["choices"][0] for c in chunks if c.get("choices")]
        finish = [d["finish_reason"] for d in deltas if d.get("finish_reason")]
        content = "".join(d["delta"].get("content") or "" for d in deltas)
        assert finish == ["length"] and not any(d["delta"].get("tool_calls") for d in deltas)
    else:
        choice = (await ask(proxy, stream))["choices"][0]
        assert choice["finish_reason"] == "length", choice
        assert not choice["message"].get("tool_calls")
        content = choice["message"]["content"]
    assert content == NO_ANSWER_CALL  # never empty, never the block's markup or words


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_broken_block_is_never_the_answer(start_proxy, fake_upstream, fmt: str, stream: bool) -> None:
    proxy = await start_proxy(models=emulated(fmt, max_repair_retries=0))
    fake_upstream.script(Reply(pieces=text_stream(pieces(call_text(fmt, args={"town": "Paris"})))))
    message = (await ask(proxy, stream))["choices"][0]["message"]
    assert not message.get("tool_calls") and message["content"] == NO_ANSWER_CALL
