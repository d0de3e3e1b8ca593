"""Drive a StreamParser over a text in several chunkings and summarise the events.

Used by every format's golden tests, the hypothesis chunking properties and the conformance
suite. ``summarize`` turns events into what a client would end up with; ``load_golden``,
``check_golden``, ``parse``, ``only`` and ``assert_no_leak`` are the per-format test plumbing.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from toolshim.formats._thought import set_thinking
from toolshim.formats.base import (
    Event,
    FinishReason,
    Malformed,
    Reasoning,
    SecondToolStarted,
    StreamParser,
    Text,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    ToolFormat,
    ToolSpec,
)

from tests.formats.tools import TOOLS

ParserFactory = Callable[[], StreamParser]
GOLDEN_DIR = Path(__file__).parent / "golden"
E = TypeVar("E")


def feed_chunks(factory: ParserFactory, chunks: Iterable[str], finish: FinishReason = "stop") -> list[Event]:
    parser = factory()
    events: list[Event] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    events.extend(parser.close(finish))
    return events


def merge(events: Sequence[Event]) -> list[Event]:
    """Coalesce adjacent Text, Reasoning and same-index ToolCallArgs events; drop empty ones.

    Linear: runs of pieces are gathered in lists and joined once.
    """
    out: list[Event] = []
    run: list[str] = []
    run_key: tuple[type, int] | None = None

    def flush() -> None:
        nonlocal run, run_key
        if run_key is not None:
            kind, index = run_key
            text = "".join(run)
            out.append(ToolCallArgs(index, text) if kind is ToolCallArgs else kind(text))
        run, run_key = [], None

    for ev in events:
        if isinstance(ev, Text | Reasoning | ToolCallArgs):
            piece = ev.fragment if isinstance(ev, ToolCallArgs) else ev.text
            if not piece:
                continue
            key = (type(ev), ev.index if isinstance(ev, ToolCallArgs) else -1)
            if key != run_key:
                flush()
                run_key = key
            run.append(piece)
        else:
            flush()
            out.append(ev)
    flush()
    return out


def random_splits(text: str, seed: int, max_piece: int = 12) -> list[str]:
    rng = random.Random(seed)
    pieces, pos = [], 0
    while pos < len(text):
        step = rng.randint(1, max_piece)
        pieces.append(text[pos : pos + step])
        pos += step
    return pieces


def arbitrary_splits(text: str, seed: int, max_cuts: int = 25) -> list[str]:
    """``text`` cut at up to ``max_cuts`` seeded random points anywhere (pieces of any length)."""
    rng = random.Random(seed)
    cuts = sorted({rng.randint(0, len(text)) for _ in range(rng.randint(0, max_cuts))})
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


def chunkings(text: str, seeds: Sequence[int] = (1, 2, 3, 4, 5)) -> list[list[str]]:
    """Whole, one character at a time, and seeded random splits."""
    return [[text], list(text), *(random_splits(text, s) for s in seeds)]


def summarize(events: Sequence[Event]) -> dict[str, Any]:
    """What a client ends up with: content, reasoning, completed calls, cut, malformed count."""
    content = "".join(e.text for e in events if isinstance(e, Text))
    reasoning = "".join(e.text for e in events if isinstance(e, Reasoning))
    calls = [{"name": e.name, "arguments": json.loads(e.arguments)} for e in events if isinstance(e, ToolCallEnd)]
    return {
        "content": content,
        "reasoning": reasoning,
        "calls": calls,
        "cut": any(isinstance(e, SecondToolStarted) for e in events),
        "malformed": sum(isinstance(e, Malformed) for e in events),
    }


def check_event_order(events: Sequence[Event]) -> None:
    """The event contract of proxy.formats.base: per-index Start, Args*, then End or Malformed."""
    open_index: int | None = None
    next_index = 0
    cut = False
    for ev in events:
        assert not cut, f"event after SecondToolStarted: {ev!r}"
        if isinstance(ev, ToolCallStart):
            assert open_index is None and ev.index == next_index, ev
            open_index = ev.index
        elif isinstance(ev, ToolCallArgs):
            assert ev.index == open_index, ev
        elif isinstance(ev, ToolCallEnd):
            assert ev.index == next_index and open_index in (None, ev.index), ev
            json.loads(ev.arguments)
            open_index, next_index = None, next_index + 1
        elif isinstance(ev, Malformed):
            if ev.index is not None:
                assert ev.index == open_index, ev
                open_index = None
                next_index += 1
        elif isinstance(ev, SecondToolStarted):
            assert open_index is None, "cut while a call is still open"
            cut = True


def assert_same_in_all_chunkings(factory: ParserFactory, text: str, finish: FinishReason = "stop") -> list[Event]:
    """Run every chunking, check the contract, and assert they all merge to the same events."""
    reference: list[Event] | None = None
    for chunks in chunkings(text):
        events = feed_chunks(factory, chunks, finish)
        check_event_order(events)
        merged = merge(events)
        if reference is None:
            reference = merged
        else:
            assert merged == reference, f"chunking {chunks[:5]!r}... differs"
    assert reference is not None
    return reference


# ---- per-format test plumbing -----------------------------------------------------------------


def load_golden(name: str) -> dict[str, dict[str, Any]]:
    """The golden cases of format ``name`` (``golden/<name>/*.json``), by file stem, in name order.

    A case file holds ``description``, the model ``output``, optional ``max_calls`` (1) and
    ``finish_reason`` ("stop"), the ``expect``ed ``summarize`` result, and ``shows_markup: true`` when
    its visible text legitimately contains the format's markup (a code fence, a mention, prose JSON), and
    ``thinking`` (the rule option: "off", "auto", "template") for an output that starts inside a thought.
    """
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted((GOLDEN_DIR / name).glob("*.json"))}


def golden_events(fmt: ToolFormat, case: dict[str, Any], tools: Sequence[ToolSpec] = TOOLS) -> list[Event]:
    """A golden case's output in every chunking (contract checked, all chunkings equal): the merged events."""
    max_calls, thinking = case.get("max_calls", 1), case.get("thinking", "off")
    return assert_same_in_all_chunkings(
        lambda: set_thinking(fmt.new_parser(tools, max_calls), thinking),
        case["output"],
        case.get("finish_reason", "stop"),
    )


def check_golden(fmt: ToolFormat, case: dict[str, Any], tools: Sequence[ToolSpec] = TOOLS) -> list[Event]:
    """Assert a golden case: same events in every chunking, and the summary its ``expect`` says."""
    events = golden_events(fmt, case, tools)
    assert summarize(events) == case["expect"], case["description"]
    return events


def parse(
    fmt: ToolFormat, text: str, max_calls: int = 1, finish: FinishReason = "stop", tools: Sequence[ToolSpec] = TOOLS
) -> list[Event]:
    """``text`` fed in one piece to a new parser of ``fmt``, then closed: the merged events."""
    return merge(feed_chunks(lambda: fmt.new_parser(tools, max_calls), [text], finish))


def only(events: Iterable[Event], kind: type[E]) -> list[E]:
    """The events of one type, in order."""
    return [e for e in events if isinstance(e, kind)]


def assert_no_leak(
    events: Sequence[Event], markers: Iterable[str], kinds: tuple[type, ...] = (Text, Reasoning)
) -> None:
    """No marker occurs in the visible text (the ``kinds`` events, joined)."""
    visible = "".join(e.text for e in events if isinstance(e, kinds))
    assert not any(marker in visible for marker in markers), visible
