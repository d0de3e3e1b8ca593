"""Lenient recognition end to end (issue 14): a call in another syntax than the prompted one reaches the
client as a tool call, through the real OpenAI SDK against the scripted upstream, streamed in small pieces;
the rule option ``lenient: false`` turns it off; each recognised syntax is counted as a repair kind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from toolshim.config.loading import load_rules
from toolshim.config.rules import RulesError

from tests.fakes import Reply, text_stream
from tests.test_emulation import ask, emulated, pieces
from tests.test_observability import scrape, value

WRAPPED = 'I\'ll check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
MISTRAL = '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}'


def calls_of(message: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message.get("tool_calls") or ()]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("fmt", ["react", "xml", "caret"])
async def test_a_hermes_block_under_another_format_is_a_call(
    start_proxy: Any, fake_upstream: Any, stream: bool, fmt: str
) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    fake_upstream.script(Reply(pieces=text_stream(pieces(WRAPPED, 3))))
    result = await ask(proxy, stream)
    message = result["choices"][0]["message"]
    assert calls_of(message) == [("get_weather", {"city": "Paris"})]
    assert (message["content"] or "").strip() == "I'll check."
    assert result["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("stream", [False, True])
async def test_lenient_false_leaves_foreign_syntax_as_text(start_proxy: Any, fake_upstream: Any, stream: bool) -> None:
    proxy = await start_proxy(models=emulated("react", lenient=False))
    fake_upstream.script(Reply(pieces=text_stream(pieces(MISTRAL, 2))))
    message = (await ask(proxy, stream))["choices"][0]["message"]
    assert message["content"] == MISTRAL and not message.get("tool_calls")


async def test_recognised_syntax_is_counted(start_proxy: Any, fake_upstream: Any) -> None:
    proxy = await start_proxy(models=emulated("hermes"))
    fake_upstream.script(Reply(pieces=text_stream(pieces(MISTRAL, 2))))
    message = (await ask(proxy, True))["choices"][0]["message"]
    assert calls_of(message) == [("get_weather", {"city": "Oslo"})]
    samples = await scrape(proxy)
    assert value(samples, "toolshim_tool_repairs_total", model="*", format="hermes", kind="foreign_mistral") == 1


def test_lenient_is_a_strict_boolean_rule_option(tmp_path: Path) -> None:
    def rules(extra: str) -> Path:
        path = tmp_path / "r.json5"
        path.write_text(
            '{upstreams: {u: {base_url: "http://127.0.0.1:9/v1"}}, '
            f'models: [{{match: "*", upstream: "u", tool_mode: "react"{extra}}}]}}',
            encoding="utf-8",
        )
        return path

    default = load_rules(rules("")).resolve("m")
    off = load_rules(rules(", lenient: false")).resolve("m")
    assert default is not None and default.rule.lenient is True
    assert off is not None and off.rule.lenient is False
    with pytest.raises(RulesError, match="lenient"):
        load_rules(rules(', lenient: "no"'))
