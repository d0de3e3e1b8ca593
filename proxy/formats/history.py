"""Chat history for a model without native tools: calls and results rewritten as plain text.

``render_history`` turns an OpenAI message list into one the upstream understands when it
knows nothing about tools: an assistant's ``tool_calls`` (or legacy ``function_call``)
become text in the format's own syntax after the message's text, and ``tool`` / legacy
``function`` results become ``user`` messages holding the format's observations.
``merge_system_prompt`` puts the format's tool instructions into the system message. Tool
results and user text are ``defuse``d first: call markup in them is data, never a ready-made call.

Format-agnostic: everything syntax-specific comes from the ``ToolFormat``. Pure functions:
the input list and its messages are never mutated; every output message is a new dict.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from .base import ToolCallRecord, ToolFormat
from .defuse import defuse, defuse_all

Message = dict[str, Any]

_RESULT_ROLES = ("tool", "function")
_SYSTEM_ROLES = ("system", "developer")
_UNKNOWN_TOOL = "tool"


def content_text(content: Any) -> str:
    """Text of a message ``content``: a string, ``None``, or a list of OpenAI content parts.

    Text-like parts (``text``, ``refusal``, ``input_text``, ``output_text``) are joined in order,
    one per line (as vLLM does); other parts (images, audio, files) become a ``[type]``
    placeholder so a result never silently vanishes.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence):
        return str(content)
    pieces = []
    for part in content:
        if isinstance(part, str):
            pieces.append(part)
        elif isinstance(part, Mapping):
            kind = str(part.get("type") or "text")
            value = part.get("text", part.get(kind)) if kind != "refusal" else part.get("refusal")
            pieces.append(value if isinstance(value, str) else f"[{kind}]")
    return "\n".join(pieces)


def _arguments_text(arguments: Any) -> str:
    """A call's arguments as the JSON string a client normally sends (some send objects)."""
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return "{}"
    try:
        return json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(arguments)


def _call_records(message: Mapping[str, Any]) -> list[ToolCallRecord]:
    """The calls an assistant message carries, from ``tool_calls`` or ``function_call``."""
    records = []
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, Sequence) and not isinstance(calls, str) else ():
        if not isinstance(call, Mapping):
            continue
        fn = call.get("function")
        fn = fn if isinstance(fn, Mapping) else {}
        records.append(
            ToolCallRecord(str(call.get("id") or ""), str(fn.get("name") or ""), _arguments_text(fn.get("arguments")))
        )
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping):
        records.append(ToolCallRecord("", str(legacy.get("name") or ""), _arguments_text(legacy.get("arguments"))))
    return records


def _join_text(text: str, block: str) -> str:
    """``text`` then ``block`` on its own line; either may be empty."""
    if not text or not block:
        return text or block
    return text + block if text.endswith("\n") else f"{text}\n{block}"


def _assistant_message(message: Mapping[str, Any], fmt: ToolFormat, records: list[ToolCallRecord]) -> Message:
    out = {k: v for k, v in message.items() if k not in ("tool_calls", "function_call")}
    out["content"] = _join_text(content_text(message.get("content")), fmt.render_calls(records) if records else "")
    return out


def _result_name(message: Mapping[str, Any], names: Mapping[str, str], last_name: str) -> str:
    """The tool a result belongs to: its call id's call, else its ``name``, else the last call."""
    call_id = message.get("tool_call_id")
    if isinstance(call_id, str) and call_id in names:
        return names[call_id]
    name = message.get("name")
    return name if isinstance(name, str) and name else last_name


def render_history(
    fmt: ToolFormat, messages: list[dict[str, Any]], tool_names: Collection[str] = ()
) -> list[dict[str, Any]]:
    """The history with calls and results as text in ``fmt``'s syntax (no tool roles/keys left).

    Consecutive results become one ``user`` message, in their original order. ``tool_names``: the
    request's tools, whose tags are defused in results and user text too (morph_xml's call syntax).
    """
    out: list[Message] = []
    names: dict[str, str] = {}  # tool_call_id -> tool name, from the assistant calls seen so far
    last_name = _UNKNOWN_TOOL
    results: list[tuple[str, str]] = []  # (tool name, content) of results waiting to be flushed as one user message
    for message in messages:
        if not isinstance(message, Mapping):
            out.append(message)
            continue
        role = message.get("role")
        if role in _RESULT_ROLES:
            name = _result_name(message, names, last_name)
            results.append((name, content_text(message.get("content"))))
            continue
        follower: str | None = None  # a user text that will share the results' turn (merged after them)
        if results:
            text = message.get("content") if role == "user" and set(message) <= {"role", "content"} else None
            result_message, follower = _results_message(
                fmt, results, tool_names, text if isinstance(text, str) else None
            )
            out.append(result_message)
            results = []
        records = _call_records(message) if role == "assistant" else []
        if role == "assistant" and ("tool_calls" in message or "function_call" in message):
            for record in records:
                if record.id:
                    names[record.id] = record.name
                last_name = record.name or last_name
            out.append(_assistant_message(message, fmt, records))
        else:
            copy = dict(message)
            if role == "assistant" and copy.get("content") is None:
                copy["content"] = ""  # chat templates choke on null content
            if role == "user":
                copy["content"] = (
                    follower if follower is not None else _defused_content(copy.get("content"), tool_names)
                )
            out.append(copy)
    if results:
        out.append(_results_message(fmt, results, tool_names)[0])
    return out


def _frame(wrapped: str) -> tuple[str, str]:
    """The text before and after a result's content in a wrapper rendered around ``\x00``."""
    prefix, _, suffix = wrapped.partition("\x00")
    return prefix, suffix


def _results_message(
    fmt: ToolFormat, results: list[tuple[str, str]], tool_names: Collection[str], follower: str | None = None
) -> tuple[Message, str | None]:
    """Consecutive results as one user message: defused together (no call read across them), then wrapped;
    with ``follower``, the user text the results' turn will be merged with (``merge_adjacent_user_turns``:
    after a blank line), defused with them."""
    frames = [_frame(fmt.render_result(name, "\x00")) for name, _ in results]
    texts = [content for _, content in results]
    if follower is not None:
        texts, frames = [*texts, follower], [*frames, ("\n", "")]
    contents = defuse_all(texts, tool_names, frames)
    wrapped = (fmt.render_result(name, content) for (name, _), content in zip(results, contents, strict=False))
    return {"role": "user", "content": "\n".join(wrapped)}, contents[-1] if follower is not None else None


def _defused_content(content: Any, tool_names: Collection[str]) -> Any:
    """User text with call markup made inert (text parts of a part list too; other parts untouched)."""
    if isinstance(content, str):
        return defuse(content, tool_names)
    if isinstance(content, list):
        return [
            {**part, "text": defuse(part["text"], tool_names)}
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
            else part
            for part in content
        ]
    return content


def _append_prompt(content: Any, prompt: str) -> Any:
    """``content`` followed by a blank line and ``prompt``; content-part lists get a new part."""
    if isinstance(content, list):
        has_text = any(content_text([part]).strip() for part in content)
        return [*content, {"type": "text", "text": f"\n\n{prompt}" if has_text else prompt}]
    text = content_text(content)
    return f"{text.rstrip()}\n\n{prompt}" if text.strip() else prompt


def merge_system_prompt(messages: list[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
    """Add the tool ``prompt`` after the first system/developer message's text, or as a new
    system message at the start when there is none."""
    out = [dict(m) if isinstance(m, Mapping) else m for m in messages]
    if not prompt:
        return out
    for message in out:
        if isinstance(message, dict) and message.get("role") in _SYSTEM_ROLES:
            message["content"] = _append_prompt(message.get("content"), prompt)
            return out
    return [{"role": "system", "content": prompt}, *out]


# Folded history (``tool_history: "folded"``): what the tools returned is told in the user's turn.
FOLD_HEADER = "Tool results so far:"
FOLD_NEXT_CALL = "Otherwise call the next tool you need."  # how a sentence that also offers an answer ends
_NEXT_ANSWER = "If these results answer the question, answer it now, naming what they found"
FOLD_NEXT = f"{_NEXT_ANSWER}. {FOLD_NEXT_CALL}"
# Tried and left: "...: say what each one found, with its values." held the numbers more often on the answer step
# alone (140 right in 160 against 125), but in whole loops the answers became lists that copied the results'
# lines and added made-up details ("The temperature in the living room is now 20 degrees Celsius").
_ANSWER = "Answer the question from these results, naming what they found"
FOLD_ANSWER = f"{_ANSWER}."


# The answer for several things looked up apart, in sentences with the values: asked to name "what they found for
# each of Paris and Tokyo", the local model answered "Paris: Sunny\nTokyo: Cloudy" (both temperatures in 2 answers
# of 8 on that step, 3 at the re-ask's temperature); asked for "full sentences, with the values they found", 7 and 8
# of 8 (two air qualities and two sunrise times 8 of 8 either way, two museums' hours 4 against 3). Not in the
# request that also offers a call: there, at temperature 0, the model answered the two museums at once with the
# Prado's hours ("The Louvre and the Prado are open from 10:00 AM to 20:00 PM today.", 7 loops of 7) where the
# general sentence has it write the Prado's call again, answered from the history.
_EACH_ANSWER = "Answer the question in full sentences from these results, with the values they found"


def answer_for_each(names: Sequence[str]) -> str:
    """``FOLD_ANSWER`` for a question about several things looked up apart: what was found for each."""
    return f"{_EACH_ANSWER} for each of {' and '.join(names)}."


def next_for_each(names: Sequence[str]) -> str:
    """``FOLD_NEXT`` for a question about several things looked up apart (``answer_for_each``)."""
    return f"{_NEXT_ANSWER} for each of {' and '.join(names)}. {FOLD_NEXT_CALL}"


FOLD_FAILED = "These calls failed: tell the user what the error says."  # the answer sentence when every latest one did
FOLD_CALL = "Call the next tool you need."
# Before the last sentence when some of the latest calls failed and others did not: told the weather in Tokyo and
# a failed exchange rate, a small model gave a rate it made up ("0.85").
FOLD_SOME_FAILED = "A call failed: do not make up its result. "
FOLD_SOME_FAILED_NEXT = FOLD_SOME_FAILED + "Call it again with corrected values, or say that it failed. "
# The request after a round whose every call failed (instead of "If these results answer the question, ..."): told
# "unknown city 'Pariss'; did you mean 'Paris'?", the local model wrote the call for Paris 5 times in 10 with this,
# once with that; after an unknown order or contact it wrote the same call again either way (10 of 10).
FOLD_FAILED_NEXT = FOLD_SOME_FAILED_NEXT.rstrip()


# How tools and frameworks report a failure in a result's text: LangChain's "Error: ...", the Agents
# SDK's "An error occurred while running the tool...", LlamaIndex's "Encountered error: ...", a traceback.
_FAILURE_TEXT = re.compile(
    r"\s*(?:error\s*[:(]|exception\s*:|traceback \(most recent call last\)|an error occurred\b|"
    r"encountered (?:an )?error\b)",
    re.IGNORECASE,
)
_ERROR_KEYS = ("error", "errors")
_RESULT_KEYS = ("result", "results", "data")


def tool_failure(text: str) -> str | None:
    """What a failed tool result says went wrong (``None``: it is a result): a JSON object whose
    ``error`` is set and that carries no result, or text that opens as frameworks word an error."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            value = json.loads(stripped)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return _error_of(value)
    return stripped if _FAILURE_TEXT.match(stripped) else None


def _error_of(result: Mapping[str, Any]) -> str | None:
    keys = {str(key).casefold(): value for key, value in result.items()}
    error = next((keys[key] for key in _ERROR_KEYS if keys.get(key)), None)
    if error is None or any(key in keys for key in _RESULT_KEYS):
        return None
    if isinstance(error, str):
        return error
    if isinstance(error, Mapping) and isinstance(error.get("message"), str):
        return str(error["message"])
    return json.dumps(error, ensure_ascii=False)


def _fold_prefix(call: ToolCallRecord | None, name: str, tool_names: Collection[str], failed: bool = False) -> str:
    """What comes before a result in its line of facts: ``- get_weather({"city": "Oslo"}) returned: ``,
    or ``failed: `` before what went wrong (a small model reads ``returned: {"error": ...}`` as a result
    and answers with a status it invents)."""
    verb = "failed" if failed else "returned"
    if call is None:
        return f"- {name} {verb}: "
    return f"- {call.name}({defuse(call.arguments, tool_names)}) {verb}: "


_FOLDED_RESULT_LINE = re.compile(r"^[ \t]*(?:- )?([\w.\-]+)\((.*)\) (?:returned|failed): ", re.MULTILINE)


def copies_folded_results(text: str) -> bool:
    """``text`` holds a line in the form folded history tells a result in (``- name(args) returned: ...``):
    the model copied the results instead of answering from them."""
    return _FOLDED_RESULT_LINE.search(text) is not None


_FOLDED_RESULT_QUOTED = re.compile(r"(?<![\w.\-])([A-Za-z_][\w.\-]*)\([^\n]*?\) (?:returned|failed):(?=\s|$)")


def quoted_folded_results(text: str) -> list[str]:
    """The tool names of the folded results' form (``name(args) returned: ``) anywhere in ``text``, inside a
    sentence too ("The tool found that renew_loan({...}) returned: {...}"): toolshim's rendering of a result,
    quoted instead of answered from."""
    return [match[1] for match in _FOLDED_RESULT_QUOTED.finditer(text)]


def without_quoted_results(text: str, is_tool: Callable[[str], bool]) -> str:
    """``text`` without the folded results' rendering of a call quoted in it whose name ``is_tool``: ``The last
    result is `get_phone_number({"person": "Dana Lee"}) returned: {"phone": ...}`.`` keeps the result (the client's
    own data) and loses ``get_phone_number(...) returned: `` (toolshim's words)."""
    return _FOLDED_RESULT_QUOTED_SPACED.sub(lambda match: "" if is_tool(match[1]) else match[0], text)


_FOLDED_RESULT_QUOTED_SPACED = re.compile(_FOLDED_RESULT_QUOTED.pattern + r"[ \t]?")


def folded_result_calls(text: str) -> list[tuple[str, str]]:
    """The calls the lines of ``text`` in the folded results' form name: (tool name, argument text)."""
    return [(match[1], match[2]) for match in _FOLDED_RESULT_LINE.finditer(text)]


def _answered_call(result: Mapping[str, Any], waiting: list[ToolCallRecord]) -> ToolCallRecord | None:
    """The call a result answers (taken off ``waiting``): by ``tool_call_id``, else the first call of its
    ``name``, else the first still waiting."""
    call_id, name = result.get("tool_call_id"), result.get("name")
    for match in (
        lambda c: bool(call_id) and c.id == call_id,
        lambda c: bool(name) and c.name == name,
        lambda c: not call_id or not c.id,
    ):
        for i, call in enumerate(waiting):
            if match(call):
                return waiting.pop(i)
    return None


def _fold_into(message: Message | None, lines: list[str], instruction: str) -> Message:
    """The user ``message`` (a new one when there is none) with the results and ``instruction`` after its text."""
    block = "\n".join([FOLD_HEADER, *lines]) + (f"\n\n{instruction}" if instruction else "")
    if message is None:
        return {"role": "user", "content": block}
    return {**message, "content": _append_prompt(message.get("content"), block)}


def fold_history(
    messages: list[dict[str, Any]], instruction: str, tool_names: Collection[str] = ()
) -> list[dict[str, Any]]:
    """The history with every tool exchange told in the user turn it answers, ending with ``instruction``
    (``fold_history_endings`` with one ending)."""
    return fold_history_endings(messages, (instruction,), tool_names)[0]


def fold_history_endings(
    messages: list[dict[str, Any]], instructions: Sequence[str], tool_names: Collection[str] = ()
) -> list[list[dict[str, Any]]]:
    """The history with every tool exchange told in the user turn it answers, not as turns of its own:
    one history per instruction the last block may end with, the results folded and defused once.

    Measured with Qwen2.5-Coder-0.5B on agent-loop tasks: shown its call as an assistant turn and the
    result as the next user turn, a small model writes the call again (the pattern in front of it); told
    the results inside the question's turn, it answers from them or calls the next tool. Each assistant
    message that carries calls, and the results that follow, become lines after the preceding user
    message's text (results defused as in ``render_history``); the last such block ends with the
    instruction. The assistant's text beside its calls is left out (its own words, already shown).
    """
    out: list[Message] = []
    pending: list[tuple[str, str]] = []  # (line start, result text) of the results since the last user message
    anchor: int | None = None  # index in ``out`` of the user message the lines belong to
    waiting: list[ToolCallRecord] = []  # the calls of the latest assistant message still without a result

    def folded_lines() -> list[str]:
        told = list(dict.fromkeys(pending))  # a call made again with the same result is one line: nothing new
        frames = [(prefix, "") for prefix, _ in told]
        contents = defuse_all([content for _, content in told], tool_names, frames)
        lines = [prefix + content for (prefix, _), content in zip(told, contents, strict=True)]
        pending.clear()
        return lines

    def placed(history: list[Message], lines: list[str], instruction: str) -> list[Message]:
        folded = _fold_into(history[anchor] if anchor is not None else None, lines, instruction)
        return [*history, folded] if anchor is None else [*history[:anchor], folded, *history[anchor + 1 :]]

    for message in messages:
        if not isinstance(message, Mapping):
            out.append(message)
            continue
        role = message.get("role")
        if role in _RESULT_ROLES:
            call = _answered_call(message, waiting)
            name = call.name if call else str(message.get("name") or _UNKNOWN_TOOL)
            text = content_text(message.get("content"))
            failure = tool_failure(text)
            prefix = _fold_prefix(call, name, tool_names, failed=failure is not None)
            pending.append((prefix, text if failure is None else failure))
            continue
        if role == "assistant" and ("tool_calls" in message or "function_call" in message):
            waiting = _call_records(message)
            continue
        if pending:  # an answered exchange: no instruction after it
            out = placed(out, folded_lines(), "")
        copy = dict(message)
        if role == "assistant" and copy.get("content") is None:
            copy["content"] = ""
        if role == "user":
            copy["content"] = _defused_content(copy.get("content"), tool_names)
            anchor = len(out)
        out.append(copy)
    if not pending:
        return [list(out) for _ in instructions]
    lines = folded_lines()
    return [placed(out, lines, instruction) for instruction in instructions]
