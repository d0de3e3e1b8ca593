"""Process settings: command-line flags over ``TOOLSHIM_*`` environment variables over defaults.

Only process-wide knobs live here; per-model behaviour belongs in the rules files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

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

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(k.strip() for k in value.split(",") if k.strip())
        return value


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
}


def load_settings(overrides: Mapping[str, object] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Defaults, then the environment, then explicit overrides (flags that were given)."""
    env = os.environ if env is None else env
    values: dict[str, object] = {field: env[var] for field, var in ENV_VARS.items() if env.get(var)}
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return Settings.model_validate(values)
