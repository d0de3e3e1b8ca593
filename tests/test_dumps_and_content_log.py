"""Raw-output dumps and content logging.

Dump file names never come from request data: a client's ``X-Request-Id`` once became part of
the path, so ``../`` or an absolute path wrote model text anywhere the process could write.
``log_content`` logs the rendered prompt and the raw model text at DEBUG, and nothing when off.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes import FakeUpstream, Reply, text_stream
from tests.formats.tools import OPENAI_TOOLS

CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
BODY = {
    "model": "m",
    "messages": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": [OPENAI_TOOLS["get_weather"]],
}
HERMES = [{"match": "*", "upstream": "up", "tool_mode": "hermes"}]


async def post(proxy: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.base_url + "/chat/completions", json=BODY, headers=headers or {}) as resp,
    ):
        assert resp.status == 200, await resp.text()
        result: dict[str, Any] = await resp.json()
        return result


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "request_id", ["../../escaped", "/tmp/toolshim-escaped-dump", "a/../../../escaped", "..\\..\\escaped", "x" * 120]
)
async def test_dump_file_names_never_come_from_the_request(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, request_id: str
) -> None:
    dump_dir = tmp_path / "work" / "dumps"
    fake_upstream.script(Reply(pieces=text_stream(["I'll check. ", CALL])))
    before = files_under(tmp_path)
    proxy = await start_proxy(models=HERMES, dump_dir=dump_dir)
    answer = await post(proxy, {"X-Request-Id": request_id})
    assert answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    created = files_under(tmp_path) - before - {tmp_path / "rules.json5"}
    assert created and all(p.parent == dump_dir for p in created), created
    assert not Path("/tmp/toolshim-escaped-dump-0.txt").exists()
    (dump,) = created
    assert "escaped" not in dump.name and "x" * 20 not in dump.name
    text = dump.read_text(encoding="utf-8")
    assert CALL in text and "format=hermes" in text
    assert repr(request_id[:128]) in text  # the id is kept, escaped, inside the file


async def test_dump_folder_that_cannot_be_written_does_not_fail_the_request(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    fake_upstream.script(Reply(pieces=text_stream([CALL])))
    proxy = await start_proxy(models=HERMES, dump_dir=blocker / "dumps")
    with caplog.at_level(logging.WARNING, logger="toolshim.observe.dumps"):
        answer = await post(proxy)
    assert answer["choices"][0]["finish_reason"] == "tool_calls"
    assert "could not write the raw-output dump" in caplog.text and "TOOLSHIM_DUMP_DIR" in caplog.text
    assert str(blocker) in caplog.text  # the operator sees where


@pytest.mark.parametrize("log_content", [True, False])
async def test_log_content_logs_prompt_and_model_text_only_when_on(
    start_proxy: Any, fake_upstream: FakeUpstream, caplog: pytest.LogCaptureFixture, log_content: bool
) -> None:
    fake_upstream.script(Reply(pieces=text_stream(["Let me look. ", CALL])))
    proxy = await start_proxy(models=HERMES, log_content=log_content)
    with caplog.at_level(logging.DEBUG, logger="toolshim.chat.emulation"):
        await post(proxy)
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "toolshim.chat.emulation")
    assert ("Weather in Paris?" in logged and "get_weather" in logged and CALL in logged) is log_content
    if not log_content:
        assert "Weather in Paris?" not in logged and CALL not in logged


async def test_dumps_keep_no_key_nor_authorization_value(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model may echo what its prompt held: the upstream key, a header, a bearer token. The dump is
    kept on disk for people who may not hold the keys: none of it is written, and only the owner reads it."""
    monkeypatch.setenv("UP_KEY", "upstream-key-0123456789")
    echoed = (
        "key upstream-key-0123456789, header hdr-secret-98765, client client-key-abcdef, "
        "Authorization: Bearer tok_abcdefghijklmnop, sk-proj-abcdefghijklmnopqrst, "
        "http://user:pa55word@host/v1 api_key=plainsecret42 "
    )
    fake_upstream.script(Reply(pieces=text_stream([echoed, CALL])))
    dump_dir = tmp_path / "dumps"
    proxy = await start_proxy(
        models=HERMES,
        upstream_extra={"api_key_env": "UP_KEY", "headers": {"X-Extra": "hdr-secret-98765"}},
        dump_dir=dump_dir,
        api_keys=("client-key-abcdef",),
    )
    await post(proxy, {"Authorization": "Bearer client-key-abcdef"})
    (dump,) = files_under(dump_dir)
    text = dump.read_text(encoding="utf-8")
    assert CALL in text
    for secret in (
        "upstream-key-0123456789",
        "hdr-secret-98765",
        "client-key-abcdef",
        "tok_abcdefghijklmnop",
        "sk-proj-abcdefghijklmnopqrst",
        "pa55word",
        "plainsecret42",
    ):
        assert secret not in text, secret
    assert dump.stat().st_mode & 0o077 == 0
