"""The exception tree and the one mapping from an error to an OpenAI error body and status.

    ProxyError                      (status, type, code, param, message)
    ├── InvalidRequest              400 invalid_request_error
    ├── Unauthorized                401 invalid_api_key
    ├── ModelNotFound               404 model_not_found
    ├── PayloadTooLarge             413 request_too_large
    ├── UpstreamHTTPError           the upstream's status, its message
    ├── UpstreamUnavailable         502 upstream_unreachable
    ├── UpstreamTimeout             504 upstream_timeout
    └── DeadlineExceeded            504 deadline_exceeded

Handlers raise these; the error middleware renders them. Nothing else builds error bodies.
Messages never contain secrets: upstream bodies are reduced to their ``message`` field.
"""

from __future__ import annotations

import json
from typing import Any


class ProxyError(Exception):
    """Base of every error the proxy reports to a client."""

    status = 500
    type = "server_error"
    code: str | None = "internal_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None,
                 status: int | None = None, type: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        if type is not None:
            self.type = type

    def body(self) -> dict[str, Any]:
        """OpenAI's error shape."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    @property
    def status_label(self) -> str:
        """A bounded label for metrics: the error code, or the status class."""
        return self.code or f"{self.status // 100}xx"


class InvalidRequest(ProxyError):
    status = 400
    type = "invalid_request_error"
    code = "invalid_request"


class Unauthorized(ProxyError):
    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"


class NotFound(ProxyError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class ModelNotFound(NotFound):
    code = "model_not_found"


class PayloadTooLarge(ProxyError):
    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


class UpstreamError(ProxyError):
    """Something went wrong talking to the upstream."""

    type = "upstream_error"


class UpstreamHTTPError(UpstreamError):
    """The upstream answered with an error status; we pass the status and its message on."""

    code = "upstream_error"

    def __init__(self, status: int, message: str, *, type: str | None = None, code: str | None = None,
                 param: str | None = None) -> None:
        super().__init__(message, status=status, type=type or _type_for_status(status), code=code, param=param)


class UpstreamUnavailable(UpstreamError):
    status = 502
    code = "upstream_unreachable"


class UpstreamTimeout(UpstreamError):
    status = 504
    code = "upstream_timeout"


class DeadlineExceeded(ProxyError):
    status = 504
    type = "timeout_error"
    code = "deadline_exceeded"


def _type_for_status(status: int) -> str:
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 429:
        return "rate_limit_error"
    return "invalid_request_error" if 400 <= status < 500 else "upstream_error"


def upstream_http_error(status: int, raw: bytes | str) -> UpstreamHTTPError:
    """Turn an upstream error response into an error in OpenAI shape, keeping its message.

    Accepts OpenAI's ``{"error": {...}}``, ``{"error": "text"}``, ``{"detail": ...}`` (FastAPI,
    llama.cpp), ``{"message": ...}`` and plain text, which is truncated.
    """
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    message, err_type, code, param = text.strip()[:2000] or f"upstream returned HTTP {status}", None, None, None
    keep_null_code = False
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            found = err.get("message") or err.get("detail") or err.get("msg")
            message = _stringify(found) if found is not None else message
            err_type = err.get("type") if isinstance(err.get("type"), str) else None
            code = err.get("code") if isinstance(err.get("code"), str) else None
            param = err.get("param") if isinstance(err.get("param"), str) else None
            keep_null_code = "error" in data and "code" in err and err["code"] is None
        elif isinstance(err, str):
            message = err
    error = UpstreamHTTPError(status, message, type=err_type, code=code, param=param)
    if keep_null_code:  # an OpenAI-shaped upstream error said code: null; relay it as it was
        error.code = None
    return error


def _stringify(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)[:2000]
