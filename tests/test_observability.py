"""Metrics and logs as ops see them: exact samples read back from /metrics, bounded labels, no secrets."""

from __future__ import annotations

import json
import logging
from typing import Any

import aiohttp
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families
from toolshim.formats import ToolCallRecord, get_format

from tests.checked import checked_openai
from tests.fakes import Reply, completion, text_stream
from tests.formats.tools import OPENAI_TOOLS

USER = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = [OPENAI_TOOLS["get_weather"]]
RULES = [
    {"match": "qwen*", "upstream": "up", "tool_mode": "hermes"},
    {"match": "gpt-*", "upstream": "up", "tool_mode": "native"},
]


async def scrape(proxy: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample on /metrics as ``{(name, sorted labels): value}``, parsed by prometheus-client."""
    async with aiohttp.ClientSession() as session, session.get(proxy.url + "/metrics") as resp:
        assert resp.status == 200
        text = await resp.text()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def delta(before: dict[Any, float], after: dict[Any, float]) -> dict[Any, float]:
    """The samples that changed (histogram buckets left out: their counts are checked via _count)."""
    return {
        k: after[k] - before.get(k, 0.0)
        for k in after
        if after[k] != before.get(k, 0.0)
        and not k[0].endswith(("_bucket", "_created"))
        and not k[0].startswith(("process_", "python_"))
    }


def hermes_call(city: str = "Paris") -> str:
    return get_format("hermes").render_calls([ToolCallRecord("c", "get_weather", json.dumps({"city": city}))])


async def test_native_request_changes_exactly_these_samples(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=RULES)
    fake_upstream.script(
        Reply(body=completion("hi", usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}))
    )
    before = await scrape(proxy)
    async with checked_openai(proxy.base_url) as client:
        await client.chat.completions.create(model="gpt-4o", messages=USER)
    changed = delta(before, await scrape(proxy))
    duration_sum = [k for k in changed if k[0] == "toolshim_request_duration_seconds_sum"]
    upstream_sum = [k for k in changed if k[0] == "toolshim_upstream_request_duration_seconds_sum"]
    for key in duration_sum + upstream_sum:
        changed.pop(key)
    assert changed == {
        (
            "toolshim_requests_total",
            (("model", "gpt-*"), ("status", "2xx"), ("stream", "false"), ("tool_mode", "native")),
        ): 1.0,
        ("toolshim_endpoint_requests_total", (("endpoint", "chat"), ("status", "2xx"))): 1.0,
        (
            "toolshim_request_duration_seconds_count",
            (("model", "gpt-*"), ("stream", "false"), ("tool_mode", "native")),
        ): 1.0,
        ("toolshim_upstream_requests_total", (("outcome", "ok"), ("upstream", "up"))): 1.0,
        ("toolshim_upstream_request_duration_seconds_count", (("outcome", "ok"), ("upstream", "up"))): 1.0,
        ("toolshim_prompt_tokens_total", (("model", "gpt-*"),)): 5.0,
        ("toolshim_completion_tokens_total", (("model", "gpt-*"),)): 2.0,
    }


async def test_emulated_stream_counts_calls_ttft_and_cut(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=RULES)
    output = "Checking. " + hermes_call("Paris") + "\n" + hermes_call("Rome") + " and more" * 30
    pieces = [output[i : i + 6] for i in range(0, len(output), 6)]
    fake_upstream.script(Reply(pieces=text_stream(pieces), delay=0.002))
    before = await scrape(proxy)
    async with checked_openai(proxy.base_url) as client:
        stream = await client.chat.completions.create(
            model="qwen-x", messages=USER, tools=WEATHER, stream=True, max_tokens=200
        )
        calls = [
            call.function.name
            async for chunk in stream
            if chunk.choices
            for call in chunk.choices[0].delta.tool_calls or ()
            if call.function and call.function.name
        ]
    assert calls == ["get_weather"]
    assert client.transport.check() == 1
    after = await scrape(proxy)
    changed = delta(before, after)
    labels = {"model": "qwen*", "format": "hermes"}
    assert changed[("toolshim_tool_calls_total", tuple(sorted(labels.items())))] == 1
    assert changed[("toolshim_tool_parse_total", tuple(sorted({**labels, "outcome": "clean"}.items())))] == 1
    # the fake ignores ``stop``: toolshim ends the output at hermes' ``</tool_call>`` itself, before the cut
    assert changed[("toolshim_stops_enforced_total", tuple(sorted(labels.items())))] == 1
    assert value(after, "toolshim_time_to_first_token_seconds_count", model="qwen*", tool_mode="hermes") == 1
    assert value(after, "toolshim_requests_total", model="qwen*", tool_mode="hermes", stream="true", status="2xx") == 1
    assert value(after, "toolshim_upstream_requests_total", upstream="up", outcome="cancelled") == 1
    assert changed[("toolshim_tokens_saved_total", (("model", "qwen*"),))] > 0
    assert value(after, "toolshim_requests_in_flight", stream="true") == 0


async def test_repairs_and_reasks_are_counted(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=RULES)
    sloppy = "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Paris',}}</tool_call>"
    bad = '<tool_call>{"name": "get_weather", "arguments": {"town": "Paris"}}</tool_call>'
    fake_upstream.script(Reply(pieces=text_stream([bad])), Reply(pieces=text_stream([sloppy])))
    async with checked_openai(proxy.base_url) as client:
        result = await client.chat.completions.create(model="qwen-x", messages=USER, tools=WEATHER)
    assert [c.function.name for c in result.choices[0].message.tool_calls or ()] == ["get_weather"]
    after = await scrape(proxy)
    assert value(after, "toolshim_tool_parse_total", model="qwen*", format="hermes", outcome="malformed") == 1
    assert value(after, "toolshim_tool_parse_total", model="qwen*", format="hermes", outcome="repaired") == 1
    assert value(after, "toolshim_reasks_total", model="qwen*", reason="repair") == 1
    assert value(after, "toolshim_markup_sanitized_total", model="qwen*", format="hermes") == 1
    repairs = [k for k in after if k[0] == "toolshim_tool_repairs_total" and after[k] > 0]
    assert repairs, "the repair kinds were not counted"


@pytest.mark.parametrize(
    ("reply", "status_label", "outcome"),
    [
        (Reply(status=500, body={"error": {"message": "boom"}}), "upstream_error", "http_error"),
        (
            Reply(status=429, body={"error": {"message": "slow down", "code": "rate_limited"}}),
            "rate_limited",
            "http_error",
        ),
    ],
)
async def test_upstream_errors_are_counted(
    start_proxy, fake_upstream, reply: Reply, status_label: str, outcome: str
) -> None:
    proxy = await start_proxy(models=RULES)
    fake_upstream.script(reply)
    async with aiohttp.ClientSession() as session:
        await session.post(proxy.base_url + "/chat/completions", json={"model": "gpt-4o", "messages": USER})
    after = await scrape(proxy)
    assert (
        value(after, "toolshim_requests_total", model="gpt-*", tool_mode="native", stream="false", status=status_label)
        == 1
    )
    assert value(after, "toolshim_upstream_requests_total", upstream="up", outcome=outcome) == 1
    assert value(after, "toolshim_upstream_errors_total", upstream="up", status=str(reply.status)) == 1


async def test_clients_cannot_create_label_values(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=[{"match": "gpt-*", "upstream": "up"}])
    async with aiohttp.ClientSession() as session:
        for i in range(20):
            await session.post(
                proxy.base_url + "/chat/completions", json={"model": f"attacker-{i}-{'x' * 50}", "messages": USER}
            )
        await session.post(proxy.base_url + "/chat/completions", data=b"{not json")
    after = await scrape(proxy)
    models = {dict(labels).get("model") for (name, labels) in after if name.startswith("toolshim_")}
    assert models <= {None, "gpt-*", "other"}
    assert (
        value(after, "toolshim_requests_total", model="other", tool_mode="-", stream="false", status="model_not_found")
        == 20
    )
    assert (
        value(after, "toolshim_requests_total", model="other", tool_mode="-", stream="false", status="invalid_request")
        == 1
    )


async def test_one_json_log_line_per_request_with_request_id(start_proxy, fake_upstream, caplog) -> None:
    proxy = await start_proxy(models=RULES)
    fake_upstream.script(Reply(body=completion("hi")))
    caplog.set_level(logging.INFO, logger="toolshim.access")
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            proxy.base_url + "/chat/completions",
            json={"model": "gpt-4o", "messages": USER},
            headers={"X-Request-Id": "req-123"},
        ) as resp,
    ):
        assert resp.headers["X-Request-Id"] == "req-123"
    records = [r for r in caplog.records if r.name == "toolshim.access"]
    assert len(records) == 1
    fields = records[0].fields
    assert fields["model"] == "gpt-*" and fields["status"] == 200 and fields["stream"] is False
    assert records[0].request_id == "req-123"
    from toolshim.observe.logs import JsonFormatter

    line = json.loads(JsonFormatter().format(records[0]))
    assert line["request_id"] == "req-123" and line["prompt_tokens"] == 11


async def test_generated_request_id_is_returned(start_proxy, fake_upstream) -> None:
    proxy = await start_proxy(models=RULES)
    fake_upstream.script(Reply(pieces=text_stream(["a"])))
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            proxy.base_url + "/chat/completions", json={"model": "gpt-4o", "messages": USER, "stream": True}
        ) as resp,
    ):
        assert len(resp.headers["X-Request-Id"]) >= 16
        await resp.read()


async def test_keys_leave_no_trace_in_logs(start_proxy, fake_upstream, caplog, monkeypatch) -> None:
    secret, client_key = "sk-upstream-SECRET-9f8e7d", "sk-client-SECRET-1a2b3c"
    monkeypatch.setenv("UP_KEY", secret)
    proxy = await start_proxy(
        models=RULES, upstream_extra={"api_key_env": "UP_KEY"}, api_keys=(client_key,), log_content=True
    )
    caplog.set_level(logging.DEBUG)
    fake_upstream.script(
        Reply(pieces=text_stream([hermes_call()])), Reply(status=401, body={"error": {"message": "bad key"}})
    )
    async with checked_openai(proxy.base_url, api_key=client_key) as client:
        await client.chat.completions.create(model="qwen-x", messages=USER, tools=WEATHER)
        with pytest.raises(openai.AuthenticationError):
            await client.chat.completions.create(model="gpt-4o", messages=USER)
    async with aiohttp.ClientSession() as session:
        await session.post(proxy.base_url + "/chat/completions", json={}, headers={"Authorization": "Bearer wrong"})
    assert fake_upstream.headers[0]["Authorization"] == f"Bearer {secret}"
    from toolshim.observe.logs import JsonFormatter

    formatter = JsonFormatter()
    text = "\n".join(formatter.format(r) for r in caplog.records)
    assert caplog.records and secret not in text and client_key not in text


async def test_raw_output_dump(start_proxy, fake_upstream, tmp_path) -> None:
    proxy = await start_proxy(models=RULES, dump_dir=tmp_path / "dumps")
    fake_upstream.script(Reply(pieces=text_stream(["I will call. ", hermes_call()])))
    async with checked_openai(proxy.base_url) as client:
        await client.chat.completions.create(model="qwen-x", messages=USER, tools=WEATHER)
    files = list((tmp_path / "dumps").iterdir())
    assert len(files) == 1
    text = files[0].read_text()
    assert "I will call. <tool_call>" in text and "format=hermes" in text
