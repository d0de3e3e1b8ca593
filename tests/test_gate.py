"""The call gate on its own: each verdict, what it records on the attempt, and the trust a re-ask gives."""

from __future__ import annotations

import json
from typing import Any

from toolshim.chat.attempt import Attempt
from toolshim.chat.gate import CallGate, Verdict
from toolshim.chat.grounding import Grounds
from toolshim.chat.repeats import call_key
from toolshim.formats import ToolCallEnd, ToolSpec

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = ToolSpec("get_weather", "Current weather in a city.", CITY)
TIME = ToolSpec("get_time", "Local time in a city.", CITY)
TOOLS = {tool.name: tool for tool in (WEATHER, TIME)}
ASKED = Grounds(["What's the weather in Lisbon?"])


def call(name: str, **arguments: Any) -> ToolCallEnd:
    return ToolCallEnd(0, name, json.dumps(arguments))


def test_a_call_the_history_answered_is_kept_back_as_a_repeat() -> None:
    gate = CallGate(TOOLS, answered=frozenset({call_key("get_weather", '{"city": "Lisbon"}')}))
    attempt = Attempt()
    assert gate.judge(call("get_weather", city="Lisbon"), attempt, 0, echoed=False) is Verdict.ANSWERED
    assert attempt.repeated == ["get_weather"]
    assert gate.judge(call("get_weather", city="Porto"), Attempt(), 0, echoed=False) is None


def test_made_up_values_are_kept_back_until_trusted() -> None:
    gate = CallGate(TOOLS, grounds=ASKED)
    attempt = Attempt()
    assert gate.judge(call("get_weather", city="Paris"), attempt, 0, echoed=False) is Verdict.MADE_UP
    assert [missing for _, missing in attempt.ungrounded] == [['city="Paris"']]
    assert gate.judge(call("get_weather", city="Lisbon"), Attempt(), 0, echoed=False) is None
    gate.trust_arguments()
    assert gate.judge(call("get_weather", city="Paris"), Attempt(), 0, echoed=False) is None


def test_an_unasked_tool_is_kept_back_after_results_and_dropped_only_beside_a_call_before_them() -> None:
    after_results = CallGate(TOOLS, unasked=frozenset({"get_time"}))
    attempt = Attempt()
    assert after_results.judge(call("get_time", city="Lisbon"), attempt, 0, echoed=False) is Verdict.UNASKED
    assert (attempt.unasked, attempt.withheld) == (["get_time"], 1)
    before_results = CallGate(TOOLS, unasked=frozenset({"get_time"}), unasked_beside_only=True)
    assert before_results.judge(call("get_time", city="Lisbon"), Attempt(), 0, echoed=False) is None
    beside = before_results.judge(call("get_time", city="Lisbon"), Attempt(), 1, echoed=False)
    assert beside is Verdict.UNASKED_BESIDE


def test_a_respelled_name_is_written_the_conversations_way() -> None:
    gate = CallGate(TOOLS, grounds=ASKED)
    event = gate.respelled(call("get_weather", city="Lisboa"))
    assert json.loads(event.arguments) == {"city": "Lisbon"} and "respelled" in event.repairs
    assert CallGate(TOOLS).respelled(call("get_weather", city="Lisboa")).arguments == '{"city": "Lisboa"}'
