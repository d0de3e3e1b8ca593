"""toolshim's result wrapper named in inline code (``proxy/mentions.py``): the span loses its brackets in any
split of the text, other code and tags stay as written; end to end, the client's content has no wrapper tag."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolshim.chat.echo import EchoFilter, Instructions
from toolshim.chat.mentions import WrapperMentions, WrapperTags

from tests.fakes import Reply, text_stream
from tests.test_emulation import ask, emulated

SEEN = [  # BFCL answers through toolshim (2026-11-26): the call was made, then the model described the protocol
    (
        "Finally, the results are printed inside the `<tool_response>` tags.",
        "Finally, the results are printed inside the `tool_response` tags.",
    ),
    (
        "The result is returned in the `<tool_response>` element.\n\nWhen you run this XML, it will output the area.",
        "The result is returned in the `tool_response` element.\n\nWhen you run this XML, it will output the area.",
    ),
    ("Close it with `</tool_response>`, then `<b>` stays.", "Close it with `tool_response`, then `<b>` stays."),
    ("Ends mid-span: `<tool_resp", "Ends mid-span: `<tool_resp"),
    ("No code: ``<tool_response>`` and `x` `<tool_response>`", "No code: ``tool_response`` and `x` `tool_response`"),
    (  # BFCL irrelevance_98 through pythonic+constrained: the instructions' sentence paraphrased in prose
        "This tool calculates the total time. The result is returned inside <tool_response></tool_response> tags.",
        "This tool calculates the total time. The result is returned inside tool_response tags.",
    ),
    ("The pair `<tool_response></tool_response>` in code.", "The pair `tool_response` in code."),
    ("Ends mid-pair: <tool_response></tool_resp", "Ends mid-pair: <tool_response></tool_resp"),
    ("Other tags stay: <b></b> and <tool_response> alone", "Other tags stay: <b></b> and <tool_response> alone"),
]


def run(text: str, cuts: list[int]) -> str:
    mentions, out, start = WrapperMentions(), [], 0
    for cut in [*sorted(c for c in cuts if c <= len(text)), len(text)]:
        out.append(mentions.feed(text[start:cut]))
        start = max(start, cut)
    return "".join(out) + mentions.flush()


@pytest.mark.parametrize(("text", "expected"), SEEN)
def test_the_wrapper_span_is_renamed_whole_and_per_character(text: str, expected: str) -> None:
    assert run(text, []) == expected
    assert run(text, list(range(len(text)))) == expected


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([t for t, _ in SEEN]), st.lists(st.integers(0, 120), max_size=12))
def test_any_split_gives_the_same_text(text: str, cuts: list[int]) -> None:
    assert run(text, cuts) == run(text, [])


def test_the_echo_filter_renames_it_on_its_way() -> None:
    echo = EchoFilter(Instructions(["Each result comes back inside <tool_response></tool_response> tags."]))
    text = "It is printed in the `<tool_resp" + "onse>` block."
    assert echo.feed(text[:30]) + echo.feed(text[30:]) + echo.flush() == "It is printed in the `tool_response` block."


CUT_AT_A_RESULT = {"hermes", "morph_xml"}  # their own result tag: a model writing one invents a result
CLIENT_SEES = [
    ("It is sunny. The result came back in the `<tool_response>` tag.", "the `tool_response` tag."),
    ("It is sunny. The result is returned inside <tool_response></tool_response> tags.", "tool_response tags."),
]


@pytest.mark.parametrize("fmt", ["hermes", "morph_xml", "pythonic", "react", "xml", "caret"])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("said", "ending"), CLIENT_SEES)
async def test_the_client_gets_no_wrapper_tag(
    start_proxy, fake_upstream, fmt: str, stream: bool, said: str, ending: str
) -> None:
    proxy = await start_proxy(models=emulated(fmt))
    fake_upstream.script(Reply(pieces=text_stream([said[:40], said[40:]])))
    result = await ask(proxy, stream)
    content = result["choices"][0]["message"]["content"]
    assert "<tool_response>" not in content and "</tool_response>" not in content
    if fmt in CUT_AT_A_RESULT and "`" not in said:  # the tag mid-line is an invented result: the turn ends there
        assert content.strip() == "It is sunny. The result is returned inside"
    else:
        assert content.strip().startswith("It is sunny.") and content.strip().endswith(ending)


TAGS = ["<tool_response>", "</tool_response>", "<tool_name>", "</tool_name>", "<result>", "</result>"]


def untagged(text: str, cuts: list[int]) -> str:
    tags, out, start = WrapperTags(TAGS), [], 0
    for cut in [*sorted(c for c in cuts if c <= len(text)), len(text)]:
        out.append(tags.feed(text[start:cut]))
        start = max(start, cut)
    return "".join(out) + tags.flush()


@given(st.lists(st.integers(0, 120), max_size=8))
def test_a_repeated_results_wrapper_tags_go_in_any_split(cuts: list[int]) -> None:
    """morph_xml's result wrapper, repeated by the model: its tags go (a tag alone on its line with its line
    break), the result and other tags stay."""
    text = '<result>\n{"temperature": 21}\n</result>\nIt is <b>21</b> C.</resu'
    assert untagged(text, cuts) == '{"temperature": 21}\nIt is <b>21</b> C.</resu'
