"""The re-ask decision: after an attempt that gave the client nothing it can use, whether the model is asked
again, why (the metrics' reason), and with which message.

Reasons: ``repeat`` (only calls whose results the history holds), ``placeholder`` (a value copied from the
worked example: the same question again, ``example.py``), ``ground`` (values the conversation does not
hold: the same question without those tools, see ``Emulator._withhold``), ``repair`` (a malformed call),
``required`` (``tool_choice`` demands a call), ``call`` and ``answer`` (an answer that talks about a tool, or
nothing but a call where none may be made), ``more`` (an answer that leaves out what the question also asks
about), ``empty``. ``repeat`` and ``answer`` ask for a plain answer with
the tools withdrawn (``EmulationPlan.answering``). Pure decisions over the plan, the builder and the attempt:
the I/O loop (``emulation``) sends what they decide.
"""

from __future__ import annotations

from typing import Any

from ..config.rules import ModelRule
from ..formats.history import copies_folded_results
from .attempt import Attempt
from .builder import ResponseBuilder
from .repeats import key_name
from .rewrite import EmulationPlan
from .toldcalls import tools_talked_about

Reask = tuple[str, str]  # (reason, message)


def next_reask(
    plan: EmulationPlan,
    builder: ResponseBuilder[Any],
    attempt: Attempt,
    repair_ok: bool,
    required_ok: bool,
    ground_asked: bool,
) -> Reask | None:
    """``(reason, message)`` when another attempt is due, else ``None``: the model's attempt and the
    message follow the conversation. ``repeat`` and ``answer`` ask for a plain answer, the tools
    withdrawn (``EmulationPlan.answering``)."""
    if builder.calls_sent or attempt.abandoned_call:
        return None
    if attempt.repeated:  # only calls whose results the history holds: answer from them
        names = ", ".join(f"`{name}`" for name in dict.fromkeys(attempt.repeated))
        return "repeat", (
            f"You already called {names} with these same arguments, and the result is in the conversation "
            "above. Do not call it again: answer the user now in plain text, using that result."
        )
    if attempt.placeholders:  # kept back only while a re-ask is allowed: the same question, sampled again
        return "placeholder", ""
    if (attempt.ungrounded or attempt.unasked) and not ground_asked:
        return "ground", ""  # Emulator._withhold decides what the next attempt leaves out
    withdrawn = builder.calls_withdrawn
    if attempt.malformed and repair_ok and not withdrawn:
        reason = attempt.malformed[0].reason
        text_ok = "" if plan.wants_call else " If none of the available tools fits, answer in plain text."
        return "repair", (
            f"Your tool call could not be used: {reason}. Write the tool call again, "
            f"correctly, in exactly the format described in the instructions.{text_ok}"
        )
    if plan.wants_call and required_ok:
        builder.drop_held_text()
        target = f"the tool `{plan.tool_choice.name}`" if plan.tool_choice.mode == "named" else "one of the tools"
        return "required", (
            f"You must call {target} now. Reply with only the tool call, in exactly the "
            "format described in the instructions."
        )
    talk = tool_talk(plan, builder, attempt) if repair_ok and not withdrawn else None
    if talk is not None:
        return talk
    if repair_ok and not withdrawn and forgets_the_rest(plan, builder, attempt):
        builder.drop_held_text()
        return "more", ""  # the plan's call body asks (emulation: ``EmulationPlan.calling``)
    if repair_ok and withdrawn and plan.folded and builder.quotes_results(builder.retractable_text()):
        builder.drop_held_text()  # a plain answer that quotes a result's folded line: toolshim's rendering
        return "answer", answer_message(plan)
    if repair_ok and not plan.wants_call and attempt.finish == "stop" and not builder.has_answer():
        # "or call a tool" would invite another call; so would it after the folded results copied back; and
        # after toolshim's own note repeated instead of an answer, the model shown its echo repeats it again
        if (
            withdrawn
            or attempt.withheld
            or (plan.folded and (builder.echoed() or copies_folded_results("".join(attempt.raw))))
        ):
            return "answer", answer_message(plan)
        return "empty", (  # nothing but whitespace, or only the instructions repeated (dropped)
            "Your reply was empty. Answer the user in plain text, or call a tool in exactly the format "
            "described in the instructions."
        )
    return None


def tool_talk(plan: EmulationPlan, builder: ResponseBuilder[Any], attempt: Attempt) -> Reask | None:
    """An answer to tool results that talks about a tool instead ("call get_on_call", "The next tool you need
    is `get_flight_status`."), while the client has seen none of it: asked again, for the call it names when
    the question asks for its tool and the conversation has not made that call, or has but the question
    names something no result covers yet ("I will call the `get_population` tool" after Lisbon's, Porto
    still asked about) (``call``), else for the answer from the results, the tools withdrawn (``answer``)."""
    if not plan.folded or attempt.finish != "stop" or attempt.calls:
        return None
    named = tools_talked_about(builder.retractable_text(), plan.parse_tools)
    if not named:
        return None
    builder.drop_held_text()
    made = {key_name(key) for key in plan.made_calls()}
    wanted = [name for name in named if (name not in made or plan.asks_more) and name not in plan.unasked]
    if wanted:
        return "call", (
            f"Call `{wanted[0]}` now: reply with only the tool call, in exactly the format described in the "
            "instructions."
        )
    return "answer", answer_message(plan)


def forgets_the_rest(plan: EmulationPlan, builder: ResponseBuilder[Any], attempt: Attempt) -> bool:
    """An answer to tool results that names none of what the question also asks about and no result covers
    ("Mont Blanc is 4,806 m high.", for "How high are Mont Blanc and the Matterhorn?"), while the client has
    seen none of it: the model is asked once for the next call (the folded history that ends naming what is
    still uncovered, ``EmulationPlan.calling``); what it writes then stands, an answer too."""
    if not plan.folded or plan.call_body is None or attempt.finish != "stop" or attempt.calls:
        return False
    text = builder.retractable_text()
    return bool(text.strip()) and plan.uncovered.left_out_by(text)


def unrepaired(plan: EmulationPlan, builder: ResponseBuilder[Any], rule: ModelRule, attempt: Attempt) -> Reask | None:
    """The re-asks are over and the attempt is a call that still cannot be made (a tool no one offered,
    a required value missing, the same broken call written again): once, the model is asked for a plain
    answer with the tools withdrawn ("I can only look up the weather", "Which payment method?") instead
    of the client getting no answer at all. Not where the rule allows no repair, nor when a call is due."""
    if (
        not attempt.malformed
        or attempt.finish != "stop"
        or rule.max_repair_retries == 0
        or plan.wants_call
        or builder.calls_sent
        or builder.calls_withdrawn
        or builder.has_answer()
    ):
        return None
    return "answer", answer_message(plan)


def answer_message(plan: EmulationPlan) -> str:
    results = ", using the tool results above" if plan.results else ""
    return f"No tool can be called in this reply: answer the user now in plain text{results}."


def missing_call_message(plan: EmulationPlan, reasks: int) -> str:
    target = f"the function '{plan.tool_choice.name}'" if plan.tool_choice.mode == "named" else "a tool"
    return (
        f"The model gave no valid tool call although tool_choice required {target} "
        f"(asked {reasks + 1} time{'s' if reasks else ''}). Retry, or use a model that follows tool "
        'instructions better; the rule option on_missing_call: "text" returns the text instead.'
    )
