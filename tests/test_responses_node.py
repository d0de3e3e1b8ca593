"""The Vercel AI SDK (Node, ``tests/node``, locked by its package-lock.json) runs ``generateText`` and
``streamText`` with a tool and a step limit through toolshim's ``/v1/responses`` to a final answer.

The packages are installed from the npm registry with ``npm ci`` the first time (``make test``);
skipped with the reason when Node or npm is missing.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeUpstream
from tests.test_responses import call_reply, rules, text_reply

NODE_DIR = Path(__file__).parent / "node"


@pytest.fixture(scope="module")
def node_ready() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("Node.js and npm are needed for the Vercel AI SDK test")
    if not (NODE_DIR / "node_modules" / "ai").is_dir():
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=NODE_DIR,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
    return node


@pytest.mark.parametrize("mode", ["hermes", "native"])
@pytest.mark.parametrize("way", ["generate", "stream"])
async def test_vercel_ai_sdk_tool_loop(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, node_ready: str, mode: str, way: str
) -> None:
    streamed = way == "stream"
    fake_upstream.script(call_reply(mode, streamed), text_reply(mode, streamed))
    proxy = await start_proxy(models=rules(mode), data_dir=tmp_path)
    proc = await asyncio.create_subprocess_exec(
        node_ready,
        "vercel.mjs",
        way,
        cwd=NODE_DIR,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "TOOLSHIM_BASE_URL": proxy.base_url},
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()[-3000:]
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result == {"text": "It is sunny in Paris.", "steps": 2, "calls": ["Paris"]}
    assert fake_upstream.paths == ["/v1/chat/completions"] * 2
