"""Which request fields may reach an upstream: an allowlist, never "everything the client sent".

A chat body goes upstream with only the fields OpenAI's Chat Completions endpoint defines, plus
the names an operator adds with the upstream option ``extra_body_fields`` (sampling knobs such as
``top_k`` or ``min_p`` of a local server). Everything else is dropped before any upstream client
sees it. This is what keeps a client from steering the call: litellm reads ``api_base``,
``base_url``, ``api_key`` and ``extra_headers`` from its keyword arguments, so a forwarded body
field of that name would send the operator's key to a host of the client's choosing.

The pass-through routes (``/v1/completions``, ``/v1/embeddings``, ..., and ``/v1/responses`` under
``responses_passthrough``) work the same way, each with the fields its endpoint defines
(``PASSTHROUGH_FIELDS``) plus the same ``extra_body_fields``: local servers execute extensions a
client could otherwise send (``chat_template`` is a Jinja template, ``prompt_embeds`` raw tensors,
``guided_regex`` a pattern compiled on the server).

Destination, credentials and headers come only from the rules; no extension may name them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# The request fields of POST /v1/chat/completions (OpenAI API reference).
CHAT_FIELDS: frozenset[str] = frozenset(
    {
        "model",
        "messages",
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "prompt_cache_retention",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    }
)

# The request fields of each pass-through endpoint (the path below /v1), as OpenAI's API reference
# defines them; rerank and score as vLLM serves them (Cohere / Jina-style rerank, vLLM's score).
PASSTHROUGH_FIELDS: dict[str, frozenset[str]] = {
    "/completions": frozenset(
        {
            "model",
            "prompt",
            "best_of",
            "echo",
            "frequency_penalty",
            "logit_bias",
            "logprobs",
            "max_tokens",
            "n",
            "presence_penalty",
            "seed",
            "stop",
            "stream",
            "stream_options",
            "suffix",
            "temperature",
            "top_p",
            "user",
        }
    ),
    "/embeddings": frozenset({"model", "input", "dimensions", "encoding_format", "user"}),
    "/moderations": frozenset({"model", "input"}),
    "/rerank": frozenset(
        {
            "model",
            "query",
            "documents",
            "top_n",
            "return_documents",
            "rank_fields",
            "max_chunks_per_doc",
            "max_tokens_per_doc",
            "truncate_prompt_tokens",
        }
    ),
    "/score": frozenset(
        {"model", "text_1", "text_2", "data_1", "data_2", "queries", "documents", "truncate_prompt_tokens"}
    ),
    "/audio/speech": frozenset(
        {"model", "input", "voice", "instructions", "response_format", "speed", "stream_format"}
    ),
    "/images/generations": frozenset(
        {
            "model",
            "prompt",
            "background",
            "moderation",
            "n",
            "output_compression",
            "output_format",
            "partial_images",
            "quality",
            "response_format",
            "size",
            "stream",
            "style",
            "user",
        }
    ),
    "/responses": frozenset(
        {
            "model",
            "input",
            "instructions",
            "background",
            "conversation",
            "include",
            "max_output_tokens",
            "max_tool_calls",
            "metadata",
            "parallel_tool_calls",
            "previous_response_id",
            "prompt",
            "prompt_cache_key",
            "prompt_cache_retention",
            "reasoning",
            "safety_identifier",
            "service_tier",
            "store",
            "stream",
            "stream_options",
            "temperature",
            "text",
            "tool_choice",
            "tools",
            "top_logprobs",
            "top_p",
            "truncation",
            "user",
        }
    ),
}

# Names that choose where a call goes or what credentials it carries (litellm's keyword arguments
# among them), or that would smuggle arbitrary fields past the allowlist.
FORBIDDEN_FIELDS: frozenset[str] = frozenset(
    {
        "api_base",
        "base_url",
        "api_key",
        "api_version",
        "api_type",
        "organization",
        "project",
        "extra_headers",
        "headers",
        "extra_body",
        "extra_query",
        "custom_llm_provider",
        "deployment_id",
        "timeout",
        "client",
        "mock_response",
        "input_cost_per_token",
        "output_cost_per_token",
        "azure_ad_token",
        "azure_ad_token_provider",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "aws_region_name",
        "vertex_credentials",
        "vertex_project",
        "vertex_location",
        "region_name",
        "litellm_params",
        "proxy_server_request",
        "callbacks",
    }
)
FORBIDDEN_PREFIXES: tuple[str, ...] = ("aws_", "azure_", "vertex_", "litellm_", "api_")


def forbidden_extension(name: str) -> bool:
    """May an operator's ``extra_body_fields`` not name this field?"""
    lowered = name.lower()
    return lowered in FORBIDDEN_FIELDS or lowered.startswith(FORBIDDEN_PREFIXES)


def allowed_fields(extra: Iterable[str] = ()) -> frozenset[str]:
    """The chat fields plus an operator's extension (validated by the rules loader)."""
    return CHAT_FIELDS | frozenset(extra)


def passthrough_fields(path: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The fields a pass-through ``path`` (below /v1) forwards: its endpoint's plus the operator's
    ``extra_body_fields``. A path without a list forwards only ``model`` and the extension."""
    return PASSTHROUGH_FIELDS.get(path, frozenset({"model"})) | frozenset(extra)


@dataclass(frozen=True, slots=True)
class Injected:
    """A body field toolshim itself set (a decoding constraint): passes the allowlist, unwrapped.

    A client's JSON decodes only to plain values, so a field wrapped in this can only come from
    toolshim: a client-sent ``grammar`` is still dropped while toolshim's own goes through."""

    value: Any


def chat_body(body: Mapping[str, Any], allowed: frozenset[str]) -> dict[str, Any]:
    """``body`` with only the ``allowed`` top-level fields (and toolshim's ``Injected`` ones, unwrapped)."""
    kept = {
        key: value.value if isinstance(value, Injected) else value
        for key, value in body.items()
        if key in allowed or isinstance(value, Injected)
    }
    if len(kept) != len(body) and log.isEnabledFor(logging.DEBUG):
        dropped = sorted(key[:64] for key in body if key not in allowed)[:20]
        log.debug("fields not forwarded upstream (not in the allowlist): %s", ", ".join(dropped))
    return kept
