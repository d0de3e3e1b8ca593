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
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..formats import ToolSpec, canonical_json
from ..formats.history import content_text

WORD = re.compile(r"[^\W_]+")
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
LETTER = re.compile(r"[^\W\d_]")
# Past this many characters of conversation only the newest text is searched: the check stays bounded.
MAX_GROUND_CHARS = 200_000


class Grounds:
    """The conversation's words and numbers, as the client sent them (not toolshim's instructions)."""

    def __init__(self, texts: Iterable[str]) -> None:
        original = "\n".join(texts)[-MAX_GROUND_CHARS:]
        text = original.casefold()
        self._text = text
        self._words = set(WORD.findall(text))
        # how the conversation spells each longer capitalised word (a name), for ``respelled``
        self._names: dict[str, str] = {}
        for word in WORD.findall(original):
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
            texts.extend(str(function.get("arguments") or "") for _, function in message_functions(message))
        return cls(texts)

    def has_number(self, value: float) -> bool:
        return any(math.isclose(value, known, rel_tol=1e-9, abs_tol=1e-9) for known in self._numbers)

    def has_text(self, value: str) -> bool:
        folded = value.casefold().strip()
        if not folded or folded in self._text:
            return True
        for word in WORD.findall(folded):
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
        if len(WORD.findall(value)) > MAX_RESPELL_VALUE_WORDS:
            return value
        return WORD.sub(lambda match: self._spelling_of(match.group()), value)

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
        words = [word for word in WORD.findall(folded) if len(word) >= 3]
        return not words or any(word not in self._words and not self._inflects(word) for word in words)

    def _grounded(self, value: Any) -> bool:
        if isinstance(value, int | float):
            return value in (0, 1) or self.has_number(float(value))
        if isinstance(value, str):
            return self.has_text(value)
        questioned = [leaf for leaf in leaves(value) if not _unquestioned(leaf, {})]
        return not questioned or any(self._grounded(leaf) for leaf in questioned)


def message_functions(message: Mapping[str, Any]) -> Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """The message's calls with their ``function`` objects (``tool_calls`` and the legacy ``function_call``)."""
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            yield call, function
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping):
        yield {}, legacy


def _names_nothing(parameter: str, value: Any) -> bool:
    """A parameter that names a person or a place given a string with no letter in it ("81", "2025")."""
    return _last_word(parameter) in _NAMING and isinstance(value, str) and not LETTER.search(value)


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


def leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, Mapping):
        for item in value.values():
            yield from leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item)
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
