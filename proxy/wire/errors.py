"""The exception tree and the one mapping from any error to what the client and the operator see.

    ProxyError                      (status, type, code, param, message)          500 internal_error
    ├── InvalidRequest              400 invalid_request
    ├── Unauthorized                401 invalid_api_key
    ├── Forbidden                   403 forbidden (origin_not_allowed, host_not_allowed)
    ├── NotFound                    404 not_found
    │   └── ModelNotFound           404 model_not_found
    ├── RequestTimeout              408 request_timeout           (also a TimeoutError): the head or
    │                                   body did not arrive within its bound
    ├── PayloadTooLarge             413 request_too_large
    ├── UnsupportedMediaType        415 unsupported_content_encoding (a compressed body)
    ├── Overloaded                  503 overloaded, Retry-After: this worker is at its in-flight or
    │                                   connection limit
    ├── DeadlineExceeded            504 deadline_exceeded
    ├── ShuttingDown                503 shutting_down: the drain's deadline came first (Retry-After)
    ├── StoreUnavailable            500 store_unavailable: the response store cannot be opened or written
    │                                   (the operator's log names the path and the setting; no retry)
    └── UpstreamError               type upstream_error
        ├── UpstreamHTTPError       the upstream's status and message
        ├── UpstreamProtocolError   502 upstream_protocol_error: bad JSON, an error event mid-stream,
        │                               a stream that ended before its finish;
        │                               upstream_event_too_large: past TOOLSHIM_MAX_UPSTREAM_EVENT_BYTES
        ├── UpstreamUnavailable     502 upstream_unreachable      (also a ConnectionError): no connection
        ├── UpstreamDisconnected    502 upstream_disconnected     (also a ConnectionError): dropped mid-answer
        ├── UpstreamTimeout         504 upstream_timeout          (also a TimeoutError)
        │   └── FirstTokenTimeout   504 first_token_timeout: headers came, no token did (the rule's limit)
        ├── UpstreamBusy            503 upstream_pool_full, Retry-After: every pooled connection to
        │                               the upstream stayed busy while we waited for one
        └── NoValidToolCall         502 no_valid_tool_call: tool_choice demanded a call and the
                                        model answered without one (after the re-asks)

Code raises these; ``render_error`` turns any exception into (status, body, headers, metric
label, log level), for the middleware, for streams and for the connection guard's raw answers
alike. Nothing else builds error bodies. Messages never contain secrets, filesystem paths or
tracebacks (``redact.client_message``, applied in ``ProxyError.body``): upstream bodies are
reduced to their ``message`` field.

Retry advice: every error answer says whether a retry makes sense, in the header the OpenAI SDKs
read (``x-should-retry``): ``false`` for the deterministic 4xx (the same request fails the same
way), ``true`` for 408/409/429 and 5xx. Our own 503s (overload, a full pool) carry ``Retry-After``;
an upstream's ``Retry-After`` on a 429/503 is passed on. The proxy never retries once the client
has a byte. One retry budget per client call: where toolshim already sent the upstream more than one
call for the request (a re-ask, the ``auto`` fallback, ``retry_without_tools``, a refused decoding
constraint), its error says ``false`` whatever the status, so the SDK's retries (2 by default) do
not multiply toolshim's: a client call costs at most 3 upstream calls against a failing upstream.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..observe.redact import client_message, short_upstream_message


class ProxyError(Exception):
    """Base of every error the proxy reports to a client."""

    status = 500
    type = "server_error"
    code: str | None = "internal_error"
    retry_after: int | None = None  # seconds; sent as ``Retry-After`` (overload: try again soon)
    retryable: bool | None = None  # None: decided by the status (see ``retry_headers``)

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        status: int | None = None,
        type: str | None = None,
    ) -> None:
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
        """OpenAI's error shape; the message without secrets, paths or tracebacks (``client_message``)."""
        message = client_message(self.message)
        return {"error": {"message": message, "type": self.type, "param": self.param, "code": self.code}}


class InvalidRequest(ProxyError):
    status = 400
    type = "invalid_request_error"
    code = "invalid_request"


class Unauthorized(ProxyError):
    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"


class Forbidden(ProxyError):
    status = 403
    type = "permission_error"
    code = "forbidden"


class NotFound(ProxyError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class ModelNotFound(NotFound):
    code = "model_not_found"


class RequestTimeout(ProxyError, TimeoutError):
    """The client did not send its request head or body within the bound (a slow or stalled client).

    A ``TimeoutError`` too, so aiohttp's lingering read of an unread body ends quietly on it."""

    status = 408
    type = "invalid_request_error"
    code = "request_timeout"


class Overloaded(ProxyError):
    """This worker is at a limit (requests in flight, open connections): shed at once, retry soon."""

    status = 503
    type = "server_error"
    code = "overloaded"
    retry_after = 1


class PayloadTooLarge(ProxyError):
    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


class UnsupportedMediaType(ProxyError):
    status = 415
    type = "invalid_request_error"
    code = "unsupported_content_encoding"


class UpstreamError(ProxyError):
    """Something went wrong talking to the upstream."""

    type = "upstream_error"


class UpstreamHTTPError(UpstreamError):
    """The upstream answered with an error status; we pass the status and its message on."""

    code: str | None = "upstream_error"

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str | None = None,
        code: str | None = None,
        param: str | None = None,
        upstream_retry: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, status=status, type=type or _type_for_status(status), code=code, param=param)
        self.upstream_retry = upstream_retry or {}  # the upstream's Retry-After headers, passed to the client


class UpstreamProtocolError(UpstreamError):
    """The upstream answered, but not as the protocol says (not JSON, an error event, no finish)."""

    status = 502
    code = "upstream_protocol_error"


class UpstreamUnavailable(UpstreamError, ConnectionError):
    """No connection could be made."""

    status = 502
    code = "upstream_unreachable"


class UpstreamDisconnected(UpstreamError, ConnectionError):
    """The connection was made, then dropped before the answer was complete."""

    status = 502
    code = "upstream_disconnected"


class UpstreamTimeout(UpstreamError, TimeoutError):
    status = 504
    code = "upstream_timeout"


class FirstTokenTimeout(UpstreamTimeout):
    """The upstream answered (or is still connecting) but sent no token within ``first_token_timeout``."""

    code = "first_token_timeout"


class UpstreamBusy(UpstreamError):
    """Every connection of the upstream's pool stayed busy for as long as we waited for one."""

    status = 503
    code = "upstream_pool_full"
    retry_after = 1


class NoValidToolCall(UpstreamError):
    """``tool_choice`` required a call; the model still answered without a valid one."""

    status = 502
    code = "no_valid_tool_call"


class DeadlineExceeded(ProxyError):
    status = 504
    type = "timeout_error"
    code = "deadline_exceeded"


class ShuttingDown(ProxyError):
    """This worker is stopping and its drain deadline came before the answer; another one can serve it."""

    status = 503
    code = "shutting_down"
    retry_after = 1  # seconds: by then the load balancer routes to a worker that is not stopping

    def __init__(self) -> None:
        super().__init__("The server is shutting down; retry the request.")


class StoreUnavailable(ProxyError):
    """The response store cannot be opened or written (a directory that cannot be created, a full disk).

    A configuration problem of this server: the same request fails the same way until the operator
    acts, so the SDKs are told not to retry (each retry would run the model again for nothing)."""

    status = 500
    code = "store_unavailable"
    retryable = False

    def __init__(self) -> None:
        super().__init__("The response store is unavailable; the server's log says why. Retry with store=false.")


def _type_for_status(status: int) -> str:
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 429:
        return "rate_limit_error"
    return "invalid_request_error" if 400 <= status < 500 else "upstream_error"


def upstream_too_large(upstream: str, limit: int) -> UpstreamProtocolError:
    """An upstream's answer, or one event of its stream, passed ``TOOLSHIM_MAX_UPSTREAM_EVENT_BYTES``."""
    return UpstreamProtocolError(
        f"upstream '{upstream}' sent an answer or event larger than the limit of {limit} bytes "
        "(TOOLSHIM_MAX_UPSTREAM_EVENT_BYTES)",
        code="upstream_event_too_large",
    )


def upstream_http_error(status: int, raw: bytes | str, headers: Mapping[str, str] | None = None) -> UpstreamHTTPError:
    """Turn an upstream error response into an error in OpenAI shape, keeping its message.

    Accepts OpenAI's ``{"error": {...}}``, ``{"error": "text"}``, ``{"detail": ...}`` (FastAPI,
    llama.cpp), ``{"message": ...}`` and plain text, which is truncated. ``headers``: the
    response's, for its ``Retry-After``.
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
    error = UpstreamHTTPError(
        status,
        short_upstream_message(message, status),
        type=err_type,
        code=code,
        param=param,
        upstream_retry=retry_after_headers(status, headers),
    )
    if keep_null_code:  # an OpenAI-shaped upstream error said code: null; relay it as it was
        error.code = None
    return error


_RETRY_AFTER = ("retry-after", "retry-after-ms")
_RETRY_AFTER_VALUE = re.compile(r"[0-9A-Za-z ,:.+-]{1,64}")  # seconds, milliseconds or an HTTP date


def retry_after_headers(status: int, headers: Mapping[str, str] | None) -> dict[str, str]:
    """The upstream's ``Retry-After`` (and OpenAI's ``retry-after-ms``) on a 429/503, when well-formed."""
    if status not in (429, 503) or not headers:
        return {}
    found = {}
    for name in _RETRY_AFTER:
        value = headers.get(name)
        if isinstance(value, str) and _RETRY_AFTER_VALUE.fullmatch(value.strip()):
            found[name] = value.strip()
    return found


def stream_error(data: str | Mapping[str, Any]) -> UpstreamProtocolError:
    """An error event in an upstream stream, with the upstream's message (scrubbed).

    Takes OpenAI's ``{"error": {...}}`` / ``{"error": "text"}`` chunk, llama.cpp's ``error:``
    field (``{"code": 500, "message": ..., "type": ...}``), or the event's raw text."""
    value: Any = data
    if isinstance(data, str):
        try:
            value = json.loads(data)
        except ValueError:
            value = data
    if isinstance(value, Mapping) and "error" in value:
        value = value["error"]
    if isinstance(value, Mapping):
        found = value.get("message") or value.get("detail") or value.get("msg")
        message = _stringify(found) if found is not None else "upstream error"
    else:
        message = _stringify(value) or "upstream error"
    return UpstreamProtocolError(f"upstream failed mid-stream: {short_upstream_message(message, 502)}")


def _stringify(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)[:2000]


@dataclass(frozen=True, slots=True)
class ErrorView:
    """How one error is shown: HTTP status, OpenAI body, bounded metric label, log level."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str]  # retry advice (x-should-retry, the upstream's Retry-After)
    label: str
    level: int
    error: ProxyError


_INTERNAL = "The server had an error while processing your request."


def render_error(exc: BaseException, upstream_calls: int = 0) -> ErrorView:
    """The one mapping from any exception to what the client and the operator see.

    ``ProxyError``s keep their status and body (the server's own HTTP exceptions arrive here as
    ``http_status_error``); anything else is a bug: a 500 that reveals nothing, logged as an error.
    ``upstream_calls``: how many the request made (its retry budget, see ``retry_headers``).
    """
    if isinstance(exc, ProxyError):
        err, level = exc, logging.INFO if exc.status < 500 else logging.WARNING
    else:
        err, level = ProxyError(_INTERNAL), logging.ERROR
    headers = retry_headers(err, upstream_calls)
    return ErrorView(err.status, err.body(), headers, err.code or f"{err.status // 100}xx", level, err)


def retry_headers(err: ProxyError, upstream_calls: int = 0) -> dict[str, str]:
    """Whether a client should retry, as the OpenAI SDKs read it, and when (the upstream's Retry-After).

    Deterministic refusals (400, 401, 403, 404, 413, 422, ...) say ``false``: the SDK's default
    retries would only repeat them. 408, 409, 429 and 5xx (timeouts, an unreachable upstream) say ``true``,
    unless toolshim already called the upstream more than once for the request: its retry is spent."""
    if upstream_calls > 1:
        retry = False
    elif err.retryable is None:
        retry = err.status in (408, 409, 429) or err.status >= 500
    else:
        retry = err.retryable
    headers = {"x-should-retry": "true" if retry else "false"}
    if err.retry_after is not None:
        headers["Retry-After"] = str(err.retry_after)
    if isinstance(err, UpstreamHTTPError):
        headers.update(err.upstream_retry)
    return headers


def bad_http_request(reason: str) -> InvalidRequest:
    """A request the HTTP parser refused (malformed request line, header too long, bad chunked
    encoding, ...): a 400 in OpenAI's shape instead of aiohttp's ``text/plain``."""
    return InvalidRequest(f"Malformed HTTP request: {reason[:300]}", code="bad_http_request")


def http_status_error(status: int, reason: str | None, method: str = "", path: str = "") -> ProxyError:
    """The web server's own refusals (unknown path, wrong method, ...) in OpenAI's shape.

    A path that exists but not for this method is answered like OpenAI does: 404 "Invalid URL"."""
    if status in (404, 405):
        where = f" ({method} {path[:200]})" if method else ""
        return NotFound(f"Invalid URL{where}; see /v1/chat/completions, /v1/models, /healthz, /metrics")
    if status == 413:
        return PayloadTooLarge(reason or "Request body too large")
    return ProxyError(reason or "HTTP error", status=status, type="invalid_request_error", code=None)
