"""Token usage for emulated answers when the upstream did not report it.

Emulation always streams from the upstream, and some servers (llama-cpp-python) never put usage in
a stream, even with ``stream_options.include_usage``. An answer still gets numbers, from the best
source there is, and says which (``UsageSource``: the ``x-toolshim-usage`` header of a non-streamed
answer and the ``source`` label of ``toolshim_usage_source``):

- ``upstream``: every attempt's usage as the upstream reported it;
- ``tokenizer``: counted with the upstream's tokenizer (llama.cpp ``/tokenize``, llama-cpp-python
  ``/extras/tokenize``, litellm's ``token_counter``);
- ``estimate``: no tokenizer answered; one token per four characters.

What is counted for the prompt is approximate either way: the text of the rendered messages (the
tool instructions included) as ``role: content`` lines, without the chat template's own special
tokens, which the server adds and we cannot see. The completion is the model's text of the attempt.
Re-asks are paid for too: usage adds up over all attempts of one answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

UsageSource = Literal["upstream", "tokenizer", "estimate"]
CHARS_PER_TOKEN = 4
MAX_COUNTED_CHARS = 1_000_000  # longer texts are estimated: a tokenizer call would cost more than it tells


class TokenCounter(Protocol):
    async def count_tokens(self, text: str, model: str) -> int | None:
        """Tokens in ``text`` by the upstream's tokenizer, or ``None`` when it has none (or failed)."""
        ...


@dataclass(frozen=True, slots=True)
class AttemptUsage:
    """One upstream attempt: what was sent and written, and the usage it reported (if any)."""

    messages: Sequence[Mapping[str, Any]]
    completion: str
    reported: Mapping[str, int] | None


def estimate_tokens(text: str) -> int:
    """About one token per four characters (rounded up): the usual rule of thumb for English text."""
    return -(-len(text) // CHARS_PER_TOKEN)


def prompt_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The prompt as counted: ``role: content`` per message (text parts only), one per line."""
    lines = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(
                str(part.get("text", ""))
                for part in content
                if isinstance(part, Mapping) and part.get("type") == "text"
            )
        lines.append(f"{message.get('role', 'user')}: {content if isinstance(content, str) else ''}")
    return "\n".join(lines)


async def settle_usage(
    counter: TokenCounter, model: str, attempts: Sequence[AttemptUsage]
) -> tuple[dict[str, int], UsageSource]:
    """The usage of all attempts added up, counting those the upstream did not report, and its source
    (the weakest one used: one estimated attempt makes the whole answer an estimate)."""
    usage: dict[str, int] = {}
    source: UsageSource = "upstream"
    missing = [attempt for attempt in attempts if not attempt.reported]
    for attempt in attempts:
        for key, value in (attempt.reported or {}).items():
            usage[key] = usage.get(key, 0) + value
    if missing:
        texts = [text for attempt in missing for text in (prompt_text(attempt.messages), attempt.completion)]
        counts, source = await _count(counter, model, texts)
        usage["prompt_tokens"] = usage.get("prompt_tokens", 0) + sum(counts[0::2])
        usage["completion_tokens"] = usage.get("completion_tokens", 0) + sum(counts[1::2])
    usage["total_tokens"] = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
    return usage, source


async def _count(counter: TokenCounter, model: str, texts: list[str]) -> tuple[list[int], UsageSource]:
    """Every text by the tokenizer, or (when any of them cannot be) every text estimated."""
    if any(len(text) > MAX_COUNTED_CHARS for text in texts):
        return [estimate_tokens(text) for text in texts], "estimate"
    counted = await asyncio.gather(*(_tokens(counter, text, model) for text in texts))
    if all(count is not None for count in counted):
        return [count or 0 for count in counted], "tokenizer"
    return [estimate_tokens(text) for text in texts], "estimate"


async def _tokens(counter: TokenCounter, text: str, model: str) -> int | None:
    return await counter.count_tokens(text, model) if text else 0
