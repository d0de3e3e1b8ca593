"""What a rules file says, validated: ``UpstreamConfig``, ``ModelRule``, ``RulesFile``; and the ``RuleSet``
they make, whose ``resolve(model)`` is the rule to apply (first match wins, cached per name).

Unknown keys are errors and types are strict (``"yes"`` is no boolean, ``"3"`` no number), so a typo
fails at start with the field and what is wrong, never silently at request time. Reading the files
(JSON5, ``${VAR}``, folders of them), ``lint`` and ``describe``: ``loading``.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..formats import FORMATS
from ..observe.redact import MASK
from .allowlist import allowed_fields, forbidden_extension

SERVED_MODES = ("native", "auto")  # tool modes besides the registered formats (formats.FORMATS)


class RulesError(Exception):
    """A rules file is missing, unreadable or invalid; the message names file and field."""


class MissingExtra(RulesError):
    """The rules name a provider whose optional package is not installed; the message is one line that
    names the extra to install."""


# provider -> (the module it imports, the toolshim extra that installs it). litellm is optional: heavy
# (about 140 MB imported) and only needed for providers that are not OpenAI-compatible.
PROVIDER_PACKAGES: dict[str, tuple[str, str]] = {"litellm": ("litellm", "litellm")}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UpstreamConfig(_Strict):
    """Where requests go. Keys come only from the environment variable named here."""

    provider: Literal["openai", "litellm"] = "openai"
    base_url: str | None = None
    api_key_env: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    connect_timeout: float = Field(10.0, gt=0)
    read_timeout: float = Field(300.0, gt=0, description="idle seconds allowed between bytes of a response")
    total_timeout: float | None = Field(None, gt=0, description="overall cap; none by default (long streams)")
    max_connections: int = Field(256, ge=1)
    extra_body_fields: tuple[str, ...] = Field(
        (), description="request fields forwarded besides OpenAI's chat fields (e.g. top_k, min_p)"
    )
    tokenizer: Literal["auto", "llama.cpp", "llama-cpp-python", "none"] = Field(
        "auto",
        description="the tokenizer endpoint that counts usage the upstream did not report; auto: try both, remember",
    )
    # how this server takes a decoding grammar (see constraint.py): "gbnf" (llama.cpp, llama-cpp-python:
    # ``grammar``), "vllm" (``structured_outputs.grammar``), "none" (no constraint is sent)
    constraint_dialect: Literal["gbnf", "vllm", "none"] = "none"
    # the request fields it understands (fields.py): "openai" as the client sent them, "compat"
    # mapped (max_completion_tokens -> max_tokens, developer -> system, OpenAI-only fields left out);
    # "auto": "openai" for api.openai.com and litellm (which translates per provider), else "compat"
    field_dialect: Literal["auto", "openai", "compat"] = "auto"

    @field_validator("extra_body_fields")
    @classmethod
    def _no_destination_fields(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [name for name in value if forbidden_extension(name)]
        if bad:
            raise ValueError(
                f"{', '.join(bad)}: may not be forwarded (destination, credentials and headers "
                "come only from the rules)"
            )
        return value

    @property
    def allowed_fields(self) -> frozenset[str]:
        """The body fields this upstream receives (see ``allowlist``)."""
        return allowed_fields(self.extra_body_fields)

    @property
    def dialect(self) -> Literal["openai", "compat"]:
        """``field_dialect`` with ``auto`` decided from the provider and the host."""
        if self.field_dialect != "auto":
            return self.field_dialect
        if self.provider == "litellm" or urlsplit(self.base_url or "").hostname == "api.openai.com":
            return "openai"
        return "compat"

    @model_validator(mode="after")
    def _base_url_for_openai(self) -> UpstreamConfig:
        if self.provider == "openai" and not self.base_url:
            raise ValueError("base_url is required for provider 'openai'")
        if self.base_url and not self.base_url.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        if self.base_url and _has_credentials(self.base_url) and self._sends_authorization():
            raise ValueError(
                "base_url carries credentials (user:password@) and the upstream also sends an Authorization "
                "header (api_key_env or headers.Authorization): an HTTP request has one; keep one of them"
            )
        return self

    def _sends_authorization(self) -> bool:
        return bool(self.api_key_env) or any(name.lower() == "authorization" for name in self.headers)

    def url_secrets(self) -> list[str]:
        """The credentials inside ``base_url``, secrets to mask: the password of ``user:password@``, or
        the user part alone when it has no password (``https://TOKEN@host``: the token)."""
        try:
            parts = urlsplit(self.base_url or "")
        except ValueError:
            return []
        if parts.password is not None:
            return [parts.password]
        return [parts.username] if parts.username else []

    def secrets(self) -> list[str]:
        """Every secret this upstream holds: its key (from the environment), header values, URL credentials."""
        key = self.api_key()
        return [*([key] if key else []), *self.headers.values(), *self.url_secrets()]

    def api_key(self) -> str | None:
        """The key from the environment, or ``None`` when unset (fine for local servers)."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None


def _has_credentials(url: str) -> bool:
    try:
        return urlsplit(url).username is not None
    except ValueError:
        return False


def masked_url(url: str) -> str:
    """``url`` as it may be printed: the secret of its user part (``user:***@``, or ``***@`` for a user
    part alone, which is a token), every query value (``?key=***``) and any fragment masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{host}" if colon else f"{MASK}@{host}"
    query = "&".join(_masked_param(param) for param in parts.query.split("&")) if parts.query else ""
    return parts._replace(netloc=netloc, query=query, fragment=MASK if parts.fragment else "").geturl()


def _masked_param(param: str) -> str:
    name, equals, _ = param.partition("=")
    return f"{name}={MASK}" if equals else MASK


# The default first_token_timeout: twice the default read_timeout. A server that sends nothing until
# its first token (llama.cpp, vLLM during prefill) is already cut by read_timeout (300 s idle), so this
# never ends a wait sooner than the default read_timeout would; it ends a stream that stays alive without
# a token, which read_timeout never does. A slow CPU prefill of a long prompt can take many minutes:
# raise both there, or set first_token_timeout to null.
FIRST_TOKEN_TIMEOUT = 600.0

# Calls per emulated turn when the client sends ``parallel_tool_calls: true`` and the rule names no
# ``max_tool_calls``: enough for the parallel questions of function-calling benchmarks (2-4 calls).
PARALLEL_CALLS_DEFAULT = 8


class ModelRule(_Strict):
    """How to serve the models whose name matches ``match`` (a glob)."""

    match: str = Field(min_length=1)
    upstream: str
    tool_mode: str = "native"  # "native", "auto", or a registered format's name
    upstream_model: str | None = None
    expose: list[str] = Field(default_factory=list, description="extra names listed by GET /v1/models")
    # emulation
    fallback_format: str = "react"  # a registered format's name
    auto_fallback_ttl: float = Field(600.0, ge=0)
    max_tool_calls: int | None = Field(None, ge=1, description="default 1 when emulated, unlimited when native")
    stream_arguments: bool = False
    lenient: bool = True  # calls written in another common syntax (bare JSON, fences, wrappers...) count too
    text_before_call: Literal["content", "reasoning", "drop"] = "content"  # text preceding a call in a turn
    max_repair_retries: int = Field(1, ge=0, le=5)
    max_required_retries: int = Field(1, ge=0, le=5)
    on_missing_call: Literal["error", "text"] = "error"  # a demanded call never came: 502, or the text
    # a re-ask samples at least this temperature (greedy decoding repeats itself); null: the request's
    reask_temperature: float | None = Field(0.3, ge=0, le=2)
    max_stop_sequences: int = Field(4, ge=1)
    # the order the prompt lists the tools in: as the client sent them, or by the conversation's first
    # user message: the best match first, or in the order it asks for them when several calls may come
    # (toolrank.py: a small model calls the tools in listed order)
    tool_order: Literal["request", "relevance"] = "request"
    # the first turn of a conversation (policies.py: a small model calls unrelated tools): "when_related"
    # sends a request that shares no word with any tool with tool_choice "none"; "related" does too and
    # offers a request only the tools it shares a word with
    offer_tools: Literal["always", "when_related", "related"] = "always"
    # how the history's calls and results reach the model: as turns in the format's syntax, or "folded" into
    # the user turn they answer as lines of facts (formats/history.py: a small model shown its call as a turn
    # writes it again)
    tool_history: Literal["turns", "folded"] = "turns"
    thinking: Literal["auto", "template", "off"] = "off"  # an output starting inside a thought (formats/_thought.py)
    # constrained decoding of emulated calls (constraint.py): "auto" where the upstream has a
    # constraint_dialect, true (the upstream must have one), false never
    constrained: Literal["auto"] | bool = False
    # conversation policies
    max_consecutive_tool_turns: int | None = Field(None, ge=1)
    max_repeated_calls: int | None = Field(3, ge=2)
    # emulated: a call that repeats one of the loop (repeats.py) is not returned; the model answers from its result
    answer_repeated_calls: bool = True
    # emulated: a call whose required values appear nowhere in the conversation (grounding.py: a small model
    # invents the value another tool would give) is not returned at once; the model is asked once to get the
    # value from a tool or to answer, and what it writes then is taken
    ground_arguments: bool = False
    max_consecutive_tool_errors: int | None = Field(3, ge=1)
    tool_error_pattern: str = r"^\s*(error|exception|traceback)\b"
    max_tools: int | None = Field(None, ge=1)
    tool_priority: list[str] = Field(default_factory=list)
    max_tool_output_chars: int | None = Field(None, ge=200)
    max_total_tool_output_chars: int | None = Field(None, ge=200)
    tool_output_limits: dict[str, Annotated[int, Field(ge=200)]] = Field(default_factory=dict)
    retry_without_tools: bool = False
    max_request_seconds: float | None = Field(None, gt=0)
    # the most tokens one upstream request may generate: the client's limit when lower, this one when it set
    # none (policies.py); null: the client's limit alone
    max_output_tokens: int | None = Field(None, ge=1)
    # seconds from the request until the upstream's first token; null turns it off (then only read_timeout,
    # the idle time between bytes, bounds the wait). On by default (FIRST_TOKEN_TIMEOUT) for a server that
    # keeps the stream alive (SSE comments, a role chunk, empty deltas) but never produces a token
    first_token_timeout: float | None = Field(FIRST_TOKEN_TIMEOUT, gt=0)
    # the Responses API: send /v1/responses as it is (model renamed) to an upstream that has its own
    responses_passthrough: bool = False
    # tools that are not functions (web_search, namespace, custom, ...): a 400 naming the type, or left out
    responses_other_tools: Literal["error", "drop"] = "error"
    # observability
    dump_raw_output: bool = False

    @field_validator("tool_mode")
    @classmethod
    def _known_mode(cls, value: str) -> str:
        if value not in FORMATS and value not in SERVED_MODES:
            raise ValueError(f"unknown tool_mode {value!r}; expected one of: {quoted(_mode_names())}")
        return value

    @field_validator("fallback_format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value not in FORMATS:
            raise ValueError(f"unknown format {value!r}; expected one of: {quoted(sorted(FORMATS))}")
        return value

    @field_validator("tool_error_pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:

        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from exc
        return value

    @property
    def emulated(self) -> bool:
        return self.tool_mode in FORMATS

    def call_limit(self, parallel: bool | None) -> int:
        """How many calls one turn may carry, from the request's ``parallel_tool_calls``.

        ``False``: one. Otherwise ``max_tool_calls`` when set; native: 128; emulated: absent or ``True``,
        ``PARALLEL_CALLS_DEFAULT`` (OpenAI's default is true: a client that did not say no takes several).
        How many the prompt asks for is ``prompted_calls``."""
        if parallel is False:
            return 1
        if self.max_tool_calls is not None:
            return self.max_tool_calls
        if not (self.emulated or self.tool_mode == "auto"):
            return 128
        return PARALLEL_CALLS_DEFAULT

    def prompted_calls(self, parallel: bool | None) -> int:
        """How many calls an emulated prompt (its wording, stop sequences and grammar) allows: as
        ``call_limit``, except that an absent ``parallel_tool_calls`` asks for one (a small model told it
        may write several loops on its call); a second call written anyway is still taken."""
        if parallel is None and self.max_tool_calls is None:
            return 1
        return self.call_limit(parallel)


class RulesFile(_Strict):
    upstreams: dict[str, UpstreamConfig] = Field(default_factory=dict)
    models: list[ModelRule] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Resolved:
    """A request's rule: the rule, its upstream name and the bounded label for metrics."""

    rule: ModelRule
    upstream_name: str
    label: str  # the rule's match pattern: a bounded metric label, never client text

    def upstream_model(self, requested: str) -> str:
        return self.rule.upstream_model or requested


# The longest model name a request may send (a 400 past it, before any lookup; see handlers). Real
# names (``hf.co/org/model-GGUF:Q4_K_M``, ``accounts/x/models/y``) stay far below it; a name is
# client text that resolution caches remember, so its size is bounded as well as their count.
MAX_MODEL_NAME_CHARS = 256
RESOLVE_CACHE_SIZE = 4096  # names remembered (least recently used go first): at most ~1 MiB of names


class RuleSet:
    """Validated rules with first-match-wins resolution, cached per model name (bounded: count and size)."""

    def __init__(self, upstreams: dict[str, UpstreamConfig], models: list[ModelRule], sources: list[Path]) -> None:
        self.upstreams = upstreams
        self.models = models
        self.sources = sources
        self._resolve_cached = lru_cache(maxsize=RESOLVE_CACHE_SIZE)(self._resolve)

    def resolve(self, model: str) -> Resolved | None:
        """The first rule whose glob matches ``model``; ``None`` when none does. A name longer than
        ``MAX_MODEL_NAME_CHARS`` is matched but not remembered."""
        if len(model) > MAX_MODEL_NAME_CHARS:
            return self._resolve(model)
        return self._resolve_cached(model)

    def cache_size(self) -> int:
        """Names the resolution cache holds now (for tests and the curious)."""
        return self._resolve_cached.cache_info().currsize

    def _resolve(self, model: str) -> Resolved | None:
        for rule in self.models:
            if fnmatch.fnmatchcase(model, rule.match):
                return Resolved(rule, rule.upstream, rule.match)
        return None

    def exposed_models(self) -> list[str]:
        """Names for GET /v1/models: literal (glob-free) matches and each rule's ``expose`` list."""
        names: list[str] = []
        for rule in self.models:
            candidates = [*([] if is_glob(rule.match) else [rule.match]), *rule.expose]
            names.extend(n for n in candidates if n not in names)
        return names


def quoted(names: list[str]) -> str:
    """Names for a message: ``'a', 'b'``."""
    return ", ".join(repr(name) for name in names)


def _mode_names() -> list[str]:
    return [*SERVED_MODES, *sorted(FORMATS)]


def is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")
