"""Logging: one JSON object per line, a request-id context variable, and no secrets.

One record is one line for every reader: JSON escapes the ASCII controls (``\\n``, ``\\r``, ``\\x1c``-``\\x1e``),
and ``JsonFormatter`` escapes the three line breaks it leaves raw with ``ensure_ascii=False`` (U+0085,
U+2028, U+2029), which ``str.splitlines``, many log shippers and JavaScript readers split on: a
client's model name or request id could otherwise forge a record of its own.

``configure_logging`` installs the formatter on the root logger; ``route_library_logs`` sends
litellm's own loggers (which come with plain-text handlers) through it too. Request summaries are logged
by the app middleware as ``toolshim.access`` records whose ``fields`` become JSON keys.
"""

from __future__ import annotations

import contextvars
import json
import logging
import time
from functools import lru_cache
from typing import Any

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


class JsonFormatter(logging.Formatter):
    """Renders a record as one JSON line: time, level, logger, request id, message, fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _second(int(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "request_id": getattr(record, "request_id", None) or request_id_var.get(),
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return one_line(_ENCODER.encode(entry))


# One encoder for every record (``json.dumps`` with options builds one per call).
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


@lru_cache(maxsize=4)
def _second(epoch_second: int) -> str:
    """A record's time to the second, formatted once per second rather than once per record."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch_second))


# The line breaks JSON leaves unescaped outside ASCII; everything below U+0020 it escapes itself.
_RAW_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def one_line(text: str) -> str:
    """A JSON text with no character any reader takes for a line break (valid JSON still: these
    characters only occur inside strings, where ``\\uXXXX`` is their escape). ASCII text (most
    records) has none of them: it is returned without a pass over it."""
    return text if text.isascii() else text.translate(_RAW_BREAKS)


def configure_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    for name in ("httpx", "httpcore"):  # litellm's HTTP client: a line per request at INFO
        logging.getLogger(name).setLevel(logging.WARNING)
    route_library_logs()


# Loggers that libraries give their own plain-text handlers (litellm, on import).
FOREIGN_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm")


def route_library_logs() -> None:
    """Take the handlers off the libraries' own loggers, so their records reach the root handler
    and come out as JSON lines like ours (call again after importing such a library)."""
    for name in FOREIGN_LOGGERS:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.propagate = True
