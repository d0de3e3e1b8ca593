"""Reliability under odd upstream answers, retries and slow first tokens (issue 16, items 4, 5, 9).

Odd answers: a 200 that is no chat completion, a chunk with ``"choices": 5``, an event that is not
JSON, llama.cpp's ``error:`` field and OpenAI's ``{"error": ...}`` event: never an empty answer,
never invalid JSON or a crash for the client, always the upstream's message (scrubbed). Retries:
every error answer carries ``x-should-retry`` and the upstream's ``Retry-After``. First token: the
rule's ``first_token_timeout`` ends a silent upstream with a 504 before anything was sent, in-band after.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from toolshim.config.loading import load_rules
from toolshim.config.rules import RulesError

from tests.checked import checked_openai
from tests.conftest import free_port, write_rules
from tests.deltas import parse_sse
from tests.fakes import FakeUpstream, Reply, chunk, completion, sse, text_stream
from tests.formats.tools import OPENAI_TOOLS
from tests.test_core_errors import assert_error, post

MESSAGES = [{"role": "user", "content": "hi"}]
WEATHER = [OPENAI_TOOLS["get_weather"]]
SECRET = "sk-upstream-secret-123456"


def rule(mode: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"match": "*", "upstream": "up", "tool_mode": mode, **extra}]


def chat_body(mode: str, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "messages": MESSAGES, "stream": stream}
    return {**body, "tools": WEATHER} if mode != "native" else body


async def stream_events(url: str, body: dict[str, Any]) -> tuple[int, list[dict[str, Any]], bool, dict[str, str]]:
    """A streamed request read raw: status, its JSON events (every one must parse), [DONE], headers."""
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as resp:
        raw = (await resp.read()).decode()
        headers = dict(resp.headers)
    if resp.status != 200:
        return resp.status, [json.loads(raw)], False, headers
    events, done = parse_sse(raw)
    return resp.status, events, done, headers


# --- 4. odd upstream answers ---------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(Reply(body={"status": "ok"}), id="json-not-a-completion"),
        pytest.param(Reply(body="<html>maintenance</html>", content_type="text/html"), id="html"),
        pytest.param(Reply(body="", content_type="text/plain"), id="empty"),
    ],
)
async def test_emulated_200_that_is_no_completion_is_an_error_not_an_empty_answer(
    start_proxy: Any, fake_upstream: FakeUpstream, stream: bool, reply: Reply
) -> None:
    fake_upstream.script(reply)
    proxy = await start_proxy(models=rule("hermes"))
    status, body = await post(proxy.base_url + "/chat/completions", json=chat_body("hermes", stream))
    assert status == 502  # nothing was sent yet: an HTTP error, not a 200 with an empty answer
    assert_error(body, code="upstream_protocol_error", type_="upstream_error")


ODD_CHOICES = [
    sse(chunk({"role": "assistant", "content": "a"})),
    sse({"id": "x", "choices": 5}),
    sse({"id": "x", "choices": [7, chunk({"content": "b"})["choices"][0]]}),
    *text_stream(["after"])[1:],
]


@pytest.mark.parametrize("mode", ["native", "hermes"])
async def test_a_chunk_with_odd_choices_does_not_kill_a_responses_stream(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, mode: str
) -> None:
    """The Responses front end iterates ``choices``: ``5`` or a non-object item is skipped, not a crash."""
    fake_upstream.script(Reply(pieces=ODD_CHOICES))
    proxy = await start_proxy(models=rule(mode), data_dir=tmp_path)
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="x", max_retries=0) as client:
        events = [e async for e in await client.responses.create(model="m", input="hi", stream=True)]
        assert events[-1].type == "response.completed"
        assert events[-1].response.output_text == "abafter"
        fake_upstream.script(Reply(body={**completion("x"), "choices": 5}))
        with pytest.raises(openai.APIStatusError) as info:
            await client.responses.create(model="m", input="hi")  # native non-stream: no answer in it
    if mode == "native":
        assert info.value.status_code == 502 and info.value.code == "upstream_protocol_error"


async def test_native_event_that_is_not_json_ends_the_stream_with_an_error_event(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(Reply(pieces=[ODD_CHOICES[0], "data: not json\n\n", *text_stream(["after"])[1:]]))
    proxy = await start_proxy()
    status, events, done, _ = await stream_events(proxy.base_url + "/chat/completions", chat_body("native", True))
    assert status == 200 and not done  # parse_sse: every event the client got is JSON
    assert events[0]["choices"][0]["delta"]["content"] == "a"
    assert_error(events[-1], code="upstream_protocol_error", message="not JSON")
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="x", max_retries=0) as client:
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
        with pytest.raises(openai.APIError, match="not JSON"):  # not a JSONDecodeError from inside the SDK
            async for _ in stream:
                pass


LLAMA_ERROR = 'error: {"code":500,"message":"KV cache is full; key ' + SECRET + '","type":"server_error"}\n\n'
OPENAI_ERROR = sse({"error": {"message": "KV cache is full; key " + SECRET, "type": "server_error", "code": None}})


@pytest.mark.parametrize("mode", ["native", "hermes", "xml"])
@pytest.mark.parametrize("error", [LLAMA_ERROR, OPENAI_ERROR], ids=["llama-error-field", "openai-error-event"])
async def test_upstream_error_event_keeps_its_message_scrubbed(
    start_proxy: Any, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch, mode: str, error: str
) -> None:
    """Mid-stream: one error event with the upstream's message (the key masked); first thing: an HTTP 502."""
    monkeypatch.setenv("FAULT_UPSTREAM_KEY", SECRET)
    fake_upstream.script(Reply(pieces=[sse(chunk({"role": "assistant", "content": "partial"})), error]))
    proxy = await start_proxy(models=rule(mode), upstream_extra={"api_key_env": "FAULT_UPSTREAM_KEY"})
    url = proxy.base_url + "/chat/completions"
    status, events, done, _ = await stream_events(url, chat_body(mode, True))
    assert status == 200 and not done
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1] if e.get("choices")) == "partial"
    assert [e for e in events if "error" in e] == [events[-1]]  # one error event, the last
    err = assert_error(events[-1], code="upstream_protocol_error", message="KV cache is full; key ***")
    assert SECRET not in err["message"]

    fake_upstream.script(Reply(pieces=[error]))
    status, events, _, _ = await stream_events(url, chat_body(mode, True))
    assert status == 502
    assert_error(events[0], code="upstream_protocol_error", message="KV cache is full; key ***")


# --- 5. one retry layer --------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (429, {"Retry-After": "7", "retry-after-ms": "7000"}, {"retry-after": "7", "retry-after-ms": "7000"}),
        (503, {"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}, {"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}),
        (503, {"Retry-After": "soon; <script>"}, {}),  # not a Retry-After value: left out
        (500, {"Retry-After": "7"}, {}),  # only a 429/503 passes it on
    ],
)
async def test_retry_after_is_passed_on_and_retry_advised(
    start_proxy: Any,
    fake_upstream: FakeUpstream,
    stream: bool,
    status: int,
    headers: dict[str, str],
    expected: dict[str, str],
) -> None:
    fake_upstream.script(Reply(status=status, body={"error": {"message": "busy"}}, headers=headers))
    proxy = await start_proxy()
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.base_url + "/chat/completions", json=chat_body("native", stream)) as resp,
    ):
        assert resp.status == status
        assert resp.headers["x-should-retry"] == "true"
        got = {name: resp.headers[name] for name in ("retry-after", "retry-after-ms") if name in resp.headers}
    assert got == expected


@pytest.mark.parametrize(
    ("upstream", "request_body", "status", "advice"),
    [
        (Reply(status=400, body={"error": {"message": "context too long"}}), {}, 400, "false"),
        (Reply(status=401, body={"error": "bad key"}), {}, 401, "false"),
        (Reply(status=422, body={"detail": "bad"}), {}, 422, "false"),
        (Reply(body=completion("ok")), {"messages": "not a list"}, 400, "false"),  # our own refusal
        (Reply(body=completion("ok")), {"model": "unknown-model"}, 404, "false"),
        (Reply(status=409, body={"error": "conflict"}), {}, 409, "true"),
        (Reply(status=500, body="oops", content_type="text/plain"), {}, 500, "true"),
        (Reply(hang=2, body={}), {}, 504, "true"),
    ],
)
async def test_every_error_says_whether_a_retry_makes_sense(
    start_proxy: Any,
    fake_upstream: FakeUpstream,
    upstream: Reply,
    request_body: dict[str, Any],
    status: int,
    advice: str,
) -> None:
    fake_upstream.script(upstream)
    proxy = await start_proxy(
        models=[{"match": "m", "upstream": "up", "tool_mode": "native"}], upstream_extra={"read_timeout": 0.3}
    )
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.base_url + "/chat/completions", json={**chat_body("native", False), **request_body}) as resp,
    ):
        assert resp.status == status
        assert resp.headers["x-should-retry"] == advice


# --- 9. time to first token ----------------------------------------------------------------------

ROLE = sse(chunk({"role": "assistant", "content": ""}))


def slow_first_token(after: float) -> Reply:
    """Headers and the role chunk at once, then nothing for ``after`` seconds (a long prefill)."""
    return Reply(pieces=[ROLE, *text_stream(["late"])[1:]], stall=(1, after))


# a native answer that is not streamed comes whole: first_token_timeout does not apply (README)
@pytest.mark.parametrize(("mode", "stream"), [("native", True), ("hermes", True), ("hermes", False)])
@pytest.mark.parametrize("hang_before_headers", [False, True])
async def test_first_token_timeout_is_a_504_before_anything_was_sent(
    start_proxy: Any, fake_upstream: FakeUpstream, mode: str, stream: bool, hang_before_headers: bool
) -> None:
    fake_upstream.script(Reply(hang=3, body=completion("late")) if hang_before_headers else slow_first_token(3))
    proxy = await start_proxy(models=rule(mode, first_token_timeout=0.3), upstream_extra={"read_timeout": 30})
    started = time.monotonic()
    status, events, _, headers = await stream_events(proxy.base_url + "/chat/completions", chat_body(mode, stream))
    assert status == 504, events
    assert_error(events[0], code="first_token_timeout", type_="upstream_error", message="first_token_timeout")
    assert headers["x-should-retry"] == "true"
    assert time.monotonic() - started < 1.5
    if not hang_before_headers:
        assert fake_upstream.disconnected == [True]  # the upstream connection was closed: it stops generating


async def test_first_token_timeout_after_output_is_an_in_band_error(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    """A re-ask after a malformed block: the text before it reached the client; the second attempt is silent."""
    first = text_stream(["I'll check.\n", "<tool_call>{not json at all!}</tool_call>"])
    fake_upstream.script(Reply(pieces=first), slow_first_token(3))
    proxy = await start_proxy(models=rule("hermes", first_token_timeout=0.4))
    started = time.monotonic()
    status, events, done, _ = await stream_events(proxy.base_url + "/chat/completions", chat_body("hermes", True))
    assert status == 200 and not done
    # (its last line break may come in a later chunk: held while it could start the "\n<tool_response>" stop)
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[1:-1] if e.get("choices"))
    assert text == "I'll check.\n"
    assert_error(events[-1], code="first_token_timeout")
    assert len(fake_upstream.requests) == 2 and time.monotonic() - started < 2


@pytest.mark.parametrize("mode", ["native", "hermes"])
async def test_first_token_timeout_does_not_bound_the_rest_of_the_answer(
    start_proxy: Any, fake_upstream: FakeUpstream, mode: str
) -> None:
    """Tokens every 0.1 s for a second: the 0.3 s limit is on the first one only."""
    fake_upstream.script(Reply(pieces=text_stream(["t"] * 10), delay=0.1))
    proxy = await start_proxy(models=rule(mode, first_token_timeout=0.3))
    async with checked_openai(proxy.base_url) as client:
        stream = await client.chat.completions.create(**chat_body(mode, True))
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "t" * 10


def test_first_token_timeout_is_validated_like_every_rule_option(tmp_path: Path) -> None:
    path = write_rules(tmp_path, f"http://127.0.0.1:{free_port()}/v1", rule("native", first_token_timeout=0))
    with pytest.raises(RulesError, match=r"models\[0\]\.first_token_timeout"):
        load_rules(path)
    path = write_rules(tmp_path, "http://127.0.0.1:1/v1", rule("native", first_token_timeout=2.5))
    assert load_rules(path).models[0].first_token_timeout == 2.5


def test_first_token_timeout_is_on_by_default_and_null_turns_it_off(tmp_path: Path) -> None:
    """600 s unless a rule says otherwise (docs/configuration.md says why); ``null`` is the way to say off."""
    models = [*rule("native"), {"match": "b", "upstream": "up", "first_token_timeout": None}]
    rules = load_rules(write_rules(tmp_path, "http://127.0.0.1:1/v1", models))
    assert rules.models[0].first_token_timeout == 600.0
    assert rules.models[1].first_token_timeout is None
