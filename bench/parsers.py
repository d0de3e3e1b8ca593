"""Parser throughput benchmark: every registered format on long, realistic model outputs.

For each format it streams prose + one ``write_file`` call whose ``content`` is ~1 MB of code
(rendered by the format itself) in small chunks, as an upstream would, and reports MB/s and
the time ratio for a 10x longer output (linear parsers stay near 10x). The same output fed in
4 KB chunks shows the parsing cost without the per-``feed`` overhead of tiny chunks. It also
streams ~1 MB of prose with no call, times ``finalize_call`` on 1 MB arguments, clean and
needing repairs, and times the pathological outputs and arguments of ``tests/formats/work.py``.

Lenient recognition (on by default: ``formats/lenient.py``) gets the same table for every format with the
recognizer in front, and a table of ~1 MB calls written in each foreign syntax (under ``react``), with the
time ratio for a 10x longer one.

These are the absolute figures; the unit tests only check that the work grows linearly.

Plain script, no pytest:
``python bench/parsers.py [--size-mb 1] [--scale 10] [--chunk 20] [--adversarial 8] [--no-lenient]``.
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

from toolshim.formats import FORMATS, ToolCallEnd, ToolCallRecord, ToolFormat
from toolshim.formats._args import ToolIndex, finalize_call, parse_json_lenient
from toolshim.formats.lenient import new_parser

from tests.formats.tools import TOOLS
from tests.formats.work import ADVERSARIAL_ARGUMENTS, ADVERSARIAL_OUTPUTS, adversarial_arguments, adversarial_output

MB = 1_000_000


def code_text(size: int, seed: int = 1) -> str:
    """~``size`` characters of Python-looking code with quotes, backslashes and unicode."""
    rng = random.Random(seed)
    templates = [
        'def handler_{n}(request, *args):\n    """Handle {n}: naïve path ✓."""\n',
        '    path = "C:\\\\data\\\\{n}.txt" if os.name == "nt" else f"/tmp/{n}"\n',
        "    if count < {n} and ratio > 0.{n}:\n        return {{'key': \"v{n}\", 'ok': True}}\n",
        '    log.info("processed %s items (%d%%)", items[{n}], pct)  # comment {n}\n',
        "    pattern = re.compile(r'^\\s*(\\w+)=(.*)$')\n\n",
    ]
    parts, total = [], 0
    while total < size:
        line = rng.choice(templates).format(n=rng.randint(0, 9999))
        parts.append(line)
        total += len(line)
    return "".join(parts)


def prose_text(size: int, seed: int = 2) -> str:
    """~``size`` characters of markdown-ish prose with code fences and no tool calls."""
    rng = random.Random(seed)
    paragraphs = [
        "The weather service returns JSON; we parse it and keep the fields we need. ",
        "Note: values like <b>bold</b> or a < b > c are plain text here. ",
        "```python\nprint('fenced code stays text')\n```\n",
        "Über-long sentences with unicode — “quotes”, émojis 🚀, and numbers 12,345. ",
        "\n\n",
    ]
    parts, total = [], 0
    while total < size:
        piece = rng.choice(paragraphs)
        parts.append(piece)
        total += len(piece)
    return "".join(parts)


def call_output(fmt: ToolFormat, size: int) -> tuple[str, str]:
    """Prose + a rendered write_file call carrying ~``size`` characters of code."""
    content = code_text(size)
    record = ToolCallRecord("call_0", "write_file", json.dumps({"path": "src/big.py", "content": content}))
    return "I'll write the whole module now.\n" + fmt.render_calls([record]) + "\n", content


def stream_time(fmt: ToolFormat, text: str, chunk: int, lenient: bool = False) -> tuple[float, list[ToolCallEnd]]:
    """Seconds to feed ``text`` in ``chunk``-sized pieces and close; the calls it produced."""
    pieces = [text[i : i + chunk] for i in range(0, len(text), chunk)]
    parser = new_parser(fmt, TOOLS, 1, lenient)
    ends: list[ToolCallEnd] = []
    start = time.perf_counter()
    for piece in pieces:
        ends.extend(e for e in parser.feed(piece) if isinstance(e, ToolCallEnd))
    ends.extend(e for e in parser.close("stop") if isinstance(e, ToolCallEnd))
    return time.perf_counter() - start, ends


def bench_format(fmt: ToolFormat, size: int, scale: int, chunk: int, lenient: bool = False) -> list[str]:
    """One table row: base time (best of 3), MB/s, scaled time, ratio, MB/s with 4 KB chunks,
    prose MB/s, and a check that the call came back intact."""
    text, content = call_output(fmt, size)
    runs = [stream_time(fmt, text, chunk, lenient) for _ in range(3)]
    base = min(t for t, _ in runs)
    ends = runs[0][1]
    ok = len(ends) == 1 and json.loads(ends[0].arguments).get("content") == content
    big_text, _ = call_output(fmt, size * scale)
    big, big_ends = stream_time(fmt, big_text, chunk, lenient)
    wide = min(stream_time(fmt, text, 4096, lenient)[0] for _ in range(3))
    prose = prose_text(size)
    prose_s = min(stream_time(fmt, prose, chunk, lenient)[0] for _ in range(2))
    ok = ok and len(big_ends) == 1
    return [
        fmt.name,
        f"{len(text) / MB:.2f}",
        f"{base:.3f}",
        f"{len(text) / MB / base:.1f}",
        f"{big:.3f}",
        f"{big / base:.1f}x",
        f"{len(text) / MB / wide:.1f}",
        f"{len(prose) / MB / prose_s:.1f}",
        "ok" if ok else "WRONG",
    ]


def foreign_output(kind: str, size: int) -> tuple[str, str]:
    """Prose + one write_file call carrying ~``size`` characters of code, in a foreign syntax."""
    content = code_text(size)
    args = {"path": "src/big.py", "content": content}
    call = json.dumps({"name": "write_file", "arguments": args})
    bodies = {
        "bare json": call,
        "json fence": "```json\n" + call + "\n```",
        "<tool_call>": "<tool_call>\n" + call + "\n</tool_call>",
        "[TOOL_CALLS]": "[TOOL_CALLS]write_file[ARGS]" + json.dumps(args),
        "qwen3 xml": "<tool_call>\n<function=write_file>\n<parameter=path>\nsrc/big.py\n</parameter>\n"
        "<parameter=content>\n" + content + "\n</parameter>\n</function>\n</tool_call>",
    }
    return "I'll write the whole module now.\n" + bodies[kind] + "\n", content


FOREIGN_KINDS = ("bare json", "json fence", "<tool_call>", "[TOOL_CALLS]", "qwen3 xml")


def foreign_rows(size: int, scale: int, chunk: int) -> list[list[str]]:
    """Each foreign syntax under ``react`` with lenient recognition: time, MB/s, 10x ratio, call intact."""
    fmt, rows = FORMATS["react"], []
    for kind in FOREIGN_KINDS:
        text, content = foreign_output(kind, size)
        runs = [stream_time(fmt, text, chunk, True) for _ in range(3)]
        base, ends = min(t for t, _ in runs), runs[0][1]
        ok = len(ends) == 1 and json.loads(ends[0].arguments).get("content") == content
        big, big_ends = stream_time(fmt, foreign_output(kind, size * scale)[0], chunk, True)
        ok = ok and len(big_ends) == 1
        mbs = len(text) / MB / base
        row = [kind, f"{len(text) / MB:.2f}", f"{base:.3f}", f"{mbs:.1f}", f"{big:.3f}", f"{big / base:.1f}x"]
        rows.append([*row, "ok" if ok else "WRONG"])
    return rows


def finalize_rows(size: int) -> list[list[str]]:
    """``finalize_call`` on a ~``size`` argument: clean and with each kind of large repair."""
    index = ToolIndex(TOOLS)
    content = code_text(size)
    clean = json.dumps({"path": "src/big.py", "content": content})
    escaped = content.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    variants: dict[str, Callable[[], str]] = {
        "clean": lambda: clean,
        "code fence": lambda: "```json\n" + clean + "\n```",
        "trailing prose": lambda: clean + "\nThis writes the module.",
        "trailing comma": lambda: clean[:-1] + ",}",
        "raw newlines": lambda: '{"path": "a", "content": "' + content.replace("\\", "\\\\").replace('"', '\\"') + '"}',
        "single quotes": lambda: "{'path': 'a', 'content': '" + escaped + "'}",
        "unclosed": lambda: clean[:-1],
    }
    rows = []
    for label, build in variants.items():
        raw = build()
        start = time.perf_counter()
        outcome = finalize_call(index, "write_file", raw)
        elapsed = time.perf_counter() - start
        rows.append(
            [
                label,
                f"{len(raw) / MB:.2f}",
                f"{elapsed * 1000:.1f}",
                ",".join(outcome.repairs) or "-",
                "ok" if outcome.ok else f"ERROR {outcome.error}",
            ]
        )
    return rows


def adversarial_output_rows(scale: int) -> list[list[str]]:
    """Seconds each format takes on each pathological output, streamed in 16-character chunks."""
    rows = []
    for kind in ADVERSARIAL_OUTPUTS:
        text = adversarial_output(kind, scale)
        seconds = [stream_time(fmt, text, 16)[0] for fmt in FORMATS.values()]
        rows.append([kind, f"{len(text) / MB:.2f}", *(f"{s:.3f}" for s in seconds)])
    return rows


def adversarial_argument_rows(scale: int) -> list[list[str]]:
    """Milliseconds for ``parse_json_lenient`` plus ``finalize_call`` on each pathological argument text."""
    rows = []
    for kind in ADVERSARIAL_ARGUMENTS:
        raw = adversarial_arguments(kind, scale)
        start = time.perf_counter()
        parse_json_lenient(raw)
        outcome = finalize_call(ToolIndex(TOOLS), "search_docs", raw)
        elapsed = time.perf_counter() - start
        rows.append([kind, f"{len(raw) / MB:.2f}", f"{elapsed * 1000:.1f}", "ok" if outcome.ok else "error"])
    return rows


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=float, default=1.0, help="size of the base output (default 1)")
    parser.add_argument("--scale", type=int, default=10, help="the longer output is this many times larger")
    parser.add_argument("--chunk", type=int, default=20, help="characters per streamed chunk (default 20)")
    parser.add_argument(
        "--adversarial",
        type=int,
        default=8,
        help="scale of the pathological inputs (default 8, the largest size the tests time)",
    )
    parser.add_argument("--no-lenient", action="store_true", help="leave out the lenient recognition tables")
    args = parser.parse_args()
    size = int(args.size_mb * MB)
    print(f"Streaming in {args.chunk}-char chunks; base ~{args.size_mb} MB, long = {args.scale}x.\n")
    headers = ["format", "MB", "seconds", "MB/s", f"{args.scale}x s", "ratio", "MB/s 4K chunks", "prose MB/s", "result"]
    print_table(headers, [bench_format(fmt, size, args.scale, args.chunk) for fmt in FORMATS.values()])
    if not args.no_lenient:
        print("\nThe same with lenient recognition (the default):\n")
        print_table(headers, [bench_format(fmt, size, args.scale, args.chunk, True) for fmt in FORMATS.values()])
        print("\nA call in each foreign syntax, under react with lenient recognition:\n")
        foreign_headers = ["syntax", "MB", "seconds", "MB/s", f"{args.scale}x s", "ratio", "result"]
        print_table(foreign_headers, foreign_rows(size, args.scale, args.chunk))
    print("\nfinalize_call on a write_file argument:\n")
    print_table(["arguments", "MB", "ms", "repairs", "result"], finalize_rows(size))
    print(f"\nPathological outputs (scale {args.adversarial}), seconds per format:\n")
    print_table(["output", "MB", *FORMATS], adversarial_output_rows(args.adversarial))
    print(f"\nPathological arguments (scale {args.adversarial}), parse_json_lenient + finalize_call:\n")
    print_table(["arguments", "MB", "ms", "result"], adversarial_argument_rows(args.adversarial))


if __name__ == "__main__":
    main()
