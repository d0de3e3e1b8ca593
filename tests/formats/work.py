"""Linear-time checks without wall-clock thresholds, and the long and adversarial inputs they use.

``assert_linear(make, process)`` checks that ``process`` does work linear in the size of its input,
``make(k)`` being an input ``k`` times as long as ``make(1)``, two ways:

* deterministic: ``count_calls`` counts the Python function and builtin calls made while ``process``
  runs; for twice the input it must make at most ``2.2`` times the calls (a linear algorithm makes at
  most twice as many, a quadratic one about four times). Exact, never flaky.
* a CPU-time ratio within one run: ``SCALE`` times the input must take under ``2.5 * SCALE`` times
  as long (least of up to three runs; a quadratic algorithm takes about ``SCALE ** 2`` times). This catches
  work no Python call shows, such as a regex or ``str.find`` re-run over all the text so far. A slow
  or busy machine slows both sides alike.

Absolute throughput figures (MB/s, seconds) are printed by ``bench/parsers.py``, not asserted.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

SCALE = 8
T = TypeVar("T")


def count_calls(run: Callable[[], Any]) -> int:
    """Python function and builtin calls made while ``run()`` runs (deterministic for deterministic code)."""
    count = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call" or event == "c_call":
            count += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return count


def cpu_time(run: Callable[[], Any], repeat: int) -> float:
    """The least CPU time of ``repeat`` runs (the least disturbed one), without garbage-collector pauses."""
    best = float("inf")
    for _ in range(repeat):
        gc.disable()
        try:
            started = time.process_time()
            run()
            best = min(best, time.process_time() - started)
        finally:
            gc.enable()
    return max(best, 1e-6)


def assert_linear(make: Callable[[int], T], process: Callable[[T], Any]) -> None:
    """``process`` does work linear in the size of its input (see the module docstring)."""
    small, double, large = make(1), make(2), make(SCALE)
    calls = count_calls(lambda: process(small)), count_calls(lambda: process(double))
    assert calls[1] <= 2.2 * calls[0], f"2x the input made {calls[1] / calls[0]:.2f}x the calls"
    base, limit = cpu_time(lambda: process(small), 3), 2.5 * SCALE
    ratio = cpu_time(lambda: process(large), 1) / base
    for _ in range(2):  # a disturbed run is measured again; a superlinear one stays slow
        if ratio < limit:
            break
        ratio = min(ratio, cpu_time(lambda: process(large), 1) / base)
    assert ratio < limit, f"{SCALE}x the input took {ratio:.1f}x the time"


# ---- inputs ----------------------------------------------------------------------------------------------


def code_content(lines: int) -> str:
    """File content that is hard for every format: quotes, backslashes, tabs, braces, markup of each
    format inside lines (never a whole closing line), unicode."""
    return "".join(
        f"line {i}: \"quoted\" \\ back\tslash {{x}} </tool_call> <b> x = 'a\\\\b' < </param:conten ^^^ ünï\n"
        for i in range(lines)
    )


def prose(lines: int) -> str:
    """Prose with characters every format must look at twice (no tool call, no marker of any format)."""
    return "".join(
        f"Line {i} with <b>html</b>, `code`, {{braces}} and a < b.\n"
        "Plain prose with <b>tags</b>, `code` and ```fences``` < > everywhere.\n"
        for i in range(lines)
    )


# Pathological model outputs, as (head, unit, repeats of the unit at scale 1): marker prefixes,
# unbalanced brackets, fences, partial tags. Every format must stay linear on each.
ADVERSARIAL_OUTPUTS: dict[str, tuple[str, str, int]] = {
    "open_braces": ("", "{\n", 6_250),
    "lt_flood": ("", "<", 12_500),
    "fence_lines": ("", "```\n", 3_125),
    "bare_name_heads": ("", '\n{"name"', 1_875),
    "tool_call_brackets": ("<tool_call>", "[", 40_000),  # over 32 KB: past the json5 fallback at every scale
    "think_close_prefixes": ("<think>", "</thin", 1_875),
}


def adversarial_output(kind: str, scale: int) -> str:
    head, unit, count = ADVERSARIAL_OUTPUTS[kind]
    return head + unit * count * scale


# Pathological tool arguments for the repairer (``parse_json_lenient``, ``finalize_call``), as
# (head, unit, repeats of the unit at scale 1, tail). Scale 1 is over 32 KB, past the json5 fallback's
# size limit, so that every scale takes the same path.
ADVERSARIAL_ARGUMENTS: dict[str, tuple[str, str, int, str]] = {
    "quotes": ("", "'", 125_000, ""),
    "unterminated_strings": ("", '{"a":"', 18_750, ""),
    "open_comments": ("", "{/*a", 31_250, ""),
    "deep_objects": ("", '{"a": ', 18_750, ""),
    "deep_arrays": ("", "[", 125_000, ""),
    "trailing_whitespace": ('{"a": 1', " ", 125_000, ""),
    "prose_with_braces": ("", "{x} and {y} ", 10_000, ""),
    "backslashes": ('{"a": "', "\\", 125_000, ""),
    "many_keys": ("{", "a:1,", 10_000, ""),
    "many_items": ("[", "1,", 20_000, ",]"),
}


def adversarial_arguments(kind: str, scale: int) -> str:
    head, unit, count, tail = ADVERSARIAL_ARGUMENTS[kind]
    return head + unit * count * scale + tail


# Malformed and never-closed calls, as (the format they aim at, head, unit): the unit repeated after the head
# to the size asked. Openers that never close, objects and brackets without end, strings without their quote,
# xml / qwen3_xml / morph_xml parameters that never close, pythonic lists without ``]``, partial markers.
# ``bench/parser_worst.py`` times each under every format; the tests check each is linear under its format
# (lenient recognition on, as served). "any": the foreign-syntax recognizer every format runs.
WORST_OUTPUTS: dict[str, tuple[str, str, str]] = {
    "hermes_open_name": ("hermes", "", '<tool_call>{"name": '),
    "hermes_open_call": ("hermes", "", '<tool_call>\n{"name": "search_docs", "arguments": {"query": "a"\n'),
    "bare_open_name": ("hermes", "", '\n{"name": "search_docs", "arguments": {'),
    "fence_open_call": ("any", "", '```json\n{"name": "search_docs", "arguments": {"query": '),
    "unclosed_object": ("hermes", '<tool_call>{"name": "search_docs", "arguments": ', '{"a": '),
    "bare_unclosed_object": ("any", '{"name": "search_docs", "arguments": ', '{"a": '),
    "deep_brackets": ("hermes", "<tool_call>", "[{"),
    "bare_deep_brackets": ("any", "", "[{"),
    "unclosed_string": ("hermes", '<tool_call>{"name": "search_docs", "arguments": {"query": "', 'ab\\"c '),
    "bare_unclosed_string": ("hermes", '{"name": "search_docs", "arguments": {"query": "', "abc {x} <y> "),
    "xml_open_param": ("xml", "<tool:search_docs>\n<param:query>", "text </param:quer <param:q "),
    "xml_open_tools": ("xml", "", "<tool:search_docs>\n<param:query>x\n"),
    "qwen3_open_param": ("qwen3_xml", "<tool_call><function=search_docs>\n<parameter=query>\n", "t </paramete <par "),
    "qwen3_open_functions": ("qwen3_xml", "", "<tool_call>\n<function=search_docs>\n<parameter=query>\nx\n"),
    "morph_open_param": ("morph_xml", "<search_docs>\n<query>", "text </quer <b> "),
    "morph_open_tools": ("morph_xml", "", "<search_docs><query>x"),
    "pythonic_list": ("pythonic", "[", 'search_docs(query="a b", limit=1), '),
    "pythonic_open_args": ("pythonic", '[search_docs(query="a", tags=', "[("),
    "pythonic_open_string": ("pythonic", '[search_docs(query="', "abc ) ] "),
    "react_open_input": ("react", "Action: search_docs\nAction Input: ", '{"query": '),
    "caret_open_block": ("caret", "^^^search_docs\nquery: a\n---\n", "line ^^ ^^^x\n"),
    "partial_markers": ("any", "", "<tool_cal</tool_cal<functio<parameter<param:<tool:<thin^^```"),
    "foreign_wrappers": ("any", "", '<function_call>{"name": "search_docs", "argu'),
    "mistral_open": ("any", "", '[TOOL_CALLS] [{"name": "search_docs", "arguments": {'),
}


def worst_output(kind: str, size: int) -> str:
    """The ``kind`` of ``WORST_OUTPUTS``, about ``size`` characters long."""
    _, head, unit = WORST_OUTPUTS[kind]
    return head + unit * max(1, (size - len(head)) // len(unit))
