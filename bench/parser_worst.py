"""Worst-case parser cost: malformed, never-closed and marker-flooded model outputs, per format.

An upstream (or a hostile model) can send a whole answer of text that keeps a parser undecided: openers
that never close, JSON objects that never end, brackets nested without end, xml and qwen3_xml parameters
that never close, pythonic lists of calls without ``]``, strings without their quote, partial markers
(``WORST_OUTPUTS`` in ``tests/formats/work.py``, whose linearity the tests check). Each case is about
``--size`` characters, streamed through every registered format (lenient recognition on, as served)
in seeded random chunks of 1 to 50 characters, as an upstream delivers them.

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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from toolshim.formats import FORMATS, ToolCallRecord, ToolFormat
from toolshim.formats.lenient import new_parser

from tests.formats.tools import TOOLS
from tests.formats.work import WORST_OUTPUTS, worst_output

MIB = 1 << 20


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
    cases = [kind for kind in WORST_OUTPUTS if not args.case or kind in args.case]
    print(f"ms per MiB, {args.size} characters in random 1-50 character chunks, lenient recognition on.")
    print("Each cell: ms/MiB (ratio to a normal answer) [time for 2x input / time for 1x].\n")
    normal = {f.name: parse_seconds(f, normal_answer(f, args.size)) * MIB / args.size for f in formats}
    width = 30
    print("case".ljust(24) + "".join(f.name.ljust(width) for f in formats))
    print("normal answer".ljust(24) + "".join(f"{normal[f.name] * 1000:.0f}".ljust(width) for f in formats))
    worst = 0.0
    for name in cases:
        text = worst_output(name, args.size)
        cells = []
        for fmt in formats:
            seconds = parse_seconds(fmt, text)
            per_mib = seconds * MIB / len(text)
            worst = max(worst, per_mib)
            cell = f"{per_mib * 1000:.0f} ({per_mib / normal[fmt.name]:.1f}x)"
            if not args.no_growth:
                cell += f" [{parse_seconds(fmt, worst_output(name, 2 * args.size)) / seconds:.1f}]"
            cells.append(cell.ljust(width))
        print(name.ljust(24) + "".join(cells), flush=True)
    print(f"\nworst: {worst * 1000:.0f} ms per MiB")


if __name__ == "__main__":
    main()
