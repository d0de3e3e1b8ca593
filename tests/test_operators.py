"""What operators see: misspelt settings named at start, every refusal logged and counted, reloads
that reach every worker."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from toolshim.config.settings import ENV_VARS, known_env_vars, unknown_env_warnings
from toolshim.server.reloads import Generation, ReloadBoard

from tests.fakes import FakeUpstream, Reply, completion

KEY = "sk-client-key-0123456789"
USER = [{"role": "user", "content": "hi"}]
CHAT = {"model": "gpt-4o", "messages": USER}
AUTH = {"Authorization": f"Bearer {KEY}"}


def test_misspelt_settings_are_named_with_the_closest_known_one() -> None:
    env = {
        "TOOLSHIM_API_KEY": "k",
        "TOOLSHIM_LOGLEVEL": "debug",
        "toolshim_port": "9000",
        "TOOLSHIM_PORT": "8000",
        "TOOLSHIM_ZZZQQQ": "1",
        "PATH": "/bin",
    }
    assert unknown_env_warnings(env) == [
        "TOOLSHIM_API_KEY is not a toolshim setting; did you mean TOOLSHIM_API_KEYS?",
        "TOOLSHIM_LOGLEVEL is not a toolshim setting; did you mean TOOLSHIM_LOG_LEVEL?",
        "TOOLSHIM_ZZZQQQ is not a toolshim setting and is ignored",
        "toolshim_port is not a toolshim setting; did you mean TOOLSHIM_PORT?",
    ]


def test_every_variable_toolshim_reads_is_known() -> None:
    read_elsewhere = {"TOOLSHIM_ALLOWED_ORIGINS", "TOOLSHIM_CACHE", "TOOLSHIM_LLAMA_CMAKE_ARGS", "TOOLSHIM_DEMO_MODEL"}
    known = known_env_vars()
    assert set(ENV_VARS.values()) | read_elsewhere <= known
    assert unknown_env_warnings({name: "x" for name in known}) == []


# (method, path, headers, body) → (status, error code, route, endpoint)
REFUSALS: dict[str, tuple[tuple[str, str, dict[str, str], Any], tuple[int, str, str, str]]] = {
    "wrong key": (
        ("POST", "/v1/chat/completions", {"Authorization": "Bearer wrong"}, CHAT),
        (401, "invalid_api_key", "/v1/chat/completions", "chat"),
    ),
    "foreign origin": (
        ("POST", "/v1/chat/completions", {**AUTH, "Origin": "https://evil.example"}, CHAT),
        (403, "origin_not_allowed", "/v1/chat/completions", "chat"),
    ),
    "foreign host": (
        ("GET", "/v1/models", {**AUTH, "Host": "evil.example"}, None),
        (403, "host_not_allowed", "/v1/models", "models"),
    ),
    "unknown path": (("GET", "/v1/nope", AUTH, None), (404, "not_found", "-", "unknown")),
    "wrong method": (("GET", "/v1/chat/completions", AUTH, None), (404, "not_found", "-", "unknown")),
    "unknown model": (
        ("POST", "/v1/chat/completions", AUTH, {"model": "nope-x", "messages": USER}),
        (404, "model_not_found", "/v1/chat/completions", "chat"),
    ),
    "body too large": (
        ("POST", "/v1/embeddings", AUTH, {"model": "gpt-4o", "input": "x" * 4096}),
        (413, "request_too_large", "/v1/embeddings", "passthrough"),
    ),
    "admin without key": (("POST", "/admin/reload", {}, None), (401, "invalid_api_key", "/admin/reload", "admin")),
}


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [{**r.fields, "request_id": r.request_id} for r in caplog.records if r.name == "toolshim.access"]


def sample(proxy: Any, name: str, **labels: str) -> float:
    return proxy.metrics.registry.get_sample_value(name, labels) or 0.0


@pytest.mark.parametrize(("ask", "expect"), REFUSALS.values(), ids=REFUSALS.keys())
async def test_every_refusal_is_logged_and_counted(
    start_proxy: Any, caplog: pytest.LogCaptureFixture, ask: tuple[Any, ...], expect: tuple[Any, ...]
) -> None:
    proxy = await start_proxy(
        models=[{"match": "gpt-*", "upstream": "up"}], api_keys=(KEY,), admin_key="adm-key-123", max_body_bytes=1024
    )
    method, path, headers, body = ask
    status, code, route, endpoint = expect
    caplog.set_level(logging.INFO, logger="toolshim.access")
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, proxy.url + path, json=body, headers={**headers, "X-Request-Id": "rid-7"}) as resp,
    ):
        assert resp.status == status and (await resp.json())["error"]["code"] == code
    [line] = access_lines(caplog)
    assert line["status"] == status and line["error_code"] == code and line["request_id"] == "rid-7"
    assert line["route"] == route and line["endpoint"] == endpoint and line["path"] == path
    assert line["model"] == "other"  # no rule was resolved: the body was not read, or named no served model
    labels = {"model": "other", "tool_mode": "-", "stream": "false", "status": code}
    assert sample(proxy, "toolshim_requests_total", **labels) == 1
    assert sample(proxy, "toolshim_endpoint_requests_total", endpoint=endpoint, status=code) == 1


async def test_unknown_model_is_logged_with_the_name_asked_but_counted_as_other(
    start_proxy: Any, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = await start_proxy(models=[{"match": "gpt-*", "upstream": "up"}])
    caplog.set_level(logging.INFO, logger="toolshim.access")
    async with aiohttp.ClientSession() as session:
        for i in range(3):
            body = {"model": f"attacker-{i}", "messages": USER}
            async with session.post(proxy.base_url + "/chat/completions", json=body) as resp:
                assert resp.status == 404
    assert [line["requested_model"] for line in access_lines(caplog)] == ["attacker-0", "attacker-1", "attacker-2"]
    assert {line["model"] for line in access_lines(caplog)} == {"other"}
    labels = {"model": "other", "tool_mode": "-", "stream": "false", "status": "model_not_found"}
    assert sample(proxy, "toolshim_requests_total", **labels) == 3


async def test_answers_are_logged_but_successful_probes_are_not(
    start_proxy: Any, fake_upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = await start_proxy(models=[{"match": "gpt-*", "upstream": "up", "tool_mode": "native"}])
    fake_upstream.script(Reply(body=completion("ok")))
    caplog.set_level(logging.INFO, logger="toolshim.access")
    async with aiohttp.ClientSession() as session:
        for path in ("/healthz", "/readyz", "/metrics", "/v1/models", "/v1/models/gpt-4o"):
            async with session.get(proxy.url + path) as resp:
                assert resp.status == 200
        async with session.post(proxy.base_url + "/chat/completions", json=CHAT) as resp:
            assert resp.status == 200
    lines = access_lines(caplog)
    assert [(line["route"], line["status"]) for line in lines] == [
        ("/v1/models", 200),
        ("/v1/models/{model}", 200),
        ("/v1/chat/completions", 200),
    ]
    assert lines[1]["model"] == lines[2]["model"] == "gpt-*" and lines[2]["requested_model"] == "gpt-4o"
    assert sample(proxy, "toolshim_endpoint_requests_total", endpoint="models", status="2xx") == 2
    assert sample(proxy, "toolshim_endpoint_requests_total", endpoint="probe", status="2xx") == 0


async def test_a_malformed_request_the_parser_refuses_is_logged_and_counted(
    start_proxy: Any, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = await start_proxy()
    caplog.set_level(logging.INFO, logger="toolshim.access")
    port = int(proxy.url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GARBAGE\r\n\r\n")
    answer = await reader.read()
    writer.close()
    assert answer.startswith(b"HTTP/1.") and b" 400 " in answer[:20] and b"X-Request-Id: " in answer
    [line] = access_lines(caplog)
    assert line["status"] == 400 and line["error_code"] == "bad_http_request" and line["endpoint"] == "unknown"
    assert line["request_id"].encode() in answer
    labels = {"model": "other", "tool_mode": "-", "stream": "false", "status": "bad_http_request"}
    assert sample(proxy, "toolshim_requests_total", **labels) == 1


def exited_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_generation_names_only_the_workers_that_are_serving(tmp_path: Path) -> None:
    board = ReloadBoard(tmp_path)
    assert board.current() == Generation(0, ())
    board.report(0, True, "started", pid=101)
    assert board.begin([101, 102]) == Generation(1, (101,))  # 102 is still starting: not signalled
    board.forget(101)
    assert board.begin([101, 102]) == Generation(2, ())
    board.clear()
    assert board.current() == Generation(0, ()) and not list(tmp_path.iterdir())


async def test_the_wait_ends_when_every_named_worker_reported_or_exited(tmp_path: Path) -> None:
    board, me, gone = ReloadBoard(tmp_path), os.getpid(), exited_pid()
    for pid in (me, gone):
        board.report(0, True, "started", pid=pid)
    assert await board.wait(0, timeout=0.2) is None  # no generation came
    generation = board.begin([me, gone])
    board.report(generation.number - 1, True, "late", pid=me)  # an older generation's report does not count
    outcome = await board.wait(0, timeout=0.3)
    assert outcome is not None and outcome.silent == [me] and outcome.reloaded == []
    board.report(generation.number, False, "bad rules", pid=me)
    outcome = await board.wait(0, timeout=5)
    assert outcome is not None and outcome.failed == {me: "bad rules"} and outcome.silent == []
