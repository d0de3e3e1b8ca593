"""What the latest question asks about that the loop has not covered yet, and calls told as their results answered them.

A small model told its results so far answers from them and forgets the rest of the question: asked for the weather in
Paris and in Tokyo, it answers with Paris's; asked for the UV index and the pollen level, it gives the UV index's level
for both. ``uncovered_in`` names what is left (Tokyo; pollen, a word of a tool no call used) for the folded request's
note and the re-ask for the next call; ``asked_apart`` names the things one tool was asked about one by one, so the
answer tells what was found for each; ``answered_as_asked`` tells a call whose value named two things ("Louvre and the
Prado") as its result answered it (the Louvre). Pure functions over the client's messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..formats import ToolSpec
from ..formats.history import content_text, tool_failure
from .grounding import LETTER, WORD, Grounds, leaves, message_functions
from .repeats import call_key
from .toolrank import unused_tool_topics


class CallResult(NamedTuple):
    """A call of the loop: its tool, its arguments' text, and its result's text (``None``: none paired with it)."""

    tool: str
    arguments: str
    result: str | None

    @property
    def failed(self) -> bool:
        """Its result says it failed: it found nothing for what it named."""
        return self.result is not None and tool_failure(self.result) is not None


# a name the question mentions: Capitalised words in a row (not opening a sentence), or a token with a digit
_MENTION = re.compile(r"(?<![.!?:]\s)(?<!^)\b[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*|\b[\w-]*\d[\w.:-]*")
MAX_MENTIONS = 4
# a count or an amount ("3 adult tickets", "a table for 2", "26.2 miles"): a value for a call or for arithmetic on
# a result, not a thing to look up (an id has more digits, letters or separators: 6611, A1234, 20:00, 2025-03-14)
_QUANTITY = re.compile(r"\d{1,3}(?:\.\d+)?")
_FIRST_PERSON = re.compile(r"I(?:['\u2019](?:m|ve|d|ll))?")  # "I", "I'm": capitalised, and no name


class Retry(NamedTuple):
    """A tool whose last call failed, with a result of another tool after it: that result may hold the value the
    failed call lacked (Tom's phone number unknown, then Tom's record naming his manager)."""

    tool: str
    values: tuple[str, ...]  # the failed call's string values ("Tom")
    parameters: tuple[str, ...]  # the parameters that held them (``person``)
    source: str  # the tool whose result came after the failure (``get_employee``)
    key: str  # the failed call (``repeats.call_key``): written again, it is asked for with this request instead
    # a value of that result under a key the question names, and the key's word: ("manager", "Dana Lee")
    found: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Uncovered:
    """What the latest question asks about that no call or result since it has covered yet."""

    names: tuple[str, ...] = ()  # its names and numbers (Tokyo, after Paris's weather)
    topics: tuple[str, ...] = ()  # its words naming a tool no call used (``unused_tool_topics``: pollen)
    topic_tools: tuple[str, ...] = ()  # those tools, each once, in the topics' order (get_pollen_count)
    # a name of the question was looked up beside these (Oslo's sunrise, not Madrid's): an answer about them is made up
    beside_looked_up: bool = False
    # then the tools of the calls that looked the others up, each once (get_sunrise): the names' next lookup
    name_tools: tuple[str, ...] = ()
    # the first topic tool's last call failed and another tool's result came after it: what to call it with
    retry: Retry | None = None

    def __bool__(self) -> bool:
        return bool(self.names or self.topics)

    @property
    def words(self) -> tuple[str, ...]:
        return self.names + self.topics

    def left_out_by(self, text: str) -> bool:
        """Whether the answer ``text`` leaves the rest out: it names none of the names, or a topic no result
        speaks of stands (an answer about it is made up: "the pollen level is very high", from the UV index's), or
        the loop looked up another of the question's names and not these: "The sun rises at 09:12 in Oslo and
        Madrid." after Oslo's sunrise names Madrid with Oslo's time. (With nothing of the question looked up, a
        name stands for the value a call took instead: "Apple's" share price, looked up as AAPL.)"""
        if self.topics:
            return True
        return bool(self.names) and (self.beside_looked_up or names_none_of(text, self.names))


NOTHING_UNCOVERED = Uncovered()


def uncovered_in(messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]) -> Uncovered:
    """What the latest question asks about that the loop has not covered yet: its names and numbers (no counts:
    ``_QUANTITY``) that no call or result since it mentions ("What's the weather in Paris and in Tokyo?", after the
    weather in Paris: Tokyo), then its words naming one of ``tools`` no call used (``unused_tool_topics``); at most
    ``MAX_MENTIONS`` in all. A small model told its results so far answers from them and forgets the rest.

    A call's value that names several of them ("Louvre and the Prado") covers only those its result names
    when the result names some (the Louvre's hours): the tool answered for one thing, not for the value."""
    start, mentions = _question_mentions(messages)
    if start < 0:
        return NOTHING_UNCOVERED
    since = messages[start + 1 :]
    calls = list(_calls_with_results(since))
    told = list(_texts_told(since, calls, mentions))
    covered = Grounds(told)
    looked_up = [mention for mention in mentions if not _QUANTITY.fullmatch(mention)]
    names = [mention for mention in looked_up if not covered.has_text(mention)][:MAX_MENTIONS]
    question = content_text(messages[start].get("content"))
    done = [mention for mention in looked_up if mention not in names and LETTER.search(mention)]
    beside = _beside_looked_up(question, done, names)
    name_tools = _tools_that_looked_up(calls, question, done, names) if beside else ()
    if not tools or len(names) >= MAX_MENTIONS or not calls:
        return Uncovered(tuple(names), beside_looked_up=beside, name_tools=name_tools)
    used = _tools_spent(calls)
    topics = unused_tool_topics(tools, question, used, " ".join(told), MAX_MENTIONS - len(names))
    topic_tools = tuple(dict.fromkeys(tool for _, tool in topics))
    return Uncovered(
        tuple(names),
        tuple(word for word, _ in topics),
        topic_tools,
        beside,
        name_tools,
        _retry_after(calls, topic_tools[0], question) if topic_tools else None,
    )


def _retry_after(calls: Sequence[CallResult], tool: str, question: str) -> Retry | None:
    """``tool``'s last call, when it failed for string values and a call of another tool gave a result after it.
    Asked "Call `get_phone_number` for it now." after Tom's number was unknown and Tom's record named his manager,
    the local model wrote Tom's call again 10 times in 10; told that it failed for "Tom" and to call it "with the
    `person` that `get_employee` found", it called it for Dana Lee 9 times in 10 (in the loops, at the re-ask
    temperature, 2 times in 7: "Tom Becker", the record's name, 3 times), so a value the result gives under a key
    the question names ("manager") is named too (``_value_named``)."""
    last = max((i for i, call in enumerate(calls) if call.tool == tool), default=-1)
    if last < 0 or not calls[last].failed:
        return None
    later = [call for call in calls[last + 1 :] if call.tool != tool and call.result and not call.failed]
    failed = _string_arguments(calls[last].arguments)
    if not later or not failed:
        return None
    found = _value_named(later[-1].result or "", question, failed.values())
    key = call_key(tool, calls[last].arguments)
    return Retry(tool, tuple(failed.values()), tuple(failed), later[-1].tool, key, found)


_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


def _value_named(result: str, question: str, failed: Iterable[str]) -> tuple[str, str] | None:
    """The first string value of the JSON ``result`` whose key has a word the question has ("manager" in "Tom's
    manager", ``account`` of ``account_id`` in "Carol's bank account"), with that word; none that holds a value the
    failed call had ("Tom Becker" holds "Tom": the one the call failed for)."""
    value = _json_object(result)
    asked = {_stem(word) for word in WORD.findall(question.casefold()) if len(word) > 2}
    spent = [text.casefold() for text in failed]
    for key, item in value.items():
        if not isinstance(item, str) or not item.strip() or any(text in item.casefold() for text in spent):
            continue
        words = [word for word in WORD.findall(_CAMEL.sub(" ", str(key)).casefold()) if _stem(word) in asked]
        if words:
            return words[0], item.strip()
    return None


def _stem(word: str) -> str:
    """A word without a plural's ``s`` (``accounts`` and ``account`` match)."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _string_arguments(arguments: str) -> dict[str, str]:
    """The top-level arguments of a call's JSON text whose values are non-blank strings."""
    return {str(k): v.strip() for k, v in _json_object(arguments).items() if isinstance(v, str) and v.strip()}


def _json_object(text: str) -> dict[str, Any]:
    """The JSON object ``text`` holds; empty when it holds another value or no JSON."""
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


_JOINED = r"\W+(?:and|or|&)\W+(?:(?:in|at|the|of|for|from|to)\W+){0,2}"


def _listed_with(question: str, one: str, other: str) -> bool:
    """Whether the question lists ``one`` and ``other`` as things of a kind ("in Oslo and in Madrid", "Mont Blanc and
    the Matterhorn", "Canada or China"): the tool that looked up one is the other's too. "in Oslo right now, in
    Fahrenheit" is no such list: a unit, not a second city."""
    a, b = re.escape(one), re.escape(other)
    return re.search(rf"\b{a}{_JOINED}{b}\b|\b{b}{_JOINED}{a}\b", question, re.IGNORECASE) is not None


def _tools_that_looked_up(
    calls: Sequence[CallResult], question: str, done: Sequence[str], names: Sequence[str]
) -> tuple[str, ...]:
    """The tools of the ``calls`` whose arguments name one of the names ``done`` that the question lists with one of
    the uncovered ``names`` (``_listed_with``), or that failed for any name done (``get_bus_times(stop="Harbour")``:
    unknown, the question still asking about Central Station: the same tool for the other name), each once, in call
    order."""
    listed = [name for name in done if any(_listed_with(question, name, other) for other in names)]
    looked_up: list[str] = []
    for call in calls:
        told = Grounds([call.arguments])
        if any(told.has_text(name) for name in (done if call.failed else listed)):
            looked_up.append(call.tool)
    return tuple(dict.fromkeys(looked_up))


def _beside_looked_up(question: str, covered: Sequence[str], names: Sequence[str]) -> bool:
    """Whether the loop looked up one of the question's names (``covered``) and left others out, none of which only
    qualifies a looked-up one ("Paris, France": France is where Paris is, not a second thing to look up)."""
    if not covered or not names:
        return False
    qualifiers = {name for name in names for done in covered if f"{done}, {name}" in question}
    return any(name not in qualifiers for name in names)


def answered_as_asked(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with each call of the current loop told as its result answered it: a string value that
    names several of the question's names ("Louvre and the Prado") names only those its result names (the
    Louvre), when it names some (paired by ``tool_call_id``).

    Told ``get_opening_hours({"museum": "Louvre and the Prado"}) returned: {"museum": "Louvre", ...}``, a small
    model answers with the Louvre's hours for both, even after the Prado's result; told the call as answered,
    it keeps the two apart. The messages themselves are not changed (copies where a value is narrowed)."""
    start, mentions = _question_mentions(messages)
    if len(mentions) < 2:
        return list(messages)
    results = {
        str(message.get("tool_call_id")): content_text(message.get("content"))
        for message in messages[start + 1 :]
        if message.get("role") in ("tool", "function") and message.get("tool_call_id")
    }
    out = list(messages)
    for index in range(start + 1, len(messages)):
        message = messages[index]
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not isinstance(calls, list):
            continue
        narrowed = [_call_as_answered(call, results, mentions) for call in calls]
        if any(new is not old for new, old in zip(narrowed, calls, strict=True)):
            out[index] = {**message, "tool_calls": narrowed}
    return out


def _question_mentions(messages: Sequence[Mapping[str, Any]]) -> tuple[int, list[str]]:
    """Where the latest user message is (-1: none) and the names and numbers it mentions (``_MENTION``)."""
    start = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), None)
    if start is None:
        return -1, []
    question = content_text(messages[start].get("content"))
    mentions: list[str] = []
    for match in _MENTION.finditer(question.strip()):
        mention = match.group().strip(".:-")
        if mention and not _FIRST_PERSON.fullmatch(mention) and mention not in mentions:
            mentions.append(mention)
    return start, mentions


def _call_as_answered(call: Any, results: Mapping[str, str], mentions: Sequence[str]) -> Any:
    """``call`` (a ``tool_calls`` item) with its arguments narrowed as its result answered them; the same object
    when nothing narrows."""
    function = call.get("function") if isinstance(call, Mapping) else None
    result = results.get(str(call.get("id") or "")) if isinstance(function, Mapping) else None
    if result is None or not isinstance(function, Mapping):
        return call
    try:
        arguments = json.loads(str(function.get("arguments") or ""))
    except ValueError:
        return call
    named = Grounds([result])
    narrowed = _map_strings(arguments, lambda value: _value_as_answered(value, named, mentions))
    if narrowed == arguments:
        return call
    return {**call, "function": {**function, "arguments": json.dumps(narrowed, ensure_ascii=False)}}


def _map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` with ``change`` applied to every string leaf (keys kept)."""
    if isinstance(value, Mapping):
        return {key: _map_strings(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [_map_strings(item, change) for item in value]
    return change(value) if isinstance(value, str) else value


def asked_apart(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The names of the latest user message that calls of one tool since it asked about apart (the weather in
    Paris, then in Tokyo; a value as its result answered it), when there are two or more and no one call names them
    all: the answer has to tell what was found for each. Calls of different tools are no such pair: the weather in
    Oslo and its conversion to Fahrenheit answer one thing; nor is a call that failed (``get_bus_times(stop="Harbour")``
    unknown, then Central Station's departures: one thing found, not one for each).

    Measured with Qwen2.5-Coder-0.5B on the answer step of seven two-lookup tasks (12 samples each): asked for an
    answer "naming what they found", it held both values 32 times in 84 ("The Louvre and the Prado are open
    from 10:00 to 20:00"); asked to name "what they found for each of Louvre and Prado", 49 times."""
    start, mentions = _question_mentions(messages)
    names = [mention for mention in mentions if LETTER.search(mention)]
    if len(names) < 2:
        return []
    by_tool: dict[str, list[Grounds]] = {}
    found = [call for call in _calls_with_results(messages[start + 1 :]) if not call.failed]
    for tool, text in _calls_told(found, names):
        by_tool.setdefault(tool, []).append(Grounds([text]))
    for calls in by_tool.values():
        # a name every call names is where each lookup starts from, not one of the things looked up apart (Berlin, in
        # "Which is closer to Berlin, Prague or Vienna?": asked for what was found "for each of Berlin and Prague
        # and Vienna", the model copied the results' JSON under each name)
        asked = [
            name
            for name in names
            if any(call.has_text(name) for call in calls) and not all(call.has_text(name) for call in calls)
        ]
        if len(asked) >= 2 and not any(all(call.has_text(name) for name in asked) for call in calls):
            return asked[:MAX_MENTIONS]
    return []


def _texts_told(
    messages: Sequence[Mapping[str, Any]], calls: Sequence[CallResult], mentions: Sequence[str]
) -> Iterable[str]:
    """The texts of the messages since the question (results, the assistant's words) and their ``calls``'
    arguments (``_calls_told``)."""
    yield from (content_text(message.get("content")) for message in messages)
    yield from (text for _, text in _calls_told(calls, mentions))


def _calls_told(calls: Sequence[CallResult], mentions: Sequence[str]) -> Iterable[tuple[str, str]]:
    """Each call as (tool name, its arguments' text); a value that names several ``mentions``, whose result names
    some of them, stands as those it names."""
    for tool, arguments, result in calls:
        yield tool, arguments if result is None else _as_answered(arguments, result, mentions)


def _tools_spent(calls: Sequence[CallResult]) -> set[str]:
    """The tools of the ``calls`` that gave a result (a call with no result paired counts), and those
    whose last call failed with no result since: a failed call covers nothing of the question, and its tool is
    worth another call once a result came after it ("unknown: 'Tom'" for Tom's phone number, then Tom's record
    naming his manager), not before (told about it again, a small model wrote the same failing call)."""
    answered: set[str] = set()
    failed: set[str] = set()
    for call in calls:
        if call.failed:
            failed.add(call.tool)
            continue
        answered.add(call.tool)
        failed.clear()
    return answered | failed


def _calls_with_results(messages: Sequence[Mapping[str, Any]]) -> Iterable[CallResult]:
    """Each call in ``messages`` as (tool name, its arguments' text, its result's text, ``None`` when no result is
    paired with it by id)."""
    waiting: dict[str, tuple[str, str]] = {}  # a call's id -> its tool and arguments' text, until its result comes
    for message in messages:
        for call, function in message_functions(message):
            call_id, told = str(call.get("id") or ""), (str(function.get("name")), str(function.get("arguments") or ""))
            if message.get("role") == "assistant" and call_id:
                waiting[call_id] = told
            else:
                yield CallResult(*told, None)
        if message.get("role") in ("tool", "function"):
            answered = str(message.get("tool_call_id") or "")
            if answered in waiting:
                tool, arguments = waiting.pop(answered)
                yield CallResult(tool, arguments, content_text(message.get("content")))
    yield from (CallResult(tool, arguments, None) for tool, arguments in waiting.values())  # no result (yet), or no id


def _as_answered(arguments: str, result: str, mentions: Sequence[str]) -> str:
    """A call's arguments as its result answered them (``_value_as_answered``), as text."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    named = Grounds([result])
    return "\n".join(
        _value_as_answered(value, named, mentions) if isinstance(value, str) else json.dumps(value)
        for value in leaves(parsed)
    )


def _value_as_answered(value: str, named: Grounds, mentions: Sequence[str]) -> str:
    """A string value that lists several of the question's names as a result that names some of them answered it:
    those it names (else the value whole: a result need not repeat what it was asked about)."""
    several = _names_listed(value, mentions)
    answered = [name for name in several if named.has_text(name)]
    return " and ".join(answered) if len(several) > len(answered) > 0 else value


_CONNECTORS = frozenset({"and", "or", "the", "plus", "vs", "versus", "both"})


def _names_listed(value: str, mentions: Sequence[str]) -> list[str]:
    """The names among ``mentions`` (with a letter) that ``value`` is a list of ("Louvre and the Prado", "Louvre,
    Prado"); none when it names fewer than two, or says anything besides them ("I'm running 10 minutes late"
    holds the question's "10", but is a message, not a list of things to look up)."""
    inside = Grounds([value])
    names = [mention for mention in mentions if LETTER.search(mention) and inside.has_text(mention)]
    if len(names) < 2:
        return []
    rest = value.casefold()
    for name in names:
        rest = rest.replace(name.casefold(), " ")
    return names if all(word in _CONNECTORS for word in WORD.findall(rest)) else []


def names_none_of(text: str, names: Sequence[str]) -> bool:
    """Whether ``text`` names none of ``names`` (case aside): an answer that leaves out what the question also
    asks about (``uncovered_in``)."""
    folded = text.casefold()
    return not any(name.casefold() in folded for name in names)
