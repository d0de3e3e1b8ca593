"""Secrets never leave: every configured secret is replaced by ``***`` in what clients and logs see.

The secrets are the values the operator configured: upstream keys (from ``api_key_env``),
upstream header values, client keys and the admin key. ``REDACTOR`` holds the current set
(replaced on start and on every rules reload); error bodies, relayed native stream events and
every log record at any level pass through it. Upstream error texts are also reduced to a
short message: no HTML pages, no tracebacks, no internal URLs.

``client_message`` is the last step of every error message a client sees (``errors``): besides the
secrets it removes what no client should learn about the server from any source (an upstream, an
OSError, a library's exception text): filesystem paths, tracebacks and credentials in URLs or
``Authorization`` values. The operator's log keeps the full text.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

MASK = "***"
_MIN_SECRET = 6  # shorter values (a header like "1" or "json") would mask ordinary words
_URL = re.compile(r"\bhttps?://[^\s'\"<>]+")
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
_HTML = re.compile(r"^\s*(<!doctype html|<html|<head|<body|<\?xml)", re.IGNORECASE)
MAX_UPSTREAM_MESSAGE = 500
PATH_MASK = "[path]"
# An absolute POSIX path of two segments or more (or one with a file extension), a home-relative one,
# or a Windows one. Not a URL's path: a path right after a word character, ':' or '/' is left alone.
_PATH = re.compile(
    r"(?<![\w:/.~\\<#-])(?:"
    r"/(?:[\w.@+-]+/)+[\w.@+-]*"
    r"|~/[\w.@+/-]*"
    r"|/[\w@+-]+\.[A-Za-z]\w{0,7}\b"
    r"|[A-Za-z]:\\(?:[^\s'\"\\<>|]+\\)*[^\s'\"\\<>|]*"
    r")"
)
_API_PATHS = ("/v1/", "/admin/")  # this server's own routes: a message may name them
_URL_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^\s/@'\"]+@")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")
_KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")
_KEY_PARAM = re.compile(r"(?i)\b((?:api[_-]?key|access[_-]?token|password|secret)[\"']?\s*[:=]\s*[\"']?)[^\s'\",;&}]+")


class Redactor:
    """Replaces every known secret in a text; cheap when there is none in it."""

    def __init__(self) -> None:
        self._secrets: tuple[str, ...] = ()
        self._secret_bytes: tuple[bytes, ...] = ()
        self.active = False  # any secret known: a stream's every chunk checks this, not a call

    def update(self, secrets: Iterable[str | None]) -> None:
        found = {s for s in secrets if s and len(s) >= _MIN_SECRET}
        self._secrets = tuple(sorted(found, key=len, reverse=True))  # longest first: no partial leftovers
        self._secret_bytes = tuple(s.encode() for s in self._secrets)
        self.active = bool(self._secrets)

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def redact_bytes(self, data: bytes) -> bytes:
        for secret in self._secret_bytes:
            if secret in data:
                data = data.replace(secret, _MASK_BYTES)
        return data


_MASK_BYTES = MASK.encode()
REDACTOR = Redactor()


def short_upstream_message(text: str, status: int) -> str:
    """An upstream's error text as a client may see it: no HTML page, no traceback, no URLs, short."""
    if _HTML.match(text):
        return f"upstream returned HTTP {status} (an HTML error page)"
    traceback = _TRACEBACK.search(text)
    if traceback:
        text = text[: traceback.start()].rstrip() or f"upstream returned HTTP {status} (a traceback)"
    text = _URL.sub("[url]", text).strip()
    if len(text) > MAX_UPSTREAM_MESSAGE:
        text = text[: MAX_UPSTREAM_MESSAGE - 1] + "…"
    return REDACTOR.redact(text)


def client_message(text: str) -> str:
    """A message as a client may see it: no secret, traceback, filesystem path or credential."""
    traceback = _TRACEBACK.search(text)
    if traceback:
        text = text[: traceback.start()].rstrip() or "(a traceback)"
    return _PATH.sub(_mask_path, scrub_credentials(text))


def scrub_credentials(text: str) -> str:
    """``text`` without any configured secret nor anything shaped like a credential: a password in a
    URL, an ``Authorization`` value, an ``sk-`` key, ``api_key=...``. For what is kept (dumps) or shown
    to a client; unlike ``client_message`` it leaves paths and tracebacks alone."""
    text = REDACTOR.redact(text)
    text = _URL_USERINFO.sub(r"\1***@", text)
    text = _BEARER.sub(r"\1 ***", text)
    text = _KEY_LIKE.sub(MASK, text)
    return _KEY_PARAM.sub(rf"\1{MASK}", text)


def _mask_path(match: re.Match[str]) -> str:
    path = match.group(0)
    return path if path.startswith(_API_PATHS) else PATH_MASK


_factory_installed = False


def install_log_redaction() -> None:
    """Redact every log record when it is made (any logger, any handler, any level); idempotent."""
    global _factory_installed
    if _factory_installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: the handler reports it, as logging always does
            return record
        clean = REDACTOR.redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = REDACTOR.redact(logging.Formatter().formatException(record.exc_info))
        return record

    logging.setLogRecordFactory(factory)
    _factory_installed = True
