"""Parser work per byte, counted rather than timed: two checkouts compared on a shared machine.

``bench/parsers.py`` times the parsers; on a machine whose cores other jobs share, the same run
varies by ±40%, so "no slower per byte than before" cannot be read from it. This script counts the
Python function calls each parse makes (``cProfile``'s call count: deterministic, the same on every
run) for the same outputs as ``bench/parsers.py``: every format on prose and on a ~100 kB call,
strict and lenient, and each foreign syntax under ``react``. Each checkout's ``proxy/`` is measured in
its own process on the same outputs (this checkout's generators); the table gives this checkout's
counts over the base's (1.000: the same work).

A call count is not time (a regex's work inside C is not counted), so keep the timed table beside
it; a change of the parsing path shows up here as a ratio away from 1.

Usage: ``python bench/parser_work.py [--base DIR] [--size 100000]``; DIR is another checkout
(e.g. a ``git worktree`` of the commit to compare with); without it, only this checkout's counts.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def count_calls(feed: object, *args: object) -> int:
    """Python function calls made by ``feed(*args)``."""
    profile = cProfile.Profile()
    profile.enable()
    feed(*args)  # type: ignore[operator]
    profile.disable()
    return sum(entry[1] for entry in pstats.Stats(profile).stats.values())  # type: ignore[attr-defined]


def measure(size: int) -> dict[str, list[int]]:
    """Calls per case for the ``toolshim`` this process imports."""
    from bench import parsers

    out: dict[str, list[int]] = {}
    prose = parsers.prose_text(size)
    for name, fmt in parsers.FORMATS.items():
        call = parsers.call_output(fmt, size)[0]
        for lenient in (False, True):
            label = f"{name}{' lenient' if lenient else ''}"
            out[label] = [
                count_calls(parsers.stream_time, fmt, call, 20, lenient),
                count_calls(parsers.stream_time, fmt, prose, 20, lenient),
            ]
    for kind in parsers.FOREIGN_KINDS:
        text = parsers.foreign_output(kind, size)[0]
        out[f"foreign {kind}"] = [count_calls(parsers.stream_time, parsers.FORMATS["react"], text, 20, True), 0]
    return out


def measured_in(tree: Path, size: int) -> dict[str, list[int]]:
    """``measure`` run in a fresh process with ``tree``'s ``proxy/`` imported as ``toolshim``."""
    with tempfile.TemporaryDirectory() as shim:
        (Path(shim) / "toolshim").symlink_to(tree / "proxy")
        # one hash seed for both: set iteration order (which marker is tried first) moves counts by ~3%
        env = {**os.environ, "PYTHONPATH": f"{shim}{os.pathsep}{tree}", "PYTHONHASHSEED": "0"}
        code = f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); from bench.parser_work import measure; "
        code += f"print(json.dumps(measure({size})))"
        done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"measuring {tree} failed:\n{done.stderr[-2000:]}")
    result: dict[str, list[int]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def table(now: dict[str, list[int]], base: dict[str, list[int]] | None) -> str:
    head = f"{'case':24} {'call':>9} {'prose':>9}"
    if base is not None:
        head += f" {'base call':>10} {'base prose':>10} {'call x':>7} {'prose x':>7}"
    lines = [head]
    for case, (call, prose) in now.items():
        line = f"{case:24} {call:9d} {prose:9d}"
        if base is not None and case in base:
            base_call, base_prose = base[case]
            ratio = f"{prose / base_prose:7.3f}" if base_prose else f"{'-':>7}"
            line += f" {base_call:10d} {base_prose:10d} {call / base_call:7.3f} {ratio}"
        lines.append(line)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, help="another checkout to compare with")
    parser.add_argument("--size", type=int, default=100_000, help="characters of the call's argument and of prose")
    args = parser.parse_args()
    now = measured_in(ROOT, args.size)
    base = measured_in(args.base.resolve(), args.size) if args.base else None
    print(f"Python function calls per parse, {args.size:,}-character outputs in 20-character chunks")
    print(table(now, base))


if __name__ == "__main__":
    main()
