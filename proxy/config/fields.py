"""The newer OpenAI request fields, written as the upstream understands them (its ``field_dialect``).

Frameworks and the OpenAI SDKs send what OpenAI's current API defines; an OpenAI-compatible
server (llama.cpp, llama-cpp-python, Ollama, vLLM, LM Studio, most hosted providers) knows an
older subset, ignores the rest silently or rejects the request. Two dialects:

* ``openai``: the fields as the client sent them (OpenAI itself; litellm, which translates per
  provider on its own).
* ``compat``: mapped to what such a server understands:

  - ``max_completion_tokens`` becomes ``max_tokens`` (llama-cpp-python ignores the new name and
    generates until the context is full); when both are sent the smaller wins, so the answer
    respects every limit the client set;
  - a ``developer`` message becomes a ``system`` message, and adjacent system messages are joined
    into one (Codex sends instructions and then developer items; many chat templates accept one
    system message only, or only as the first message);
  - fields that only steer OpenAI's platform (storage, billing tier, prompt caching, safety ids,
    predicted outputs, hosted web search, audio output, GPT-5's ``verbosity``) are dropped: a
    compatible server has no use for them, and the strict ones answer 400/422 to an unknown field;
  - ``stream_options`` on a request that does not stream is dropped (vLLM answers 400 to it).

  Passed as sent: the sampling and decoding fields compatible servers implement (``seed``,
  ``logprobs`` / ``top_logprobs``, ``logit_bias``, ``n``, ``response_format``, ``stop``, ...),
  ``reasoning_effort`` (vLLM, Ollama and LM Studio read it for reasoning models) and ``user``.

In both dialects ``parallel_tool_calls`` goes only with tools: OpenAI itself answers 400 to it
without ``tools``, and it is left behind when toolshim takes the tools off a request.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeGuard

from ..formats.history import content_text

log = logging.getLogger(__name__)

Dialect = Literal["openai", "compat"]

# OpenAI platform features with no meaning on a compatible server (dropped in ``compat``).
OPENAI_ONLY_FIELDS: frozenset[str] = frozenset(
    {
        "audio",
        "metadata",
        "modalities",
        "prediction",
        "prompt_cache_key",
        "prompt_cache_retention",
        "safety_identifier",
        "service_tier",
        "store",
        "verbosity",
        "web_search_options",
    }
)


def for_upstream(body: Mapping[str, Any], dialect: Dialect) -> dict[str, Any]:
    """``body`` (already allowlisted) as an upstream of ``dialect`` takes it; a new dict."""
    out = dict(body)
    if "parallel_tool_calls" in out and not (out.get("tools") or out.get("functions")):
        del out["parallel_tool_calls"]
    if dialect == "openai":
        return out
    dropped = sorted(name for name in out if name in OPENAI_ONLY_FIELDS)
    for name in dropped:
        del out[name]
    if "stream_options" in out and not out.get("stream"):
        del out["stream_options"]
    _max_tokens(out)
    if isinstance(out.get("messages"), list):
        out["messages"] = compat_messages(out["messages"])
    if dropped and log.isEnabledFor(logging.DEBUG):
        log.debug("fields an OpenAI-compatible upstream has no use for, not sent: %s", ", ".join(dropped))
    return out


def _max_tokens(body: dict[str, Any]) -> None:
    """``max_completion_tokens`` → ``max_tokens``; of two limits the smaller (both are the client's)."""
    if "max_completion_tokens" not in body:
        return
    newer = body.pop("max_completion_tokens")
    older = body.get("max_tokens")
    if newer is None:
        return
    if is_count(newer) and is_count(older):
        body["max_tokens"] = min(newer, older)
    elif older is None or not is_count(older):
        body["max_tokens"] = newer


def is_count(value: Any) -> bool:
    """A token count: an int, and not a bool (JSON true is no limit)."""
    return isinstance(value, int) and not isinstance(value, bool)


def compat_messages(messages: Sequence[Any]) -> list[Any]:
    """``developer`` messages as ``system`` ones, adjacent system messages joined (blank line between)."""
    if not _needs_compat(messages):
        return list(messages)
    out: list[Any] = []
    for message in messages:
        if isinstance(message, Mapping) and message.get("role") == "developer":
            message = {**message, "role": "system"}
        prev = out[-1] if out else None
        if _is_system(message) and _is_system(prev):
            out[-1] = _joined(prev, message)
        else:
            out.append(message)
    return out


def _needs_compat(messages: Sequence[Any]) -> bool:
    """Whether ``compat_messages`` has anything to change: one pass over the roles, most conversations have
    neither a developer message nor two system messages in a row (a 66 kB agent history: 0.01 against 0.08 ms)."""
    after_system = False
    for message in messages:
        if type(message) is not dict:
            return True  # another kind of mapping, or no mapping: the careful pass judges it
        role = message.get("role")
        if role == "developer" or (role == "system" and after_system):
            return True
        after_system = role == "system"
    return False


def _is_system(message: Any) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(message, Mapping) and message.get("role") == "system"


def _joined(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """One system message holding both texts (a ``name`` on either is not kept: templates ignore it)."""
    texts = [text for text in (content_text(first.get("content")), content_text(second.get("content"))) if text.strip()]
    return {"role": "system", "content": "\n\n".join(texts)}
