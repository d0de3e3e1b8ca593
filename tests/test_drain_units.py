"""The drain in one process (every front end's cut), the restart policy, the usable-CPU count."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from toolshim.config.cpus import CpuBudget, cgroup_quota
from toolshim.config.loading import load_rules
from toolshim.config.settings import Settings
from toolshim.server.app import create_app, start_site
from toolshim.server.drain import INFLIGHT, drain
from toolshim.server.state import METRICS
from toolshim.server.workers import RestartPolicy

from tests.conftest import free_port, write_rules
from tests.fakes import FakeUpstream, Reply, text_stream

USER = [{"role": "user", "content": "hi"}]
SLOW = text_stream([f"w{i} " for i in range(100)])  # 0.2 s apart: 20 s, far past the drain


class Served:
    def __init__(self, app: web.Application, runner: web.AppRunner, url: str) -> None:
        self.app, self.runner, self.url = app, runner, url


@pytest.fixture
async def served(tmp_path: Path, fake_upstream: FakeUpstream) -> AsyncIterator[Served]:
    rules = write_rules(tmp_path, fake_upstream.url, [{"match": "*", "upstream": "up", "tool_mode": "native"}])
    app = create_app(Settings(rules_path=rules, data_dir=tmp_path / "data"), load_rules(rules))
    port = free_port()
    runner = await start_site(app, "127.0.0.1", port, shutdown_timeout=1.0)
    yield Served(app, runner, f"http://127.0.0.1:{port}")
    await runner.cleanup()


async def cut_after_first_bytes(served: Served, path: str, body: dict[str, Any]) -> tuple[int, bytes, str]:
    """Start a request, wait for its first bytes, drain with a 0.5 s deadline; status, body, type."""
    async with aiohttp.ClientSession() as session, session.post(served.url + path, json=body) as resp:
        first = await asyncio.wait_for(resp.content.readany(), 5)
        draining = asyncio.ensure_future(drain(served.app, served.runner, drain_seconds=0.5, ready_delay=0))
        try:
            rest = await asyncio.wait_for(resp.content.read(), 5)
        except aiohttp.ClientPayloadError:
            rest = b"<incomplete>"
        await asyncio.wait_for(draining, 5)
        return resp.status, first + rest, resp.content_type


async def test_a_responses_stream_cut_ends_with_error_and_response_failed(
    served: Served, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(Reply(pieces=SLOW, delay=0.2))
    status, body, _ = await cut_after_first_bytes(
        served, "/v1/responses", {"model": "m", "input": "hi", "stream": True, "store": False}
    )
    assert status == 200
    events = [block for block in body.decode().strip().split("\n\n") if block]
    kinds = [block.split("\n", 1)[0].removeprefix("event: ") for block in events]
    assert kinds[-2:] == ["error", "response.failed"], kinds
    error = json.loads(events[-2].split("data: ", 1)[1])
    assert error["code"] == "shutting_down"
    assert len(served.app[INFLIGHT]) == 0


async def test_a_relayed_event_stream_cut_ends_with_an_error_event(served: Served, fake_upstream: FakeUpstream) -> None:
    pieces = [f"data: {json.dumps({'choices': [{'text': str(i)}]})}\n\n" for i in range(100)]
    fake_upstream.script(Reply(pieces=pieces, delay=0.2))
    status, body, content_type = await cut_after_first_bytes(
        served, "/v1/completions", {"model": "m", "prompt": "hi", "stream": True}
    )
    assert status == 200 and content_type == "text/event-stream"
    last = body.decode().strip().split("\n\n")[-1]
    assert json.loads(last.removeprefix("data: "))["error"]["code"] == "shutting_down"


async def test_a_relayed_plain_body_cut_is_left_incomplete(served: Served, fake_upstream: FakeUpstream) -> None:
    """Not an event stream: no error can be written into it, so the client must see it unfinished."""
    fake_upstream.script(Reply(pieces=[b'{"data": [' + b"0," * 10] * 100, delay=0.2, content_type="application/json"))
    _status, body, _ = await cut_after_first_bytes(served, "/v1/embeddings", {"model": "m", "input": "hi"})
    assert body.endswith(b"<incomplete>")


async def test_a_client_that_leaves_during_the_drain_is_not_answered_503(
    served: Served, fake_upstream: FakeUpstream
) -> None:
    """Only the drain's own cancellation becomes a 503; a client hanging up stays a 499."""
    fake_upstream.script(Reply(body={"never": "sent"}, hang=30))
    with socket.create_connection(("127.0.0.1", int(served.url.rsplit(":", 1)[1]))) as client:
        body = json.dumps({"model": "m", "messages": USER}).encode()
        head = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        client.sendall(head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        for _ in range(100):
            if len(served.app[INFLIGHT]):
                break
            await asyncio.sleep(0.02)
        draining = asyncio.ensure_future(drain(served.app, served.runner, drain_seconds=5, ready_delay=0))
        await asyncio.sleep(0.2)
    started = time.monotonic()
    await asyncio.wait_for(draining, 3)  # the client left: the drain ends long before its 5 s
    assert time.monotonic() - started < 2
    assert len(served.app[INFLIGHT]) == 0
    registry = served.app[METRICS].registry
    sample = "toolshim_endpoint_requests_total"
    assert registry.get_sample_value(sample, {"endpoint": "chat", "status": "4xx"}) == 1  # 499: the client left
    assert registry.get_sample_value(sample, {"endpoint": "chat", "status": "shutting_down"}) is None


def test_restart_policy_backs_off_then_gives_up() -> None:
    policy = RestartPolicy(quick=10, limit=5, base=0.25, cap=10)
    assert [policy.after_death(lived=1) for _ in range(4)] == [0.25, 0.5, 1.0, 2.0]
    assert policy.after_death(lived=1) is None


def test_restart_policy_forgets_failures_after_a_worker_that_lived() -> None:
    policy = RestartPolicy(quick=10, limit=3, base=1, cap=3)
    assert [policy.after_death(lived=0.1) for _ in range(2)] == [1, 2]
    assert policy.after_death(lived=60) == 1  # it served for a minute: a crash, not a failed start
    assert [policy.after_death(lived=0.1) for _ in range(2)] == [1, 2]
    assert policy.after_death(lived=0.1) is None


def test_restart_policy_caps_the_wait() -> None:
    policy = RestartPolicy(quick=10, limit=100, base=1, cap=5)
    assert [policy.after_death(lived=0) for _ in range(5)] == [1, 2, 4, 5, 5]


def cgroups(tmp_path: Path, proc_lines: str, files: dict[str, str]) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    root.mkdir(exist_ok=True)
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(proc_lines)
    return root, proc


def test_cgroup_v2_quota_is_the_smallest_on_the_way_up(tmp_path: Path) -> None:
    root, proc = cgroups(
        tmp_path,
        "0::/pod/app\n",
        {"cpu.max": "max 100000\n", "pod/cpu.max": "150000 100000\n", "pod/app/cpu.max": "max 100000\n"},
    )
    assert cgroup_quota(root, proc) == 1.5


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    root, proc = cgroups(
        tmp_path,
        "5:memory:/x\n4:cpu,cpuacct:/docker/abc\n",
        {"cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "50000\n", "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n"},
    )
    assert cgroup_quota(root, proc) == 0.5


@pytest.mark.parametrize(
    "files",
    [
        {},
        {"cpu.max": "max 100000\n"},
        {"cpu.max": "garbage\n"},
        {"cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n"},
    ],
)
def test_no_quota(tmp_path: Path, files: dict[str, str]) -> None:
    root, proc = cgroups(tmp_path, "0::/\n", files)
    assert cgroup_quota(root, proc) is None


def test_usable_cpus_round_the_quota_up_within_the_affinity() -> None:
    assert CpuBudget(affinity=8, quota=2.5).usable == 3
    assert CpuBudget(affinity=8, quota=0.2).usable == 1
    assert CpuBudget(affinity=2, quota=16).usable == 2
    assert CpuBudget(affinity=4, quota=None).usable == 4
    assert CpuBudget(affinity=8, quota=2.5).describe() == "3 usable CPUs (affinity 8, cgroup CPU quota 2.5)"
