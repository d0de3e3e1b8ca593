"""Integer bounds as GBNF (issue 11): the range rule matches exactly the integers in the range.

The rule is checked by translating it, token by token, into a regular expression (the rule uses
only literals, digit classes, ``{m,n}`` repetition, groups and alternation; the translation refuses
anything else), then compared with Python's own integer comparison over random ranges. The same
rules inside a real grammar go through llama.cpp's sampler in ``test_constraint.py``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from toolshim.constrain.intrange import MAX_DIGITS, integer_bounds, integer_range_rule

from tests.gbnf import parses

_TOKEN = re.compile(r'\s*("[0-9-]*"|\[[0-9]\]|\[[0-9]-[0-9]\]|\{[0-9]+(?:,[0-9]+)?\}|\(|\)|\|)')


def as_regex(rule: str) -> re.Pattern[str]:
    """The rule as a regex; every character of the rule must belong to a known token."""
    out, pos = [], 0
    while pos < len(rule):
        match = _TOKEN.match(rule, pos)
        assert match, f"unexpected GBNF at {rule[pos:]!r}"
        token, pos = match.group(1), match.end()
        out.append(re.escape(token[1:-1]) if token.startswith('"') else "(?:" if token == "(" else token)
    return re.compile("".join(out))


def test_the_translation_can_fail() -> None:
    assert as_regex('"1" [0-9]{2}').fullmatch("123") and not as_regex('"1" [0-9]{2}').fullmatch("12")
    with pytest.raises(AssertionError):
        as_regex("[a-z]+")


def in_range(n: int, low: int | None, high: int | None) -> bool:
    return (low is None or low <= n) and (high is None or n <= high)


def near(low: int | None, high: int | None) -> list[int]:
    """Integers around each bound and across digit-count edges, the places a decomposition slips."""
    points = [0, 1, -1, 9, 10, 99, 100, -10, -100, 10**MAX_DIGITS - 1]
    for bound in (low, high):
        if bound is not None:
            points += [bound - 1, bound, bound + 1, bound * 10, bound // 10, -bound]
    return points


ints = st.integers(min_value=-(10**9), max_value=10**9) | st.integers(min_value=-150, max_value=150)


@settings(max_examples=400, deadline=None)
@given(a=ints, b=ints, side=st.sampled_from(["both", "low", "high"]), probes=st.lists(ints, max_size=30))
@example(a=105, b=0, side="low", probes=[15, 104, 105, 1000])  # llama.cpp's lower-bound branch let 15 in
@example(a=5, b=480, side="both", probes=[4, 5, 45, 480, 481, 1000, -1])
@example(a=-50, b=-3, side="both", probes=[-51, -50, -3, -2, 0, 3])
def test_rule_matches_exactly_the_range(a: int, b: int, side: str, probes: list[int]) -> None:
    low, high = min(a, b), max(a, b)
    low, high = (low, high) if side == "both" else (low, None) if side == "low" else (None, high)
    pattern = as_regex(integer_range_rule(low, high))
    for n in probes + near(low, high):
        if len(str(abs(n))) <= MAX_DIGITS:
            assert bool(pattern.fullmatch(str(n))) == in_range(n, low, high), (low, high, n)
    assert not pattern.fullmatch("-0") and not pattern.fullmatch("007")


def test_open_sides_stop_at_sixteen_digits_and_empty_ranges_raise() -> None:
    pattern = as_regex(integer_range_rule(None, None))
    assert pattern.fullmatch("9" * MAX_DIGITS) and pattern.fullmatch("-" + "9" * MAX_DIGITS)
    assert not pattern.fullmatch("1" + "0" * MAX_DIGITS)
    assert as_regex(integer_range_rule(0, 10**20)).fullmatch(str(10**20))  # an explicit bound goes past
    with pytest.raises(ValueError, match="no integer"):
        integer_range_rule(5, 4)


@pytest.mark.parametrize("bounds", [(5, 480), (-50, -3), (None, 5), (105, None), (-7, 7), (0, 0), (None, None)])
def test_rules_parse_in_llama_cpp(bounds: tuple[int | None, int | None]) -> None:
    assert parses(f"root ::= {integer_range_rule(*bounds)}")


@pytest.mark.parametrize(
    ("schema", "bounds"),
    [
        ({"type": "integer", "minimum": 5, "maximum": 480}, (5, 480)),
        ({"type": "integer", "minimum": -3}, (-3, None)),
        ({"type": "integer", "maximum": -3}, (None, -3)),
        ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}, (1, 9)),
        ({"type": "integer", "exclusiveMinimum": 1.5, "exclusiveMaximum": 9.5}, (2, 9)),
        ({"type": "integer", "minimum": 1.5, "maximum": 9.5}, (2, 9)),
        ({"type": "integer", "minimum": 0, "exclusiveMinimum": 3}, (4, None)),  # the stricter wins
        ({"type": "integer", "minimum": 5, "exclusiveMinimum": True, "maximum": 9, "exclusiveMaximum": True}, (6, 8)),
        ({"type": "integer", "minimum": 5, "exclusiveMinimum": False}, (5, None)),  # draft 4, inclusive
        ({"type": "integer"}, None),
        ({"type": "number", "minimum": 5}, None),  # floats: checked after, not by the grammar
        ({"type": "integer", "minimum": 1, "enum": [1, 2]}, None),  # the converter's enum rule is exact
        ({"type": "integer", "minimum": True}, None),  # a boolean is no bound
        ({"type": ["integer", "null"], "minimum": 1}, None),
    ],
)
def test_integer_bounds(schema: dict[str, Any], bounds: tuple[int | None, int | None] | None) -> None:
    assert integer_bounds(schema) == bounds
