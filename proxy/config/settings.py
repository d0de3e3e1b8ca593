"""Process settings: command-line flags over ``TOOLSHIM_*`` environment variables over defaults.

Only process-wide knobs live here; per-model behaviour belongs in the rules files.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .cpus import usable_cpus

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# The rules served when none are named: the package's copy of the repository's rules/default.json5 (a
# symlink in the source tree, a file in the wheel), so an installed `toolshim serve` needs no checkout.
DEFAULT_RULES = Path(__file__).with_name("default_rules.json5")


class SettingsError(ValueError):
    """Settings that cannot be used; the message names the environment variable and the flag."""


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rules_path: Path = DEFAULT_RULES
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    workers: int = Field(default_factory=usable_cpus, ge=1)  # CPU affinity capped by the cgroup quota
    api_keys: tuple[str, ...] = ()  # client keys; empty = no client authentication
    admin_key: str | None = None  # enables POST /admin/reload
    metrics_key: str | None = None  # set: GET /metrics needs it as a Bearer token; unset: /metrics is open
    max_body_bytes: int = Field(10 * 1024 * 1024, ge=1024)
    # what one request may contain (a 400 naming the limit past it); generous, against amplification
    max_messages: int = Field(10_000, ge=1)  # chat messages, or Responses input items
    max_tools: int = Field(1024, ge=1)  # tools (or legacy functions) in one request
    max_json_depth: int = Field(128, ge=8, le=255)  # nesting of the JSON body (255: what orjson writes)
    max_schema_depth: int = Field(64, ge=2)  # nesting of one tool's parameters schema
    max_upstream_event_bytes: int = Field(32 * 1024 * 1024, ge=1024)  # one upstream SSE event or body
    drain_seconds: float = Field(30.0, ge=0)
    ready_delay: float = Field(1.0, ge=0)  # seconds /readyz reports draining before the listener closes
    # connection and overload bounds, per worker (proxy/connections.py, proxy/overload.py)
    head_timeout: float = Field(20.0, gt=0)  # seconds from a request's first byte to the end of its head
    body_timeout: float = Field(60.0, gt=0)  # seconds from the end of the head to the end of the body
    keepalive_timeout: float = Field(75.0, gt=0)  # seconds an idle connection (no request started) stays open
    send_timeout: float = Field(60.0, gt=0)  # seconds one write to a client may wait for it to read (server/sending.py)
    max_connections: int = Field(4096, ge=1)  # open client connections per worker (idle ones give way first)
    max_in_flight: int = Field(1024, ge=1)  # /v1 requests served at once per worker; more get 503 + Retry-After
    log_level: str = "INFO"
    log_content: bool = False  # log message contents at DEBUG (off: they may be private)
    dump_dir: Path | None = None  # write raw upstream text of emulated responses here
    # browser origins allowed to call /v1 and /admin (CORS, preflight included); none by default; "*": any
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()  # Host header values served; empty: loopback names when bound to loopback

    allow_unauthenticated: bool = False  # serve a non-loopback address without client keys, on purpose
    # the Responses API's stored responses (previous_response_id, GET /v1/responses/{id})
    data_dir: Path = Path("toolshim-data")  # the embedded SQLite store lives here (created on first write)
    responses_store: Literal["sqlite", "redis"] = "sqlite"
    redis_url: str | None = None  # responses_store "redis": redis://host:port/db (several replicas share it)
    responses_ttl: float = Field(30 * 24 * 3600.0, gt=0)  # seconds a stored response can be continued

    @field_validator("api_keys", "allowed_origins", "allowed_hosts", mode="before")
    @classmethod
    def _split_list(cls, value: object) -> object:
        """Comma-separated lists, as environment variables carry them."""
        if isinstance(value, str):
            return tuple(item.strip() for item in value.split(",") if item.strip())
        return value

    def origin_allowed(self, origin: str) -> bool:
        """May a browser page from ``origin`` call /v1 and /admin?"""
        return "*" in self.allowed_origins or origin in self.allowed_origins

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.upper() not in LOG_LEVELS:
            raise ValueError(f"unknown log level {value!r}; expected one of: {', '.join(LOG_LEVELS)}")
        return value.upper()

    @property
    def loopback_only(self) -> bool:
        """Is the listener reachable from this machine only?"""
        return is_loopback(self.host)

    def exposure_problem(self) -> str | None:
        """Why serving these settings would open the operator's upstream keys to the network, if it would."""
        if self.loopback_only or self.api_keys or self.allow_unauthenticated:
            return None
        return (
            f"refusing to listen on {self.host} without client keys: anyone who can reach it would use your "
            "upstream keys. Set TOOLSHIM_API_KEYS, or pass --allow-unauthenticated "
            "(TOOLSHIM_ALLOW_UNAUTHENTICATED=true) if the exposure is intended."
        )

    def access_summary(self) -> str:
        """One line for the start-up log: who can use this proxy."""
        if self.api_keys:
            return f"access: client keys required on /v1 ({len(self.api_keys)} configured)"
        if self.loopback_only:
            return f"access: no client keys; reachable from this machine only ({self.host})"
        return (
            f"access: OPEN to the network on {self.host} without client keys (allow_unauthenticated): "
            "anyone who reaches it uses your upstream keys"
        )


def is_loopback(host: str) -> bool:
    """``127.0.0.0/8``, ``::1`` and ``localhost``; anything else (``0.0.0.0`` included) is not.

    Asked for every request's ``Host``: cached (512 names of at most 255 characters, the longest
    DNS name: a longer one is no loopback name and is not remembered), as parsing is not free."""
    return len(host) <= _MAX_HOST_CHARS and _is_loopback(host)


_MAX_HOST_CHARS = 255


@lru_cache(maxsize=512)
def _is_loopback(host: str) -> bool:
    if host.strip("[]").lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


ENV_VARS = {
    "rules_path": "TOOLSHIM_RULES",
    "host": "TOOLSHIM_HOST",
    "port": "TOOLSHIM_PORT",
    "workers": "TOOLSHIM_WORKERS",
    "api_keys": "TOOLSHIM_API_KEYS",
    "admin_key": "TOOLSHIM_ADMIN_KEY",
    "metrics_key": "TOOLSHIM_METRICS_KEY",
    "max_body_bytes": "TOOLSHIM_MAX_BODY_BYTES",
    "max_messages": "TOOLSHIM_MAX_MESSAGES",
    "max_tools": "TOOLSHIM_MAX_TOOLS",
    "max_json_depth": "TOOLSHIM_MAX_JSON_DEPTH",
    "max_schema_depth": "TOOLSHIM_MAX_SCHEMA_DEPTH",
    "max_upstream_event_bytes": "TOOLSHIM_MAX_UPSTREAM_EVENT_BYTES",
    "drain_seconds": "TOOLSHIM_DRAIN_SECONDS",
    "ready_delay": "TOOLSHIM_READY_DELAY",
    "head_timeout": "TOOLSHIM_HEAD_TIMEOUT",
    "body_timeout": "TOOLSHIM_BODY_TIMEOUT",
    "keepalive_timeout": "TOOLSHIM_KEEPALIVE_TIMEOUT",
    "send_timeout": "TOOLSHIM_SEND_TIMEOUT",
    "max_connections": "TOOLSHIM_MAX_CONNECTIONS",
    "max_in_flight": "TOOLSHIM_MAX_IN_FLIGHT",
    "log_level": "TOOLSHIM_LOG_LEVEL",
    "log_content": "TOOLSHIM_LOG_CONTENT",
    "dump_dir": "TOOLSHIM_DUMP_DIR",
    "allowed_origins": "TOOLSHIM_CORS_ORIGINS",
    "allowed_hosts": "TOOLSHIM_ALLOWED_HOSTS",
    "allow_unauthenticated": "TOOLSHIM_ALLOW_UNAUTHENTICATED",
    "data_dir": "TOOLSHIM_DATA_DIR",
    "responses_store": "TOOLSHIM_RESPONSES_STORE",
    "redis_url": "TOOLSHIM_REDIS_URL",
    "responses_ttl": "TOOLSHIM_RESPONSES_TTL",
}


FLAGS = {
    "rules_path": "--rules",
    "host": "--host",
    "port": "--port",
    "workers": "--workers",
    "log_level": "--log-level",
    "allowed_origins": "--cors-origins",
    "allow_unauthenticated": "--allow-unauthenticated",
}

ENV_ALIASES = {"allowed_origins": ("TOOLSHIM_ALLOWED_ORIGINS",)}  # older names, read when the new one is unset


# ``TOOLSHIM_*`` variables read outside ``Settings``: the helper scripts, the demo and the test tools.
OTHER_ENV_VARS = (
    "TOOLSHIM_CACHE",  # scripts/local_model.py
    "TOOLSHIM_LLAMA_CMAKE_ARGS",  # scripts/local_model.py
    "TOOLSHIM_DEMO_UPSTREAM",  # demo/agent.py
    "TOOLSHIM_DEMO_MODEL",
    "TOOLSHIM_DEMO_API_KEY",
    "TOOLSHIM_TEST_MODEL",  # tests/realmodel
    "TOOLSHIM_BASE_URL",  # tests/node
)
ENV_PREFIX = "TOOLSHIM_"


def known_env_vars() -> set[str]:
    """Every ``TOOLSHIM_*`` name something in this project reads."""
    aliases = {name for names in ENV_ALIASES.values() for name in names}
    return {*ENV_VARS.values(), *aliases, *OTHER_ENV_VARS}


def unknown_env_warnings(env: Mapping[str, str] | None = None) -> list[str]:
    """One line per ``TOOLSHIM_*`` variable nothing reads, naming the closest known one: a
    misspelt setting (``TOOLSHIM_API_KEY``) otherwise leaves the default in force without a word."""
    env = os.environ if env is None else env
    known = known_env_vars()
    by_suffix = {name.removeprefix(ENV_PREFIX): name for name in known}
    lines = []
    for name in sorted(env):
        if not name.upper().startswith(ENV_PREFIX) or name in known:
            continue
        close = difflib.get_close_matches(name.upper().removeprefix(ENV_PREFIX), by_suffix, n=1, cutoff=0.6)
        hint = f"; did you mean {by_suffix[close[0]]}?" if close else " and is ignored"
        lines.append(f"{name} is not a toolshim setting{hint}")
    return lines


def _from_env(env: Mapping[str, str]) -> dict[str, object]:
    values: dict[str, object] = {}
    for field, var in ENV_VARS.items():
        for name in (var, *ENV_ALIASES.get(field, ())):
            if env.get(name):
                values[field] = env[name]
                break
    return values


def load_settings(overrides: Mapping[str, object] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Defaults, then the environment, then explicit overrides (flags that were given)."""
    env = os.environ if env is None else env
    values = _from_env(env)
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    values.update(flags)
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        raise SettingsError("\n".join(_describe(err, flags) for err in exc.errors())) from None


def _describe(err: Any, flags: Mapping[str, object]) -> str:
    """One line per problem, naming what the operator sets: the flag given, else the variable."""
    field = str(err["loc"][0]) if err["loc"] else ""
    env_name, flag = ENV_VARS.get(field, field), FLAGS.get(field)
    source = flag if flag and field in flags else (f"{env_name} (or {flag})" if flag else env_name)
    message = str(err["msg"]).removeprefix("Value error, ")
    given = err.get("input")
    shown = f" (got {given!r})" if isinstance(given, str | int | float) and repr(given) not in message else ""
    return f"{source}: {message}{shown}"
