"""Process settings: command-line flags over ``TOOLSHIM_*`` environment variables over defaults.

Only process-wide knobs live here; per-model behaviour belongs in the rules files.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rules_path: Path = Path("rules/default.json5")
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    workers: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1)
    api_keys: tuple[str, ...] = ()  # client keys; empty = no client authentication
    admin_key: str | None = None  # enables POST /admin/reload
    max_body_bytes: int = Field(10 * 1024 * 1024, ge=1024)
    drain_seconds: float = Field(30.0, ge=0)
    ready_delay: float = Field(1.0, ge=0)  # seconds /readyz reports draining before the listener closes
    log_level: str = "INFO"
    log_content: bool = False  # log message contents at DEBUG (off: they may be private)
    dump_dir: Path | None = None  # write raw upstream text of emulated responses here
    allowed_origins: tuple[str, ...] = ()  # browser origins allowed to call /v1 and /admin; none by default
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

    @property
    def loopback_only(self) -> bool:
        """Is the listener reachable from this machine only?"""
        return is_loopback(self.host)

    def exposure_problem(self) -> str | None:
        """Why serving these settings would open the operator's upstream keys to the network, if it would."""
        if self.loopback_only or self.api_keys or self.allow_unauthenticated:
            return None
        return (f"refusing to listen on {self.host} without client keys: anyone who can reach it would use your "
                "upstream keys. Set TOOLSHIM_API_KEYS, or pass --allow-unauthenticated "
                "(TOOLSHIM_ALLOW_UNAUTHENTICATED=true) if the exposure is intended.")


    def access_summary(self) -> str:
        """One line for the start-up log: who can use this proxy."""
        if self.api_keys:
            return f"access: client keys required on /v1 ({len(self.api_keys)} configured)"
        if self.loopback_only:
            return f"access: no client keys; reachable from this machine only ({self.host})"
        return (f"access: OPEN to the network on {self.host} without client keys (allow_unauthenticated): "
                "anyone who reaches it uses your upstream keys")


def is_loopback(host: str) -> bool:
    """``127.0.0.0/8``, ``::1`` and ``localhost``; anything else (``0.0.0.0`` included) is not."""
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
    "max_body_bytes": "TOOLSHIM_MAX_BODY_BYTES",
    "drain_seconds": "TOOLSHIM_DRAIN_SECONDS",
    "ready_delay": "TOOLSHIM_READY_DELAY",
    "log_level": "TOOLSHIM_LOG_LEVEL",
    "log_content": "TOOLSHIM_LOG_CONTENT",
    "dump_dir": "TOOLSHIM_DUMP_DIR",
    "allowed_origins": "TOOLSHIM_ALLOWED_ORIGINS",
    "allowed_hosts": "TOOLSHIM_ALLOWED_HOSTS",
    "allow_unauthenticated": "TOOLSHIM_ALLOW_UNAUTHENTICATED",
    "data_dir": "TOOLSHIM_DATA_DIR",
    "responses_store": "TOOLSHIM_RESPONSES_STORE",
    "redis_url": "TOOLSHIM_REDIS_URL",
    "responses_ttl": "TOOLSHIM_RESPONSES_TTL",
}


def load_settings(overrides: Mapping[str, object] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Defaults, then the environment, then explicit overrides (flags that were given)."""
    env = os.environ if env is None else env
    values: dict[str, object] = {field: env[var] for field, var in ENV_VARS.items() if env.get(var)}
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return Settings.model_validate(values)
