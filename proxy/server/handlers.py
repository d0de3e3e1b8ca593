"""HTTP handlers: read and validate, resolve the rule, hand over to a mode, write the answer.

Thin on purpose: no parsing of model output here. Streaming responses pull the first event
before sending headers, so an upstream that fails at once gives the client a real HTTP error
status; a failure after that ends the stream with an OpenAI error event (never a clean close).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncGenerator, Callable
from typing import Any

import aiohttp
from aiohttp import web

from .. import responses
from ..chat import modes
from ..chat.limits import RequestLimits, check_body, check_chat, check_responses
from ..chat.policies import apply_policies
from ..chat.turn import ChatTurn
from ..config.allowlist import chat_body, passthrough_fields
from ..config.rules import MAX_MODEL_NAME_CHARS, Resolved
from ..observe.context import RequestInfo
from ..observe.redact import REDACTOR
from ..upstream.openai_http import relay_headers
from ..wire.errors import (
    ErrorView,
    InvalidRequest,
    ModelNotFound,
    NotFound,
    PayloadTooLarge,
    ProxyError,
    ShuttingDown,
    Unauthorized,
    UnsupportedMediaType,
    UpstreamDisconnected,
    UpstreamTimeout,
    render_error,
)
from ..wire.jsoncodec import dumps, loads
from ..wire.sse import encode_json
from .catalog import model_card
from .drain import was_cut
from .middleware import secret_matches
from .reloads import Outcome
from .sending import SendTimeout, send
from .state import METRICS, OWNER_KEY, RESPONSES_STORE, SETTINGS, STATE, reload_rules, request_info

log = logging.getLogger(__name__)

# The other /v1 endpoints relayed to the model's upstream (JSON bodies that name a model). Anything
# else under /v1 is a 404 and nothing is sent upstream: the upstream's key must not open other doors.
PASSTHROUGH_PATHS = (
    "/v1/completions",
    "/v1/embeddings",
    "/v1/moderations",
    "/v1/rerank",
    "/v1/score",
    "/v1/audio/speech",
    "/v1/images/generations",
)

SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}


# Content types that say the body is a form, not JSON: refused (415) on every route, which all take
# JSON. Any other type (or none) is read as JSON: clients send ``text/plain`` and
# ``application/octet-stream`` with JSON inside, and the parser judges the bytes either way.
FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")


async def read_json(request: web.Request) -> Any:
    """The JSON body, or a 400 / 413 / 415 in OpenAI's shape. A form body is refused unread (above); so
    is a compressed one: a small gzip body can inflate to gigabytes (the server does not decompress,
    see ``start_site``)."""
    settings = request.app[SETTINGS]
    if request.content_type in FORM_TYPES:
        raise UnsupportedMediaType(
            f"Content-Type '{request.content_type}' is not accepted: send the body as JSON with "
            "'Content-Type: application/json' (curl: -H 'Content-Type: application/json').",
            code="unsupported_media_type",
        )
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise UnsupportedMediaType(
            f"Content-Encoding '{encoding[:40]}' is not accepted; send the JSON body uncompressed.",
        )
    limit = settings.max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(f"Request body is {request.content_length} bytes; the limit is {limit} bytes.")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(f"Request body is larger than the limit of {limit} bytes.") from None
    if not raw.strip():
        raise InvalidRequest("The request body is empty; send a JSON object.")
    try:
        body = loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InvalidRequest(
            "We could not parse the JSON body of your request. (HINT: This likely means you "
            "aren't using your HTTP library correctly.)"
        ) from None
    except RecursionError:
        raise InvalidRequest("The JSON body is nested too deeply.") from None
    check_body(body, RequestLimits.of(settings))
    return body


def resolve_model(request: web.Request, model: str) -> Resolved:
    """The rule for ``model``, noted on the request (the label and, for the log, the name asked for).

    A name longer than ``MAX_MODEL_NAME_CHARS`` is a 400 before any lookup: no cache keyed by names
    (resolution, ``tool_mode: auto`` memory) ever holds client text of any length."""
    info = request_info(request)
    info.requested_model = model[:100]
    if len(model) > MAX_MODEL_NAME_CHARS:
        raise InvalidRequest(
            f"The model name is {len(model)} characters long; the limit is {MAX_MODEL_NAME_CHARS}.",
            param="model",
            code="model_name_too_long",
        )
    rules = request.app[STATE].runtime.rules
    resolved = rules.resolve(model)
    if resolved is None:
        served = rules.exposed_models()
        hint = f" Served models include: {', '.join(served[:5])}." if served else ""
        raise ModelNotFound(
            f"The model '{model[:200]}' does not exist or is not served by this proxy.{hint} "
            "GET /v1/models lists them.",
            param="model",
        )
    info.model = resolved.label
    return resolved


async def chat_completions(request: web.Request) -> web.StreamResponse:
    """handler → turn → policies → mode (rewrite → upstream → decoder → parser → builder) → SSE."""
    info = request_info(request)
    info.counted = True
    raw = await read_json(request)
    check_chat(raw, RequestLimits.of(request.app[SETTINGS]))
    turn = ChatTurn.from_body(raw)
    info.stream = turn.stream
    request.app[METRICS].request_started(info)
    job = start_job(request, turn, resolve_model(request, turn.model))
    if turn.stream:
        return await send_stream(request, modes.with_deadline(job, modes.stream(job)))
    return json_answer(await modes.complete_within(job), usage_headers(info))


def usage_headers(info: RequestInfo) -> dict[str, str]:
    """Where an emulated answer's usage came from (``upstream``, ``tokenizer`` or ``estimate``), and
    what getting its decoding grammar cost (``built 12.345 ms``, ``cached 0.010 ms``), where it had one."""
    headers = {"x-toolshim-usage": info.usage_source} if info.usage_source else {}
    if info.grammar:
        headers["x-toolshim-grammar"] = info.grammar
    return headers


def start_job(request: web.Request, turn: ChatTurn, resolved: Resolved) -> modes.ChatJob:
    """The typed turn after the policies, with everything a mode needs (every front end)."""
    info = request_info(request)
    settings, metrics, state = request.app[SETTINGS], request.app[METRICS], request.app[STATE]
    info.model, info.tool_mode = resolved.label, resolved.rule.tool_mode
    upstream = state.runtime.upstreams[resolved.upstream_name]
    info.upstream = upstream.name
    policy = apply_policies(turn, resolved.rule)
    metrics.record_policies(info.model, policy.actions)
    info.policies.extend(policy.actions)
    return modes.ChatJob(
        policy.turn,
        resolved,
        upstream,
        info,
        metrics,
        state.auto_emulate_until,
        settings.dump_dir,
        settings.log_content,
        state.runtime.rules.upstreams[resolved.upstream_name].constraint_dialect,
    )


async def create_response(request: web.Request) -> web.StreamResponse:
    """POST /v1/responses: Responses request → chat turn → the same pipeline → Response events."""
    info = request_info(request)
    info.counted, info.endpoint = True, "responses"
    raw = await read_json(request)
    check_responses(raw, RequestLimits.of(request.app[SETTINGS]))
    model = responses.model_of(raw)
    info.stream = isinstance(raw, dict) and raw.get("stream") is True
    request.app[METRICS].request_started(info)
    resolved = resolve_model(request, model)
    if resolved.rule.responses_passthrough:  # an upstream with its own Responses API judges the body
        info.model, info.tool_mode = resolved.label, "passthrough"
        return await relay(request, raw, resolved, model)
    store, owner = request.app[RESPONSES_STORE], request[OWNER_KEY]
    drop = resolved.rule.responses_other_tools == "drop"
    wire = await responses.resolve_references(store, owner, responses.parse_request(raw, drop_other_tools=drop))
    context = await responses.load_context(store, owner, wire.previous_response_id)
    turn = responses.chat_turn(wire, context, request.app[SETTINGS].max_messages)
    exchange = responses.Exchange(wire, context, store, owner)
    job = start_job(request, turn, resolved)
    if wire.stream:
        return await send_stream(request, exchange.sse(job), exchange.error_bytes)
    return json_answer(await exchange.complete(job), usage_headers(info))


# The stored-response routes answer only the caller's own records (``OWNER_KEY``, set by the auth
# middleware): another key's id is a 404 like an unknown one.
async def get_response(request: web.Request) -> web.Response:
    record = await responses.load(request.app[RESPONSES_STORE], request[OWNER_KEY], request.match_info["response_id"])
    return json_answer(record.response)


async def delete_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    await responses.delete(request.app[RESPONSES_STORE], request[OWNER_KEY], response_id)
    return web.json_response({"id": response_id, "object": "response.deleted", "deleted": True})


async def list_input_items(request: web.Request) -> web.Response:
    record = await responses.load(request.app[RESPONSES_STORE], request[OWNER_KEY], request.match_info["response_id"])
    return json_answer(responses.input_items_page(record, request.query))


def json_answer(value: Any, headers: dict[str, str] | None = None) -> web.Response:
    """A whole answer as JSON, with every configured secret masked (as streams are)."""
    return web.Response(body=REDACTOR.redact_bytes(dumps(value)), content_type="application/json", headers=headers)


async def send_stream(
    request: web.Request, chunks: AsyncGenerator[bytes, None], error_bytes: Callable[[ErrorView], bytes] | None = None
) -> web.StreamResponse:
    """Relay SSE bytes; errors before the first byte become HTTP errors, after it an error event
    (``error_bytes`` renders it for another front end; chat's is the OpenAI error body)."""
    info = request_info(request)
    try:
        first = await anext(chunks, None)
    except BaseException:
        await chunks.aclose()
        raise
    response = web.StreamResponse(headers={**SSE_HEADERS, "X-Request-Id": info.request_id})
    try:
        await response.prepare(request)
        if first is not None:
            await send(request, response, first)
        async for chunk in chunks:
            await send(request, response, chunk)
    except SendTimeout:
        pass  # the client stopped reading: dropped and counted; the upstream closes below
    except (ConnectionResetError, aiohttp.ClientConnectionResetError):
        info.error_code = "client_closed"
    except asyncio.CancelledError:
        if not was_cut(request):
            raise  # the client went away
        view = render_error(ShuttingDown())  # the drain's deadline: say so in-band, then close
        info.error_code = view.label
        log.warning("stream cut at the drain deadline")
        await _write_quietly(request, response, error_bytes(view) if error_bytes else encode_json(view.body))
    except Exception as exc:  # ends the stream in OpenAI's shape (a bug too), never as a clean close
        view = render_error(exc)
        info.error_code = view.label
        if view.level >= logging.ERROR:
            log.exception("stream failed after it started")
        else:
            log.warning("stream failed after it started: %s", view.error.message)
        await _write_quietly(request, response, error_bytes(view) if error_bytes else encode_json(view.body))
    finally:
        await chunks.aclose()
    return response


async def _write_quietly(request: web.Request, response: web.StreamResponse, data: bytes) -> None:
    """A last event (an error) for a client that may be gone or not reading: never raises."""
    try:
        await send(request, response, data)
    except (SendTimeout, ConnectionResetError, aiohttp.ClientConnectionResetError):
        pass


async def list_models(request: web.Request) -> web.Response:
    runtime = request.app[STATE].runtime
    cards = await runtime.catalog.cards(runtime.rules, runtime.upstreams)
    return web.json_response({"object": "list", "data": cards})


async def get_model(request: web.Request) -> web.Response:
    name = request.match_info["model"]
    return web.json_response(model_card(name, resolve_model(request, name).upstream_name))


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "pid": os.getpid()})  # the pid tells workers apart


async def readyz(request: web.Request) -> web.Response:
    if request.app[STATE].draining:
        return web.json_response({"status": "draining"}, status=503)
    return web.json_response({"status": "ready"})


async def metrics(request: web.Request) -> web.Response:
    body, content_type = request.app[METRICS].render()
    return web.Response(body=body, headers={"Content-Type": content_type})


async def passthrough(request: web.Request) -> web.StreamResponse:
    """The ``PASSTHROUGH_PATHS`` (embeddings, completions, ...) go to the upstream of the body's model."""
    info = request_info(request)
    info.counted, info.endpoint = True, "passthrough"
    raw = await read_json(request)
    model = raw.get("model") if isinstance(raw, dict) else None
    if not isinstance(model, str) or not model:
        raise InvalidRequest("Missing required parameter: 'model'.", param="model")
    resolved = resolve_model(request, model)
    info.model, info.tool_mode, info.stream = resolved.label, "passthrough", bool(raw.get("stream"))
    return await relay(request, raw, resolved, model)


async def relay(request: web.Request, raw: dict[str, Any], resolved: Resolved, model: str) -> web.StreamResponse:
    """Send the body's allowlisted fields (the endpoint's and the upstream's ``extra_body_fields``;
    model renamed) to the same path on the model's upstream; relay the answer and its safe headers."""
    info = request_info(request)
    runtime = request.app[STATE].runtime
    upstream = runtime.upstreams[resolved.upstream_name]
    info.upstream = upstream.name
    path = request.path.removeprefix("/v1")
    fields = passthrough_fields(path, runtime.rules.upstreams[resolved.upstream_name].extra_body_fields)
    body = dumps({**chat_body(raw, fields), "model": resolved.upstream_model(model)})
    upstream_resp = await upstream.forward(request.method, path, body, "application/json")  # errors: HTTP errors
    try:
        response = web.StreamResponse(status=upstream_resp.status, headers=relay_headers(upstream_resp))
        response.headers["X-Request-Id"] = info.request_id
        try:
            await response.prepare(request)
        except (ConnectionResetError, aiohttp.ClientConnectionResetError):
            info.error_code = "client_closed"
            return response
        await _relay_body(request, upstream_resp, response)
        return response
    finally:
        upstream_resp.release()


async def _relay_body(
    request: web.Request, upstream_resp: aiohttp.ClientResponse, response: web.StreamResponse
) -> None:
    """Copy the upstream's body once the client has the headers; errors by phase from here on.

    No HTTP error can be sent any more: an upstream that fails mid-body ends the answer as
    ``_end_relay`` does (an error event for SSE, a dropped connection otherwise), labelled as the
    upstream's failure; a client that hangs up is ``client_closed``, never an upstream failure."""
    info = request_info(request)
    pieces = upstream_resp.content.iter_any()
    try:
        while True:
            try:
                piece = await anext(pieces, None)
            except (aiohttp.ClientError, TimeoutError) as exc:
                await _end_relay(request, response, _relay_failure(exc))
                return
            if piece is None:
                return
            try:
                await send(request, response, piece)
            except SendTimeout:
                upstream_resp.close()  # not released to the pool: the rest of its body is not wanted
                return
            except (ConnectionResetError, aiohttp.ClientConnectionResetError):
                info.error_code = "client_closed"
                return
    except asyncio.CancelledError:
        if not was_cut(request):
            raise  # the client went away
        await _end_relay(request, response, ShuttingDown())


def _relay_failure(exc: BaseException) -> ProxyError:
    """What an upstream's failure while its body was relayed was, for the log, the metrics and an error event."""
    if isinstance(exc, TimeoutError):
        return UpstreamTimeout("The upstream stopped sending its answer (read timeout).")
    return UpstreamDisconnected(f"The upstream dropped the connection mid-answer ({type(exc).__name__}).")


async def _end_relay(request: web.Request, response: web.StreamResponse, error: ProxyError) -> None:
    """End a relayed answer that cannot finish (the drain cut it, the upstream failed): an error event
    for SSE; any other body is left incomplete (the connection is dropped), so the client cannot take
    it for a whole one."""
    view = render_error(error)
    request_info(request).error_code = view.label
    log.warning("relayed answer ended early: %s", view.error.message)
    if response.content_type == "text/event-stream":
        await _write_quietly(request, response, encode_json(view.body))
    elif request.transport is not None:
        request.transport.abort()


async def admin_reload(request: web.Request) -> web.Response:
    """POST /admin/reload: only when an admin key is configured, and only with that key. With several
    workers it reloads them all (``reloads``) and says how many: ``{"status": "reloaded", "workers": 2}``."""
    admin_key = request.app[SETTINGS].admin_key
    if not admin_key:
        raise NotFound("Unknown path /admin/reload (set TOOLSHIM_ADMIN_KEY to enable it)")
    presented = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    if not secret_matches(presented, admin_key):
        raise Unauthorized("Incorrect or missing admin key.")
    fleet = request.app[STATE].fleet
    if fleet is None:  # one worker: this process
        ok, message = reload_rules(request.app)
        if not ok:
            raise InvalidRequest(f"{_INVALID_RULES}\n{message}", code="invalid_rules")
        return web.json_response({"status": "reloaded", "workers": 1})
    return web.json_response({"status": "reloaded", "workers": reloaded_workers(await fleet.reload(RELOAD_WAIT))})


RELOAD_WAIT = 10.0  # seconds /admin/reload waits for every worker's report
_INVALID_RULES = "The new rules are invalid; the old rules keep serving."


def reloaded_workers(outcome: Outcome | None) -> int:
    """How many workers reloaded; an error when any refused the rules or did not answer in time."""
    if outcome is None:
        raise ProxyError(
            f"The supervisor started no reload within {RELOAD_WAIT:g}s; the old rules keep serving.",
            status=504,
            code="reload_timeout",
        )
    if outcome.failed:
        why = next(iter(outcome.failed.values()))
        if not outcome.reloaded:
            raise InvalidRequest(f"{_INVALID_RULES}\n{why}", code="invalid_rules")
        raise ProxyError(
            f"{len(outcome.reloaded)} workers reloaded; {len(outcome.failed)} refused the rules and keep the old "
            f"ones (did the file change meanwhile? reload again):\n{why}",
            code="reload_partial",
        )
    if outcome.silent:
        raise ProxyError(
            f"{len(outcome.reloaded)} workers reloaded; {len(outcome.silent)} did not report within "
            f"{RELOAD_WAIT:g}s (see the server log)",
            status=504,
            code="reload_timeout",
        )
    return len(outcome.reloaded)


def add_routes(app: web.Application) -> None:
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/responses", create_response)
    app.router.add_get("/v1/responses/{response_id}", get_response)
    app.router.add_delete("/v1/responses/{response_id}", delete_response)
    app.router.add_get("/v1/responses/{response_id}/input_items", list_input_items)
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/v1/models/{model:.+}", get_model)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/admin/reload", admin_reload)
    for path in PASSTHROUGH_PATHS:
        app.router.add_post(path, passthrough)


__all__ = ["add_routes", "send_stream"]
