"""The re-ask's repetition of text the client already has (``chat.attempt.Repetition``): skipped a word at a time,
never a letter of new text lost, the same for any chunking."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolshim.chat.attempt import Repetition


def skipped(sent: str, written: str, cuts: list[int] | None = None) -> str:
    """What passes of ``written``, fed in pieces cut at ``cuts``."""
    repetition = Repetition(sent)
    out, start = [], 0
    for end in [*(cuts or []), len(written)]:
        if repetition.done:
            out.append(written[start:end])
        else:
            out.append(repetition.skip(written[start:end]))
        start = end
    return "".join(out)


@pytest.mark.parametrize(
    ("sent", "written", "passes"),
    [
        # new text that starts like the sent text: no letter of it lost, a space between the two
        ("Matterhorn is located in Paris.", "Mont Blanc is 4806 meters tall.", " Mont Blanc is 4806 meters tall."),
        ("The answer is", "Theory aside, 42.", " Theory aside, 42."),
        # the sent text written again, then more: only the more
        ("The weather in Paris is", "The weather in Paris is sunny.", " sunny."),
        ("Paris: 18 C.", "Paris: 18 C.\nTokyo: 25 C.", "\nTokyo: 25 C."),
        # whole words repeated, then other words: the other words, with the whitespace before them
        ("The weather in Paris is sunny.", "The weather in Tokyo is cloudy.", " Tokyo is cloudy."),
        # a word that only starts like the sent one passes whole
        ("Paris is sunny.", "Parisian weather is mild.", " Parisian weather is mild."),
        ("Parisian weather", "Paris is sunny.", " Paris is sunny."),
        # whitespace before new text is kept
        ("Hello.", "\n\nWorld.", "\n\nWorld."),
        ("Hello.\n", "World.", "World."),
        # all of it again, nothing more (whitespace after it passes)
        ("Done.", " Done.", ""),
        ("Done.", " Done. ", " "),
    ],
)
def test_what_a_re_ask_passes(sent: str, written: str, passes: str) -> None:
    assert skipped(sent, written) == passes
    for cut in range(1, len(written)):
        assert skipped(sent, written, [cut]) == passes, cut


WORDS = st.sampled_from(["The", "Paris", "Par", "is", "sunny", "18", "C.", "Mont", "M", "x"])
TEXTS = st.lists(st.tuples(WORDS, st.sampled_from([" ", "\n", ""])), max_size=8).map(
    lambda parts: "".join(word + gap for word, gap in parts)
)


@given(TEXTS, TEXTS, st.lists(st.integers(min_value=0, max_value=60), max_size=4))
def test_any_chunking_passes_the_same_and_drops_only_a_repetition(sent: str, written: str, cuts: list[int]) -> None:
    whole = skipped(sent, written)
    assert skipped(sent, written, sorted(min(cut, len(written)) for cut in cuts)) == whole
    kept, full = "".join(whole.split()), "".join(written.split())
    assert full.endswith(kept)  # what passes is the end of what was written ...
    dropped = full[: len(full) - len(kept)]
    assert "".join(sent.split()).startswith(dropped)  # ... and what was dropped repeats the sent text
