"""Tools listed in the order of their relevance to the user's request, for the emulated prompt.

A small model reads the tool list as a to-do list: on BFCL's ``multiple`` questions the local
model called the tools in the order they were listed, from the first, until it reached the one the
question was about. Listing the tools the request's words point at first makes that first call the
right one. No tool is dropped and ties keep the client's order, so a request that names no tool's
words sees the list as sent.

The score is lexical, with no model and no I/O: the words of the conversation's first user message
that also occur in a tool's name, description or parameter names, each weighted by how few of the
offered tools carry it (a word every tool has tells nothing), a word of the tool's name counting
double. The first user message is the conversation's request; ranking by it keeps the order, and so
the prompt's prefix, the same on every later turn, which keeps the model server's prompt cache.

The same stems decide whether a request is related to a tool at all (``related_tools``, for the
``offer_tools`` policy), over everything the model is told about a tool: on BFCL's irrelevance
questions 54% of the requests share no word with any tool, against 0-1% of the questions a tool
answers (5% of live_simple, 2% of live_multiple: requests in another language, or naming none of
the tool's words). Per tool: 223 of the 557 tools of BFCL's ``multiple`` questions share no word with
their request and none of those is the one asked for; of live_multiple's 1047 requests, 6 (0.6%)
need a tool that shares none of their words ("How much is 394 times 213?" for ``CalcProduct``).

When the turn may hold several calls (``parallel_tool_calls``) and the request names two tools or
more by a word of their name no other tool carries, the list follows the request instead: each tool
where the request first names a word only that tool carries (``in_asked_order``). The model walks the
list as a to-do list there too, and stops early: on BFCL's ``parallel_multiple`` questions it left out
the tasks listed after the one it took for the last (a factorial asked first, listed last, never
called). So listed, the tools the answer needs come in the order it needs them for 161 of those 200
questions, against 71 ranked; a request for one thing among look-alikes stays ranked (the right tool
first: 192 of the 198 ``multiple`` questions offered a tool, 193 ranked; live_multiple 850 of 1027, 849).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..formats import ToolSpec
from ..formats.history import content_text

_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+")
_STEM = 6  # words compared by their first six letters: "lawsuits" ~ "lawsuit", "calculates" ~ "calculate"
_NAME_WEIGHT = 2.0
_STOPWORDS = frozenset(
    "the and for with from that this what which who whom whose when where how are was were will would "
    "can could should you your our their its his her they them there here into onto about than then "
    "also only just all any each some such give get find tell show want need like make use using used "
    "please help function default value type optional required given".split()
)


def stems(text: str) -> set[str]:
    """The comparable words of ``text``: camelCase and snake_case split, lower case, short and
    common words left out, each cut to its first ``_STEM`` letters."""
    return set(_first_places(text))


def _first_places(text: str) -> dict[str, int]:
    """Each comparable word of ``text`` (see ``stems``) with the index of its first occurrence."""
    places: dict[str, int] = {}
    for index, stem, _ in _comparable(text):
        places.setdefault(stem, index)
    return places


def _comparable(text: str) -> Iterator[tuple[int, str, str]]:
    """The comparable words of ``text`` (see ``stems``), each as its index among the words, its stem and itself in
    lower case."""
    for index, word in enumerate(w.lower() for w in _WORD.findall(text)):
        if len(word) > 2 and word not in _STOPWORDS:
            yield index, _stem(word), word


def _stem(word: str) -> str:
    """A plural's ``s`` off ("tests" ~ "test"), then the first ``_STEM`` letters."""
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word[:_STEM]


def _tool_words(tool: ToolSpec) -> tuple[set[str], set[str]]:
    """(name words, other words): the name, then the description and parameter names."""
    props = tool.parameters.get("properties")
    params = " ".join(props) if isinstance(props, Mapping) else ""
    name = stems(tool.name)  # _WORD splits at "_", ".", "-" and camelCase
    return name, stems(f"{tool.description} {params}") | name


@dataclass(frozen=True, slots=True)
class _Overlap:
    """What a request shares with each offered tool, worked out once for the orderings below."""

    places: dict[str, int]  # the request's comparable words, each with the index of its first occurrence
    words: list[tuple[set[str], set[str]]]  # each tool's (name words, all its words)
    carriers: dict[str, int]  # for each word of the request, how many of the tools carry it

    @classmethod
    def of(cls, tools: Sequence[ToolSpec], request: str) -> _Overlap:
        places = _first_places(request)
        words = [_tool_words(tool) for tool in tools]
        carriers: dict[str, int] = {}
        for _, every in words:
            for word in every.intersection(places):
                carriers[word] = carriers.get(word, 0) + 1
        return cls(places, words, carriers)

    def shared(self, index: int) -> tuple[set[str], set[str]]:
        """(name words, all words) of tool ``index`` that the request names."""
        name, every = self.words[index]
        return name.intersection(self.places), every.intersection(self.places)


def ranked(tools: Sequence[ToolSpec], request: str) -> list[ToolSpec]:
    """``tools`` most relevant to ``request`` first; a stable sort, so equal scores keep their order."""
    return _ranked(tools, _Overlap.of(tools, request))


def _ranked(tools: Sequence[ToolSpec], overlap: _Overlap) -> list[ToolSpec]:
    weight = {word: math.log(1 + len(tools) / count) for word, count in overlap.carriers.items()}

    def score(index: int) -> float:
        name, shared = overlap.shared(index)
        return math.fsum(weight[w] * (_NAME_WEIGHT if w in name else 1.0) for w in shared)

    return [tools[i] for i in sorted(range(len(tools)), key=lambda i: -score(i))]


def in_asked_order(tools: Sequence[ToolSpec], request: str) -> list[ToolSpec]:
    """``tools`` in the order ``request`` asks for them.

    Each tool is placed where the request first names its most telling word: the one the fewest of
    the tools carry, a word of its name before others. Tools with a word of their own come first,
    in the request's order; then those sharing only words other tools carry too ("ticket" when the
    request is about a musical's and a train's, and a concert's tool is offered as well); then those
    sharing none, in the client's order."""
    return _in_asked_order(tools, _Overlap.of(tools, request))


def _in_asked_order(tools: Sequence[ToolSpec], overlap: _Overlap) -> list[ToolSpec]:
    carriers, places = overlap.carriers, overlap.places

    def place(index: int) -> tuple[int, int, int]:
        name, shared = overlap.shared(index)
        if not shared:
            return (2, 0, index)
        telling = min(shared, key=lambda w: (carriers[w], w not in name, places[w]))
        return (0 if carriers[telling] == 1 else 1, places[telling], index)

    return [tools[i] for i in sorted(range(len(tools)), key=place)]


def asks_for_several(tools: Sequence[ToolSpec], request: str) -> bool:
    """Whether ``request`` names two tools or more by a word of their name that no other tool
    carries: it asks for several things ("the factorial of 7, then a flute by Yamaha" with
    ``math_factorial`` and ``find_flute``), not for one among look-alikes."""
    return _asks_for_several(_Overlap.of(tools, request))


def _asks_for_several(overlap: _Overlap) -> bool:
    named = (overlap.shared(i)[0] for i in range(len(overlap.words)))
    return sum(any(overlap.carriers[w] == 1 for w in name) for name in named) >= 2


def listing_order(tools: Sequence[ToolSpec], request: str, several_calls: bool) -> list[ToolSpec]:
    """The order to list ``tools`` in for ``tool_order: "relevance"``: when the turn may hold several
    calls and the request asks for several things, the order it asks for them in; else the best
    match first."""
    if len(tools) < 2:
        return list(tools)
    overlap = _Overlap.of(tools, request)
    if several_calls and _asks_for_several(overlap):
        return _in_asked_order(tools, overlap)
    return _ranked(tools, overlap)


def related_tools(tools: Sequence[ToolSpec], request: str, context: str = "") -> list[bool] | None:
    """For each tool, whether ``request`` (or ``context``, a system prompt: it only adds) shares a word
    with anything the model is told about it: its name, description, and its parameters' names,
    descriptions and string enum values at any depth. ``None`` when ``request`` has no comparable word
    (a greeting, another script, arithmetic): no judgement, whatever ``context`` says.

    Wider than the ranking's words: a word only a parameter's description or enum carries
    ("psychologist" among a service type's values) still relates the request to the tool."""
    asked = stems(request)
    if not asked:
        return None
    words = asked | stems(context)
    return [bool(_told_about(tool) & words) for tool in tools]


def _told_about(tool: ToolSpec) -> set[str]:
    """The stems of everything the model is told about ``tool``."""
    return stems(" ".join((tool.name, tool.description, *_schema_texts(tool.parameters))))


def _schema_texts(schema: Any) -> Iterator[str]:
    """The words a JSON schema shows the model: descriptions, titles, property names, string enum values."""
    if not isinstance(schema, Mapping):
        return
    for key in ("description", "title"):
        if isinstance(schema.get(key), str):
            yield schema[key]
    enum = schema.get("enum")
    if isinstance(enum, list):
        yield from (value for value in enum if isinstance(value, str))
    props = schema.get("properties")
    if isinstance(props, Mapping):
        yield from map(str, props)
        for sub in props.values():
            yield from _schema_texts(sub)
    for key in ("items", "additionalProperties"):
        yield from _schema_texts(schema.get(key))
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list):
            for sub in schema[key]:
                yield from _schema_texts(sub)


def first_user_text(messages: Iterable[Mapping[str, Any]]) -> str:
    """The text of the first user message; empty when there is none."""
    first = next((m for m in messages if m.get("role") == "user"), None)
    return content_text(first.get("content")) if first is not None else ""


def unused_tool_topics(
    tools: Sequence[ToolSpec], request: str, used: Collection[str], told: str, limit: int
) -> list[tuple[str, str]]:
    """The words of ``request`` that name a tool no call has used yet ("pollen", of ``get_pollen_count``, in "What
    are the UV index and the pollen level in Sydney?" after ``get_uv_index``), each with that tool's name, in the
    request's order, at most ``limit``: a word of such a tool's name or description that no used tool's name or
    description carries and nothing ``told`` since the request (the calls' values, the results) says. A small model
    answers the whole question from the first result and makes the rest up ("the pollen level is very high", the UV
    index's level), or calls the tool the question's first words name when another one's description holds the step
    before it ("Tom's manager", of a directory's record "team and manager", before the manager's phone number).
    A word of several tools' names is the first one's; a word of a name before a word of a description."""
    covered = stems(told).union(*(_tool_words(tool)[1] for tool in tools if tool.name in used))
    unused = [(tool, stems(tool.name)) for tool in tools if tool.name not in used]
    owners: dict[str, str] = {}  # each stem that names an unused tool -> that tool
    for tool, name in unused:
        for stem in name:
            owners.setdefault(stem, tool.name)
    for tool, name in unused:  # the description counts for a tool none of whose name words is covered
        if not name & covered:
            for stem in stems(tool.description):
                owners.setdefault(stem, tool.name)
    topics: dict[str, tuple[str, str]] = {}
    for _, stem, word in _comparable(request):
        if stem in owners and stem not in covered:
            topics.setdefault(stem, (word, owners[stem]))
    return list(topics.values())[:limit]


def last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of the latest user message; empty when there is none."""
    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    return content_text(last.get("content")) if last is not None else ""


def relates_to_no_tool(tools: Sequence[ToolSpec], request: str) -> bool:
    """``request`` shares no word with any of ``tools`` (false when there are none, or it has no comparable
    word: no judgement)."""
    related = related_tools(tools, request)
    return bool(tools) and related is not None and not any(related)


def unasked_tools(tools: Sequence[ToolSpec], request: str) -> frozenset[str]:
    """The names of ``tools`` that ``request`` shares no word with (none when it has no comparable word)."""
    related = related_tools(tools, request)
    if related is None:
        return frozenset()
    return frozenset(tool.name for tool, asked in zip(tools, related, strict=True) if not asked)
