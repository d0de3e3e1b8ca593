"""Worst-case parser cost: malformed, never-closed and marker-flooded model outputs, per format.

An upstream (or a hostile model) can send a whole answer of text that keeps a parser undecided: openers
that never close, JSON objects that never end, brackets nested without end, xml and qwen3_xml parameters
that never close, pythonic lists of calls without ``]``, strings without their quote, partial markers.
Each case is about ``--size`` characters, streamed through every registered format (lenient recognition
on, as served) in seeded random chunks of 1 to 50 characters, as an upstream delivers them.

For each case and format it prints milliseconds per MiB and the ratio to a normal answer (prose and one
call) of the same size, and the growth of the time for twice the input (a linear parser stays near 2x; a
rescan of held text shows as ~4x). The unit tests check linearity by counting calls; these are the
absolute figures.

Plain script, no pytest: ``python bench/parser_worst.py [--size 1048576] [--case NAME] [--format NAME]``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from toolshim.formats import FORMATS, ToolCallRecord, ToolFormat
from toolshim.formats.lenient import new_parser

from tests.formats.tools import TOOLS

MIB = 1 << 20


def _repeat(head: str, unit: str) -> Callable[[int], str]:
    """``head`` then ``unit`` repeated to ``size`` characters."""
    return lambda size: head + unit * max(1, (size - len(head)) // len(unit))


def _calls(unit: str, head: str = "") -> Callable[[int], str]:
    return _repeat(head, unit)


# Worst-case outputs by name: each a function of the size in characters.
CASES: dict[str, Callable[[int], str]] = {
    # openers that never close, over and over
    "hermes_open_name": _repeat("", '<tool_call>{"name": '),
    "hermes_open_call": _repeat("", '<tool_call>\n{"name": "search_docs", "arguments": {"query": "a"\n'),
    "bare_open_name": _repeat("", '\n{"name": "search_docs", "arguments": {'),
    "fence_open_call": _repeat("", '```json\n{"name": "search_docs", "arguments": {"query": '),
    # one object that never ends: nested objects, brackets
    "unclosed_object": _repeat('<tool_call>{"name": "search_docs", "arguments": ', '{"a": '),
    "bare_unclosed_object": _repeat('{"name": "search_docs", "arguments": ', '{"a": '),
    "deep_brackets": _repeat("<tool_call>", "[{"),
    "bare_deep_brackets": _repeat("", "[{"),
    # strings without their terminator
    "unclosed_string": _repeat('<tool_call>{"name": "search_docs", "arguments": {"query": "', 'ab\\"c '),
    "bare_unclosed_string": _repeat('{"name": "search_docs", "arguments": {"query": "', "abc {x} <y> "),
    # xml / qwen3_xml / morph_xml parameters that never close
    "xml_open_param": _repeat("<tool:search_docs>\n<param:query>", "text </param:quer <param:q "),
    "xml_open_tools": _repeat("", "<tool:search_docs>\n<param:query>x\n"),
    "qwen3_open_param": _repeat("<tool_call>\n<function=search_docs>\n<parameter=query>\n", "text </paramete <par "),
    "qwen3_open_functions": _repeat("", "<tool_call>\n<function=search_docs>\n<parameter=query>\nx\n"),
    "morph_open_param": _repeat("<search_docs>\n<query>", "text </quer <b> "),
    "morph_open_tools": _repeat("", "<search_docs><query>x"),
    # pythonic lists of calls that never close
    "pythonic_list": _repeat("[", 'search_docs(query="a b", limit=1), '),
    "pythonic_open_args": _repeat('[search_docs(query="a", tags=', "[("),
    "pythonic_open_string": _repeat('[search_docs(query="', "abc ) ] "),
    # react / caret blocks that never end
    "react_open_input": _repeat("Action: search_docs\nAction Input: ", '{"query": '),
    "caret_open_block": _repeat("^^^search_docs\nquery: a\n---\n", "line ^^ ^^^x\n"),
    # many partial markers
    "partial_markers": _repeat("", "<tool_cal</tool_cal<functio<parameter<param:<tool:<thin^^```"),
    "lt_flood": _repeat("", "<"),
    "foreign_wrappers": _repeat("", '<function_call>{"name": "search_docs", "argu'),
    "mistral_open": _repeat("", '[TOOL_CALLS] [{"name": "search_docs", "arguments": {'),
}


def normal_answer(fmt: ToolFormat, size: int) -> str:
    """Prose and one call with a long ``content`` argument: what a normal answer costs."""
    line = "def f(x):\n    return 'a' + \"b\" if x < 3 else {x: 1}  # naïve ✓\n"
    content = line * max(1, size // 2 // len(line))
    record = ToolCallRecord("call_0", "write_file", json.dumps({"path": "a.py", "content": content}))
    prose = "Here is the plan, with `code` and <b>tags</b> and more words.\n" * max(1, size // 2 // 62)
    return prose + fmt.render_calls([record]) + "\n"


def chunks(text: str, seed: int = 7) -> list[str]:
    """``text`` split at seeded random points, 1 to 50 characters apart."""
    rng = random.Random(seed)
    pieces, at = [], 0
    while at < len(text):
        step = rng.randint(1, 50)
        pieces.append(text[at : at + step])
        at += step
    return pieces


def parse_seconds(fmt: ToolFormat, text: str) -> float:
    """Seconds to feed ``text`` in random chunks and close, with lenient recognition (as served)."""
    pieces = chunks(text)
    parser = new_parser(fmt, TOOLS, 4, True)
    started = time.perf_counter()
    for piece in pieces:
        parser.feed(piece)
    parser.close("stop")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=MIB, help="characters per output (default 1 MiB)")
    parser.add_argument("--case", action="append", help="only these cases (repeatable)")
    parser.add_argument("--format", action="append", help="only these formats (repeatable)")
    parser.add_argument("--no-growth", action="store_true", help="skip the 2x-input column (halves the run time)")
    args = parser.parse_args()
    formats = [f for n, f in FORMATS.items() if not args.format or n in args.format]
    cases = {n: c for n, c in CASES.items() if not args.case or n in args.case}
    print(f"ms per MiB, {args.size} characters in random 1-50 character chunks, lenient recognition on.")
    print("Each cell: ms/MiB (ratio to a normal answer) [time for 2x input / time for 1x].\n")
    normal = {f.name: parse_seconds(f, normal_answer(f, args.size)) * MIB / args.size for f in formats}
    width = 30
    print("case".ljust(24) + "".join(f.name.ljust(width) for f in formats))
    print("normal answer".ljust(24) + "".join(f"{normal[f.name] * 1000:.0f}".ljust(width) for f in formats))
    worst = 0.0
    for name, make in cases.items():
        text = make(args.size)
        cells = []
        for fmt in formats:
            seconds = parse_seconds(fmt, text)
            per_mib = seconds * MIB / len(text)
            worst = max(worst, per_mib)
            cell = f"{per_mib * 1000:.0f} ({per_mib / normal[fmt.name]:.1f}x)"
            if not args.no_growth:
                cell += f" [{parse_seconds(fmt, make(2 * args.size)) / seconds:.1f}]"
            cells.append(cell.ljust(width))
        print(name.ljust(24) + "".join(cells), flush=True)
    print(f"\nworst: {worst * 1000:.0f} ms per MiB")


if __name__ == "__main__":
    main()
