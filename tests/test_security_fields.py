"""Security: a client cannot steer where a call goes or what credentials it carries.

The body sent upstream is built from an allowlist of chat-completions fields (plus the
upstream's ``extra_body_fields``), for every upstream kind. Body fields such as ``api_base``,
``base_url``, ``api_key`` or ``extra_headers`` never reach litellm's keyword arguments, so the
operator's key never reaches a listener the client chose (``attacker`` receives nothing).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from toolshim.config.loading import load_rules
from toolshim.config.rules import RulesError

from tests.conftest import write_rules
from tests.deltas import check_completion, check_deltas, parse_sse
from tests.fakes import FakeUpstream, Reply, completion, text_stream

KEY = "sk-operator-secret-key"
MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
LITELLM_MODELS = [{"match": "claude-ish", "upstream": "up", "tool_mode": "native", "upstream_model": "openai/m"}]


def hostile_fields(attacker_url: str) -> dict[str, Any]:
    """Fields a hostile client adds to redirect the call and capture the key."""
    return {
        "api_base": attacker_url,
        "base_url": attacker_url,
        "api_key": "client-chosen",
        "extra_headers": {"Authorization": "Bearer client-chosen", "X-Leak": "1"},
        "custom_llm_provider": "openai",
        "extra_body": {"chat_template": "{{ evil }}"},
        "chat_template": "{{ evil }}",
        "prompt_embeds": "AAAA",
        "guided_regex": ".*",
    }


@pytest.fixture
async def litellm_proxy(start_proxy: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("OPERATOR_KEY", KEY)
    return await start_proxy(
        models=LITELLM_MODELS, upstream_extra={"provider": "litellm", "api_key_env": "OPERATOR_KEY", "read_timeout": 5}
    )


def assert_untouched(attacker: FakeUpstream) -> None:
    assert attacker.paths == [] and attacker.requests == [] and attacker.headers == []


@pytest.mark.parametrize("stream", [False, True])
async def test_litellm_body_cannot_redirect_the_call_or_its_key(
    litellm_proxy: Any, fake_upstream: FakeUpstream, attacker: FakeUpstream, stream: bool
) -> None:
    fake_upstream.script(Reply(pieces=text_stream(["ok"])) if stream else Reply(body=completion("ok")))
    body = {"model": "claude-ish", "messages": MESSAGES, "stream": stream, **hostile_fields(attacker.url)}
    async with (
        aiohttp.ClientSession() as session,
        session.post(litellm_proxy.base_url + "/chat/completions", json=body) as resp,
    ):
        assert resp.status == 200, await resp.text()
        await resp.read()
    assert_untouched(attacker)
    assert fake_upstream.paths == ["/v1/chat/completions"]
    assert fake_upstream.headers[0]["Authorization"] == f"Bearer {KEY}"
    assert "X-Leak" not in fake_upstream.headers[0]
    sent = fake_upstream.requests[0]
    assert not set(hostile_fields("")) & set(sent), sent


async def test_litellm_rule_headers_still_sent(
    start_proxy: Any, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("OPERATOR_KEY", KEY)
    extra = {"provider": "litellm", "api_key_env": "OPERATOR_KEY", "headers": {"X-Tenant": "ops"}}
    proxy = await start_proxy(models=LITELLM_MODELS, upstream_extra=extra)
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="x", max_retries=0) as client:
        await client.chat.completions.create(
            model="claude-ish", messages=MESSAGES, extra_body={"extra_headers": {"X-Tenant": "client"}}
        )
    headers = {name.lower(): value for name, value in fake_upstream.headers[0].items()}
    assert headers["x-tenant"] == "ops", headers


@pytest.mark.parametrize("mode", ["native", "hermes"])
@pytest.mark.parametrize("stream", [False, True])
async def test_openai_upstream_gets_only_allowlisted_fields(
    start_proxy: Any, fake_upstream: FakeUpstream, attacker: FakeUpstream, mode: str, stream: bool
) -> None:
    proxy = await start_proxy(models=[{"match": "*", "upstream": "up", "tool_mode": mode}])
    emulated = mode != "native"
    fake_upstream.script(Reply(pieces=text_stream(["ok"])) if stream or emulated else Reply(body=completion("ok")))
    body = {
        "model": "m",
        "messages": MESSAGES,
        "stream": stream,
        "temperature": 0.5,
        "seed": 7,
        "tools": TOOLS,
        "top_k": 40,
        **hostile_fields(attacker.url),
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.base_url + "/chat/completions", json=body) as resp,
    ):
        assert resp.status == 200, await resp.text()
        text = await resp.text()
    if stream:
        chunks, done = parse_sse(text)
        assert done
        check_deltas(chunks)
    else:
        check_completion(json.loads(text))
    assert_untouched(attacker)
    sent = fake_upstream.requests[0]
    assert sent["temperature"] == 0.5 and sent["seed"] == 7
    assert "top_k" not in sent and not set(hostile_fields("")) & set(sent), sent


async def test_extra_body_fields_extend_the_allowlist(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    proxy = await start_proxy(upstream_extra={"extra_body_fields": ["top_k", "min_p"]})
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="x", max_retries=0) as client:
        await client.chat.completions.create(
            model="m", messages=MESSAGES, extra_body={"top_k": 40, "min_p": 0.1, "chat_template": "x"}
        )
    sent = fake_upstream.requests[0]
    assert sent["top_k"] == 40 and sent["min_p"] == 0.1 and "chat_template" not in sent


@pytest.mark.parametrize(
    "name",
    ["api_base", "base_url", "extra_headers", "API_KEY", "aws_secret_access_key", "extra_body", "litellm_params"],
)
def test_rules_refuse_to_forward_destination_or_credential_fields(tmp_path: Path, name: str) -> None:
    path = write_rules(
        tmp_path, "http://127.0.0.1:9/v1", [{"match": "*", "upstream": "up"}], {"extra_body_fields": ["top_k", name]}
    )
    with pytest.raises(RulesError) as info:
        load_rules(path)
    assert "upstreams.up.extra_body_fields" in str(info.value) and name in str(info.value)
