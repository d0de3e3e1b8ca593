"""The Codex CLI through toolshim's Responses API against a scripted upstream (issue 13's Codex check).

Starts a scripted chat-completions upstream and toolshim (``hermes``, with
``responses_other_tools: "drop"``: Codex also offers ``web_search`` and a ``namespace`` of agent
tools, which a text-only model cannot use), then runs ``codex exec`` with toolshim as its model
provider. The scripted model first asks for ``exec_command`` (``cat answer.txt``), then answers with
what the result said. Prints what happened; exit 0 when Codex ran the command and finished.

    npm i --prefix /tmp/codex @openai/codex     # once; or set CODEX_BIN
    .venv/bin/python bench/codex_exec.py
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from toolshim.config.loading import load_rules  # noqa: E402
from toolshim.config.settings import Settings  # noqa: E402
from toolshim.formats import ToolCallRecord, get_format  # noqa: E402
from toolshim.server.app import create_app, start_site  # noqa: E402

from tests.conftest import free_port, write_rules  # noqa: E402
from tests.fakes import FakeUpstream, Reply, text_stream  # noqa: E402

CODEX = os.environ.get("CODEX_BIN", "/tmp/codex/node_modules/.bin/codex")


async def main() -> int:
    fake = FakeUpstream()
    upstream_app = web.Application()
    upstream_app.router.add_route("*", "/{tail:.*}", fake.handle)
    upstream_runner = web.AppRunner(upstream_app)
    await upstream_runner.setup()
    port = free_port()
    await web.TCPSite(upstream_runner, "127.0.0.1", port).start()
    fake.url = f"http://127.0.0.1:{port}/v1"
    work = Path(tempfile.mkdtemp(prefix="toolshim-codex-"))
    (work / "answer.txt").write_text("forty-two\n")
    (work / "codex-home").mkdir()
    rules = write_rules(
        work, fake.url, [{"match": "*", "upstream": "up", "tool_mode": "hermes", "responses_other_tools": "drop"}]
    )
    app = create_app(Settings(rules_path=rules, data_dir=work / "data"), load_rules(rules))
    proxy_port = free_port()
    runner = await start_site(app, "127.0.0.1", proxy_port)
    command = json.dumps({"cmd": "cat answer.txt"})
    call = get_format("hermes").render_calls([ToolCallRecord("c", "exec_command", command)])
    fake.script(Reply(pieces=text_stream([call])), Reply(pieces=text_stream(["The file says forty-two."])))
    provider = (
        f'model_providers.toolshim={{name="toolshim", base_url="http://127.0.0.1:{proxy_port}/v1", '
        'wire_api="responses", env_key="TOOLSHIM_KEY"}'
    )
    try:
        proc = await asyncio.create_subprocess_exec(
            CODEX,
            "exec",
            "--skip-git-repo-check",
            "-c",
            'model_provider="toolshim"',
            "-c",
            provider,
            "-m",
            "m",
            "What does answer.txt say?",
            cwd=work,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "TOOLSHIM_KEY": "unused", "CODEX_HOME": str(work / "codex-home")},
        )
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=180)
    finally:
        await runner.cleanup()
        await upstream_runner.cleanup()
    text = out.decode(errors="replace")
    print(text[-4000:])
    results = [m for body in fake.requests[1:] for m in body.get("messages", []) if "forty-two" in str(m)]
    print(
        f"[codex] exit {proc.returncode}; upstream calls {len(fake.requests)}; command output reached the model: "
        f"{bool(results)}"
    )
    return 0 if proc.returncode == 0 and results and "forty-two" in text else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
