"""Argument grounding: did a call's values come from the conversation, or did the model make them up?

Asked "What is the temperature in Oslo, in Fahrenheit?", a small model converts a 25 °C it invented instead
of asking the weather tool first; asked for the capital of France, it fetches the weather in Paris; asked
about "the city where my colleague Alice lives", it guesses the city instead of looking Alice up. In each
case a value the call needs appears nowhere in what the user, the client's system prompt or the tool
results said. ``Grounds`` holds that text; ``ungrounded`` names the required values of a call that it does
not contain, so the model can be asked once to get the value from a tool (or to answer) before the call is
taken (``ground_arguments`` in the rules, ``Emulator._reask``).

Lenient on purpose: a value is grounded when any of its words (three or more characters, or digits)
appears in the conversation, or a number equal to it does. A longer word also counts when it only adds
an ending to a word of the conversation or drops one (dentist / dentists); a word that merely starts the
same way is another word: "Lisboa" is not what the user said when they wrote "Lisbon", and the tool that
knows "Lisbon" will not know it. Values the schema itself gives (``enum``,
``const``, ``default``), booleans and the numbers 0 and 1 are never questioned. What a model derives from
world knowledge ("NYC" → "New York") can fail the check; it then costs one re-ask, after which the same
call is taken as written.

A name the model spelled its own way is written back the way the conversation wrote it
(``respelled_arguments``): "Lisboa" for the user's "Lisbon", "Sevilla" for "Seville"; the tool that knows
the user's name may know no other. Only names: a word that starts like exactly one capitalised word of the
conversation (its first five letters) and differs from it in at most two letters (and a third of its
length), in a short value (a name, not a message body whose spelling may be better than the user's);
anything further off ("Portuguese" beside "Portugal") is left as the model wrote it.

A value can come from the conversation and still name nothing: a parameter that names a person or a place
(``name``, ``city``, ``contact_name`` ...) given only digits ("What is the square root of 81?" → a contact
lookup for "81") is made up all the same.

The tool definitions are not grounds: their descriptions hold examples ("City name, e.g. Paris") that a
model copies into a call it has no value for.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..formats import ToolSpec, canonical_json
from ..formats.history import content_text, tool_failure
from .toolrank import unused_tool_topics

_WORD = re.compile(r"[^\W_]+")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:[.,]\d+)*(?:\.\d+)?")
_NUMBER_WORDS = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
} | {"dozen": 12, "half": 0.5, "hundred": 100, "thousand": 1000, "million": 1_000_000}
_STEM = 5  # words of this many characters or more also match a word they extend or shorten (dentist / dentists)
MAX_RESPELL_EDITS = 2  # letters a respelled name may differ by (and at most a third of its length)
MAX_RESPELL_WORD = 40  # longer words are not compared: the edit distance stays cheap
MAX_RESPELL_VALUE_WORDS = 6  # a longer string is text, not a name: left as written
# parameters that name a person or a place (the last word of the parameter's name): digits alone name none
_NAMING = frozenset({"name", "city", "country", "person", "contact", "town"})
_IDENTIFYING = frozenset({"id", "ids", "uuid", "guid"})  # parameters that hold an id (the last word of the name)
_LETTER = re.compile(r"[^\W\d_]")
# Past this many characters of conversation only the newest text is searched: the check stays bounded.
MAX_GROUND_CHARS = 200_000


class Grounds:
    """The conversation's words and numbers, as the client sent them (not toolshim's instructions)."""

    def __init__(self, texts: Iterable[str]) -> None:
        original = "\n".join(texts)[-MAX_GROUND_CHARS:]
        text = original.casefold()
        self._text = text
        self._words = set(_WORD.findall(text))
        # how the conversation spells each longer capitalised word (a name), for ``respelled``
        self._names: dict[str, str] = {}
        for word in _WORD.findall(original):
            if len(word) >= _STEM and word[0].isupper():
                self._names.setdefault(word.casefold(), word)
        self._stems: dict[str, list[str]] = {}
        for word in self._words:
            if len(word) >= _STEM:
                self._stems.setdefault(word[:_STEM], []).append(word)
        self._digits = {_digits(word) for word in self._words if word.isdigit()}
        self._numbers = {number for raw in _NUMBER.findall(text) if (number := _to_number(raw)) is not None}
        self._numbers |= {float(value) for word, value in _NUMBER_WORDS.items() if word in self._words}

    @classmethod
    def of_messages(cls, messages: Sequence[Mapping[str, Any]]) -> Grounds:
        """Every message's text and every earlier call's arguments."""
        texts: list[str] = []
        for message in messages:
            texts.append(content_text(message.get("content")))
            texts.extend(str(function.get("arguments") or "") for _, function in _functions(message))
        return cls(texts)

    def has_number(self, value: float) -> bool:
        return any(math.isclose(value, known, rel_tol=1e-9, abs_tol=1e-9) for known in self._numbers)

    def has_text(self, value: str) -> bool:
        folded = value.casefold().strip()
        if not folded or folded in self._text:
            return True
        for word in _WORD.findall(folded):
            if word.isdigit() and len(_digits(word)) >= 2 and _digits(word) in self._digits:
                return True
            if len(word) >= 3 and (word in self._words or self._inflects(word)):
                return True
            if not word.isascii() and len(word) >= 2 and word in self._text:
                return True
        return False

    def _inflects(self, word: str) -> bool:
        """A conversation word this one extends or shortens by an ending (``dentists`` for ``dentist``)."""
        if len(word) < _STEM:
            return False
        return any(known.startswith(word) or word.startswith(known) for known in self._stems.get(word[:_STEM], ()))

    def respelled_arguments(self, tool: ToolSpec | None, arguments: str) -> str:
        """The call's arguments (JSON text) with the names the model respelled written as the conversation
        writes them ("Lisboa" after "Lisbon"); the same text when there is none. Schema values are kept."""
        if tool is None or not self._names:
            return arguments
        try:
            args = json.loads(arguments)
        except ValueError:
            return arguments
        if not isinstance(args, dict):
            return arguments
        properties = tool.parameters.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        fixed = {name: self._respell_value(value, properties.get(name)) for name, value in args.items()}
        return arguments if fixed == args else canonical_json(fixed)

    def _respell_value(self, value: Any, schema: Any) -> Any:
        if isinstance(value, str):
            if _unquestioned(value, schema if isinstance(schema, Mapping) else {}):
                return value
            return self.respelled(value)
        if isinstance(value, list):
            return [self._respell_value(item, None) for item in value]
        if isinstance(value, dict):
            return {key: self._respell_value(item, None) for key, item in value.items()}
        return value

    def respelled(self, value: str) -> str:
        """``value`` with each word that respells one name of the conversation written as the conversation
        writes it ("Lisboa, Portugal" after "Lisbon" -> "Lisbon, Portugal"); a longer text is left alone."""
        if len(_WORD.findall(value)) > MAX_RESPELL_VALUE_WORDS:
            return value
        return _WORD.sub(lambda match: self._spelling_of(match.group()), value)

    def _spelling_of(self, word: str) -> str:
        folded = word.casefold()
        if len(folded) < _STEM or len(folded) > MAX_RESPELL_WORD or folded in self._words or self._inflects(folded):
            return word
        limit = min(MAX_RESPELL_EDITS, len(folded) // 3)
        close = [known for known in self._stems.get(folded[:_STEM], ()) if _within_edits(folded, known, limit)]
        return self._names.get(close[0], word) if len(close) == 1 else word

    def ungrounded(self, tool: ToolSpec | None, arguments: str) -> list[str]:
        """The required arguments of this call (JSON text) as ``name=value`` when none of their values
        comes from the conversation (``250`` of "250 US dollars" grounds a currency conversion whose "USD"
        the model spelled itself); empty: the call is grounded, or cannot be judged."""
        if tool is None:
            return []
        try:
            args = json.loads(arguments)
        except ValueError:
            return []
        if not isinstance(args, dict):
            return []
        properties = tool.parameters.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = tool.parameters.get("required")
        names = [name for name in required if isinstance(name, str)] if isinstance(required, list) else []
        told = definition_text(tool)
        judged = [
            name for name in names if name in args and not _unquestioned(args[name], _schema_of(properties, name))
        ]
        made_up = [name for name in judged if not self._given(name, args[name], told)]
        # an id only the user or a tool result can give: made up, whatever else the call got right
        # (reserve_table(restaurant_id="1234567890", time="20:00", people=2) before the restaurant was looked up)
        ids = [name for name in made_up if _identifies(name)]
        if ids or len(made_up) == len(judged):
            return [f"{name}={json.dumps(args[name], ensure_ascii=False)}" for name in ids or made_up]
        return []

    def _given(self, name: str, value: Any, told: str) -> bool:
        """Whether a value comes from the conversation (not copied from the definition, not digits for a name)."""
        return self._grounded(value) and not self._copied(value, told) and not _names_nothing(name, value)

    def _copied(self, value: Any, told: str) -> bool:
        """A string the tool's definition shows (its example, "e.g. 2 * (3 + 4)", "San Francisco, CA") and the
        conversation does not, a word of it with them: the model copied the example. The example's form
        filled with the user's words ("Paris, FR" for "landmarks in Paris", the example "Paris, FR") is theirs."""
        if not isinstance(value, str) or len(folded := value.casefold().strip()) < 3:
            return False
        if folded not in told or folded in self._text:
            return False
        words = [word for word in _WORD.findall(folded) if len(word) >= 3]
        return not words or any(word not in self._words and not self._inflects(word) for word in words)

    def _grounded(self, value: Any) -> bool:
        if isinstance(value, int | float):
            return value in (0, 1) or self.has_number(float(value))
        if isinstance(value, str):
            return self.has_text(value)
        leaves = [leaf for leaf in _leaves(value) if not _unquestioned(leaf, {})]
        return not leaves or any(self._grounded(leaf) for leaf in leaves)


# a name the question mentions: Capitalised words in a row (not opening a sentence), or a token with a digit
_MENTION = re.compile(r"(?<![.!?:]\s)(?<!^)\b[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*|\b[\w-]*\d[\w.:-]*")
MAX_MENTIONS = 4
# a count or an amount ("3 adult tickets", "a table for 2", "26.2 miles"): a value for a call or for arithmetic on
# a result, not a thing to look up (an id has more digits, letters or separators: 6611, A1234, 20:00, 2025-03-14)
_QUANTITY = re.compile(r"\d{1,3}(?:\.\d+)?")
_FIRST_PERSON = re.compile(r"I(?:['\u2019](?:m|ve|d|ll))?")  # "I", "I'm": capitalised, and no name


@dataclass(frozen=True, slots=True)
class Uncovered:
    """What the latest question asks about that no call or result since it has covered yet."""

    names: tuple[str, ...] = ()  # its names and numbers (Tokyo, after Paris's weather)
    topics: tuple[str, ...] = ()  # its words naming a tool no call used (``unused_tool_topics``: pollen)
    topic_tools: tuple[str, ...] = ()  # those tools, each once, in the topics' order (get_pollen_count)

    def __bool__(self) -> bool:
        return bool(self.names or self.topics)

    @property
    def words(self) -> tuple[str, ...]:
        return self.names + self.topics

    def left_out_by(self, text: str) -> bool:
        """Whether the answer ``text`` leaves the rest out: it names none of the names, or a topic no result
        speaks of stands (an answer about it is made up: "the pollen level is very high", from the UV index's)."""
        return bool(self.topics) or (bool(self.names) and names_none_of(text, self.names))


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
    told = list(_texts_told(since, mentions))
    covered = Grounds(told)
    looked_up = (mention for mention in mentions if not _QUANTITY.fullmatch(mention))
    names = [mention for mention in looked_up if not covered.has_text(mention)][:MAX_MENTIONS]
    if not tools or len(names) >= MAX_MENTIONS:
        return Uncovered(tuple(names))
    if not any(_calls_with_results(since)):
        return Uncovered(tuple(names))
    used = _tools_spent(since)
    question = content_text(messages[start].get("content"))
    topics = unused_tool_topics(tools, question, used, " ".join(told), MAX_MENTIONS - len(names))
    return Uncovered(tuple(names), tuple(word for word, _ in topics), tuple(dict.fromkeys(tool for _, tool in topics)))


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
    Oslo and its conversion to Fahrenheit answer one thing.

    Measured with Qwen2.5-Coder-0.5B on the answer step of seven two-lookup tasks (12 samples each): asked for an
    answer "naming what they found", it held both values 32 times in 84 ("The Louvre and the Prado are open
    from 10:00 to 20:00"); asked to name "what they found for each of Louvre and Prado", 49 times."""
    start, mentions = _question_mentions(messages)
    names = [mention for mention in mentions if _LETTER.search(mention)]
    if len(names) < 2:
        return []
    by_tool: dict[str, list[Grounds]] = {}
    for tool, text in _calls_told(messages[start + 1 :], names):
        by_tool.setdefault(tool, []).append(Grounds([text]))
    for calls in by_tool.values():
        asked = [name for name in names if any(call.has_text(name) for call in calls)]
        if len(asked) >= 2 and not any(all(call.has_text(name) for name in asked) for call in calls):
            return asked[:MAX_MENTIONS]
    return []


def _texts_told(messages: Sequence[Mapping[str, Any]], mentions: Sequence[str]) -> Iterable[str]:
    """The texts of the messages since the question (results, the assistant's words) and their calls' arguments
    (``_calls_told``)."""
    yield from (content_text(message.get("content")) for message in messages)
    yield from (text for _, text in _calls_told(messages, mentions))


def _calls_told(messages: Sequence[Mapping[str, Any]], mentions: Sequence[str]) -> Iterable[tuple[str, str]]:
    """Each call in ``messages`` as (tool name, its arguments' text); a value that names several ``mentions``,
    whose result names some of them, stands as those it names."""
    for tool, arguments, result in _calls_with_results(messages):
        yield tool, arguments if result is None else _as_answered(arguments, result, mentions)


def _tools_spent(messages: Sequence[Mapping[str, Any]]) -> set[str]:
    """The tools of the calls in ``messages`` that gave a result (a call with no result paired counts), and those
    whose last call failed with no result since: a failed call covers nothing of the question, and its tool is
    worth another call once a result came after it ("unknown: 'Tom'" for Tom's phone number, then Tom's record
    naming his manager), not before (told about it again, a small model wrote the same failing call)."""
    answered: set[str] = set()
    failed: set[str] = set()
    for tool, _, result in _calls_with_results(messages):
        if result is not None and tool_failure(result) is not None:
            failed.add(tool)
            continue
        answered.add(tool)
        failed.clear()
    return answered | failed


def _calls_with_results(messages: Sequence[Mapping[str, Any]]) -> Iterable[tuple[str, str, str | None]]:
    """Each call in ``messages`` as (tool name, its arguments' text, its result's text, ``None`` when no result is
    paired with it by id)."""
    waiting: dict[str, tuple[str, str]] = {}  # a call's id -> its tool and arguments' text, until its result comes
    for message in messages:
        for call, function in _functions(message):
            call_id, told = str(call.get("id") or ""), (str(function.get("name")), str(function.get("arguments") or ""))
            if message.get("role") == "assistant" and call_id:
                waiting[call_id] = told
            else:
                yield *told, None
        if message.get("role") in ("tool", "function"):
            answered = str(message.get("tool_call_id") or "")
            if answered in waiting:
                tool, arguments = waiting.pop(answered)
                yield tool, arguments, content_text(message.get("content"))
    yield from ((tool, arguments, None) for tool, arguments in waiting.values())  # no result (yet), or no id


def _functions(message: Mapping[str, Any]) -> Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """The message's calls with their ``function`` objects (``tool_calls`` and the legacy ``function_call``)."""
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            yield call, function
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping):
        yield {}, legacy


def _as_answered(arguments: str, result: str, mentions: Sequence[str]) -> str:
    """A call's arguments as its result answered them (``_value_as_answered``), as text."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    named = Grounds([result])
    return "\n".join(
        _value_as_answered(value, named, mentions) if isinstance(value, str) else json.dumps(value)
        for value in _leaves(parsed)
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
    names = [mention for mention in mentions if _LETTER.search(mention) and inside.has_text(mention)]
    if len(names) < 2:
        return []
    rest = value.casefold()
    for name in names:
        rest = rest.replace(name.casefold(), " ")
    return names if all(word in _CONNECTORS for word in _WORD.findall(rest)) else []


def names_none_of(text: str, names: Sequence[str]) -> bool:
    """Whether ``text`` names none of ``names`` (case aside): an answer that leaves out what the question also
    asks about (``uncovered_in``)."""
    folded = text.casefold()
    return not any(name.casefold() in folded for name in names)


def _names_nothing(parameter: str, value: Any) -> bool:
    """A parameter that names a person or a place given a string with no letter in it ("81", "2025")."""
    return _last_word(parameter) in _NAMING and isinstance(value, str) and not _LETTER.search(value)


def _schema_of(properties: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    schema = properties.get(name)
    return schema if isinstance(schema, Mapping) else {}


def names_an_id(missing: Sequence[str]) -> bool:
    """Whether the made-up values ``ungrounded`` listed (``name=value``) hold an id."""
    return any(_identifies(item.partition("=")[0]) for item in missing)


def _identifies(parameter: str) -> bool:
    """A parameter that holds an id (``order_id``, ``restaurantId``, ``uuid``): no model knows one by itself."""
    return _last_word(parameter) in _IDENTIFYING


def _last_word(parameter: str) -> str:
    return re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", parameter.strip("_"))[-1].casefold()


def definition_text(tool: ToolSpec) -> str:
    """What the client's definition tells about the tool, folded: its description and schema."""
    return f"{tool.description}\n{json.dumps(tool.parameters, ensure_ascii=False)}".casefold()


def _unquestioned(value: Any, schema: Mapping[str, Any]) -> bool:
    """A value that says nothing about where it came from: given by the schema, a flag, empty."""
    if value is None or isinstance(value, bool) or value == "":
        return True
    enum = schema.get("enum")
    if isinstance(enum, list) and value in enum:
        return True
    return ("const" in schema and schema["const"] == value) or ("default" in schema and schema["default"] == value)


def _leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def _within_edits(a: str, b: str, limit: int) -> bool:
    """Whether ``a`` becomes ``b`` in at most ``limit`` single-letter edits (Levenshtein, cut off early)."""
    if abs(len(a) - len(b)) > limit:
        return False
    previous = list(range(len(b) + 1))
    for i, letter in enumerate(a, 1):
        current = [i]
        for j, other in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (letter != other)))
        if min(current) > limit:
            return False
        previous = current
    return previous[-1] <= limit


def _digits(word: str) -> str:
    """``09`` and ``9`` alike."""
    return word.lstrip("0") or "0"


def _to_number(raw: str) -> float | None:
    """``1,234.5`` / ``1234`` / ``4,5`` (a decimal comma) as a number."""
    if raw.count(",") and "." not in raw and re.fullmatch(r"-?\d+,\d{1,2}", raw):
        raw = raw.replace(",", ".")
    try:
        return float(raw.replace(",", ""))
    except ValueError:
        return None
