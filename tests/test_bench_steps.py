"""bench/single_steps.py's own logic, without a model: its questions, histories and judging."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace
from typing import Any

import pytest

from bench.single_steps import ANSWER_STEPS, NEEDS_NONE, NEEDS_TOOL, TOOLS, AnswerStep, answer_step, first_turn


class Completions:
    """The chat API of an OpenAI client, answering with a fixed message and keeping the requests."""

    def __init__(self, content: str | None, calls: list[str]) -> None:
        self.requests: list[dict[str, Any]] = []
        tool_calls = [SimpleNamespace(function=SimpleNamespace(name=name, arguments="{}")) for name in calls]
        self.message = SimpleNamespace(content=content, tool_calls=tool_calls or None)

    def create(self, **body: Any) -> SimpleNamespace:
        self.requests.append(body)
        return SimpleNamespace(choices=[SimpleNamespace(message=self.message)])


def client(content: str | None = None, calls: list[str] | None = None) -> Any:
    return SimpleNamespace(chat=SimpleNamespace(completions=Completions(content, calls or [])))


def test_every_question_offers_tools_that_exist_and_no_loop_task_uses() -> None:
    from bench.loop_tasks import TASKS_BY_NAME

    questions = {task.question for task in TASKS_BY_NAME.values()}
    for question, names in (*NEEDS_TOOL, *NEEDS_NONE):
        assert question not in questions and all(name in TOOLS for name in names)
    assert len({step.question for step in ANSWER_STEPS}) == len(ANSWER_STEPS)


@pytest.mark.parametrize("step", ANSWER_STEPS, ids=lambda step: step.question[:30])
def test_each_answer_step_is_judged_on_the_fact_its_result_gives(step: AnswerStep) -> None:
    fake = client("Let me see.")
    assert answer_step(fake, "m", step, True, 0) == (False, "Let me see.")
    sent = fake.chat.completions.requests[0]
    assert sent["messages"][0]["role"] == "system" and sent["messages"][-1]["role"] == "tool"
    result = sent["messages"][-1]["content"]
    assert result == step.result if isinstance(step.result, str) else json.loads(result) == step.result
    assert re.compile(step.expected)  # the pattern compiles; a call is never an answer
    assert answer_step(client(None, ["send_email"]), "m", step, False, 0) == (False, "call send_email")


def test_right_answers_pass() -> None:
    menu, stock = ANSWER_STEPS[0], ANSWER_STEPS[6]
    assert answer_step(client("Yes: the Garden Delight, $12."), "m", menu, False, 0)[0]
    assert answer_step(client("Sorry, medium is out of stock."), "m", stock, False, 0)[0]
    assert not answer_step(client("Yes, medium is available."), "m", stock, False, 0)[0]


def test_the_first_turn_reports_the_tool_called_first() -> None:
    question, names = NEEDS_TOOL[0]
    assert first_turn(client(None, ["define_word", "calculator"]), "m", question, names, False, 1) == "define_word"
    assert first_turn(client("It means everywhere."), "m", question, names, True, 1) == ""
