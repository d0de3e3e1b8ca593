"""Integer bounds as GBNF: a rule whose sentences are exactly the decimal integers in a range.

Sans-IO, pure. llama-cpp-python's copy of llama.cpp's JSON-Schema converter ignores ``minimum``,
``maximum``, ``exclusiveMinimum`` and ``exclusiveMaximum``, so a constrained model could write an
out-of-range integer and be re-asked. ``constraint.py`` gives a bounded integer schema this rule
instead. The method is the digit-range decomposition of llama.cpp's newer converter
(``_generate_min_max_int`` in ``examples/json_schema_to_grammar.py``, MIT, (c) the ggml authors),
rewritten here over closed ranges of digit strings: split the magnitudes by length, and within one
length by the first digit where the bounds differ. (Written afresh rather than copied: llama.cpp's
lower-bound-only branch drops the zeros after the first digit, so ``minimum: 105`` let ``15`` through.)

A side with no bound stops at 16 digits, as the converter's own ``integral-part`` does. ``-0`` and
leading zeros are not written (JSON allows ``-0``; the grammar just never needs it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

MAX_DIGITS = 16  # the converter's integral-part: [1-9] [0-9]{0,15}
_UNBOUNDED = 10**MAX_DIGITS - 1
_STRUCTURAL = ("$ref", "oneOf", "anyOf", "allOf", "const", "enum", "not", "if")


def integer_bounds(schema: Mapping[str, Any]) -> tuple[int | None, int | None] | None:
    """(lowest, highest) allowed integer of a bounded ``{"type": "integer"}`` schema, ``None`` per
    open side; ``None`` when the schema is not one (another type, no bounds, or keywords such as
    ``enum`` that the converter handles itself). Draft 4's boolean ``exclusiveMinimum`` counts too."""
    if schema.get("type") != "integer" or any(key in schema for key in _STRUCTURAL):
        return None
    low = _strictest(schema, "minimum", "exclusiveMinimum", math.ceil, max, +1)
    high = _strictest(schema, "maximum", "exclusiveMaximum", math.floor, min, -1)
    return None if low is None and high is None else (low, high)


def _strictest(
    schema: Mapping[str, Any],
    inclusive: str,
    exclusive: str,
    to_int: Callable[[float], int],
    pick: Callable[[list[int]], int],
    step: int,
) -> int | None:
    """One side's bound as an integer: the stricter of the inclusive and exclusive keywords."""
    found = []
    value, flag = _number(schema.get(inclusive)), schema.get(exclusive)
    if value is not None:
        # Draft 4: "exclusiveMinimum": true turns "minimum" exclusive.
        exact = flag is True and float(value).is_integer()
        found.append(int(to_int(value)) + (step if exact else 0))
    other = _number(flag)
    if other is not None:
        # Exclusive: the next integer past it (5 -> 6; 5.5 -> 6 via ceil for a lower bound).
        found.append(int(other) + step if float(other).is_integer() else int(to_int(other)))
    return pick(found) if found else None


def _number(value: Any) -> int | float | None:
    """A finite JSON number, else ``None`` (booleans and infinities are no bounds)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) else None


def integer_range_rule(low: int | None, high: int | None) -> str:
    """The GBNF alternatives (no trailing ``space``) for the integers ``low..high``, a ``None``
    side open up to 16 digits. Raises ``ValueError`` when no integer fits."""
    lo = -_UNBOUNDED if low is None else low
    hi = _UNBOUNDED if high is None else high
    if lo > hi:
        raise ValueError(f"no integer lies between {low} and {high}")
    options = []
    if lo < 0:  # negatives: "-" then magnitudes max(1, -hi)..-lo
        options.append('"-" (' + _magnitudes(max(1, -hi), -lo) + ")")
    if hi >= 0:
        options.append(_magnitudes(max(0, lo), hi))
    return " | ".join(options)


def _magnitudes(lo: int, hi: int) -> str:
    """Alternatives for ``lo..hi`` (0 <= lo <= hi) without leading zeros: one group per digit count,
    and the lengths that are wholly inside merged into a single repetition."""
    options = []
    low_len, high_len = len(str(lo)), len(str(hi))
    if low_len == high_len:
        return _same_length(str(lo), str(hi))
    if lo == 0 or lo == 10 ** (low_len - 1):  # the whole shortest length is inside
        first_full = low_len
    else:
        options.append(_same_length(str(lo), "9" * low_len))
        first_full = low_len + 1
    last_full = high_len if hi == 10**high_len - 1 else high_len - 1
    if first_full == 1 and lo == 0:  # "0" is not [1-9]
        options.append('"0"')
        if last_full >= 1:
            options.append(_seq("[1-9]", _digits(0, last_full - 1)))
    elif first_full <= last_full:
        options.append(_seq("[1-9]", _digits(first_full - 1, last_full - 1)))
    if last_full < high_len:
        options.append(_same_length("1" + "0" * (high_len - 1), str(hi)))
    return " | ".join(options)


def _same_length(lo: str, hi: str) -> str:
    """Digit strings from ``lo`` to ``hi`` of their common length (leading zeros as given)."""
    common = 0
    while common < len(lo) and lo[common] == hi[common]:
        common += 1
    head = f'"{lo[:common]}"' if common else ""
    if common == len(lo):
        return head
    first, last, rest = lo[common], hi[common], len(lo) - common - 1
    low_tail, high_tail = lo[common + 1 :], hi[common + 1 :]
    low_whole, high_whole = low_tail == "0" * rest, high_tail == "9" * rest
    options = []
    start, end = chr(ord(first) + (0 if low_whole else 1)), chr(ord(last) - (0 if high_whole else 1))
    if not low_whole:
        options.append(_seq(_digit_class(first, first), _same_length(low_tail, "9" * rest)))
    if start <= end:
        options.append(_seq(_digit_class(start, end), _digits(rest, rest)))
    if not high_whole:
        options.append(_seq(_digit_class(last, last), _same_length("0" * rest, high_tail)))
    body = options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"
    return _seq(head, body)


def _seq(*parts: str) -> str:
    """Parts in sequence, empty ones skipped."""
    return " ".join(part for part in parts if part)


def _digit_class(first: str, last: str) -> str:
    return f"[{first}]" if first == last else f"[{first}-{last}]"


def _digits(least: int, most: int) -> str:
    """``[0-9]`` repeated least..most times ("" for none)."""
    if most == 0:
        return ""
    if least == most:
        return "[0-9]" if most == 1 else f"[0-9]{{{most}}}"
    return f"[0-9]{{{least},{most}}}"
