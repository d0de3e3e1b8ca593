"""The syntax corpus (``corpus/syntaxes.json``): real model outputs per call-syntax family, read leniently.

Each case: the model's output, the offered tools (a named tool set: name -> JSON Schema), the calls it
should give (name + arguments) and the text that should remain (compared with runs of blanks as one space); ``source``
names the public test suite it comes from. ``read(fmt, case, chunks)`` runs one case through
``new_parser`` (lenient on) of a prompted format; ``score`` gives per family the cases read right whole
and in every chunking (whole, one character at a time, seeded splits).

Run ``python -m tests.formats.corpus [FORMAT ...]`` to print the table.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

from toolshim.formats import get_format
from toolshim.formats.base import Malformed, ToolSpec
from toolshim.formats.lenient import new_parser

from tests.formats.harness import chunkings, feed_chunks, merge, summarize

CORPUS = Path(__file__).parent / "corpus" / "syntaxes.json"
SHIPPED = ("hermes", "pythonic")  # the prompted formats the share is reported for


@cache
def load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CORPUS.read_text(encoding="utf-8"))
    return data


def cases() -> list[dict[str, Any]]:
    return list(load()["cases"])


def tools(case: dict[str, Any]) -> list[ToolSpec]:
    return [ToolSpec(name, "", schema) for name, schema in load()["toolsets"][case["tools"]].items()]


def read(fmt: str, case: dict[str, Any], chunks: list[str] | None = None) -> dict[str, Any]:
    """What a client gets for the case under ``fmt``: content (blanks normalized), calls, malformed count."""
    specs = tools(case)
    events = feed_chunks(lambda: new_parser(get_format(fmt), specs, 16), chunks or [case["output"]])
    got = summarize(merge(events))
    return {
        "content": " ".join(got["content"].split()),
        "calls": got["calls"],
        "malformed": sum(isinstance(e, Malformed) for e in events),
    }


def expected(case: dict[str, Any]) -> dict[str, Any]:
    return {"content": " ".join(case["content"].split()), "calls": case["calls"], "malformed": 0}


def right(fmt: str, case: dict[str, Any], chunked: bool = True) -> bool:
    """Read right whole and (``chunked``) in every chunking."""
    want = expected(case)
    ways = chunkings(case["output"], (1, 2, 3)) if chunked else [[case["output"]]]
    return all(read(fmt, case, chunks) == want for chunks in ways)


def score(fmt: str, chunked: bool = True) -> dict[str, tuple[int, int]]:
    """Per family (and ``all``): (cases read right, cases)."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for case in cases():
        ok = right(fmt, case, chunked)
        for key in (case["family"], "all"):
            out[key][0] += ok
            out[key][1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def main(formats: list[str]) -> None:
    table = {fmt: score(fmt) for fmt in formats}
    families = [*sorted({f for s in table.values() for f in s if f != "all"}), "all"]
    print(f"{'family':<12}" + "".join(f"{fmt:>12}" for fmt in formats))
    for fam in families:
        cells = "".join(f"{f'{table[fmt][fam][0]}/{table[fmt][fam][1]}':>12}" for fmt in formats)
        print(f"{fam:<12}{cells}")
    for fmt in formats:
        ok, n = table[fmt]["all"]
        print(f"{fmt}: {ok}/{n} = {100 * ok / n:.0f}% read right (whole and in every chunking)")
    for fmt in formats:
        misses = [c["id"] for c in cases() if not right(fmt, c)]
        print(f"{fmt} misses: {', '.join(misses) or '-'}")


if __name__ == "__main__":
    main(sys.argv[1:] or list(SHIPPED))
