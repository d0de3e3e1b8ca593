"""The ``toolshim`` command as a user runs it: real subprocesses of the installed console script."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from toolshim.config.settings import DEFAULT_RULES

from tests.conftest import free_port
from tests.fakes import FakeUpstream, Reply, completion

TOOLSHIM = str(Path(sys.executable).with_name("toolshim"))
GOOD = (
    '{upstreams: {local: {base_url: "%s"}}, models: [{match: "qwen*", upstream: "local", tool_mode: "hermes"},'
    ' {match: "*", upstream: "local"}]}'
)
BAD = (
    '{upstreams: {local: {base_url: "http://127.0.0.1:1/v1"}},\n models: [{match: "*", upstream: "local",'
    ' tool_mode: "telepathy"}]}'
)


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TOOLSHIM, *args], capture_output=True, text=True, timeout=30, env={**os.environ, **(env or {})}
    )


def test_check_rules_prints_table(tmp_path: Path) -> None:
    path = tmp_path / "rules.json5"
    path.write_text(GOOD % "http://127.0.0.1:11434/v1")
    result = run("check-rules", str(path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["match", "tool", "mode"]
    assert lines[1].split()[:3] == ["qwen*", "hermes", "local"]
    assert "http://127.0.0.1:11434/v1" in result.stdout
    assert "2 model rules, 1 upstreams: OK" in result.stdout


def test_check_rules_bad_exits_2_with_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "rules.json5"
    path.write_text(BAD)
    result = run("check-rules", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert f"{path}: models[0].tool_mode" in result.stderr
    assert "'native'" in result.stderr  # says what is allowed


def test_check_rules_default_rules_ship_valid() -> None:
    result = run("check-rules", str(Path(__file__).parent.parent / "rules" / "default.json5"))
    assert result.returncode == 0, result.stderr


def test_check_rules_without_a_path_checks_what_serve_would_load(tmp_path: Path) -> None:
    packaged = run("check-rules", env={"TOOLSHIM_RULES": ""})
    assert packaged.returncode == 0, packaged.stderr
    assert "local-coder" in packaged.stdout and f"({DEFAULT_RULES})" in packaged.stdout
    path = tmp_path / "rules.json5"
    path.write_text(GOOD % "http://127.0.0.1:11434/v1")
    named = run("check-rules", env={"TOOLSHIM_RULES": str(path)})
    assert named.returncode == 0 and f"2 model rules, 1 upstreams: OK ({path})" in named.stdout


def test_serve_with_bad_rules_fails_at_start(tmp_path: Path) -> None:
    path = tmp_path / "rules.json5"
    path.write_text(BAD)
    result = run("serve", "--rules", str(path), "--port", str(free_port()))
    assert result.returncode != 0
    assert f"{path}: models[0].tool_mode" in result.stderr
    missing = run("serve", env={"TOOLSHIM_RULES": str(tmp_path / "nope.json5"), "TOOLSHIM_PORT": str(free_port())})
    assert missing.returncode != 0 and "nope.json5: no such file or folder" in missing.stderr


def test_serve_with_bad_settings_fails_at_start(tmp_path: Path) -> None:
    path = tmp_path / "rules.json5"
    path.write_text(GOOD % "http://127.0.0.1:1/v1")
    result = run("serve", "--rules", str(path), env={"TOOLSHIM_PORT": "not-a-port"})
    assert result.returncode != 0 and "port" in result.stderr


@pytest.fixture
async def served(tmp_path: Path, fake_upstream: FakeUpstream) -> Any:
    """``toolshim serve`` in a subprocess, its port from ``TOOLSHIM_PORT``, rules from ``TOOLSHIM_RULES``."""
    path = tmp_path / "rules.json5"
    path.write_text(GOOD % fake_upstream.url)
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        TOOLSHIM,
        "serve",
        env={**os.environ, "TOOLSHIM_PORT": str(port), "TOOLSHIM_RULES": str(path)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    yield proc, f"http://127.0.0.1:{port}"
    if proc.returncode is None:
        proc.kill()
        await proc.wait()


async def _wait_healthy(url: str, proc: asyncio.subprocess.Process) -> None:
    deadline = time.monotonic() + 20
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            assert proc.returncode is None, "toolshim serve exited early"
            try:
                async with session.get(url + "/healthz") as resp:
                    if resp.status == 200 and (await resp.json())["status"] == "ok":
                        return
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError("toolshim serve did not answer /healthz in time")


async def test_serve_runs_for_real(served: Any, fake_upstream: FakeUpstream) -> None:
    proc, url = served
    await _wait_healthy(url, proc)
    fake_upstream.script(Reply(body=completion("from upstream")))
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            url + "/v1/chat/completions",
            json={"model": "qwen2.5", "messages": [{"role": "user", "content": "x"}], "tool_mode_probe": 1},
        ) as resp,
    ):
        assert resp.status == 200
        assert (await resp.json())["choices"][0]["message"]["content"] == "from upstream"
    proc.send_signal(signal.SIGTERM)
    _, stderr = await asyncio.wait_for(proc.communicate(), 15)
    assert proc.returncode == 0
    logs = stderr.decode()
    assert "listening" in logs  # JSON log lines on stderr
