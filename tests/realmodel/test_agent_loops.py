"""Whole agent loops with the real model: frameworks' own loops through toolshim with the demo rules.

``bench/agent_loops.py`` measures how often such loops end in a *correct* answer; that depends on the
model's luck. What must hold whatever the model writes is asserted here, for a short task that needs a
tool and one that needs none, each through the plain OpenAI SDK loop (streamed) and LangGraph's
``create_react_agent``: the loop ends within its round cap with a non-empty answer, and that answer
carries no toolshim instruction text (a run of words toolshim wrote upstream, found through the two
recording relays of the bench), no raw call markup, and no error reached the client.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.agent_loops import DEFAULT_RULES, Bench, TimedRelay, load_rules, run_loop, timed_relay
from bench.loop_tasks import TASKS_BY_NAME
from scripts.local_model import LocalModelError
from scripts.local_stack import Service, start_toolshim, stop

pytestmark = pytest.mark.realmodel

MAX_ROUNDS = 8
MAX_TOKENS = 128


@pytest.fixture(scope="module")
def loops(llama: Service) -> Iterator[Bench]:
    """client -> relay -> toolshim (demo/rules.json5) -> relay -> the session's model server."""
    upstream = timed_relay(llama.root)
    relays: list[TimedRelay] = [upstream]
    proxy: Service | None = None
    try:
        rules, model, _ = load_rules(DEFAULT_RULES, None, [], upstream.base_url, llama.model_id)
        try:
            proxy = start_toolshim(rules)
        except LocalModelError as exc:
            pytest.fail(f"cannot start toolshim: {exc}", pytrace=False)
        client = timed_relay(proxy.root)
        relays.append(client)
        yield Bench(client.base_url, model, client, upstream, MAX_ROUNDS, MAX_TOKENS, loop_timeout=300.0)
    finally:
        for relay in relays:
            relay.stop()
        if proxy is not None:
            stop(proxy)


@pytest.mark.parametrize("framework", ["openai-stream", "langgraph"])
@pytest.mark.parametrize("task", ["calculator", "no_tool"])
async def test_the_loop_ends_in_a_clean_answer(loops: Bench, framework: str, task: str) -> None:
    record = await run_loop(loops, framework, TASKS_BY_NAME[task])
    seen = f"{record.kind}: {record.answer!r}; calls {record.calls}; rounds {record.transcript}"
    assert record.error is None, seen
    assert not record.http_errors, seen
    assert record.kind != "capped" and record.rounds <= MAX_ROUNDS, seen
    assert record.answer.strip(), seen
    assert not record.markup, seen
    assert not record.toolshim_text, seen
