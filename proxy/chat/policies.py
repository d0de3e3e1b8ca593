"""Conversation policies: keep agent loops from spinning and small models within their limits.

Applied to the client's request before the mode is chosen, as pure functions of the
``ChatTurn`` and the rule; each returns a new turn and the names of the policies that acted
(for metrics and the log). Withdrawing the tools means ``tool_choice: "none"`` for this turn plus a short
instruction, so native and emulated modes both stop calling tools and the history stays valid.

* consecutive tool turns   ``max_consecutive_tool_turns`` (off by default)
* repeated calls           ``max_repeated_calls`` (default 3), since the last user message: the same call
                           again and again, or a cycle of calls (repeats.py)
* consecutive tool errors  ``max_consecutive_tool_errors`` (default 3), ``tool_error_pattern``
* unrelated first request  ``offer_tools``: the conversation's opening request goes with tool_choice
                           "none" when it shares no word with any tool ("when_related", "related"), and
                           without the tools it shares no word with ("related"; toolrank.related_tools)
* tool budget              ``max_tools`` with ``tool_priority``, then recent use, then request order
* tool output limits       ``max_tool_output_chars``, ``max_total_tool_output_chars``,
                           ``tool_output_limits`` (per tool name)
* output limit             ``max_output_tokens``: the most tokens one upstream request may generate; the
                           client's limit when lower, this one when the client set none (a small model
                           that loops on a request without a limit generates until its context is full:
                           minutes of a local server, for one answer)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from ..config.fields import is_count
from ..config.rules import ModelRule
from ..formats import ToolChoice
from ..formats.history import content_text, merge_system_prompt
from .repeats import calls_in_order, key_name, loop_calls, trailing_repeats
from .toolrank import first_user_text, ranked, related_tools
from .turn import ChatTurn, tool_name

Message = Mapping[str, Any]

CUT_MARKER = "\n[... toolshim removed {n} characters of this tool output ...]\n"
SHORT_CUT_MARKER = "[...{n} cut...]"
_MARKERS = re.compile(
    "|".join(re.escape(marker.strip()).replace(re.escape("{n}"), r"\d+") for marker in (CUT_MARKER, SHORT_CUT_MARKER))
)


@dataclass(slots=True)
class PolicyResult:
    turn: ChatTurn
    actions: list[str] = field(default_factory=list)


def apply_policies(turn: ChatTurn, rule: ModelRule) -> PolicyResult:
    """All policies, in order: loop guards (which may withdraw tools), budget, output limits."""
    result = PolicyResult(turn)
    if turn.offers_tools and _ends_with_tool_results(turn.messages):
        reason = _loop_guard(turn.messages, rule)
        if reason is not None:
            policy, instruction = reason
            result.turn = _withdraw_tools(result.turn, instruction)
            result.actions.append(policy)
    if rule.offer_tools != "always":
        offered = _offer_related_tools(result.turn, trim=rule.offer_tools == "related")
        if offered is not None:
            result.turn = offered
            result.actions.append("offer_tools")
    if rule.max_tools and len(result.turn.tool_defs) > rule.max_tools:
        result.turn = _limit_tools(result.turn, rule)
        result.actions.append("max_tools")
    limited = limit_tool_outputs(list(result.turn.messages), rule)
    if limited is not None:
        result.turn = result.turn.with_messages(limited).with_injected(*_cut_markers(limited))
        result.actions.append("tool_output_limit")
    capped = _capped_output(result.turn, rule.max_output_tokens)
    if capped is not None:
        result.turn = capped
        result.actions.append("max_output_tokens")
    return result


_OUTPUT_LIMITS = ("max_tokens", "max_completion_tokens")


def _capped_output(turn: ChatTurn, cap: int | None) -> ChatTurn | None:
    """The turn with no output limit above ``cap``, and ``max_completion_tokens: cap`` when it has none (OpenAI's
    name; a compatible upstream gets it as ``max_tokens``, config/fields.py); ``None`` when nothing changes."""
    if cap is None:
        return None
    options = dict(turn.options)
    limits = [name for name in _OUTPUT_LIMITS if is_count(options.get(name))]
    if not limits:
        options["max_completion_tokens"] = cap
    elif all(options[name] <= cap for name in limits):
        return None
    for name in limits:
        options[name] = min(options[name], cap)
    return turn.with_options(options)


# ---- loop guards ----------------------------------------------------------------------------


def _ends_with_tool_results(messages: Sequence[Message]) -> bool:
    return bool(messages) and messages[-1].get("role") in ("tool", "function")


def _loop_guard(messages: Sequence[Message], rule: ModelRule) -> tuple[str, str] | None:
    """The first loop guard that trips: ``(policy name, instruction for the model)``."""
    turns = rule.max_consecutive_tool_turns
    if turns and trailing_tool_turns(messages) >= turns:
        return "max_consecutive_tool_turns", (
            f"You have called tools {turns} times in a row. Do not call any more tools now: answer the user "
            "with what you have found so far, and say what is still missing."
        )
    repeated = rule.max_repeated_calls
    looping = repeated_call(messages, repeated) if repeated else None
    if looping is not None and repeated:
        return "max_repeated_calls", _repeat_instruction(looping, repeated)
    errors = rule.max_consecutive_tool_errors
    if errors and trailing_tool_errors(messages, rule.tool_error_pattern) >= errors:
        return "max_consecutive_tool_errors", (
            f"The last {errors} tool calls failed. Stop calling tools and tell the user what went wrong, "
            "quoting the error."
        )
    return None


def trailing_tool_turns(messages: Sequence[Message]) -> int:
    """Assistant turns at the end of the history that were only tool calls (no text)."""
    count = 0
    for message in reversed(messages):
        role = message.get("role")
        if role in ("tool", "function"):
            continue
        if (
            role == "assistant"
            and (message.get("tool_calls") or message.get("function_call"))
            and not content_text(message.get("content")).strip()
        ):
            count += 1
            continue
        break
    return count


def repeated_call(messages: Sequence[Message], limit: int) -> list[str] | None:
    """The calls the agent keeps making, when the last ``limit - 1`` calls of the current agent loop each
    repeat an earlier one (``repeats``: the same call with the same arguments, nothing new in between; so
    ``limit`` identical calls in a row, or a cycle A, B, A, B, A): their ``call_key``s, in order. A new user
    message starts a new loop: asking again is not spinning."""
    keys = loop_calls(messages)
    run = trailing_repeats(keys)
    if run < limit - 1:
        return None
    return list(dict.fromkeys(keys[len(keys) - run - 1 :]))


def _repeat_instruction(keys: list[str], limit: int) -> str:
    names = [f"`{name}`" for name in dict.fromkeys(map(key_name, keys))]
    shown = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    if len(keys) == 1:
        what = f"You called {shown} with the same arguments {limit} times in a row"
    else:
        what = f"You keep calling {shown} in turn with the same arguments"
    return (
        f"{what}; calling again will not give a different result. Do not call tools now: answer with what "
        "you have, or explain the problem."
    )


@lru_cache(maxsize=64)
def _error_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def trailing_tool_errors(messages: Sequence[Message], pattern: str) -> int:
    """How many of the most recent tool results, counting back, are errors."""
    regex = _error_regex(pattern)
    count = 0
    for message in reversed(messages):
        if message.get("role") not in ("tool", "function"):
            if message.get("role") == "assistant":
                continue
            break
        if not regex.search(content_text(message.get("content"))[:2000]):
            break
        count += 1
    return count


def _withdraw_tools(turn: ChatTurn, instruction: str) -> ChatTurn:
    """``tool_choice: "none"`` for this turn plus the instruction; the tools stay, so the history stays valid."""
    withdrawn = _tool_choice_none(turn).with_messages(merge_system_prompt(list(turn.messages), instruction))
    return withdrawn.with_injected(instruction)


def _tool_choice_none(turn: ChatTurn) -> ChatTurn:
    """The turn with ``tool_choice: "none"`` and no ``parallel_tool_calls`` (meaningless without calls)."""
    return replace(turn.with_tool_choice(ToolChoice("none")), parallel=None)


# ---- unrelated first request -------------------------------------------------------------------

_OPENING_ROLES = frozenset({"system", "developer", "user"})


def _offer_related_tools(turn: ChatTurn, trim: bool) -> ChatTurn | None:
    """The opening request with only the tools it is related to (toolrank.related_tools): with
    ``tool_choice: "none"`` when it is related to none, and with ``trim`` without the tools it shares
    no word with. ``None``: the turn stays as it is (not an opening request, or nothing to judge).

    A small model offered tools calls one even when none fits (BFCL irrelevance: invented arguments),
    and among several it calls the unrelated ones too (BFCL multiple: a lawsuit search after the
    protein sequence asked for); a tool that shares no word with the request is rarely the one asked for.

    The user's words decide: a user message with no comparable word ("What is 17 * 23 + 4?", a
    greeting, another script) is not judged. A system or developer prompt only adds to what is
    related: an application that describes its tools' domain there keeps them."""
    opening = _opening_request(turn)
    if opening is None:
        return None
    related = related_tools(turn.tools, *opening)
    if related is None or all(related):
        return None
    if not any(related):
        return _tool_choice_none(turn)
    if not trim:
        return None
    unrelated = {spec.name for spec, wanted in zip(turn.tools, related, strict=True) if not wanted}
    return turn.with_tool_defs(d for d in turn.tool_defs if tool_name(d) not in unrelated)


def _opening_request(turn: ChatTurn) -> tuple[str, str] | None:
    """(the user message, the system and developer messages) of a conversation's first turn (one user
    message, nothing from the assistant or a tool yet) that offers tools and leaves the choice to the
    model; ``None`` for any other turn.

    Only the first turn: a reply like "yes, do it" names no tool either, and once the conversation has
    begun the tools stay."""
    if turn.choice.mode != "auto" or not turn.tools:
        return None
    users: list[str] = []
    prompts: list[str] = []
    for message in turn.messages:
        role = message.get("role")
        if role not in _OPENING_ROLES:
            return None
        (users if role == "user" else prompts).append(content_text(message.get("content")))
    return (users[0], "\n".join(prompts)) if len(users) == 1 else None


# ---- tool budget ------------------------------------------------------------------------------


def _recently_used(messages: Sequence[Message]) -> list[str]:
    """Tool names by most recent use in the history."""
    order: list[str] = []
    for name in map(key_name, reversed(calls_in_order(messages))):
        if name not in order:
            order.append(name)
    return order


def _limit_tools(turn: ChatTurn, rule: ModelRule) -> ChatTurn:
    """Keep ``max_tools``: a forced tool first, then priority list, recent use, relevance to the
    request (with ``tool_order: "relevance"``, see toolrank.py), request order.

    A named ``tool_choice`` that names no offered tool is left for the mode to report (a
    policy must not turn it into a 500)."""
    tools = turn.tool_defs
    forced = turn.choice.name if turn.choice.mode == "named" else None
    ranking = [n for n in (forced,) if n] + list(rule.tool_priority) + _recently_used(turn.messages)
    if rule.tool_order == "relevance":
        ranking += [spec.name for spec in ranked(turn.tools, first_user_text(turn.messages))]
    rank = {name: i for i, name in reversed(list(enumerate(ranking)))}
    ordered = sorted(enumerate(tools), key=lambda it: (rank.get(tool_name(it[1]), len(ranking)), it[0]))
    kept = {i for i, _ in ordered[: rule.max_tools]}
    return turn.with_tool_defs(t for i, t in enumerate(tools) if i in kept)


# ---- tool output limits -----------------------------------------------------------------------


def shorten(text: str, limit: int) -> str:
    """Keep the head and the tail of ``text`` within ``limit`` characters, marking what was cut.

    The result never exceeds ``limit`` (a fair share of a total can be tiny): the short marker
    is used when the long one would take more room than the text it keeps, a bare head when
    neither fits.
    """
    if len(text) <= limit:
        return text
    for marker in (CUT_MARKER, SHORT_CUT_MARKER):
        room = len(marker.format(n=len(text)))  # the real count has no more digits than this
        keep = limit - room
        if keep >= (room if marker is CUT_MARKER else 1):
            head = keep * 2 // 3
            tail = keep - head
            return text[:head] + marker.format(n=len(text) - keep) + (text[len(text) - tail :] if tail else "")
    return text[: max(limit, 0)]


def _cut_markers(messages: Sequence[Message]) -> list[str]:
    """The cut markers in the tool results (the model must not echo them)."""
    found = (
        _MARKERS.findall(content_text(m.get("content"))) for m in messages if m.get("role") in ("tool", "function")
    )
    return list(dict.fromkeys(marker for markers in found for marker in markers))


def _latest_results(messages: Sequence[Message]) -> list[int]:
    """Indexes of the tool results after the last assistant message (the latest turn)."""
    found: list[int] = []
    for i in range(len(messages) - 1, -1, -1):
        role = messages[i].get("role")
        if role in ("tool", "function"):
            found.append(i)
        elif role == "assistant":
            break
    return found[::-1]


def _fair_shares(lengths: list[int], budget: int) -> list[int]:
    """Water-filling: small results keep everything, large ones share what is left equally."""
    shares = [0] * len(lengths)
    remaining, pending = budget, sorted(range(len(lengths)), key=lambda i: lengths[i])
    while pending:
        even = remaining // len(pending)
        i = pending.pop(0)
        shares[i] = min(lengths[i], even)
        remaining -= shares[i]
    return shares


def limit_tool_outputs(messages: list[dict[str, Any]], rule: ModelRule) -> list[dict[str, Any]] | None:
    """Messages with long tool results shortened, or ``None`` when nothing needed cutting."""
    if not (rule.max_tool_output_chars or rule.max_total_tool_output_chars or rule.tool_output_limits):
        return None
    names = {
        c.get("id"): (c.get("function") or {}).get("name")
        for m in messages
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or ()
    }
    limits: dict[int, int] = {}
    for i, message in enumerate(messages):
        if message.get("role") not in ("tool", "function"):
            continue
        name = message.get("name") or names.get(message.get("tool_call_id"))
        limit = rule.tool_output_limits.get(str(name), rule.max_tool_output_chars or 0)
        if limit:
            limits[i] = limit
    texts = {
        i: content_text(messages[i].get("content"))
        for i, m in enumerate(messages)
        if m.get("role") in ("tool", "function")
    }
    if rule.max_total_tool_output_chars:
        latest = _latest_results(messages)
        lengths = [min(len(texts[i]), limits.get(i, len(texts[i]))) for i in latest]
        for i, share in zip(latest, _fair_shares(lengths, rule.max_total_tool_output_chars), strict=True):
            limits[i] = min(limits.get(i, share), share)
    changed = False
    out = list(messages)
    for i, limit in limits.items():
        if len(texts[i]) > limit:
            out[i] = {**messages[i], "content": shorten(texts[i], limit)}
            changed = True
    return out if changed else None
