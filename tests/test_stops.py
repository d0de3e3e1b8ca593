"""``StopMatcher``: the first stop sequence in any split, bounded hold-back, nothing after a hit."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from toolshim.chat.stops import StopMatcher

STOPS = ("\nObservation:", "<END>", "</tool_call>")


def run(stops: tuple[str, ...], parts: list[str]) -> tuple[str, str | None]:
    matcher = StopMatcher(stops)
    out = "".join(matcher.feed(p) for p in parts) + matcher.flush()
    return out, matcher.hit


def expected(stops: tuple[str, ...], text: str) -> tuple[str, str | None]:
    hits = [(text.find(s), -len(s), s) for s in stops if s and s in text]
    if not hits:
        return text, None
    pos, _, stop = min(hits)
    return text[:pos], stop


CASES = [
    "><<",  # with stops "<" and "><<" (see test_stop_inside_a_longer_one_still_completing)
    "Action: f\nAction Input: {}\nObservation: made up\nmore",
    "plain text with <EN and no stop",
    "a</tool_call>b<END>c",
    "\nObservation",
    "<END><END>",
    "",
]


def test_every_split_point_gives_the_whole_text_answer() -> None:
    for text in CASES:
        want = expected(STOPS, text)
        assert run(STOPS, [text]) == want
        assert run(STOPS, list(text)) == want
        for cut in range(len(text) + 1):
            assert run(STOPS, [text[:cut], text[cut:]]) == want
        rng = random.Random(7)
        for _ in range(20):
            cuts = sorted(rng.sample(range(len(text) + 1), min(3, len(text) + 1)))
            parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
            assert run(STOPS, parts) == want


def test_hold_back_is_bounded_and_nothing_follows_a_hit() -> None:
    matcher = StopMatcher(STOPS)
    assert matcher.feed("x" * 1000 + "\nObserv") == "x" * 1000  # only the partial stop waits
    assert matcher.feed("ation: invented") == "" and matcher.hit == "\nObservation:"
    assert matcher.feed("more") == "" and matcher.flush() == ""


def test_stop_inside_a_longer_one_still_completing() -> None:
    for text in ("><<", "><x", "><"):
        want = expected(("<", "><<"), text)
        for cut in range(len(text) + 1):
            assert run(("<", "><<"), [text[:cut], text[cut:]]) == want, (text, cut)
            assert run(("<", "><<"), list(text)) == want


def test_no_stops_passes_text_through() -> None:
    matcher = StopMatcher(["", ""])
    assert not matcher.active and matcher.feed("<END>") == "<END>" and matcher.hit is None


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.text("ab<>END/", max_size=6).filter(bool), min_size=1, max_size=3),
    st.text("ab<>END/\n", max_size=60),
    st.lists(st.integers(0, 60), max_size=6),
)
def test_property_any_split(stops: list[str], text: str, cuts: list[int]) -> None:
    points = sorted({min(c, len(text)) for c in cuts})
    parts = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    out, hit = run(tuple(stops), parts)
    want_out, want_hit = expected(tuple(stops), text)
    assert out == want_out
    assert (hit is None) == (want_hit is None)
