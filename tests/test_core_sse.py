"""The sans-IO SSE decoder and encoder: line endings, multi-line data, comments, splits anywhere.

Every stream is checked whole, one character at a time and split at every position, because
upstreams cut their writes at arbitrary byte offsets (the decoder sees decoded text).
"""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolshim.wire.sse import DONE, DONE_BYTES, EventTooLarge, PayloadReader, SSEDecoder, SSEEvent, encode, encode_json


def decode_pieces(pieces: list[str]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for piece in pieces:
        events += decoder.decode(piece)
    return events + decoder.flush()


def every_split(text: str) -> list[list[str]]:
    """The text whole, one character at a time, and cut in two (and three) at every position."""
    splits = [[text], list(text)]
    splits += [[text[:i], text[i:]] for i in range(len(text) + 1)]
    splits += [[text[:i], text[i:j], text[j:]] for i in range(len(text) + 1) for j in range(i, len(text) + 1)]
    return splits


NOT_BREAKS = "a\u2028b\u2029c\x85d\x0be\x0cf\x1cg"  # str.splitlines() splits on all of these; SSE must not
CASES: list[tuple[str, str, list[SSEEvent]]] = [
    ("lf", "data: a\n\ndata: b\n\n", [SSEEvent("a"), SSEEvent("b")]),
    ("crlf", "data: a\r\n\r\ndata: b\r\n\r\n", [SSEEvent("a"), SSEEvent("b")]),
    ("cr", "data: a\r\rdata: b\r\r", [SSEEvent("a"), SSEEvent("b")]),
    ("mixed endings", "data: a\r\n\ndata: b\r\rdata: c\n\r\n", [SSEEvent("a"), SSEEvent("b"), SSEEvent("c")]),
    ("multi-line data", "data: one\ndata: two\r\ndata:three\n\n", [SSEEvent("one\ntwo\nthree")]),
    ("comments", ": keep-alive\n\n: x\ndata: a\n: y\n\n", [SSEEvent("a")]),
    ("event field", "event: error\ndata: {}\n\ndata: z\n\n", [SSEEvent("{}", "error"), SSEEvent("z")]),
    (
        "llama.cpp error field",
        'data: {"a":1}\n\nerror: {"code":500,"message":"boom"}\n\n',
        [SSEEvent('{"a":1}'), SSEEvent('{"code":500,"message":"boom"}', "error")],
    ),
    ("no space after colon", "data:x\n\n", [SSEEvent("x")]),
    ("only the first space stripped", "data:  x \n\n", [SSEEvent(" x ")]),
    ("field without colon", "data\n\n", [SSEEvent("")]),
    ("unknown fields ignored", "id: 7\nretry: 10\nfoo: bar\ndata: a\n\n", [SSEEvent("a")]),
    ("blank lines alone dispatch nothing", "\n\n\r\n\r\r", []),
    ("done", 'data: {"a":1}\n\ndata: [DONE]\n\n', [SSEEvent('{"a":1}'), SSEEvent(DONE)]),
    ("u2028 is not a line break", f"data: {NOT_BREAKS}\n\n", [SSEEvent(NOT_BREAKS)]),
    ("unterminated event flushed", "data: a\n\ndata: last", [SSEEvent("a"), SSEEvent("last")]),
    ("unterminated after line end", "data: a\ndata: b\n", [SSEEvent("a\nb")]),
    ("unterminated after cr", "data: last\r", [SSEEvent("last")]),
    ("colon inside value", 'data: {"k": "v:w"}\n\n', [SSEEvent('{"k": "v:w"}')]),
    ("unicode", "data: héllo ✓ 😀\n\n", [SSEEvent("héllo ✓ 😀")]),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decoder_every_split_point(text: str, expected: list[SSEEvent]) -> None:
    for pieces in every_split(text):
        assert decode_pieces(pieces) == expected, pieces


def test_decoder_empty_chunks_change_nothing() -> None:
    assert decode_pieces(["", "data: a\r", "", "\n", "", "\n", ""]) == [SSEEvent("a")]


def test_cr_then_lf_in_later_chunk_is_one_line_end() -> None:
    """A CR at a chunk end is a line end at once; the LF that opens the next chunk is its partner."""
    decoder = SSEDecoder()
    assert decoder.decode("data: a\r") == []
    assert decoder.decode("\n") == []  # the CRLF partner, not a blank line
    assert decoder.decode("\n") == [SSEEvent("a")]
    assert decoder.flush() == []


def test_flush_resets_for_a_new_stream() -> None:
    decoder = SSEDecoder()
    assert decoder.decode("data: a") == []
    assert decoder.flush() == [SSEEvent("a")]
    assert decoder.flush() == []
    assert decoder.decode("data: b\n\n") == [SSEEvent("b")]


def test_long_line_in_small_pieces_is_kept_whole() -> None:
    payload = json.dumps({"arguments": "x" * 300_000})
    text = f"data: {payload}\n\n"
    pieces = [text[i : i + 1000] for i in range(0, len(text), 1000)]
    assert decode_pieces(pieces) == [SSEEvent(payload)]


def test_encode_single_and_multi_line() -> None:
    assert encode('{"a":1}') == b'data: {"a":1}\n\n'
    assert encode("a\nb\r\nc\rd") == b"data: a\ndata: b\ndata: c\ndata: d\n\n"
    assert encode("a\u2028b") == "data: a\u2028b\n\n".encode()
    assert DONE_BYTES == b"data: [DONE]\n\n"
    assert encode_json({"x": "é"}) == 'data: {"x":"é"}\n\n'.encode()


# --- properties -------------------------------------------------------------------------------

_payload_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
_line_end = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def streams(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A stream of events (with comments and random line endings) and the payloads it carries."""
    payloads = draw(st.lists(_payload_text.filter(lambda s: s != ""), max_size=6))
    out: list[str] = []
    for payload in payloads:
        end = draw(_line_end)  # one per event: "\r" then a blank "\n" would be a single CRLF
        if draw(st.booleans()):
            out.append(":" + draw(st.text(alphabet="abc :", max_size=5)) + end)
        for line in payload.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
            out.append("data: " + line + end)
        out.append(end)
    expected = [p.replace("\r\n", "\n").replace("\r", "\n") for p in payloads]
    return "".join(out), expected


@settings(max_examples=300, deadline=None)
@given(stream=streams(), cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8))
def test_random_splits_decode_like_whole(stream: tuple[str, list[str]], cuts: list[int]) -> None:
    text, expected = stream
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    assert [e.data for e in decode_pieces(pieces)] == expected


@settings(max_examples=200, deadline=None)
@given(payload=_payload_text)
def test_encode_then_decode_round_trips(payload: str) -> None:
    expected = payload.replace("\r\n", "\n").replace("\r", "\n")
    events = decode_pieces([encode(payload).decode()])
    assert [e.data for e in events] == ([expected] if payload else [""])


# ---- max_event_size: memory stays bounded whatever the upstream sends --------------------------------


def decode_capped(pieces: list[str], limit: int) -> list[SSEEvent]:
    decoder = SSEDecoder(max_event_size=limit)
    events: list[SSEEvent] = []
    for piece in pieces:
        events += decoder.decode(piece)
    return events + decoder.flush()


@pytest.mark.parametrize(
    "text",
    [
        "data: " + "x" * 50 + "\n\n",  # one data line over the limit
        "data: " + "x" * 20 + "\ndata: " + "y" * 20 + "\n\ndata: z\n\n",  # two lines, together over
        "data: " + "x" * 50,  # unterminated, never flushed as an event
        ": " + "c" * 50 + "\n\ndata: a\n\n",  # a comment line counts too while it is being read
    ],
    ids=["one-line", "two-lines", "unterminated", "comment"],
)
def test_event_over_the_limit_raises_at_every_split(text: str) -> None:
    for pieces in every_split(text):
        with pytest.raises(EventTooLarge):
            decode_capped(pieces, 32)


def test_events_up_to_the_limit_decode_as_without_one() -> None:
    text = "data: " + "x" * 32 + "\n\ndata: " + "y" * 15 + "\ndata: " + "z" * 15 + "\n\n: ok\ndata: a\n\n"
    expected = [SSEEvent("x" * 32), SSEEvent("y" * 15 + "\n" + "z" * 15), SSEEvent("a")]
    for pieces in every_split(text):
        assert decode_capped(pieces, 38) == expected, pieces


def test_too_large_drops_what_it_held_and_stays_failed() -> None:
    decoder = SSEDecoder(max_event_size=1000)
    assert decoder.decode("data: a\n\ndata: " + "x" * 600) == [SSEEvent("a")]
    with pytest.raises(EventTooLarge) as caught:
        decoder.decode("x" * 600)  # the unterminated line passes the limit before its end arrives
    assert caught.value.limit == 1000
    assert decoder._tail == [] and decoder._data == []  # nothing kept: the memory is released
    with pytest.raises(EventTooLarge):
        decoder.decode("\n\ndata: b\n\n")
    with pytest.raises(EventTooLarge):
        decoder.flush()


def test_events_before_the_large_one_in_the_same_chunk_come_with_the_error() -> None:
    decoder = SSEDecoder(max_event_size=32)
    with pytest.raises(EventTooLarge) as caught:
        decoder.decode("data: a\n\ndata: b\n\ndata: " + "x" * 40 + "\n\ndata: c\n\n")
    assert caught.value.events == [SSEEvent("a"), SSEEvent("b")]


# ---- PayloadReader: an upstream's event stream as bytes in any split --------------------------------

FINISH = '{"choices":[{"delta":{},"finish_reason":"stop"}]}'
PIECE = '{"choices":[{"delta":{"content":"h\\u00e9"}}]}'


def read_payloads(raw: bytes, cuts: list[int], limit: int = 1 << 20) -> tuple[list[str], str | None, int]:
    """The payloads, the failure's code, and how many pieces were fed before the reader was over."""
    reader = PayloadReader("up", limit)
    bounds = [0, *sorted(cuts), len(raw)]
    payloads: list[str] = []
    fed = 0
    for start, stop in itertools.pairwise(bounds):
        if reader.over:
            break
        payloads += reader.feed(raw[start:stop])
        fed += 1
    payloads += reader.end()
    failure = reader.failure()
    return payloads, (failure.code if failure is not None else None), fed


@given(st.lists(st.integers(min_value=0, max_value=120), max_size=6))
@settings(max_examples=200, deadline=None)
def test_payload_reader_gives_the_same_payloads_for_any_split(cuts: list[int]) -> None:
    raw = f"data: {PIECE}\r\n\r\n: keep-alive\n\ndata: {FINISH}\n\ndata: [DONE]\n\n".encode()
    cuts = [c for c in cuts if c <= len(raw)]
    payloads, failure, _ = read_payloads(raw, cuts)
    assert payloads == [PIECE, FINISH] and failure is None  # "é" split inside its UTF-8 bytes too


def test_payload_reader_reads_nothing_after_done() -> None:
    raw = f"data: {PIECE}\n\ndata: [DONE]\n\n".encode() + b"data: late\n\n"
    payloads, failure, fed = read_payloads(raw, [len(raw) - 4])
    assert (payloads, failure, fed) == ([PIECE], None, 1)


def test_payload_reader_an_end_without_finish_or_done_is_a_failure() -> None:
    assert read_payloads(f"data: {PIECE}\n\n".encode(), []) == ([PIECE], "upstream_protocol_error", 1)
    assert read_payloads(f"data: {FINISH}".encode(), [])[:2] == ([FINISH], None)  # unterminated, still counts


def test_payload_reader_an_error_event_ends_it_after_the_payloads_before() -> None:
    raw = f'data: {PIECE}\n\nerror: {{"code": 500, "message": "model crashed"}}\n\ndata: {PIECE}\n\n'.encode()
    reader = PayloadReader("up", 1 << 20)
    assert reader.feed(raw) == [PIECE] and reader.over
    failure = reader.failure()
    assert failure is not None and "model crashed" in failure.message
    assert reader.feed(b"data: more\n\n") == [] and reader.end() == []


def test_payload_reader_an_event_past_the_limit_fails_at_once() -> None:
    raw = f"data: {PIECE}\n\ndata: ".encode() + b"x" * 200
    payloads, failure, fed = read_payloads(raw, [len(raw) - 50], limit=100)
    assert (payloads, failure, fed) == ([PIECE], "upstream_event_too_large", 1)
