"""Sans-IO: toolshim's tool-result wrapper, named in the model's inline code, loses its angle brackets.

The emulated formats hand tool results to the model inside a wrapper tag of toolshim's making
(``<tool_response>...</tool_response>``); the client never sees one (its results are ``tool``
messages). Small models describe it anyway, in inline code: "the result is returned in the
`<tool_response>` element" (BFCL through hermes and morph_xml). The formats keep a backticked tag as
text by design (a user may ask about a tag), so the mention reaches the text path and would show the
client a piece of toolshim's protocol. ``WrapperMentions`` writes such a span as the plain name,
`` `tool_response` ``: the sentence still reads and no markup remains. The empty pair the instructions
name ("inside <tool_response></tool_response> tags") is renamed without backticks too: a model that
paraphrases that sentence in prose (BFCL irrelevance_98, pythonic) writes it bare.

``WrapperTags`` removes the tags of the result wrappers a request actually rendered (``<result>``,
``<tool_result:get_weather>``) from the model's text: a model that repeats a tool result it was shown
repeats them too.

Linear: each ``feed`` looks at the new text plus at most one span's (or tag's) length held from before.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..formats import RESULT_CLOSE as RESPONSE_END
from ..formats import RESULT_OPEN as RESPONSE
from ..formats import partial_marker_len

_NAME = RESPONSE.strip("<>")
_PAIR = RESPONSE + RESPONSE_END  # the instructions' own "<tool_response></tool_response> tags", quoted in prose
_SPANS = {  # longest first: a backticked pair is one span, not a pair inside backticks
    f"`{_PAIR}`": f"`{_NAME}`",
    f"`{RESPONSE}`": f"`{_NAME}`",
    f"`{RESPONSE_END}`": f"`{_NAME}`",
    _PAIR: _NAME,
}
_LONGEST = max(map(len, _SPANS))
_IN_EVERY_SPAN = _NAME + ">"  # one substring test tells whether any span can be in the text


class WrapperMentions:
    """``feed(text) -> text`` with the wrapper's backticked tags renamed; ``flush()`` at the end."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held = ""  # a tail that may still become a span (nothing held: text without "`" or "<" passes as it is)

    def feed(self, text: str) -> str:
        text = self.held + text
        if _IN_EVERY_SPAN in text:
            for span, name in _SPANS.items():
                text = text.replace(span, name)
        tail = text[-_LONGEST:]
        keep = partial_marker_len(text, _SPANS) if "`" in tail or "<" in tail else 0
        self.held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """The held tail: the text ended before it became a span."""
        held, self.held = self.held, ""
        return held


class WrapperTags:
    """``feed(text) -> text`` without the tags of toolshim's own tool-result wrappers (``<result>``,
    ``<tool_result:get_weather>``, ...): a model repeating a result it was shown repeats its wrapper,
    which the client never sent and must never see. A tag alone on its line goes with its line break.
    A partial tag at a chunk's end waits for the next; ``flush()`` at the end."""

    __slots__ = ("_held", "_longest", "_markers")

    def __init__(self, tags: Iterable[str]) -> None:
        unique = sorted(set(tags), key=len, reverse=True)
        self._markers = [f"{tag}\n" for tag in unique] + unique  # a tag's own line first
        self._longest = max(map(len, self._markers), default=0)
        self._held = ""

    def feed(self, text: str) -> str:
        if not self._markers:
            return text
        text = self._held + text
        self._held = ""
        if "<" not in text:
            return text
        # a tail that may still become a tag (or a tag its line break may follow) waits for the next piece
        keep = partial_marker_len(text, self._markers) if "<" in text[-self._longest :] else 0
        self._held = text[len(text) - keep :] if keep else ""
        return self._remove(text[: len(text) - keep])

    def flush(self) -> str:
        held, self._held = self._held, ""
        return self._remove(held)

    def _remove(self, text: str) -> str:
        for marker in self._markers:
            if marker in text:
                text = text.replace(marker, "")
        return text
