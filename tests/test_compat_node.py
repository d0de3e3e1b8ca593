"""Node clients (issue 17): ``openai``'s ``runTools`` and the Vercel AI SDK (``generateText`` / ``streamText``
through ``@ai-sdk/openai-compatible``) run a real tool loop through toolshim.

The packages are pinned in ``tests/compat_node/package-lock.json``; they are installed with ``npm ci`` on
first use (about 5 s). Without ``node``/``npm`` these tests are skipped, saying why.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import Reply, text_stream
from tests.test_compat_clients import ANSWER, assert_loop_went_through
from tests.test_emulation import call_text, emulated, pieces

HERE = Path(__file__).parent / "compat_node"


@pytest.fixture(scope="session")
def node_clients() -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for the Node client tests")
    if not (HERE / "node_modules").is_dir():
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"], cwd=HERE, capture_output=True, text=True, timeout=300
        )
        if done.returncode != 0:
            pytest.fail(f"npm ci failed in {HERE}: {done.stderr.strip()[-300:]}")  # a real failure, never a skip
    return HERE


@pytest.mark.parametrize("client", ["openai-runTools", "ai-generateText", "ai-streamText"])
async def test_node_client_tool_loop(node_clients: Path, start_proxy: Any, fake_upstream: Any, client: str) -> None:
    proxy = await start_proxy(models=emulated("hermes"))
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(call_text("hermes"), 5))), Reply(pieces=text_stream(pieces(ANSWER, 6)))
    )
    proc = await asyncio.create_subprocess_exec(
        "node",
        "loop.mjs",
        client,
        proxy.base_url,
        cwd=node_clients,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()[-2000:]
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result == {"answer": ANSWER, "calls": ["Paris"]}
    assert_loop_went_through(fake_upstream)
