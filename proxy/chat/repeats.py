"""Sans-IO: which tool calls of an agent loop repeat what the loop already did.

A small model that has its answer in a tool result often calls the same tool again with the same
arguments, or walks a cycle of calls (A, B, A, B, ...). Calls are compared by name and canonical
arguments (``call_key``: key order and spacing aside). A call *repeats* when an identical call was made
since the last user message and nothing new happened since: every call of another tool made after that
one had been made before it too. So ``read, edit, read`` is no repeat (the edit was new, the file may
have changed), while ``A, A`` and ``A, B, A, B`` end in repeats (the second B, the second A, ...). A call
of the same tool with other arguments changes nothing the first call read: after ``get_air(Delhi),
get_air(Zurich)`` a third ``get_air(Delhi)`` repeats (a small model asked about two cities goes back to
the first instead of answering).

``repeat_keys`` gives the calls that would repeat if the model wrote them now (the emulator answers
those from the result already in the history instead of returning them); ``trailing_repeats`` counts
the repeats the history ends with (the ``max_repeated_calls`` loop guard). ``repeat_keys`` is linear in
the history; ``trailing_repeats`` walks back from each call at most to the previous identical one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

Message = Mapping[str, Any]


def call_key(name: str, arguments: Any) -> str:
    """A call as name plus canonical arguments (JSON with sorted keys; text that is no JSON as it is)."""
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else arguments
        canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, TypeError):
        canonical = str(arguments)
    return f"{name}\0{canonical}"


def key_name(key: str) -> str:
    """The tool name of a ``call_key``."""
    return key.split("\0", 1)[0]


def loop_start(messages: Sequence[Message]) -> int:
    """Where the current agent loop began: just after the last user message."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i + 1
    return 0


def calls_in_order(messages: Sequence[Message]) -> list[str]:
    """The ``call_key`` of every call the assistant messages carry, in order (``tool_calls`` and the
    legacy ``function_call``)."""
    keys: list[str] = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        found = [c.get("function") or {} for c in message.get("tool_calls") or () if isinstance(c, Mapping)]
        if isinstance(message.get("function_call"), Mapping):
            found.append(message["function_call"])
        keys.extend(call_key(str(fn.get("name")), fn.get("arguments")) for fn in found if isinstance(fn, Mapping))
    return keys


def loop_calls(messages: Sequence[Message]) -> list[str]:
    """The calls of the current agent loop (since the last user message)."""
    return calls_in_order(messages[loop_start(messages) :])


def _firsts(keys: Sequence[str]) -> list[int]:
    """For each call, where its key was first made."""
    first: dict[str, int] = {}
    return [first.setdefault(key, i) for i, key in enumerate(keys)]


def repeat_keys(keys: Sequence[str]) -> frozenset[str]:
    """The calls that would repeat if written next: made before, and every call of another tool after
    their latest occurrence made before that occurrence too (nothing new since)."""
    firsts = _firsts(keys)
    latest: dict[str, int] = {key: i for i, key in enumerate(keys)}
    newest = _NewestFirsts()  # over the calls after position i: per tool, the latest position one was first made
    after = [0] * len(keys)
    for i in range(len(keys) - 1, -1, -1):
        name = key_name(keys[i])
        after[i] = newest.besides(name)
        newest.add(name, firsts[i])
    return frozenset(key for key, i in latest.items() if after[i] < i)


class _NewestFirsts:
    """The largest first-made position per tool name, with the two largest of distinct names kept apart,
    so "the largest among the other tools" is one look-up (``repeat_keys`` stays linear)."""

    def __init__(self) -> None:
        self._by_name: dict[str, int] = {}
        self._top: tuple[int, str] = (-1, "")
        self._second: tuple[int, str] = (-1, "")

    def add(self, name: str, first: int) -> None:
        value = max(self._by_name.get(name, -1), first)
        self._by_name[name] = value
        if name == self._top[1]:
            self._top = (value, name)
        elif value > self._top[0]:
            self._second, self._top = self._top, (value, name)
        elif value > self._second[0]:
            self._second = (value, name)

    def besides(self, name: str) -> int:
        """The largest first-made position among the tools not named ``name`` (-1: none)."""
        return self._second[0] if name == self._top[1] else self._top[0]


def trailing_repeats(keys: Sequence[str]) -> int:
    """How many calls at the end of ``keys`` are each a repeat (of the calls before them)."""
    firsts = _firsts(keys)
    count = 0
    for n in range(len(keys) - 1, 0, -1):
        if not _repeats(keys, firsts, n):
            break
        count += 1
    return count


def _repeats(keys: Sequence[str], firsts: Sequence[int], n: int) -> bool:
    """Whether call ``n`` repeats: an earlier identical call, and every call of another tool between first
    made before it."""
    key = keys[n]
    name = key_name(key)
    for i in range(n - 1, -1, -1):
        if keys[i] == key:
            return True
        if firsts[i] >= i and key_name(keys[i]) != name:  # new to the loop since ``key`` was last made
            return False
    return False
