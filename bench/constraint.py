"""Grammar build time for constrained decoding (issue 11 item 1): first build and cache hits.

Builds the hermes and pythonic grammars for tool sets of 1, 3, 10 and 40 tools (the test tools, repeated under new
names), each in a fresh cache, then looks each up again; prints milliseconds. The model's own time for
one call on the local 0.5B model is seconds, so the cached look-up must stay far below 10% of it.

    .venv/bin/python bench/constraint.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from toolshim.constrain.grammars import GrammarCache
from toolshim.formats import ToolChoice, ToolSpec

from tests.formats.tools import OPENAI_TOOLS

HITS = 2000


def tool_set(size: int) -> list[ToolSpec]:
    base = [ToolSpec.from_openai(t) for t in OPENAI_TOOLS.values()]
    return [ToolSpec(f"{base[i % len(base)].name}_{i}", "", base[i % len(base)].parameters) for i in range(size)]


def main() -> None:
    print(f"{'format':>8} {'tools':>5} {'first ms':>9} {'cached µs':>10} {'grammar chars':>14}")
    for fmt in ("hermes", "pythonic"):
        for size in (1, 3, 10, 40):
            tools, cache = tool_set(size), GrammarCache()
            first = cache.get(fmt, tools, ToolChoice("required"), 1)
            if first is None:
                sys.exit("no grammar: is llama-cpp-python installed (toolshim[constrain])?")
            started = time.perf_counter()
            for _ in range(HITS):
                cache.get(fmt, tools, ToolChoice("required"), 1)
            cached_us = (time.perf_counter() - started) / HITS * 1e6
            print(f"{fmt:>8} {size:>5} {first.build_seconds * 1e3:>9.2f} {cached_us:>10.1f} {len(first.text):>14}")


if __name__ == "__main__":
    main()
