"""Logs an operator can use (issue 17): upstream failures with their cause at warning; litellm's lines as JSON."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import free_port
from tests.fakes import Reply
from tests.test_core_errors import OK_BODY, post


def upstream_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "upstream" in r.getMessage()]


@pytest.mark.parametrize("stream", [False, True])
async def test_unreachable_upstream_is_logged_with_its_cause(
    start_proxy: Any, caplog: pytest.LogCaptureFixture, stream: bool
) -> None:
    proxy = await start_proxy(upstream_extra={"base_url": f"http://127.0.0.1:{free_port()}/v1"})
    with caplog.at_level(logging.WARNING):
        status, body = await post(proxy.base_url + "/chat/completions", json={**OK_BODY, "stream": stream})
    assert status == 502 and "connection refused" in body["error"]["message"]
    assert "127.0.0.1" not in body["error"]["message"]
    assert any("connection refused" in m and "upstream_unreachable" in m for m in upstream_warnings(caplog))


async def test_upstream_error_status_is_logged_with_its_message(
    start_proxy: Any, fake_upstream: Any, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = await start_proxy()
    fake_upstream.script(Reply(status=429, body={"error": {"message": "slow down please", "type": "rate_limit"}}))
    with caplog.at_level(logging.WARNING):
        status, _ = await post(proxy.base_url + "/chat/completions", json=OK_BODY)
    assert status == 429
    assert any("slow down please" in m and "429" in m for m in upstream_warnings(caplog))


def test_litellm_log_lines_come_out_as_json() -> None:
    """litellm attaches plain-text handlers to its loggers on import; ours takes them off."""
    code = (
        "import logging\n"
        "from toolshim.observe.logs import configure_logging\n"
        "from toolshim.upstream.litellm import _import_litellm\n"
        "configure_logging('INFO')\n"
        "_import_litellm()\n"
        "logging.getLogger('LiteLLM').warning('from litellm')\n"
        "logging.getLogger('LiteLLM Router').warning('from the router')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is JSON
    assert {r["msg"] for r in records} >= {"from litellm", "from the router"}
