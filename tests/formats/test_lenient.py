"""Lenient recognition (proxy/formats/lenient.py): foreign call syntaxes under every prompted format.

Golden cases (``golden/lenient/*.json``, one per foreign syntax or prose-safety rule) run under every
registered format, whole, one character at a time, in seeded random splits and at arbitrary cut points;
every format's own golden cases give the same result with lenient recognition on; prose without an
offered tool's name gives exactly the wrapped parser's events (hypothesis); call indexes and the cut are
shared with the wrapped parser; the work stays linear.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from toolshim.formats import FORMATS, ToolCallRecord, get_format
from toolshim.formats._thought import set_thinking
from toolshim.formats.base import FinishReason, Malformed, StreamParser, Text, ToolCallEnd, ToolCallStart
from toolshim.formats.lenient import BLOCK_CAP, HOLD_CAP, LenientParser, new_parser

from tests.formats.harness import (
    arbitrary_splits,
    assert_same_in_all_chunkings,
    check_event_order,
    feed_chunks,
    load_golden,
    merge,
    summarize,
)
from tests.formats.tools import TOOLS
from tests.formats.work import (
    ADVERSARIAL_OUTPUTS,
    WORST_OUTPUTS,
    adversarial_output,
    assert_linear,
    prose,
    worst_output,
)

FORMAT_NAMES = sorted(FORMATS)
LENIENT = load_golden("lenient")
CASES = [(fmt, stem) for stem in LENIENT for fmt in FORMAT_NAMES]
CLEAN_CASES = [(fmt, stem) for fmt, stem in CASES if not LENIENT[stem].get("shows_markup")]  # markup on purpose
OWN_CASES = [(fmt, stem) for fmt in FORMAT_NAMES for stem in load_golden(fmt)]
# What a lenient golden output may not show as content (unless the case says "shows_markup").
FOREIGN_MARKUP = ('"arguments"', '"parameters"', "[TOOL_CALLS]", "[ARGS]", "<function=", "```", "<|python_tag|>")
FOREIGN_TAGS = ("tool_call", "tool_calls", "function_call", "tools", "tool", "json", "response")


def lenient(fmt: str, max_calls: int = 1) -> StreamParser:
    return new_parser(get_format(fmt), TOOLS, max_calls)


def run(fmt: str, text: str, max_calls: int = 1, finish: FinishReason = "stop", chunks: list[str] | None = None) -> Any:
    events = feed_chunks(lambda: lenient(fmt, max_calls), chunks if chunks is not None else [text], finish)
    check_event_order(events)
    return merge(events)


def expected(fmt: str, case: dict[str, Any]) -> dict[str, Any]:
    """The case's ``expect``, or its ``expect_by_format`` entry where the prompted format reads the
    output its own way (its own syntax opened like the foreign one, or its own prose rules)."""
    return dict(case.get("expect_by_format", {}).get(fmt, case["expect"]))


# ---- golden cases ------------------------------------------------------------------------------------------


def test_every_foreign_syntax_has_golden_cases() -> None:
    wanted = {
        "bare_object",
        "bare_after_prose",
        "bare_parameters",
        "bare_arguments_string",
        "bare_list",
        "bare_semicolons",
        "bare_multiline_objects",
        "json_fence",
        "tool_call_tag",
        "function_call_tag",
        "tools_tag_list",
        "tool_tag",
        "json_tag",
        "response_tag_call",
        "mistral_list",
        "mistral_args",
        "function_tag",
        "openai_tool_calls",
        "prose_json",
        "unknown_tool",
        "fence_other_json",
        "qwen3_wrapped",
        "qwen3_bare_two",
        "morph_call",
        "morph_mention",
    }
    assert wanted <= LENIENT.keys()


@pytest.mark.parametrize(("fmt", "stem"), CASES, ids=[f"{f}/{s}" for f, s in CASES])
def test_golden(fmt: str, stem: str) -> None:
    """Whole, one character at a time and in seeded random splits: the events the case expects."""
    case = LENIENT[stem]
    events = assert_same_in_all_chunkings(
        lambda: lenient(fmt, case.get("max_calls", 1)), case["output"], case.get("finish_reason", "stop")
    )
    assert summarize(events) == expected(fmt, case), case["description"]


@pytest.mark.parametrize(("fmt", "stem"), CASES, ids=[f"{f}/{s}" for f, s in CASES])
def test_golden_arbitrary_splits_match_whole(fmt: str, stem: str) -> None:
    case = LENIENT[stem]
    text, max_calls, finish = case["output"], case.get("max_calls", 1), case.get("finish_reason", "stop")
    whole = run(fmt, text, max_calls, finish)
    for seed in range(20):
        pieces = arbitrary_splits(text, seed)
        assert run(fmt, text, max_calls, finish, pieces) == whole, pieces


@pytest.mark.parametrize(("fmt", "stem"), CLEAN_CASES, ids=[f"{f}/{s}" for f, s in CLEAN_CASES])
def test_golden_never_shows_foreign_markup(fmt: str, stem: str) -> None:
    case = LENIENT[stem]
    events = run(fmt, case["output"], case.get("max_calls", 1), case.get("finish_reason", "stop"))
    content = "".join(e.text for e in events if isinstance(e, Text))
    tags = [f"<{t}>" for t in FOREIGN_TAGS] + [f"</{t}>" for t in FOREIGN_TAGS]
    assert not [m for m in (*FOREIGN_MARKUP, *tags) if m in content], content


@pytest.mark.parametrize(("fmt", "stem"), OWN_CASES, ids=[f"{f}/{s}" for f, s in OWN_CASES])
def test_own_golden_cases_unchanged(fmt: str, stem: str) -> None:
    """Lenient recognition changes nothing a format's own golden cases expect (whole and split), but for the line
    break before an invented tool result that ends the turn: recognition sits inside the format's guard and
    holds the break before a result tag (``<tool_response>``) with the tag, so it goes with the rest of the cut.
    A tag it does not hold, a word (``Observation:``), keeps the break in the content, as without lenient."""
    case = load_golden(fmt)[stem]
    thinking = case.get("thinking", "off")
    events = assert_same_in_all_chunkings(
        lambda: set_thinking(lenient(fmt, case.get("max_calls", 1)), thinking),
        case["output"],
        case.get("finish_reason", "stop"),
    )
    got, want = summarize(events), dict(case["expect"])
    if stem.startswith("invented_result") and got["calls"]:  # the break before a result tag may go with the cut
        got["content"], want["content"] = got["content"].rstrip("\n"), want["content"].rstrip("\n")
    assert got == want, case["description"]


def test_off_is_the_format_parser() -> None:
    fmt = get_format("react")
    assert not isinstance(new_parser(fmt, TOOLS, 1, lenient=False), LenientParser)
    text = LENIENT["tool_call_tag"]["output"]
    events = merge(feed_chunks(lambda: new_parser(fmt, TOOLS, 1, lenient=False), [text]))
    assert summarize(events)["calls"] == [] and summarize(events)["content"] == text


# ---- properties ----------------------------------------------------------------------------------------------

# Fragments of every foreign syntax, but only names of tools that are not offered.
NOISE = [
    "{",
    "}",
    "[",
    "]",
    '"name"',
    ": ",
    ", ",
    "; ",
    '"get_stock"',
    '"arguments"',
    '"parameters"',
    '"tool_calls"',
    '"function"',
    "{}",
    "```",
    "```json\n",
    "<tools>",
    "</tools>",
    "<response>",
    "<tool>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "get_stock",
    "<function=get_stock>",
    "</function>",
    "<|python_tag|>",
    "`",
    "\n",
    " ",
    "prose",
    '"',
    "\\",
]


MADE_UP_CALL = re.compile(r'<function=get_stock>\s*(?:[{\[]|</function>)|"name"\s*:\s*"get_stock"')


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.sampled_from(NOISE), max_size=40), data=st.data())
def test_prose_without_offered_names_is_untouched(fmt: str, parts: list[str], data: st.DataObject) -> None:
    """Without an offered tool's name, lenient events are exactly the format parser's, in any split
    (unless the noise spells a call to the made-up tool: that is malformed, see ``unknown_tool``)."""
    text = "".join(parts)
    assume(MADE_UP_CALL.search(text) is None)
    plain = merge(feed_chunks(lambda: get_format(fmt).new_parser(TOOLS, 2), [text]))
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=12))
    pieces = [text[a:b] for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(text)], strict=True)]
    assert run(fmt, text, 2, chunks=pieces) == plain


CALL_PIECES = [
    *NOISE,
    '{"name": "get_weather", "arguments": {"city": "Oslo"}}',
    "<tool_call>",
    "[TOOL_CALLS]get_weather",
]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.sampled_from(CALL_PIECES), max_size=30), data=st.data())
def test_any_split_gives_the_same_events(fmt: str, parts: list[str], data: st.DataObject) -> None:
    text = "".join(parts)
    finish = data.draw(st.sampled_from(["stop", "length"]))
    whole = run(fmt, text, 3, finish)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=15)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    assert run(fmt, text, 3, finish, pieces) == whole


# ---- shared call slots -----------------------------------------------------------------------------------------

FOREIGN = '\n{"name": "get_weather", "arguments": {"city": "Bern"}}\n'


def own_call(fmt: str, city: str) -> str:
    return get_format(fmt).render_calls([ToolCallRecord("c", "get_weather", json.dumps({"city": city}))])


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_indexes_are_shared_with_the_format_parser(fmt: str) -> None:
    text = own_call(fmt, "Oslo") + FOREIGN + own_call(fmt, "Rome") + "\n"
    events = assert_same_in_all_chunkings(lambda: lenient(fmt, 3), text)
    starts = [(e.index, e.name) for e in events if isinstance(e, ToolCallStart)]
    assert starts == [(0, "get_weather"), (1, "get_weather"), (2, "get_weather")]
    cities = [json.loads(e.arguments)["city"] for e in events if isinstance(e, ToolCallEnd)]
    assert cities == ["Oslo", "Bern", "Rome"]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_the_cut_counts_calls_of_both(fmt: str) -> None:
    foreign_first = assert_same_in_all_chunkings(lambda: lenient(fmt, 1), FOREIGN + own_call(fmt, "Rome"))
    own_first = assert_same_in_all_chunkings(lambda: lenient(fmt, 1), own_call(fmt, "Rome") + FOREIGN)
    for events in (foreign_first, own_first):
        summary = summarize(events)
        assert len(summary["calls"]) == 1 and summary["cut"], events


def test_foreign_calls_name_their_syntax() -> None:
    ends = [e for e in run("react", LENIENT["mistral_args"]["output"]) if isinstance(e, ToolCallEnd)]
    assert ends[0].repairs == ("foreign_mistral",)


def test_wrapped_call_cut_by_length_is_malformed() -> None:
    events = run("react", '<tool_call>{"name": "get_weather", "arguments": {"city": "Pa', finish="length")
    assert [type(e) for e in events] == [Malformed]


def test_hold_back_is_bounded() -> None:
    """An undecided value is released as text once it passes HOLD_CAP characters, in any chunking."""
    head = '{"arguments": {"text": "' + "x" * (HOLD_CAP + 10)
    parser = lenient("xml")
    shown = "".join(e.text for e in parser.feed(head) if isinstance(e, Text))
    assert shown.startswith('{"arguments"') and len(head) - len(shown) <= HOLD_CAP
    assert BLOCK_CAP >= 1 << 20


# ---- linear time -------------------------------------------------------------------------------------------------

LENIENT_ADVERSARIAL = {
    "name_heads": '{"name": ',
    "open_lists": "[ ",
    "mistral_prefixes": "[TOOL_CALL",
    "function_prefixes": "<function=get_weather",
    "call_mentions": 'x {"name": "get_weather", "arguments": {}} y\n',
    "fence_heads": "```json\n{",
    "qwen3_heads": "<tool_call>\n<function=get_weather>\n<parameter=city>\n",
    "morph_heads": "<get_weather><city>",
}


def chunked(fmt: str, text: str, size: int) -> None:
    parser = lenient(fmt, 2)
    for i in range(0, len(text), size):
        parser.feed(text[i : i + size])
    parser.close("stop")


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_long_foreign_call_is_linear(fmt: str) -> None:
    def make(k: int) -> str:
        content = 'line with "quotes" and {braces} and <b>\\n\n' * (300 * k)
        return "Sure. " + json.dumps({"name": "write_file", "arguments": {"path": "a.py", "content": content}})

    assert_linear(make, lambda text: chunked(fmt, text, 7))


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_long_prose_is_linear(fmt: str) -> None:
    assert_linear(lambda k: prose(100 * k), lambda text: chunked(fmt, text, 7))


@pytest.mark.parametrize("kind", sorted(ADVERSARIAL_OUTPUTS))
def test_adversarial_output_is_linear(kind: str) -> None:
    assert_linear(lambda k: adversarial_output(kind, k), lambda text: chunked("react", text, 16))


@pytest.mark.parametrize("kind", sorted(LENIENT_ADVERSARIAL))
@pytest.mark.parametrize("fmt", ["hermes", "react"])
def test_lenient_adversarial_output_is_linear(fmt: str, kind: str) -> None:
    unit = LENIENT_ADVERSARIAL[kind]
    assert_linear(lambda k: unit * (20_000 // len(unit)) * k, lambda text: chunked(fmt, text, 16))


@pytest.mark.parametrize("kind", sorted(WORST_OUTPUTS))
def test_worst_output_is_linear(kind: str) -> None:
    """Malformed and never-closed calls, under the format they aim at with lenient recognition (as served):
    the work stays linear (``bench/parser_worst.py`` prints what it costs)."""
    fmt = WORST_OUTPUTS[kind][0].replace("any", "react")
    # a bare object is held up to HOLD_CAP and cheaply; past it the text costs more per character, so the
    # sizes start well past it
    size = 8 * HOLD_CAP if kind == "bare_unclosed_string" else 8_000
    assert_linear(lambda k: worst_output(kind, size * k), lambda text: chunked(fmt, text, 16))
