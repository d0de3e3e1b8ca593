"""Rules files (JSON5) → a validated ``RuleSet``; ``RuleSet.resolve(model)`` → the rule to apply.

A rules path is one file or a folder of ``*.json5`` / ``*.json`` files (read in name order;
upstreams merge, model rules concatenate). Unknown keys are errors (with the closest known key
suggested), types are strict (``"yes"`` is no boolean, ``"3"`` no number), and ``${VAR}`` in a
string value is replaced from the environment (an unset one is an error), so a typo fails at start
with the file, the field and what is wrong, never silently at request time. ``lint`` finds what is
valid but probably wrong (shadowed rules, unset key variables) for ``check-rules``.
"""

from __future__ import annotations

import difflib
import fnmatch
import importlib.util
import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import json5
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..formats import FORMATS
from ..observe.redact import MASK, Redactor
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
            raise ValueError(f"unknown tool_mode {value!r}; expected one of: {_quoted(_mode_names())}")
        return value

    @field_validator("fallback_format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value not in FORMATS:
            raise ValueError(f"unknown format {value!r}; expected one of: {_quoted(sorted(FORMATS))}")
        return value

    @field_validator("tool_error_pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        import re

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


def _grammar_formats() -> list[str]:
    """The registered formats that have a grammar, sorted: each format says so itself (``grammar``)."""
    return sorted(name for name, fmt in FORMATS.items() if fmt.grammar is not None)


def _quoted(names: list[str]) -> str:
    return ", ".join(repr(name) for name in names)


def _mode_names() -> list[str]:
    return [*SERVED_MODES, *sorted(FORMATS)]


def is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def _rules_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".json5", ".json") and p.is_file())
        if not files:
            raise RulesError(f"{path}: no *.json5 or *.json rules files in this folder")
        return files
    if not path.exists():
        raise RulesError(f"{path}: no such file or folder")
    return [path]


def _format_validation(file: Path, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".") or "(top)"
        hint = _extra_key_hint(err["loc"]) if err["type"] == "extra_forbidden" else ""
        lines.append(f"{file}: {where}: {err['msg']}{hint}")
    return "\n".join(lines)


def _extra_key_hint(loc: tuple[int | str, ...]) -> str:
    """For an unknown key: where the key belongs (``api_key``) or the closest known key."""
    key = str(loc[-1])
    if len(loc) == 1:
        model: type[BaseModel] = RulesFile
    elif loc[0] == "upstreams" and len(loc) == 3:
        model = UpstreamConfig
    elif loc[0] == "models" and len(loc) == 3:
        model = ModelRule
    else:
        return ""
    if key in ("api_key", "key", "token", "api_token"):
        return (
            "; keys are never written in rules files: put it in an environment variable and name that "
            'variable with api_key_env (e.g. api_key_env: "OPENAI_API_KEY")'
        )
    close = difflib.get_close_matches(key, list(model.model_fields), n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _substitute_env(value: Any, where: str, missing: list[str]) -> Any:
    """``${VAR}`` in string values (not keys) → the variable's value; unset names go to ``missing``."""
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            found = os.environ.get(match.group(1))
            if found is None:
                missing.append(f"{where or '(top)'}: environment variable {match.group(1)} is not set")
                return ""
            return found

        return _ENV_REF.sub(replace, value)
    if isinstance(value, dict):
        return {k: _substitute_env(v, f"{where}.{k}".lstrip("."), missing) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_env(v, f"{where}[{i}]", missing) for i, v in enumerate(value)]
    return value


def _read_file(file: Path) -> RulesFile:
    try:
        data: Any = json5.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RulesError(f"{file}: cannot read: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise RulesError(f"{file}: not valid JSON5: {exc}") from exc
    missing: list[str] = []
    data = _substitute_env(data, "", missing)
    if missing:
        raise RulesError("\n".join(f"{file}: {line}" for line in missing))
    try:  # strict, from JSON: "yes" is no boolean and "3" no number; arrays fill tuples
        return RulesFile.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        raise RulesError(_format_validation(file, exc)) from exc


def load_rules(path: str | os.PathLike[str]) -> RuleSet:
    """Read and validate the rules at ``path``; ``RulesError`` names the file and field on failure."""
    files = _rules_files(Path(path))
    upstreams: dict[str, UpstreamConfig] = {}
    placed: list[tuple[Path, int, ModelRule]] = []
    owners: dict[str, Path] = {}
    for file in files:
        parsed = _read_file(file)
        for name, upstream in parsed.upstreams.items():
            if name in upstreams:
                raise RulesError(f"{file}: upstreams.{name}: already defined in {owners[name]}")
            upstreams[name], owners[name] = upstream, file
        placed.extend((file, i, rule) for i, rule in enumerate(parsed.models))
    for file, i, rule in placed:
        if rule.upstream not in upstreams:
            known = ", ".join(sorted(upstreams)) or "none defined"
            raise RulesError(f"{file}: models[{i}].upstream: unknown upstream {rule.upstream!r} (known: {known})")
        if rule.constrained is True and upstreams[rule.upstream].constraint_dialect == "none":
            raise RulesError(
                f"{file}: models[{i}].constrained: true needs upstreams.{rule.upstream}.constraint_dialect "
                '("gbnf" or "vllm"); "auto" uses one only where it is set'
            )
    checked = [rule for _, _, rule in placed]
    if not checked:
        raise RulesError(f"{path}: no model rules: add at least one entry under 'models'")
    _require_provider_packages(upstreams, owners)
    return RuleSet(upstreams, checked, files)


def _require_provider_packages(upstreams: dict[str, UpstreamConfig], owners: dict[str, Path]) -> None:
    """Refuse, at load, a provider whose package is missing: ``serve`` checks before it starts any worker,
    ``check-rules`` and reloads report it, and no worker dies on the import (once per worker, restarted)."""
    for provider, (module, extra) in PROVIDER_PACKAGES.items():
        users = [name for name, config in upstreams.items() if config.provider == provider]
        if users and importlib.util.find_spec(module) is None:
            files = ", ".join(sorted({str(owners[name]) for name in users}))
            names = ", ".join(f"upstreams.{name}" for name in users)
            raise MissingExtra(
                f"{files}: {names}: provider {provider!r} needs the {module} package, which is not installed: "
                f"pip install 'toolshim[{extra}]' (or remove the upstream from the rules)"
            )


def lint(rules: RuleSet) -> list[str]:
    """Valid but probably wrong: rules no request can reach, and key variables that are unset."""
    found: list[str] = []
    for i, rule in enumerate(rules.models):
        for j, earlier in enumerate(rules.models[:i]):
            if earlier.match == rule.match:
                found.append(f"models[{i}] ({rule.match!r}) duplicates models[{j}]: it is never used")
                break
            if fnmatch.fnmatchcase(rule.match, earlier.match):
                found.append(
                    f"models[{i}] ({rule.match!r}) is shadowed by models[{j}] ({earlier.match!r}), which "
                    "matches every name it does and comes first: it is never used"
                )
                break
    for i, rule in enumerate(rules.models):
        emulates = rule.fallback_format if rule.tool_mode == "auto" else rule.tool_mode
        if rule.constrained is not False and emulates in FORMATS and FORMATS[emulates].grammar is None:
            found.append(
                f"models[{i}].constrained: format {emulates!r} has no grammar (only "
                f"{_quoted(_grammar_formats())}): its calls go unconstrained"
            )
    for name, upstream in rules.upstreams.items():
        if upstream.api_key_env and not os.environ.get(upstream.api_key_env):
            found.append(
                f"upstreams.{name}.api_key_env: {upstream.api_key_env} is not set in this environment; "
                "requests would go without a key"
            )
    return found


def describe(rules: RuleSet) -> str:
    """The resolved model table that ``toolshim check-rules`` prints: no credential of a ``base_url``
    (``masked_url``) and no configured secret (keys, header values) in it, wherever it appears."""
    rows: list[tuple[str, ...]] = [("match", "tool mode", "upstream", "provider", "upstream model")]
    for rule in rules.models:
        up = rules.upstreams[rule.upstream]
        where = masked_url(up.base_url) if up.base_url else up.provider
        rows.append(
            (
                rule.match,
                rule.tool_mode,
                f"{rule.upstream} ({where})",
                up.provider,
                rule.upstream_model or "(as requested)",
            )
        )
    secrets = Redactor()  # a key or header value put elsewhere too (``${VAR}`` in a URL's path, a model name)
    secrets.update(secret for upstream in rules.upstreams.values() for secret in upstream.secrets())
    rows = [tuple(secrets.redact(cell) for cell in row) for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)
