"""When the model writes badly (issue 18, items 1, 5, 6), end to end: the real OpenAI SDK → proxy →
a scripted aiohttp upstream, in every registered format, streamed and not.

- usage: every non-streamed answer has it (and a streamed one that asks for it), from the upstream,
  else its tokenizer endpoint, else an estimate; the ``x-toolshim-usage`` header and the
  ``toolshim_usage_source`` metric say which;
- re-asks: a non-streamed answer carries only the final attempt's text; the model's repetition of the
  instructions rendered for this request never reaches the client;
- re-asks that cannot help: a word-for-word repeat ends them, a re-ask samples a higher temperature,
  and an answer without a valid call is never empty.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from toolshim.chat.builder import NO_ANSWER_CALL
from toolshim.chat.usage import MAX_COUNTED_CHARS, estimate_tokens, prompt_text
from toolshim.formats import FORMATS, get_format
from toolshim.formats.base import ToolChoice

from tests.checked import checked_openai
from tests.fakes import Reply, text_stream
from tests.formats.tools import TOOLS
from tests.test_emulation import USER, WEATHER, ask, call_text, emulated, pieces, raw_stream

FORMAT_NAMES = sorted(FORMATS)
MODEL_TEXT = "It is sunny in Paris today."


def bad_call(fmt: str) -> str:
    """A call block whose arguments break the schema ("town" instead of the required "city")."""
    return call_text(fmt, args={"town": "Paris"})


def words(text: str) -> int:
    return len(text.split())  # the fake upstream's tokenizer: one token per word


async def ask_raw(proxy: Any, **kwargs: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """A non-streamed answer and its response headers, through the SDK."""
    async with checked_openai(proxy.base_url) as client:
        raw = await client.chat.completions.with_raw_response.create(model="m", messages=USER, tools=WEATHER, **kwargs)
        return raw.parse().model_dump(), dict(raw.headers)


def counts(usage: dict[str, Any]) -> tuple[int, int, int]:
    return usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]


def source_count(proxy: Any, source: str) -> float:
    return float(proxy.metrics.usage_sources.labels("*", source)._value.get())


# ---- item 1: usage -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("tokenizer", ["llama.cpp", "llama-cpp-python"])
async def test_usage_counted_with_the_upstream_tokenizer(start_proxy, fake_upstream, fmt: str, tokenizer: str) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    fake_upstream.tokenizer = tokenizer
    model_text = "Let me look.\n" + call_text(fmt)
    fake_upstream.script(Reply(pieces=text_stream(pieces(model_text))))  # no usage in the stream
    result, headers = await ask_raw(proxy)
    assert result["choices"][0]["message"]["tool_calls"]
    expected_prompt = words(prompt_text(fake_upstream.requests[0]["messages"]))
    assert counts(result["usage"]) == (expected_prompt, words(model_text), expected_prompt + words(model_text))
    assert headers["x-toolshim-usage"] == "tokenizer"
    path = "/tokenize" if tokenizer == "llama.cpp" else "/extras/tokenize"
    field = "content" if tokenizer == "llama.cpp" else "input"
    assert all(call[0] == path and field in call[1] for call in fake_upstream.tokenize_calls[-2:])
    # the endpoint that answered is remembered: the next answer asks it alone, and streams agree
    before = len(fake_upstream.tokenize_calls)
    chunks = await raw_stream(proxy, stream_options={"include_usage": True})
    assert chunks[-1]["choices"] == [] and counts(chunks[-1]["usage"]) == counts(result["usage"])
    assert [call[0] for call in fake_upstream.tokenize_calls[before:]] == [path, path]
    assert source_count(proxy, "tokenizer") == 2


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_usage_estimated_without_a_tokenizer(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    fake_upstream.script(Reply(pieces=text_stream(pieces(MODEL_TEXT))))
    result, headers = await ask_raw(proxy)
    prompt = estimate_tokens(prompt_text(fake_upstream.requests[0]["messages"]))
    assert result["usage"]["prompt_tokens"] == prompt > 0
    assert result["usage"]["completion_tokens"] == estimate_tokens(MODEL_TEXT)
    assert result["usage"]["total_tokens"] == prompt + estimate_tokens(MODEL_TEXT)
    assert headers["x-toolshim-usage"] == "estimate"
    tried = len(fake_upstream.tokenize_calls)
    assert tried > 0
    chunks = await raw_stream(proxy, stream_options={"include_usage": True})
    assert counts(chunks[-1]["usage"]) == counts(result["usage"])
    assert len(fake_upstream.tokenize_calls) == tried  # "no tokenizer here" is remembered
    assert source_count(proxy, "estimate") == 2


async def test_usage_from_the_upstream_wins(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("caret"))
    fake_upstream.tokenizer = "llama.cpp"
    usage = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
    fake_upstream.script(Reply(pieces=text_stream(pieces(MODEL_TEXT), usage=usage)))
    result, headers = await ask_raw(proxy)
    assert result["usage"]["prompt_tokens"] == 120 and result["usage"]["total_tokens"] == 150
    assert headers["x-toolshim-usage"] == "upstream" and fake_upstream.tokenize_calls == []
    assert source_count(proxy, "upstream") == 1


async def test_streams_without_include_usage_count_nothing(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("hermes"))
    fake_upstream.tokenizer = "llama.cpp"
    fake_upstream.script(Reply(pieces=text_stream(pieces(MODEL_TEXT))))
    chunks = await raw_stream(proxy)
    assert all(not c.get("usage") for c in chunks) and fake_upstream.tokenize_calls == []


async def test_tokenizer_none_in_the_rules_estimates(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("xml"), upstream_extra={"tokenizer": "none"})
    fake_upstream.tokenizer = "llama.cpp"
    fake_upstream.script(Reply(pieces=text_stream(pieces(MODEL_TEXT))))
    _, headers = await ask_raw(proxy)
    assert headers["x-toolshim-usage"] == "estimate" and fake_upstream.tokenize_calls == []


async def test_an_answer_too_long_to_tokenize_is_estimated(start_proxy, fake_upstream) -> None:
    """Tokenizing megabytes upstream costs more than the count tells: past ``MAX_COUNTED_CHARS`` the
    answer's usage is estimated and the tokenizer is not asked."""
    proxy = await start_proxy(models=emulated("hermes"))
    fake_upstream.tokenizer = "llama.cpp"
    long_text = "word " * (MAX_COUNTED_CHARS // 5 + 1)
    fake_upstream.script(Reply(pieces=text_stream(pieces(long_text, 100_000))))
    result, headers = await ask_raw(proxy)
    assert headers["x-toolshim-usage"] == "estimate" and fake_upstream.tokenize_calls == []
    assert result["usage"]["completion_tokens"] == estimate_tokens(long_text)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_usage_adds_up_over_reasks(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    fake_upstream.tokenizer = "llama-cpp-python"
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(bad_call(fmt)))), Reply(pieces=text_stream(pieces(call_text(fmt))))
    )
    result, headers = await ask_raw(proxy)
    assert result["choices"][0]["message"]["tool_calls"] and len(fake_upstream.requests) == 2
    prompts = sum(words(prompt_text(request["messages"])) for request in fake_upstream.requests)
    assert result["usage"]["prompt_tokens"] == prompts
    assert result["usage"]["completion_tokens"] == words(bad_call(fmt)) + words(call_text(fmt))
    assert headers["x-toolshim-usage"] == "tokenizer"


async def test_litellm_counts_with_its_token_counter() -> None:
    from toolshim.config.rules import UpstreamConfig
    from toolshim.upstream.litellm import LiteLLMUpstream

    upstream = LiteLLMUpstream("lite", UpstreamConfig(provider="litellm"))
    count = await upstream.count_tokens("hello there world, how are you", "openai/gpt-4o")
    assert isinstance(count, int) and 3 <= count <= 12


# ---- item 5: only the final attempt's text; no echo of the instructions ---------------------------


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_non_stream_answer_has_only_the_final_attempts_text(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    first = "First I try something.\n" + bad_call(fmt)
    second = "Now properly.\n" + call_text(fmt)
    fake_upstream.script(Reply(pieces=text_stream(pieces(first))), Reply(pieces=text_stream(pieces(second))))
    result = await ask(proxy, False)
    message = result["choices"][0]["message"]
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    assert "First I try" not in (message["content"] or "") and "Now properly." in message["content"]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_stream_never_repeats_text_after_a_reask(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    first = "Checking the weather.\n" + bad_call(fmt)
    second = "Checking the weather.\n" + call_text(fmt)
    fake_upstream.script(Reply(pieces=text_stream(pieces(first))), Reply(pieces=text_stream(pieces(second))))
    result = await ask(proxy, True)
    message = result["choices"][0]["message"]
    assert message["tool_calls"] and (message["content"] or "").count("Checking the weather.") == 1


def echoed_lines(fmt: str) -> list[str]:
    """Prose lines of the instructions this format renders (no markup), as a model might repeat them."""
    prompt = get_format(fmt).render_tools(TOOLS[:1], ToolChoice("auto"), False)
    prose = [line for line in prompt.splitlines() if len(line.split()) >= 6 and not set(line) & set('<>{}[]^`:"')]
    assert prose, fmt
    return prose[:2]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
async def test_instruction_echo_never_reaches_the_client(start_proxy, fake_upstream, fmt: str, stream: bool) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    echo = echoed_lines(fmt)
    # the echo in varied case and spacing, its sentences split over lines, then a real answer
    model_text = "\n".join([echo[0].upper(), *echo[1:], MODEL_TEXT])
    fake_upstream.script(Reply(pieces=text_stream(pieces(model_text, 5))))
    result = await ask(proxy, stream)
    assert result["choices"][0]["message"]["content"].strip() == MODEL_TEXT
    # and before a call: only the model's own words are left
    fake_upstream.script(Reply(pieces=text_stream(pieces(f"{echo[-1]}\nLet me check.\n{call_text(fmt)}", 3))))
    message = (await ask(proxy, stream))["choices"][0]["message"]
    assert message["tool_calls"] and (message["content"] or "").strip() == "Let me check."


async def test_echo_of_the_corrective_message_is_dropped(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("hermes"))
    fake_upstream.script(
        Reply(pieces=text_stream(pieces("I will not call anything."))),
        Reply(pieces=text_stream(pieces("You must call one of the tools now. Sure. " + call_text("hermes")))),
    )
    message = (await ask(proxy, False, tool_choice="required"))["choices"][0]["message"]
    assert message["tool_calls"] and (message["content"] or "").strip() == "Sure."


# ---- item 6: re-asks that cannot help -------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
async def test_identical_output_ends_the_reasks(start_proxy, fake_upstream, fmt: str, stream: bool) -> None:
    proxy = await start_proxy(models=emulated(fmt, max_repair_retries=5))
    fake_upstream.script(Reply(pieces=text_stream(pieces("I will check that.\n" + bad_call(fmt)))))  # every time
    result = await ask(proxy, stream, temperature=0)
    assert len(fake_upstream.requests) == 2  # the second answer was the first again: no third
    assert fake_upstream.requests[0]["temperature"] == 0 and fake_upstream.requests[1]["temperature"] == 0.3
    message = result["choices"][0]["message"]
    assert not message.get("tool_calls") and message["content"].strip() == "I will check that."
    assert result["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_answer_is_never_empty(start_proxy, fake_upstream, fmt: str) -> None:
    """The final attempt wrote only a broken block: the client gets an earlier attempt's own words."""
    proxy = await start_proxy(models=emulated(fmt, max_repair_retries=1))
    fake_upstream.script(
        Reply(pieces=text_stream(pieces("The forecast needs a lookup.\n" + bad_call(fmt)))),
        Reply(pieces=text_stream(pieces(call_text(fmt, args={"town": "Lyon"})))),
    )
    message = (await ask(proxy, False))["choices"][0]["message"]
    assert message["content"].strip() == "The forecast needs a lookup."


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
async def test_only_a_broken_block_gives_a_note_not_its_words(
    start_proxy, fake_upstream, fmt: str, stream: bool
) -> None:
    proxy = await start_proxy(models=emulated(fmt, max_repair_retries=0))
    fake_upstream.script(Reply(pieces=text_stream(pieces(bad_call(fmt)))))
    result = await ask(proxy, stream)
    message = result["choices"][0]["message"]
    assert not message.get("tool_calls") and message["content"] == NO_ANSWER_CALL


async def test_reask_temperature_rule_option(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("hermes", reask_temperature=None))
    fake_upstream.script(Reply(pieces=text_stream(pieces(bad_call("hermes")))), Reply(pieces=text_stream(["ok"])))
    await ask(proxy, False, temperature=0)
    assert [request["temperature"] for request in fake_upstream.requests] == [0, 0]
    proxy = await start_proxy(models=emulated("hermes"))
    fake_upstream.requests.clear()
    fake_upstream.script(Reply(pieces=text_stream(pieces(bad_call("hermes")))), Reply(pieces=text_stream(["ok"])))
    await ask(proxy, False, temperature=0.9)  # a temperature above the floor is kept
    assert [request["temperature"] for request in fake_upstream.requests] == [0.9, 0.9]


MADE_UP_CALL = '{"name": "lookup_tax_records", "arguments": {"year": 2020}}'


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_to_a_made_up_tool_is_no_text(start_proxy, fake_upstream, fmt: str, stream: bool) -> None:
    """A bare call object naming no offered tool is a malformed call: re-asked (text allowed when
    tool_choice is auto), and never shown as written."""
    proxy = await start_proxy(models=emulated(fmt, max_repair_retries=1))
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(MADE_UP_CALL))), Reply(pieces=text_stream(pieces("I have no tax tool.")))
    )
    message = (await ask(proxy, stream))["choices"][0]["message"]
    assert not message.get("tool_calls") and message["content"].strip() == "I have no tax tool."
    corrective = fake_upstream.requests[1]["messages"][-1]["content"]
    assert "'lookup_tax_records' is not a tool" in corrective and "answer in plain text" in corrective


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_made_up_calls_to_the_end_leave_words_not_markup(start_proxy, fake_upstream, fmt: str) -> None:
    proxy = await start_proxy(models=emulated(fmt, max_repair_retries=1))
    fake_upstream.script(*[Reply(pieces=text_stream(pieces(MADE_UP_CALL.replace("2020", y)))) for y in ("2020", "21")])
    content = (await ask(proxy, False))["choices"][0]["message"]["content"]
    assert content.strip() and not any(mark in content for mark in '{}"')


async def test_a_demanded_call_is_reasked_without_the_text_hint(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("hermes", max_repair_retries=1))
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(MADE_UP_CALL))), Reply(pieces=text_stream(pieces(call_text("hermes"))))
    )
    message = (await ask(proxy, False, tool_choice="required"))["choices"][0]["message"]
    assert message["tool_calls"][0]["function"]["name"] == "get_weather"
    assert "plain text" not in fake_upstream.requests[1]["messages"][-1]["content"]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("first", ["blank", "echo"])
async def test_an_empty_reply_is_asked_again(start_proxy, fake_upstream, fmt: str, stream: bool, first: str) -> None:
    """Only white space, or only the instructions repeated (dropped): nothing to show, so the model is
    asked once more, and its answer is what the client gets."""
    proxy = await start_proxy(models=emulated(fmt, max_repair_retries=1))
    empty = "\n\n \n" if first == "blank" else "\n".join(echoed_lines(fmt)) + "\n"
    fake_upstream.script(Reply(pieces=text_stream(pieces(empty))), Reply(pieces=text_stream(pieces(MODEL_TEXT))))
    message = (await ask(proxy, stream))["choices"][0]["message"]
    assert message["content"].strip() == MODEL_TEXT and len(fake_upstream.requests) == 2
    assert "Your reply was empty" in fake_upstream.requests[1]["messages"][-1]["content"]
    assert proxy.metrics.reasks.labels("*", "empty")._value.get() == 1


async def test_an_empty_reply_is_not_asked_again_without_repairs(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=emulated("hermes", max_repair_retries=0))
    fake_upstream.script(Reply(pieces=text_stream(pieces("\n\n"))))
    await ask(proxy, False)
    assert len(fake_upstream.requests) == 1


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
async def test_a_paraphrase_of_the_instructions_never_reaches_a_non_streamed_answer(
    start_proxy, fake_upstream, fmt: str
) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    paraphrase = "You can call this tool only when you need it; otherwise answer the user directly."
    fake_upstream.script(Reply(pieces=text_stream(pieces(f"{paraphrase}\n{MODEL_TEXT}", 4))))
    assert (await ask(proxy, False))["choices"][0]["message"]["content"].strip() == MODEL_TEXT


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "after",
    [
        "\n\n\nThe weather in Paris is 18 degrees and sunny.",  # a result made up before the tool ran
        "\nI will now tell you the weather once I have it.",  # a promise
    ],
)
async def test_text_after_a_bare_call_never_reaches_the_client(
    start_proxy, fake_upstream, stream: bool, after: str
) -> None:
    """A bare call object has no closing tag to stop the model at: what it writes after the call was written
    without the call's result, and the client gets the call alone."""
    proxy = await start_proxy(models=emulated("hermes"))
    written = '{"name": "get_weather", "arguments": {"city": "Paris"}}' + after
    fake_upstream.script(Reply(pieces=text_stream(pieces(written))))
    result = await ask(proxy, stream, messages=[{"role": "user", "content": "Weather in Paris?"}])
    message = result["choices"][0]["message"]
    [made] = message["tool_calls"]
    assert json.loads(made["function"]["arguments"]) == {"city": "Paris"}
    assert not (message.get("content") or "").strip()
    assert result["choices"][0]["finish_reason"] == "tool_calls"
