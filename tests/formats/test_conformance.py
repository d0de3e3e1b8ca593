"""Conformance suite run over every registered format (proxy.formats.FORMATS).

What any format must do, whatever its syntax: prompt contents, stop sequences and the ones between
calls, a render/parse round trip, plain text untouched, think blocks, fenced markers, stop-sequence,
``length`` and ``content_filter`` cut-offs, the max_calls cut, deterministic chunking, and no markup
leaking into Text on garbage or mutated input (detectors in ``LEAKS``). Each format's golden cases
(``golden/<format>/*.json``; a format without them fails) run whole, one character at a time and in
seeded random splits, and show no markup (``GOLDEN_LEAKS``). Long and adversarial outputs are parsed
in linear time, checked without wall-clock thresholds (``work.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from toolshim.formats import FORMATS, Text, ToolCallRecord, ToolChoice, ToolFormat, get_format
from toolshim.formats._thought import set_thinking
from toolshim.formats.base import Event, FinishReason, Malformed, Reasoning, ToolCallArgs, ToolCallEnd

from tests.formats.harness import (
    arbitrary_splits,
    assert_same_in_all_chunkings,
    check_event_order,
    check_golden,
    feed_chunks,
    load_golden,
    merge,
    summarize,
)
from tests.formats.tools import TOOL_NAMES, TOOLS
from tests.formats.work import ADVERSARIAL_OUTPUTS, adversarial_output, assert_linear, code_content, prose

FORMAT_NAMES = sorted(FORMATS)
LeakFinder = Callable[[str], list[str]]


def substrings(*needles: str) -> LeakFinder:
    return lambda text: [n for n in needles if n in text]


def line_prefixes(*prefixes: str, fold: bool = False) -> LeakFinder:
    """Lines that start with a prefix (``fold``: after indentation, case-insensitively)."""

    def find(text: str) -> list[str]:
        lines = text.split("\n")
        if fold:
            return [ln for ln in lines if ln.lstrip().casefold().startswith(tuple(p.casefold() for p in prefixes))]
        return [ln for ln in lines if ln.startswith(prefixes)]

    return find


# The markup each format must never let through as Text, and markers the fuzzer inserts.
LEAKS: dict[str, LeakFinder] = {
    "hermes": substrings("<tool_call", "</tool_call"),
    "xml": substrings("<tool:", "</tool:", "<param:"),
    "caret": line_prefixes("^^^"),
    "react": line_prefixes("Action:", "Action Input:", fold=True),
    "qwen3_xml": substrings("<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter="),
    "morph_xml": substrings(
        *(f"{tag}{name}{end}" for name in TOOL_NAMES for tag in ("<", "</") for end in (">", "/>"))
    ),
    "pythonic": substrings(*(f"[{name}(" for name in TOOL_NAMES)),
}
MARKERS: dict[str, list[str]] = {
    "hermes": ["<tool_call>", "</tool_call>", "<tool_call>\n", '{"name": "get_weather", "arguments": '],
    "xml": ["<tool:get_weather>", "</tool:get_weather>", "<param:city>", "</param:city>", "<tool:", "</tool:x>"],
    "caret": ["\n^^^get_weather\n", "\n^^^\n", "\n^^^", "\n---\n", "\ncity: Oslo\n"],
    "react": ["\nAction: get_weather\n", "\nAction Input: ", "\nAction:", "\nObservation:", "\nThought: "],
    "qwen3_xml": [
        "<tool_call>\n",
        "</tool_call>",
        "<function=get_weather>\n",
        "</function>",
        "<parameter=city>\n",
        "\n</parameter>\n",
        "<function=",
        "<parameter=",
    ],
    "morph_xml": ["<get_weather>", "</get_weather>", "<city>", "</city>", "<get_weather/>", "<item>", "</search_docs>"],
    "pythonic": ["[get_weather(", "\n[search_docs(", ")]", "), ", "get_weather(", "=", "'", '"""', "]\n", "(", ")"],
}
COMMON_MARKERS = ["<think>", "</think>", "\n", "{", "}", '"']

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get_weather", {"city": "São Paulo", "unit": "celsius"}),
    (
        "search_docs",
        {
            "query": "tool calling",
            "limit": 5,
            "tags": ["a", "b c", "ü"],
            "exact": True,
            "filters": {"lang": "py", "since": 2.5},
        },
    ),
    (
        "write_file",
        {"path": "src/app.py", "content": 'def f(x):\n    return "a\\\\b" + \'q\' + "{x}"\n\t# ünïcödé 🚀 <b> & \\n\n'},
    ),
    ("search_docs", {"query": 'say "hi" \\ bye', "tags": []}),
]

PLAIN_TEXTS = [
    "Hello, world!",
    "Line one.\nLine two has <b>html</b>, a < b > c, and x^2 + y^2.\n",
    "Actions speak louder than words.\nThoughtful people wait; Observations follow.",
    "日本語のテキスト 🚀 ñ — “quotes” and 'apostrophes'",
    'Numbers {1, 2} and [3] and "json-ish": {"a": 1}',
]


def records(calls: Sequence[tuple[str, dict[str, Any]]]) -> list[ToolCallRecord]:
    return [ToolCallRecord(f"call_{i}", name, json.dumps(args)) for i, (name, args) in enumerate(calls)]


def expected_calls(calls: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [{"name": name, "arguments": args} for name, args in calls]


def factory(fmt: ToolFormat, max_calls: int = 1) -> Callable[[], Any]:
    return lambda: fmt.new_parser(TOOLS, max_calls=max_calls)


def parse_whole(fmt: ToolFormat, text: str, max_calls: int, finish: FinishReason) -> list[Event]:
    return merge(feed_chunks(factory(fmt, max_calls), [text], finish))


def content_of(events: Sequence[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, Text))


@pytest.fixture(params=FORMAT_NAMES)
def fmt(request: pytest.FixtureRequest) -> ToolFormat:
    return get_format(request.param)


def test_every_format_has_leak_detectors() -> None:
    assert set(FORMATS) == set(LEAKS) == set(MARKERS) == set(GOLDEN_LEAKS)


# ---- rendering ---------------------------------------------------------------------------------


class TestRendering:
    @pytest.mark.parametrize("choice", [ToolChoice("auto"), ToolChoice("required"), ToolChoice("named", "write_file")])
    @pytest.mark.parametrize("parallel", [False, True])
    def test_render_tools_mentions_tools_and_required_params(
        self, fmt: ToolFormat, choice: ToolChoice, parallel: bool
    ) -> None:
        prompt = fmt.render_tools(TOOLS, choice, parallel)
        assert isinstance(prompt, str) and prompt.strip()
        for spec in TOOLS:
            assert spec.name in prompt
            for param in spec.parameters.get("required", []):
                assert param in prompt
        assert "required" in prompt

    def test_stop_sequences(self, fmt: ToolFormat) -> None:
        stops = fmt.stop_sequences()
        assert isinstance(stops, tuple)
        assert all(isinstance(s, str) and s for s in stops)

    @pytest.mark.parametrize("pair", ["sample", "real"])
    def test_stops_between_calls_are_the_stops_inside_two_rendered_calls(self, fmt: ToolFormat, pair: str) -> None:
        """The old derivation (proxy/rewrite.py format_stops): the stop sequences that occur in two rendered
        calls are the ones that would end generation between them."""
        sample = ToolCallRecord("call_1", "tool_name", '{"key": "value"}')
        two_calls = fmt.render_calls([sample, sample] if pair == "sample" else records(CALLS[:2]))
        assert fmt.stops_between_calls() == tuple(stop for stop in fmt.stop_sequences() if stop in two_calls)

    def test_render_result_contains_the_content(self, fmt: ToolFormat) -> None:
        rendered = fmt.render_result("get_weather", "18 °C\nsunny")
        assert isinstance(rendered, str) and "18 °C" in rendered and "sunny" in rendered


# ---- parsing -----------------------------------------------------------------------------------


class TestParsing:
    @pytest.mark.parametrize("call", CALLS, ids=[f"{n}{i}" for i, (n, _) in enumerate(CALLS)])
    def test_single_call_round_trip(self, fmt: ToolFormat, call: tuple[str, dict[str, Any]]) -> None:
        text = fmt.render_calls(records([call]))
        summary = summarize(assert_same_in_all_chunkings(factory(fmt), text))
        assert summary["calls"] == expected_calls([call])
        assert (summary["content"].strip(), summary["malformed"], summary["cut"]) == ("", 0, False)

    def test_several_calls_round_trip(self, fmt: ToolFormat) -> None:
        text = "I'll do several things.\n" + fmt.render_calls(records(CALLS))
        summary = summarize(assert_same_in_all_chunkings(factory(fmt, max_calls=len(CALLS)), text))
        assert summary["calls"] == expected_calls(CALLS)
        assert summary["content"].strip() == "I'll do several things."
        assert (summary["malformed"], summary["cut"]) == (0, False)

    def test_second_call_is_the_cut(self, fmt: ToolFormat) -> None:
        text = fmt.render_calls(records(CALLS[:2]))
        summary = summarize(assert_same_in_all_chunkings(factory(fmt, max_calls=1), text))
        assert summary["calls"] == expected_calls(CALLS[:1])
        assert summary["cut"] is True and summary["malformed"] == 0

    @pytest.mark.parametrize("text", PLAIN_TEXTS)
    def test_text_without_markers_is_unchanged(self, fmt: ToolFormat, text: str) -> None:
        summary = summarize(assert_same_in_all_chunkings(factory(fmt), text))
        assert summary == {"content": text, "reasoning": "", "calls": [], "cut": False, "malformed": 0}

    def test_empty_output(self, fmt: ToolFormat) -> None:
        assert merge(feed_chunks(factory(fmt), [])) == []
        assert merge(feed_chunks(factory(fmt), ["", ""])) == []

    def test_think_block_is_reasoning(self, fmt: ToolFormat) -> None:
        summary = summarize(assert_same_in_all_chunkings(factory(fmt), "<think>plan it</think>Hello"))
        assert (summary["reasoning"].strip(), summary["content"].strip(), summary["calls"]) == ("plan it", "Hello", [])

    def test_think_then_call(self, fmt: ToolFormat) -> None:
        text = "<think>need weather</think>\n" + fmt.render_calls(records(CALLS[:1]))
        summary = summarize(assert_same_in_all_chunkings(factory(fmt), text))
        assert summary["reasoning"].strip() == "need weather"
        assert summary["calls"] == expected_calls(CALLS[:1])

    @pytest.mark.parametrize("lang", ["", "xml", "json", "text"])
    def test_call_block_in_a_code_fence_is_a_call(self, fmt: ToolFormat, lang: str) -> None:
        """Issue 18 item 2: a fence whose first line opens a call block is markup around a call."""
        text = f"Let me check.\n```{lang}\n" + fmt.render_calls(records(CALLS[:1])) + "\n```\nDone."
        summary = summarize(assert_same_in_all_chunkings(factory(fmt), text))
        assert summary["calls"] == expected_calls(CALLS[:1])
        assert (summary["malformed"], summary["cut"]) == (0, False)
        assert "```" not in summary["content"] and summary["content"].split() == ["Let", "me", "check.", "Done."]

    def test_marker_in_a_fence_of_prose_stays_text(self, fmt: ToolFormat) -> None:
        text = "The syntax:\n```\nWrite it as\n" + fmt.render_calls(records(CALLS[:1])) + "\n```\nThat's all."
        summary = summarize(assert_same_in_all_chunkings(factory(fmt), text))
        assert summary == {"content": text, "reasoning": "", "calls": [], "cut": False, "malformed": 0}

    def test_block_cut_at_a_stop_sequence_is_completed(self, fmt: ToolFormat) -> None:
        call = CALLS[1]
        full = "Let me search.\n" + fmt.render_calls(records([call])) + "\n" + fmt.render_result(call[0], "3 hits")
        positions = [full.find(s) for s in fmt.stop_sequences() if s in full]
        assert positions, "no stop sequence occurs after a rendered call"
        for pos in positions:
            summary = summarize(assert_same_in_all_chunkings(factory(fmt), full[:pos], "stop"))
            assert summary["calls"] == expected_calls([call]), full[:pos]
            assert summary["malformed"] == 0

    @pytest.mark.parametrize("finish", ["length", "content_filter"])
    def test_truncated_mid_block_is_malformed(self, fmt: ToolFormat, finish: FinishReason) -> None:
        """The truncation rule (proxy.formats._calls): a block the upstream cut off is never a complete call."""
        text = "Checking.\n" + fmt.render_calls(records(CALLS[:1]))
        cut = text[: text.index("São") + 2]
        events = assert_same_in_all_chunkings(factory(fmt), cut, finish)
        summary = summarize(events)
        assert summary["calls"] == [] and summary["malformed"] == 1
        assert summary["content"].strip() == "Checking."
        assert not LEAKS[fmt.name](summary["content"])
        bad = next(e for e in events if isinstance(e, Malformed))
        assert bad.index == 0 and bad.reason == f"tool block truncated (finish_reason={finish})"

    def test_content_filter_cut_is_a_length_cut(self, fmt: ToolFormat) -> None:
        """One truncation rule for both cut-off reasons, wherever the output is cut."""

        def cut(text: str, finish: FinishReason) -> list[Event]:  # the reason names its finish_reason
            events = parse_whole(fmt, text, 2, finish)
            return [
                replace(e, reason=e.reason.replace(str(finish), "CUT")) if isinstance(e, Malformed) else e
                for e in events
            ]

        text = "Checking.\n" + fmt.render_calls(records(CALLS[:2])) + "\nDone."
        for end in range(len(text) + 1):
            assert cut(text[:end], "content_filter") == cut(text[:end], "length"), text[:end]


# ---- properties: chunking, garbage, mutations ------------------------------------------------------

PROSE = st.sampled_from(["", "Sure.\n", "Let me check that for you.\n", "Done! ✓\n", "x < y > z\n"])


def chunk(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


def check_robust(fmt: ToolFormat, text: str, cuts: list[int], max_calls: int, finish: Any) -> None:
    """Never raises, obeys the event contract, splits do not matter, no markup reaches Text."""
    whole = feed_chunks(factory(fmt, max_calls), [text], finish)
    pieces = feed_chunks(factory(fmt, max_calls), chunk(text, cuts), finish)
    check_event_order(whole)
    check_event_order(pieces)
    assert merge(pieces) == merge(whole)
    if "`" not in text:  # fences and inline code legitimately keep markers as text
        assert not LEAKS[fmt.name](content_of(whole)), content_of(whole)


@pytest.mark.parametrize("name", FORMAT_NAMES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_splits_give_the_same_events(name: str, data: st.DataObject) -> None:
    fmt = get_format(name)
    calls = data.draw(st.lists(st.sampled_from(CALLS), min_size=1, max_size=3))
    text = data.draw(PROSE) + fmt.render_calls(records(calls)) + "\n" + data.draw(PROSE)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=40))
    max_calls = data.draw(st.integers(1, 3))
    reference = merge(feed_chunks(factory(fmt, max_calls), [text]))
    events = feed_chunks(factory(fmt, max_calls), chunk(text, cuts))
    check_event_order(events)
    assert merge(events) == reference


@pytest.mark.parametrize("name", FORMAT_NAMES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw=st.binary(max_size=400),
    cuts=st.lists(st.integers(0, 400), max_size=20),
    finish=st.sampled_from(["stop", "length"]),
)
def test_random_bytes_never_break_the_parser(name: str, raw: bytes, cuts: list[int], finish: str) -> None:
    check_robust(get_format(name), raw.decode("utf-8", errors="replace"), cuts, 1, finish)


MUTATION = st.tuples(
    st.sampled_from(["delete", "duplicate", "truncate", "insert"]),
    st.integers(0, 10_000),
    st.integers(1, 40),
    st.integers(0, 100),
)


def mutate(text: str, ops: list[tuple[str, int, int, int]], markers: list[str]) -> str:
    for op, pos, size, pick in ops:
        pos %= len(text) + 1
        if op == "delete":
            text = text[:pos] + text[pos + size :]
        elif op == "duplicate":
            text = text[: pos + size] + text[pos : pos + size] + text[pos + size :]
        elif op == "truncate":
            text = text[:pos]
        else:
            text = text[:pos] + markers[pick % len(markers)] + text[pos:]
    return text


@pytest.mark.parametrize("name", FORMAT_NAMES)
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_calls_never_leak_markup(name: str, data: st.DataObject) -> None:
    fmt = get_format(name)
    calls = data.draw(st.lists(st.sampled_from(CALLS), min_size=1, max_size=2))
    base = data.draw(PROSE) + fmt.render_calls(records(calls)) + "\n" + data.draw(PROSE)
    text = mutate(base, data.draw(st.lists(MUTATION, min_size=1, max_size=4)), MARKERS[name] + COMMON_MARKERS)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=20))
    check_robust(fmt, text, cuts, data.draw(st.integers(1, 2)), data.draw(st.sampled_from(["stop", "length"])))


# ---- golden cases: tests/formats/golden/<format>/*.json, every registered format ------------------------

GOLDEN = {name: load_golden(name) for name in FORMAT_NAMES}
GOLDEN_CASES = [(name, case) for name in FORMAT_NAMES for case in GOLDEN[name]]
# Cases every format's golden set has, each format's own required cases, and its minimum size.
GOLDEN_CORE = {
    "text_only",
    "tool_only",
    "text_then_tool",
    "two_tools_cut",
    "unicode",
    "unknown_tool",
    "near_miss_name",
    "repairable_json",
    "length_mid_block",
}
GOLDEN_REQUIRED: dict[str, set[str]] = {
    "caret": {
        "two_tools_max2",
        "multiline_diff",
        "code_quotes_backslashes",
        "arrays",
        "nested_objects",
        "unrepairable",
        "stop_cut_header",
        "stop_cut_body",
        "think",
        "marker_in_fence",
    },
}
GOLDEN_MINIMUM = {"hermes": 40, "xml": 30}
SPLIT_SEEDS = range(60)


def caret_markup_lines(text: str) -> list[str]:
    lines = [line.rstrip("\r") for line in text.split("\n")]
    return [line for line in lines if line in ("^^^", "---") or line.startswith("^^^get")]


# What no golden output may show, and in which events (unless the case says "shows_markup").
GOLDEN_LEAKS: dict[str, tuple[LeakFinder, tuple[type[Text] | type[Reasoning], ...]]] = {
    "hermes": (
        substrings("<tool_call>", "</tool_call>", "<think>", "</think>", "<tool_response>", '"arguments"'),
        (Text,),
    ),
    "xml": (substrings("<tool:", "</tool:", "<param:", "</param:", "<think>", "</think>", "<tool_result"), (Text,)),
    "caret": (caret_markup_lines, (Text,)),
    "qwen3_xml": (
        substrings("<tool_call", "</tool_call", "<function=", "</function", "<parameter=", "</parameter", "<think>"),
        (Text,),
    ),
    "morph_xml": (
        substrings(*(f"{tag}{name}" for name in TOOL_NAMES for tag in ("<", "</")), "<think>", "</think>"),
        (Text,),
    ),
    "react": (
        substrings("Thought:", "Action:", "Action Input:", "Final Answer:", "Observation:", "<think>", "</think>"),
        (Text, Reasoning),
    ),
    "pythonic": (substrings(*(f"[{name}(" for name in TOOL_NAMES), "<think>", "</think>", "<tool_response"), (Text,)),
}


def test_golden_set_is_complete(fmt: ToolFormat) -> None:
    """A format without golden files (or with too few) fails here."""
    cases = GOLDEN[fmt.name]
    assert len(cases) >= GOLDEN_MINIMUM.get(fmt.name, 20), f"golden/{fmt.name}/ has {len(cases)} cases"
    assert GOLDEN_CORE | GOLDEN_REQUIRED.get(fmt.name, set()) <= cases.keys()


@pytest.mark.parametrize(("name", "case"), GOLDEN_CASES, ids=[f"{n}/{c}" for n, c in GOLDEN_CASES])
def test_golden(name: str, case: str) -> None:
    """Whole, one character at a time and in seeded random splits: the events the case expects."""
    check_golden(get_format(name), GOLDEN[name][case])


@pytest.mark.parametrize(("name", "case"), GOLDEN_CASES, ids=[f"{n}/{c}" for n, c in GOLDEN_CASES])
def test_golden_arbitrary_splits_match_whole(name: str, case: str) -> None:
    """Cut at up to 25 points anywhere (60 seeded cut sets): the same events as the whole output."""
    fmt, spec = get_format(name), GOLDEN[name][case]
    text, max_calls, finish = spec["output"], spec.get("max_calls", 1), spec.get("finish_reason", "stop")
    whole = merge(feed_chunks(factory(fmt, max_calls), [text], finish))
    for seed in SPLIT_SEEDS:
        pieces = arbitrary_splits(text, seed)
        events = feed_chunks(factory(fmt, max_calls), pieces, finish)
        check_event_order(events)
        assert merge(events) == whole, pieces


@pytest.mark.parametrize(("name", "case"), GOLDEN_CASES, ids=[f"{n}/{c}" for n, c in GOLDEN_CASES])
def test_golden_never_shows_markup(name: str, case: str) -> None:
    spec = GOLDEN[name][case]
    if spec.get("shows_markup"):
        pytest.skip("the case's visible text contains markup on purpose")
    find, kinds = GOLDEN_LEAKS[name]
    parser = set_thinking(get_format(name).new_parser(TOOLS, spec.get("max_calls", 1)), spec.get("thinking", "off"))
    events = merge(feed_chunks(lambda: parser, [spec["output"]], spec.get("finish_reason", "stop")))
    visible = "".join(e.text for e in events if isinstance(e, kinds))
    assert not find(visible), visible


# ---- linear time: no wall-clock thresholds (tests/formats/work.py); figures: bench/parsers.py -----------


def chunked(fmt: ToolFormat, text: str, size: int) -> list[Event]:
    return feed_chunks(factory(fmt), [text[i : i + size] for i in range(0, len(text), size)])


def long_call(fmt: ToolFormat, scale: int) -> tuple[str, str]:
    """A write_file call with long, hard content, as the format writes it: ``(content, output)``."""
    content = code_content(200 * scale)
    record = ToolCallRecord("call_0", "write_file", json.dumps({"path": "big.py", "content": content}))
    return content, "I'll write the module.\n" + fmt.render_calls([record])


@pytest.mark.parametrize(("size", "scale"), [(7, 4), (4096, 256)])  # ~70 KB in tiny chunks, ~4.5 MB in big ones
def test_long_call_streams_intact(fmt: ToolFormat, size: int, scale: int) -> None:
    content, text = long_call(fmt, scale)
    events = chunked(fmt, text, size)
    check_event_order(events)
    (end,) = [e for e in events if isinstance(e, ToolCallEnd)]
    assert json.loads(end.arguments) == {"path": "big.py", "content": content}
    fragments = "".join(e.fragment for e in events if isinstance(e, ToolCallArgs))
    if fragments:  # JSON formats stream the arguments object exactly as written
        assert fragments in text and json.loads(fragments) == json.loads(end.arguments)


def test_long_call_is_linear(fmt: ToolFormat) -> None:
    assert_linear(lambda k: long_call(fmt, k)[1], lambda text: chunked(fmt, text, 7))


@pytest.mark.parametrize(("size", "lines"), [(7, 400), (4096, 60_000)])  # ~50 KB in tiny chunks, ~7 MB in big ones
def test_long_prose_is_unchanged(fmt: ToolFormat, size: int, lines: int) -> None:
    text = prose(lines)
    assert merge(chunked(fmt, text, size)) == [Text(text)]


def test_long_prose_is_linear(fmt: ToolFormat) -> None:
    assert_linear(lambda k: prose(100 * k), lambda text: chunked(fmt, text, 7))


@pytest.mark.parametrize("kind", sorted(ADVERSARIAL_OUTPUTS))
def test_adversarial_output_is_linear(fmt: ToolFormat, kind: str) -> None:
    assert_linear(lambda k: adversarial_output(kind, k), lambda text: chunked(fmt, text, 16))


@pytest.mark.parametrize(
    "text",
    [
        "functions.get_weather(city='Paris')\n",  # a namespace models write: a call, in any pieces
        "default_api.get_weather(city='Paris')\n",
        "Sure.get_weather(city='Paris')\n",  # prose run into a call (a lost line break): text, in any pieces
        "GetWeather(city='Paris')\n",
    ],
)
def test_a_bare_call_under_a_namespace_reads_the_same_in_any_pieces(text: str) -> None:
    """A bare pythonic call's name is held while it may still become a tool's; read whole, a name the hold-back
    would have let go as text is no bare call either (found by the mutation test: ``Sure.get_weather(``)."""
    fmt = get_format("pythonic")
    for cut in range(1, len(text)):
        check_robust(fmt, text, [cut], 1, "stop")
